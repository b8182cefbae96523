"""Pod templates: plain JSON for the plugins, typed where the operator reads them or a pod
refuses them.

A template stays a `dict` (the plugins copy and edit it as JSON), but it is validated against
`PodTemplateShape`, whose schema is also the template's schema in the CRDs: the containers are
a list of mappings with a DNS-label `name` and an `image`, `command`/`args` lists of strings,
`env` a list of `{name, value | valueFrom}`, ports numbers in range, and so on. A template of any
other shape would crash the code that builds the pods, or be refused by the API server only when
the pods are created; the API server now refuses it when the job is submitted. Every other pod
field is kept as written (`x-kubernetes-preserve-unknown-fields`) and checked by the API server
when the pods are created.

What the operator sets on every pod, a template may not set (the operator's values would win
anyway, `t9kjobs.objects.new_pod`; refusing says so when the job is submitted):

* labels and annotations of the reserved domains (`RESERVED_DOMAINS`: `tensorstack.dev` and its
  subdomains, `batch.tensorstack.dev`, the T9k scheduler's `scheduler.tensorstack.dev`), in
  every template;
* `hostname` and `subdomain` in the templates of a kind whose pods the operator names in the
  job's headless Service, `hostNetwork: true` and `hostPort` where the pods run sshd: the
  templates of those kinds' roles, in `t9kjobs.models.pod_roles`;
* the operator's Secrets and ConfigMaps (`<job>-ssh`, `<job>-hostfile`, `<job>-stacks`)
  wherever a pod names one, in every template: `t9kjobs.models.pod_refs`;
* `schedulingGroup` in every template: the gang a pod joins is the operator's to say (the
  `scheduling` feature plugin's own PodGroup, or none), never another job's.

Each such refusal is declared twice, as a CEL rule for the API server and as a pydantic
validator for `t9kjobs validate`, at the same field path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from t9kjobs.models._base import ApiModel
from t9kjobs.models.pod_refs import (
    ConfigMapRefShape,
    EnvFromShape,
    EnvVarSourceShape,
    ProjectedShape,
    SecretVolumeShape,
)

__all__ = [
    "DNS_LABEL",
    "MAX_ENV",
    "MAX_ENV_FROM",
    "MAX_POD_METADATA_KEYS",
    "MAX_VOLUMES",
    "POD_SPEC_RULES",
    "RESERVED_DOMAINS",
    "RESERVED_KEY_PATTERN",
    "ContainerPortShape",
    "ContainerShape",
    "PodMetadataShape",
    "PodSpecShape",
    "PodTemplate",
    "PodTemplateShape",
    "SchedulingGroupShape",
    "ShapeSchema",
    "checker",
    "reserved_key",
    "reserved_keys_message",
]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PORT_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# The label and annotation domains the operator owns: a key whose prefix (the part before `/`)
# is one of them or ends with `.<domain>` is the operator's (`tensorstack.dev/owner-name`,
# `batch.tensorstack.dev/stop-when-finished`, the T9k scheduler's
# `scheduler.tensorstack.dev/queue`). Pods get only the operator's values for such keys; a pod
# template may not set one. Other domains (`sim.t9kjobs.dev/*`, the simulation's) are the
# user's.
RESERVED_DOMAINS: tuple[str, ...] = ("tensorstack.dev",)
# A reserved key, as a regular expression that Python and the API server's CEL (RE2) read
# alike: a prefix without `/` that is a reserved domain or one of its subdomains, then `/`.
RESERVED_KEY_PATTERN = (
    "^([^/]*[.])?(" + "|".join(d.replace(".", "[.]") for d in RESERVED_DOMAINS) + ")/"
)
_RESERVED = re.compile(RESERVED_KEY_PATTERN)
_RESERVED_SAID = ", ".join(f"{d} and *.{d}" for d in RESERVED_DOMAINS)
# Environment variables and volumes a template may have: bounds that let the API server
# estimate the cost of the rules on each of them (t9kjobs.models.pod_refs), far above what a
# training pod uses.
MAX_ENV = 1024
MAX_ENV_FROM = 64
MAX_VOLUMES = 256
# Labels, and annotations, a template may have: what a CEL rule over their keys may iterate
# (the API server refuses a rule over an unbounded map: its estimated cost is too high).
MAX_POD_METADATA_KEYS = 256


def reserved_key(key: str) -> bool:
    """Whether a label or annotation key is the operator's (`RESERVED_DOMAINS`)."""
    return _RESERVED.match(key) is not None


def reserved_keys_message(what: str, keys: list[str]) -> str:
    """Why a template may not set these `what` (label, annotation) keys."""
    named = ", ".join(f"`{k}`" for k in keys)
    verb = "is" if len(keys) == 1 else "are"
    plural = "" if len(keys) == 1 else "s"
    return f"{what} key{plural} {named} {verb} reserved for the operator ({_RESERVED_SAID})"


class _Shape(ApiModel):
    """Typed where listed, everything else kept as written."""

    model_config = ApiModel.model_config | ConfigDict(extra="allow")


class EnvVarShape(_Shape):
    """An environment variable of a container."""

    name: str = Field(min_length=1, description="Variable name.")
    value: str | None = Field(default=None, description="Its value; a string.")
    value_from: EnvVarSourceShape | None = Field(
        default=None, description="Where the value comes from (a Secret, a field...)."
    )


class ContainerPortShape(_Shape):
    """A port of a container."""

    container_port: int = Field(ge=1, le=65535, description="Port number in the container.")
    name: str | None = Field(
        default=None, max_length=15, pattern=_PORT_NAME, description="Port name."
    )
    protocol: Literal["TCP", "UDP", "SCTP"] | None = Field(default=None, description="Protocol.")
    host_port: int | None = Field(default=None, ge=0, le=65535, description="Port on the host.")


class VolumeMountShape(_Shape):
    """Where a volume is mounted in a container."""

    name: str = Field(min_length=1, description="Volume name.")
    mount_path: str = Field(min_length=1, description="Path in the container.")


class ResourcesShape(_Shape):
    """Resource limits and requests: quantities, a number or a string each (`1`, `500m`)."""

    limits: dict[str, Any] | None = Field(default=None, description="Resource limits.")
    requests: dict[str, Any] | None = Field(default=None, description="Resource requests.")


class ContainerShape(_Shape):
    """A container of the pod template."""

    name: str = Field(
        max_length=63, pattern=DNS_LABEL, description="Container name: a lowercase DNS label."
    )
    image: str = Field(min_length=1, description="Container image.")
    command: list[str] | None = Field(default=None, description="Entrypoint.")
    args: list[str] | None = Field(default=None, description="Arguments to the entrypoint.")
    env: list[EnvVarShape] | None = Field(
        default=None, max_length=MAX_ENV, description="Environment variables."
    )
    env_from: list[EnvFromShape] | None = Field(
        default=None,
        max_length=MAX_ENV_FROM,
        description="Secrets' and ConfigMaps' keys as environment variables.",
    )
    ports: list[ContainerPortShape] | None = Field(default=None, description="Ports.")
    resources: ResourcesShape | None = Field(default=None, description="Compute resources.")
    volume_mounts: list[VolumeMountShape] | None = Field(
        default=None, description="Volumes mounted in the container."
    )
    working_dir: str | None = Field(default=None, description="Working directory.")


class VolumeShape(_Shape):
    """A volume of the pod."""

    name: str = Field(max_length=63, pattern=DNS_LABEL, description="Volume name.")
    secret: SecretVolumeShape | None = Field(default=None, description="A Secret's keys.")
    config_map: ConfigMapRefShape | None = Field(default=None, description="A ConfigMap's keys.")
    projected: ProjectedShape | None = Field(default=None, description="Several sources.")


_UNIQUE_NAMES = (
    "((has(self.containers) ? self.containers : []).map(c, c.name)"
    " + (has(self.initContainers) ? self.initContainers : []).map(c, c.name))"
)


class SchedulingGroupShape(_Shape):
    """The gang a pod joins (kube-scheduler's): typed only so that a CEL rule can name it; a
    template may not set it."""

    pod_group_name: str | None = Field(default=None, description="The PodGroup's name.")


_SCHEDULING_GROUP = (
    "`schedulingGroup` is set by the operator: a pod joins its own job's gang (a PodGroup the"
    " operator makes) or none, never one a template names"
)

POD_SPEC_RULES: list[JsonValue] = [
    {
        "rule": f"{_UNIQUE_NAMES}.all(n, {_UNIQUE_NAMES}.exists_one(m, m == n))",
        "message": "container names must be unique among containers and initContainers",
    },
    {
        "rule": "!has(self.schedulingGroup)",
        "message": _SCHEDULING_GROUP,
        "fieldPath": ".schedulingGroup",
        "reason": "FieldValueForbidden",
    },
]


class PodSpecShape(_Shape):
    """The pod spec of a template."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": POD_SPEC_RULES}
    )

    containers: list[ContainerShape] | None = Field(default=None, description="Containers.")
    init_containers: list[ContainerShape] | None = Field(
        default=None, description="Init containers."
    )
    volumes: list[VolumeShape] | None = Field(
        default=None, max_length=MAX_VOLUMES, description="Volumes."
    )
    scheduling_group: SchedulingGroupShape | None = Field(
        default=None,
        description="Not allowed: the operator sets it (a pod joins its own job's gang, or none).",
    )

    @field_validator("scheduling_group")
    @classmethod
    def _gang_set_by_the_operator(cls, value: object) -> object:
        # Called only for a value the user wrote (a null is absent): the CRD refuses any value.
        raise ValueError(_SCHEDULING_GROUP)

    @model_validator(mode="after")
    def _unique_names(self) -> PodSpecShape:
        names = [c.name for c in [*(self.containers or []), *(self.init_containers or [])]]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                "container names must be unique among containers and initContainers;"
                f" repeated: {', '.join(repeated)}"
            )
        return self


def _reserved_rule(field: str, what: str) -> JsonValue:
    """The CEL rule refusing reserved keys in the map `field` (labels, annotations); its
    message names one of them."""
    match = f"k.matches('{RESERVED_KEY_PATTERN}')"
    said = f" is reserved for the operator ({_RESERVED_SAID})"
    return {
        "rule": f"!has(self.{field}) || self.{field}.all(k, !{match})",
        "message": f"{what} keys of the domains {_RESERVED_SAID} are reserved for the operator",
        "messageExpression": f"'{what} key `' + self.{field}.filter(k, {match})[0] + '`{said}'",
        "fieldPath": f".{field}",
        "reason": "FieldValueForbidden",
    }


class PodMetadataShape(_Shape):
    """The labels and annotations the pods get; the operator's domains are refused."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                _reserved_rule("labels", "label"),
                _reserved_rule("annotations", "annotation"),
            ]
        }
    )

    labels: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_POD_METADATA_KEYS,
        description=f"Labels of the pods, at most {MAX_POD_METADATA_KEYS}; keys of the domains"
        f" {_RESERVED_SAID} are the operator's and refused.",
    )
    annotations: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_POD_METADATA_KEYS,
        description=f"Their annotations, at most {MAX_POD_METADATA_KEYS}; keys of the domains"
        f" {_RESERVED_SAID} are the operator's and refused.",
    )

    @field_validator("labels", "annotations")
    @classmethod
    def _not_reserved(
        cls, value: dict[str, str] | None, info: ValidationInfo
    ) -> dict[str, str] | None:
        found = sorted(k for k in value or {} if reserved_key(k))
        if found:
            what = "label" if info.field_name == "labels" else "annotation"
            raise ValueError(reserved_keys_message(what, found))
        return value


class PodTemplateShape(_Shape):
    """A pod template: metadata and spec."""

    metadata: PodMetadataShape | None = Field(default=None, description="Pod metadata.")
    spec: PodSpecShape | None = Field(default=None, description="Pod spec.")


def checker(shape: type[PodTemplateShape]) -> Callable[[Any, ValidatorFunctionWrapHandler], Any]:
    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        template = handler(value)
        shape.model_validate(template, strict=True, by_alias=True, by_name=False)
        return template

    check.__doc__ = (
        f"A pod template, kept as a plain dict and checked against `{shape.__name__}` (also its"
        " schema in the CRD); fields the shape does not list are kept as written."
    )
    return check


@dataclass(frozen=True)
class ShapeSchema:
    """The template's JSON schema (and so its CRD schema) is its shape's."""

    shape: type[PodTemplateShape]

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self.shape.__pydantic_core_schema__)


# A pod template of any kind.
PodTemplate = Annotated[
    dict[str, Any], WrapValidator(checker(PodTemplateShape)), ShapeSchema(PodTemplateShape)
]
