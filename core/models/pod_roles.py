"""The pod templates of kinds whose pods have a role the operator sets up: named in the job's
headless Service (PyTorchTrainingJob: `HeadlessPodTemplate`), or running sshd as well
(DeepSpeedJob, ColossalAIJob: `SshPodTemplate`).

What the operator sets on such pods, their templates may not set: `hostname` and `subdomain`
(each pod's hostname is its own name, its subdomain the job's headless Service); and where the
pods run sshd, `hostNetwork: true` (sshd on the node's network would be the node's port 22) and
a container port's `hostPort` (a port of the node forwarded to sshd, or to the job's
unauthenticated rendezvous ports). Each refusal is a CEL rule for the API server and a pydantic
validator for `t9kjobs validate`, at the same field path, as in `t9kjobs.models.pod`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, JsonValue, ValidationInfo, WrapValidator, field_validator

from t9kjobs.models.pod import (
    POD_SPEC_RULES,
    ContainerPortShape,
    ContainerShape,
    PodSpecShape,
    PodTemplateShape,
    ShapeSchema,
    checker,
)

__all__ = [
    "HeadlessPodSpecShape",
    "HeadlessPodTemplate",
    "HeadlessPodTemplateShape",
    "SshContainerPortShape",
    "SshContainerShape",
    "SshPodSpecShape",
    "SshPodTemplate",
    "SshPodTemplateShape",
]

_OPERATOR_SETS_HOST = (
    "is set by the operator in this kind: each pod's hostname is its own name and its"
    " subdomain the job's headless Service, so that the job's pods reach each other by name"
)
_HOST_FIELDS = ("hostname", "subdomain")
_HOST_NETWORK = (
    "`hostNetwork: true` is not allowed in this kind: its pods run sshd on port 22, which on the"
    " node's network would be the node's own port 22"
)
_HOST_PORT = (
    "`hostPort` is not allowed in this kind: its pods run sshd (as root by default), and a port"
    " of the node forwarded to a container would open it, or the job's rendezvous ports, to"
    " whoever reaches the node"
)


def _refused_rule(field: str) -> JsonValue:
    return {
        "rule": f"!has(self.{field})",
        "message": f"`{field}` {_OPERATOR_SETS_HOST}",
        "fieldPath": f".{field}",
        "reason": "FieldValueForbidden",
    }


_HEADLESS_SPEC_RULES: list[JsonValue] = [*POD_SPEC_RULES, *map(_refused_rule, _HOST_FIELDS)]
_SSH_SPEC_RULES: list[JsonValue] = [
    *_HEADLESS_SPEC_RULES,
    {
        "rule": "!has(self.hostNetwork) || !self.hostNetwork",
        "message": _HOST_NETWORK,
        "fieldPath": ".hostNetwork",
        "reason": "FieldValueForbidden",
    },
]


class SshContainerPortShape(ContainerPortShape):
    """A container port of a pod that runs sshd: no `hostPort`."""

    model_config = ContainerPortShape.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.hostPort) || self.hostPort == 0",
                    "message": _HOST_PORT,
                    "fieldPath": ".hostPort",
                    "reason": "FieldValueForbidden",
                }
            ]
        }
    )

    host_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Not allowed (but 0, none): the pods run sshd, which a port of the node"
        " would open to whoever reaches the node.",
    )

    @field_validator("host_port")
    @classmethod
    def _not_on_the_node(cls, value: int | None) -> int | None:
        if value:
            raise ValueError(_HOST_PORT)
        return value


class SshContainerShape(ContainerShape):
    """A container of a pod that runs sshd: its ports have no `hostPort`."""

    # A narrower item type than the base's: lists are invariant to mypy, but these shapes only
    # validate (the template stays the dict it was), so nothing appends a base item to them.
    ports: list[SshContainerPortShape] | None = Field(  # type: ignore[assignment]
        default=None, description="Ports."
    )


def _refused_field(field: str) -> Any:
    return Field(default=None, description=f"Not allowed: `{field}` {_OPERATOR_SETS_HOST}.")


class HeadlessPodSpecShape(PodSpecShape):
    """The pod spec of a kind whose pods the operator names in the job's headless Service:
    `hostname` and `subdomain` are the operator's."""

    model_config = PodSpecShape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _HEADLESS_SPEC_RULES}
    )

    hostname: str | None = _refused_field("hostname")
    subdomain: str | None = _refused_field("subdomain")

    @field_validator(*_HOST_FIELDS)
    @classmethod
    def _set_by_the_operator(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Called only for a value the user wrote (a null is absent): the CRD refuses any value.
        raise ValueError(f"`{info.field_name}` {_OPERATOR_SETS_HOST}")


class SshPodSpecShape(HeadlessPodSpecShape):
    """The pod spec of a kind whose pods run sshd (DeepSpeedJob, ColossalAIJob): also
    not on the node's network, nor reached through a port of the node (`hostPort`)."""

    model_config = HeadlessPodSpecShape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _SSH_SPEC_RULES}
    )

    # Narrower item types than the base's (see `SshContainerShape.ports`).
    containers: list[SshContainerShape] | None = Field(  # type: ignore[assignment]
        default=None, description="Containers."
    )
    init_containers: list[SshContainerShape] | None = Field(  # type: ignore[assignment]
        default=None, description="Init containers."
    )

    host_network: bool | None = Field(
        default=None,
        description="Not allowed to be true: the pods run sshd on port 22, which on the node's"
        " network would be the node's own port 22.",
    )

    @field_validator("host_network")
    @classmethod
    def _not_on_the_node(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError(_HOST_NETWORK)
        return value


class HeadlessPodTemplateShape(PodTemplateShape):
    """A pod template whose `spec.hostname` and `spec.subdomain` are the operator's."""

    spec: HeadlessPodSpecShape | None = Field(default=None, description="Pod spec.")


class SshPodTemplateShape(PodTemplateShape):
    """A pod template of sshd pods: no hostname, subdomain, `hostNetwork: true` or
    `hostPort`."""

    spec: SshPodSpecShape | None = Field(default=None, description="Pod spec.")


# The template of a kind that gives every pod the hostname and subdomain of the job's headless
# Service (PyTorchTrainingJob): those two are refused.
HeadlessPodTemplate = Annotated[
    dict[str, Any],
    WrapValidator(checker(HeadlessPodTemplateShape)),
    ShapeSchema(HeadlessPodTemplateShape),
]
# The template of a kind whose pods run sshd and are named in the job's headless Service
# (DeepSpeedJob, ColossalAIJob): hostname, subdomain, `hostNetwork: true` and `hostPort` are
# refused.
SshPodTemplate = Annotated[
    dict[str, Any],
    WrapValidator(checker(SshPodTemplateShape)),
    ShapeSchema(SshPodTemplateShape),
]
