"""Spec types that several kinds share (RunPolicy, RunMode, scheduling, elastic, restarts).

Where the user references spell a field differently from the API references, the API spelling
is canonical and the other is accepted as an alias (`enable` for `enabled`, `Queue` for `queue`),
so that no field a user writes from either document is silently dropped.

Cross-field rules are declared twice: as CEL (`x-kubernetes-validations`, copied into the CRDs
by `t9kjobs.crds`) for the API server's admission, and as pydantic validators for `t9kjobs
validate`. Transition rules (those reading `oldSelf`) exist only as CEL: they need the stored
object.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from t9kjobs.models._base import ApiModel
from t9kjobs.models.bounds import INT32_MAX, MAX_ARGS, MAX_REPLICA_TYPES, MAX_REPLICAS
from t9kjobs.models.pod import PodTemplate

__all__ = [
    "ELASTIC_ON",
    "RETRYABLE_EXIT_CODES",
    "Args",
    "CleanUpPolicy",
    "DebugMode",
    "ElasticConfig",
    "GeneratedCommandPauseMode",
    "GeneratedCommandResumeSpec",
    "GeneratedCommandRunMode",
    "PauseMode",
    "ReplicaDebugSet",
    "ReplicaSpec",
    "RestartPolicy",
    "RestartPolicyType",
    "RestartRule",
    "ResumeSpec",
    "RunMode",
    "RunModeName",
    "RunPolicy",
    "SchedulePolicy",
    "T9kScheduler",
    "not_elastic_rule",
]

RestartPolicyType = Literal["Always", "OnFailure", "Never", "ExitCode"]
# An argument list: a command, its arguments, launcher options.
Args = Annotated[list[str], Field(max_length=MAX_ARGS)]
CleanUpPolicy = Literal["All", "Unfinished", "None"]
RunModeName = Literal["Immediate", "Debug", "Pause"]

# Exit codes that mean "killed from outside" (SIGINT, SIGKILL, SIGTERM, SIGUSR1 + 128): worth a
# retry under the ExitCode policy; any other non-zero code is the program's own verdict.
RETRYABLE_EXIT_CODES = frozenset({130, 137, 143, 138})


def _enabled_field(description: str) -> bool:
    return Field(
        default=False,
        validation_alias=AliasChoices("enabled", "enable"),
        serialization_alias="enabled",
        description=description + " `enable` is accepted as an alias.",
    )


class _OneSpelling(ApiModel):
    """A model with aliased fields: two spellings of one field are an error, as in the CRD.

    Without this, pydantic reports the second spelling as an unknown field, which hides why.
    """

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for info in cls.model_fields.values():
                if isinstance(info.validation_alias, AliasChoices):
                    # A null spelling is absent (the API server prunes it).
                    given = [c for c in info.validation_alias.choices if data.get(c) is not None]
                    if len(given) > 1:
                        names = " or ".join(f"`{c}`" for c in given)
                        raise ValueError(
                            f"set only one of {names}: they are spellings of one field"
                        )
        return data


class RestartPolicy(ApiModel):
    """The object form of a restart policy: a policy and a per-replica limit of restarts."""

    policy: RestartPolicyType = Field(
        default="OnFailure", description="The policy to restart a finished replica."
    )
    limit: int = Field(
        default=0,
        ge=0,
        le=INT32_MAX,
        description="The maximum number of restarts of one replica. Defaults to 0.",
    )


class RestartRule(ApiModel):
    """A replica's restart policy in normal form, as the engine applies it.

    `limit` is the replica's own restart limit; None means none, for kinds whose
    `restartPolicy` is a string only and whose restarts are bounded by the job's
    `runPolicy.backoffLimit` (DeepSpeedJob, PyTorchTrainingJob). A kind with neither would
    restart a failing replica for ever.
    """

    policy: RestartPolicyType = Field(description="The policy the engine applies.")
    limit: int | None = Field(
        default=None,
        description="Restarts of one replica allowed; None: bounded by runPolicy.backoffLimit"
        " only.",
    )

    @classmethod
    def of(cls, value: RestartPolicyType | RestartPolicy) -> RestartRule:
        """A `restartPolicy` that has the object form: the string form is that policy with the
        object form's default limit (0), as the GenericJob and ColossalAIJob references say."""
        if isinstance(value, str):
            value = RestartPolicy(policy=value)
        return cls(policy=value.policy, limit=value.limit)


class ReplicaDebugSet(ApiModel):
    """How to start the replicas of one type in debug mode."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: Args | None = Field(
        default=None, description="Command that replaces the containers' command."
    )


class DebugMode(_OneSpelling):
    """Whether and how to start the job in debug mode."""

    enabled: bool = _enabled_field("Whether to enable debug mode.")
    replica_specs: list[ReplicaDebugSet] = Field(
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides in debug mode.",
    )


class ResumeSpec(ApiModel):
    """How to start the replicas of one type when the job resumes from pause."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: Args | None = Field(
        default=None, description="Command to run instead of the template's, when resuming."
    )
    args: Args | None = Field(
        default=None, description="Args to use instead of the template's, when resuming."
    )


# True when the stored (old) object is paused, whichever spelling of `enabled` it uses; a
# transition rule only runs when the old object has a `pause` at all.
_WAS_PAUSED = (
    "((has(oldSelf.enabled) && oldSelf.enabled) || (has(oldSelf.enable) && oldSelf.enable))"
)
_RESUME_SPECS_FROZEN = (
    f"!{_WAS_PAUSED} || (has(self.resumeSpecs) ? self.resumeSpecs : [])"
    " == (has(oldSelf.resumeSpecs) ? oldSelf.resumeSpecs : [])"
)


class PauseMode(_OneSpelling):
    """Whether the job is paused (its pods deleted) and how it resumes."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": _RESUME_SPECS_FROZEN,
                    "message": "resumeSpecs cannot be changed while the job is paused; set them"
                    " together with pause.enabled: true",
                    "fieldPath": ".resumeSpecs",
                    "reason": "FieldValueForbidden",
                }
            ]
        }
    )

    enabled: bool = _enabled_field("Whether to enable pause mode.")
    resume_specs: list[ResumeSpec] = Field(
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides used when resuming.",
    )


class RunMode(ApiModel):
    """Immediate (default), Debug or Pause. Pause wins when both are enabled."""

    debug: DebugMode | None = Field(default=None, description="Debug mode.")
    pause: PauseMode | None = Field(default=None, description="Pause mode.")

    @property
    def paused(self) -> bool:
        return self.pause is not None and self.pause.enabled

    @property
    def debugging(self) -> bool:
        return not self.paused and self.debug is not None and self.debug.enabled

    @property
    def name(self) -> RunModeName:
        """The mode in force, as status.runMode shows it."""
        return "Pause" if self.paused else "Debug" if self.debugging else "Immediate"


_GENERATED_COMMAND = (
    "cannot be set on resume in this kind: the operator generates the command of every pod"
    " (the launcher, sshd), so it would be dropped; resumeSpecs may only skip init containers"
)


def _refused_on_resume(field: str) -> Any:
    return Field(default=None, description=f"Not allowed: `{field}` {_GENERATED_COMMAND}.")


class GeneratedCommandResumeSpec(ResumeSpec):
    """How to start the replicas of one type when the job resumes: the command is generated."""

    # The engine sets such a kind's launch command after the resume overrides, so `command` and
    # `args` would be dropped without a word: they are refused, here and at admission.

    model_config = ResumeSpec.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!has(self.{field})",
                    "message": f"`{field}` {_GENERATED_COMMAND}",
                    "fieldPath": f".{field}",
                    "reason": "FieldValueForbidden",
                }
                for field in ("command", "args")
            ]
        }
    )

    command: list[str] | None = _refused_on_resume("command")
    args: list[str] | None = _refused_on_resume("args")

    @field_validator("command", "args")
    @classmethod
    def _refused(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        # Called only for a value the user wrote (a null is absent): the CRD refuses any value.
        raise ValueError(f"`{info.field_name}` {_GENERATED_COMMAND}")


class GeneratedCommandPauseMode(PauseMode):
    """Pause mode whose resumeSpecs may only skip init containers."""

    resume_specs: list[GeneratedCommandResumeSpec] = Field(  # type: ignore[assignment]
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides used when resuming: skipInitContainer only.",
    )


class GeneratedCommandRunMode(RunMode):
    """The run mode of a kind whose operator generates every pod's command (DeepSpeedJob,
    ColossalAIJob): resume overrides of command and args are refused."""

    pause: GeneratedCommandPauseMode | None = Field(default=None, description="Pause mode.")


class RunPolicy(ApiModel):
    """Runtime policies: cleanup, deadline and restart budget."""

    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="Seconds from the job's start after which it fails with DeadlineExceeded.",
    )
    backoff_limit: int = Field(
        default=3,
        ge=0,
        le=INT32_MAX,
        description="Restarts allowed, shared by all replicas, before the job fails."
        " Defaults to 3.",
    )
    clean_up_policy: CleanUpPolicy = Field(
        default="None",
        description="Pods deleted when the job finishes: All, Unfinished (those still pending or"
        " running) or None (default).",
    )


class T9kScheduler(_OneSpelling):
    """Gang scheduling through the T9k scheduler (a PodGroup per job)."""

    queue: str = Field(
        validation_alias=AliasChoices("queue", "Queue"),
        serialization_alias="queue",
        description="Queue of the PodGroup. `Queue` is accepted as an alias.",
    )
    priority: int = Field(
        default=0, ge=0, le=100, description="PodGroup priority in [0, 100]. Defaults to 0."
    )


class SchedulePolicy(ApiModel):
    """Which scheduler places the pods; the cluster's default scheduler when unset."""

    # An explicit alias: the camelCase generator spells `t9k_scheduler` as `t9KScheduler`.
    t9k_scheduler: T9kScheduler | None = Field(
        default=None,
        alias="t9kScheduler",
        description="Gang scheduling by the T9k scheduler: a PodGroup per job, in a queue.",
    )


_ELASTIC_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.minReplicas) || !has(self.maxReplicas)"
        " || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must be <= maxReplicas",
        "fieldPath": ".minReplicas",
    },
    {
        "rule": "!has(self.expectedReplicas) || !has(self.minReplicas)"
        " || self.minReplicas <= self.expectedReplicas",
        "message": "expectedReplicas must be >= minReplicas",
        "fieldPath": ".expectedReplicas",
    },
    {
        "rule": "!has(self.expectedReplicas) || !has(self.maxReplicas)"
        " || self.expectedReplicas <= self.maxReplicas",
        "message": "expectedReplicas must be <= maxReplicas",
        "fieldPath": ".expectedReplicas",
    },
    {
        "rule": "has(self.minReplicas) == has(oldSelf.minReplicas)"
        " && (!has(self.minReplicas) || self.minReplicas == oldSelf.minReplicas)",
        "message": "minReplicas cannot be changed once the job is created",
        "fieldPath": ".minReplicas",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "has(self.maxReplicas) == has(oldSelf.maxReplicas)"
        " && (!has(self.maxReplicas) || self.maxReplicas == oldSelf.maxReplicas)",
        "message": "maxReplicas cannot be changed once the job is created",
        "fieldPath": ".maxReplicas",
        "reason": "FieldValueForbidden",
    },
]


# `spec.elastic.enabled` in either spelling, read at the spec: the CRD keeps both as
# properties, without a default.
ELASTIC_ON = (
    "(has(self.elastic.enabled) && self.elastic.enabled)"
    " || (has(self.elastic.enable) && self.elastic.enable)"
)


def not_elastic_rule(kind: str) -> JsonValue:
    """The spec's transition rule refusing a change of `elastic.expectedReplicas` (what `kubectl
    scale` writes through the scale subresource) while the job is not elastic: the operator
    would ignore it, and `kubectl scale` would say "scaled"."""
    return {
        "rule": f"!has(self.elastic) || !has(self.elastic.expectedReplicas) || ({ELASTIC_ON})"
        " || (has(oldSelf.elastic) && has(oldSelf.elastic.expectedReplicas)"
        " && oldSelf.elastic.expectedReplicas == self.elastic.expectedReplicas)",
        "message": f"this {kind} is not elastic (spec.elastic.enabled is not true), so its"
        " replicas cannot be scaled: kubectl scale and spec.elastic.expectedReplicas only"
        " resize elastic jobs",
        "fieldPath": ".elastic.expectedReplicas",
        "reason": "FieldValueForbidden",
    }


class ElasticConfig(_OneSpelling):
    """Elastic training: the worker count may change at run time within [min, max]."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _ELASTIC_RULES}
    )

    enabled: bool = _enabled_field("Whether to enable elastic training.")
    min_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLICAS,
        description="Minimum number of replicas; immutable once created.",
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLICAS,
        description="Maximum number of replicas; immutable once created.",
    )
    expected_replicas: int | None = Field(
        default=None,
        ge=0,
        le=MAX_REPLICAS,
        description="Desired number of replicas, within [minReplicas, maxReplicas]; may change"
        " at run time (it is the target of the scale subresource: `kubectl scale`).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ElasticConfig:
        low, high, want = self.min_replicas, self.max_replicas, self.expected_replicas
        if low is not None and high is not None and low > high:
            raise ValueError(f"minReplicas ({low}) must be <= maxReplicas ({high})")
        if want is not None and low is not None and want < low:
            raise ValueError(f"expectedReplicas ({want}) must be >= minReplicas ({low})")
        if want is not None and high is not None and want > high:
            raise ValueError(f"expectedReplicas ({want}) must be <= maxReplicas ({high})")
        return self

    def replicas(self, default: int) -> int:
        """The replica count: `expectedReplicas` (else `default`) clamped to [min, max]."""
        n = self.expected_replicas if self.expected_replicas is not None else default
        if self.min_replicas is not None:
            n = max(n, self.min_replicas)
        if self.max_replicas is not None:
            n = min(n, self.max_replicas)
        return n


# No `-` in a replica type, and a letter first: a pod name `<job>-<type>-<index>` (or
# `<job>-<type>` for a kind's single pod) then reads back one way only, so the pods of two jobs
# of one namespace never share a name (job `a` with type `b-c` and job `a-b` with type `c`
# would both have a pod `a-b-c-0`).
_REPLICA_TYPE_PATTERN = r"^[a-z][a-z0-9]*$"


def _replica_type(value: str) -> str:
    if not re.fullmatch(_REPLICA_TYPE_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a replica type: lowercase letters and digits, a letter first, no"
            " '-' (pod names <job>-<type>-<index> must name one pod of one job)"
        )
    return value


ReplicaType = Annotated[
    str,
    Field(
        min_length=1,
        max_length=30,
        json_schema_extra={"pattern": _REPLICA_TYPE_PATTERN},
        description="Replica type: lowercase letters and digits, a letter first (no `-`); it"
        " becomes part of pod names.",
    ),
    AfterValidator(_replica_type),
]


class ReplicaSpec(ApiModel):
    """One type of replica: how many pods, from which template, restarted how."""

    type: ReplicaType
    replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description=f"Number of replicas, at most {MAX_REPLICAS}. Defaults to 1.",
    )
    restart_policy: RestartPolicyType | RestartPolicy = Field(
        default="OnFailure",
        description="How a finished replica is restarted: the object form {policy, limit}"
        " (limit defaults to 0) or a policy name (Always, OnFailure, Never, ExitCode) with"
        " limit 0. Defaults to OnFailure, limit 0.",
    )
    template: PodTemplate = Field(
        default_factory=dict, description="The pod template of this replica type."
    )
