"""What a pod template may name of its namespace: never the Secrets and ConfigMaps the operator
makes for jobs.

The operator makes, for each DeepSpeedJob and ColossalAIJob, a Secret `<job>-ssh` (the job's
SSH keys: `authorized_keys` is root ssh into its workers) and a ConfigMap `<job>-hostfile`
(the hosts its launcher sends its environment to), and mounts a job's own into its pods
itself; for a Stalled job of any kind, a ConfigMap `<job>-stacks` (its ranks' Python stacks,
which show its code and data paths). A template that names one can only mean another job's:
its pods would read that job's keys, even a job created later (a pod waits for a missing
Secret, then mounts it). So no template of any kind may name a Secret whose name ends in
`-ssh` or a ConfigMap whose name ends in `-hostfile` or `-stacks`, wherever a pod names one
(a volume, a projected volume's source, an environment variable's `valueFrom`, a container's
`envFrom`). The rule is static (names, not
what exists), so the API server refuses it at admission (a CEL rule of each reference) as
`t9kjobs validate` does; its price is that a user's own Secret may not be called
`github-ssh`, which the message says. docs/security.md, threat 24.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, JsonValue, field_validator

from t9kjobs.models._base import ApiModel

__all__ = [
    "OPERATOR_SUFFIXES",
    "ConfigMapRefShape",
    "EnvFromShape",
    "EnvVarSourceShape",
    "ProjectedShape",
    "SecretRefShape",
    "SecretVolumeShape",
]

# An object's name is a DNS subdomain: at most 253 characters. Said in the schema, it bounds
# what the API server estimates each rule costs (a CRD has a budget for all its rules).
_NAME = 253
# The endings of the names the operator gives the objects it makes for jobs, by kind.
OPERATOR_SUFFIXES: dict[str, tuple[str, ...]] = {
    "Secret": ("-ssh",),
    "ConfigMap": ("-hostfile", "-stacks"),
}
_WHAT = {
    "Secret": "Secret `<job>-ssh` of each DeepSpeedJob and ColossalAIJob, which it mounts into"
    " that job's own pods itself",
    "ConfigMap": "ConfigMap `<job>-hostfile` of each DeepSpeedJob and ColossalAIJob, which it"
    " mounts into that job's own pods itself, and `<job>-stacks`, a Stalled job's stacks",
}


def _message(kind: str) -> str:
    endings = " or ".join(f"`{s}`" for s in OPERATOR_SUFFIXES[kind])
    return (
        f"names a {kind} ending in {endings}: such names are the operator's ({_WHAT[kind]});"
        f" a template may not name one, as it could only be another job's."
        f" Give your {kind} a name that does not end in {endings}"
    )


def _rule(kind: str, field: str) -> JsonValue:
    ends = " || ".join(f"self.{field}.endsWith('{s}')" for s in OPERATOR_SUFFIXES[kind])
    return {
        "rule": f"!has(self.{field}) || !({ends})",
        "message": f"`{field}` {_message(kind)}",
        "fieldPath": f".{field}",
        "reason": "FieldValueForbidden",
    }


def _refuse(kind: str, field: str, value: str | None) -> str | None:
    if value is not None and value.endswith(OPERATOR_SUFFIXES[kind]):
        raise ValueError(f"`{field}` {_message(kind)}")
    return value


class _Shape(ApiModel):
    model_config = ApiModel.model_config | ConfigDict(extra="allow")


class SecretRefShape(_Shape):
    """A Secret named by `name` (a key of it, its keys as variables, a projected source)."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_rule("Secret", "name")]}
    )

    name: str | None = Field(
        default=None, max_length=_NAME, description="The Secret's name; not `*-ssh`."
    )

    @field_validator("name")
    @classmethod
    def _not_the_operators(cls, value: str | None) -> str | None:
        return _refuse("Secret", "name", value)


class ConfigMapRefShape(_Shape):
    """A ConfigMap named by `name` (a volume, a key of it, its keys, a projected source)."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_rule("ConfigMap", "name")]}
    )

    name: str | None = Field(
        default=None,
        max_length=_NAME,
        description="The ConfigMap's name; not `*-hostfile` or `*-stacks`.",
    )

    @field_validator("name")
    @classmethod
    def _not_the_operators(cls, value: str | None) -> str | None:
        return _refuse("ConfigMap", "name", value)


class SecretVolumeShape(_Shape):
    """A volume of a Secret's keys."""

    model_config = _Shape.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_rule("Secret", "secretName")]}
    )

    secret_name: str | None = Field(
        default=None, max_length=_NAME, description="The Secret's name; not `*-ssh`."
    )

    @field_validator("secret_name")
    @classmethod
    def _not_the_operators(cls, value: str | None) -> str | None:
        return _refuse("Secret", "secretName", value)


class ProjectionShape(_Shape):
    """One source of a projected volume."""

    secret: SecretRefShape | None = Field(default=None, description="A Secret's keys.")
    config_map: ConfigMapRefShape | None = Field(default=None, description="A ConfigMap's keys.")


class ProjectedShape(_Shape):
    """A projected volume: several sources in one folder."""

    sources: list[ProjectionShape] | None = Field(
        default=None, max_length=64, description="Its sources."
    )


class EnvVarSourceShape(_Shape):
    """Where an environment variable's value comes from."""

    secret_key_ref: SecretRefShape | None = Field(default=None, description="A Secret's key.")
    config_map_key_ref: ConfigMapRefShape | None = Field(
        default=None, description="A ConfigMap's key."
    )
    field_ref: dict[str, JsonValue] | None = Field(default=None, description="A pod's field.")
    resource_field_ref: dict[str, Any] | None = Field(
        default=None, description="A container's resource."
    )


class EnvFromShape(_Shape):
    """Every key of a Secret or a ConfigMap as environment variables."""

    secret_ref: SecretRefShape | None = Field(default=None, description="A Secret.")
    config_map_ref: ConfigMapRefShape | None = Field(default=None, description="A ConfigMap.")
    prefix: str | None = Field(default=None, description="A prefix for the variables' names.")
