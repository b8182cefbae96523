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
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from t9kjobs.models._base import ApiModel

__all__ = [
    "DNS_LABEL",
    "ContainerShape",
    "PodSpecShape",
    "PodTemplate",
    "PodTemplateShape",
]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PORT_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class _Shape(ApiModel):
    """Typed where listed, everything else kept as written."""

    model_config = ApiModel.model_config | ConfigDict(extra="allow")


class EnvVarShape(_Shape):
    """An environment variable of a container."""

    name: str = Field(min_length=1, description="Variable name.")
    value: str | None = Field(default=None, description="Its value; a string.")
    value_from: dict[str, JsonValue] | None = Field(
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
    env: list[EnvVarShape] | None = Field(default=None, description="Environment variables.")
    ports: list[ContainerPortShape] | None = Field(default=None, description="Ports.")
    resources: ResourcesShape | None = Field(default=None, description="Compute resources.")
    volume_mounts: list[VolumeMountShape] | None = Field(
        default=None, description="Volumes mounted in the container."
    )
    working_dir: str | None = Field(default=None, description="Working directory.")


class VolumeShape(_Shape):
    """A volume of the pod."""

    name: str = Field(max_length=63, pattern=DNS_LABEL, description="Volume name.")


_UNIQUE_NAMES = (
    "((has(self.containers) ? self.containers : []).map(c, c.name)"
    " + (has(self.initContainers) ? self.initContainers : []).map(c, c.name))"
)


class PodSpecShape(_Shape):
    """The pod spec of a template."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"{_UNIQUE_NAMES}.all(n, {_UNIQUE_NAMES}.exists_one(m, m == n))",
                    "message": "container names must be unique among containers and initContainers",
                }
            ]
        }
    )

    containers: list[ContainerShape] | None = Field(default=None, description="Containers.")
    init_containers: list[ContainerShape] | None = Field(
        default=None, description="Init containers."
    )
    volumes: list[VolumeShape] | None = Field(default=None, description="Volumes.")

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


class PodMetadataShape(_Shape):
    """The labels and annotations the pods get."""

    labels: dict[str, str] | None = Field(default=None, description="Labels of the pods.")
    annotations: dict[str, str] | None = Field(default=None, description="Their annotations.")


class PodTemplateShape(_Shape):
    """A pod template: metadata and spec."""

    metadata: PodMetadataShape | None = Field(default=None, description="Pod metadata.")
    spec: PodSpecShape | None = Field(default=None, description="Pod spec.")


def _check_shape(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A pod template, kept as a plain dict and checked against `PodTemplateShape` (also its
    schema in the CRD); fields the shape does not list are kept as written."""
    template = handler(value)
    PodTemplateShape.model_validate(template, strict=True, by_alias=True, by_name=False)
    return template


class _ShapeSchema:
    """The template's JSON schema (and so its CRD schema) is `PodTemplateShape`'s."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(PodTemplateShape.__pydantic_core_schema__)


PodTemplate = Annotated[dict[str, Any], WrapValidator(_check_shape), _ShapeSchema]
