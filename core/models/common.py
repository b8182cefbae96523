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

from pydantic import AfterValidator, AliasChoices, ConfigDict, Field, JsonValue, model_validator

from t9kjobs.models._base import ApiModel, PodTemplate

__all__ = [
    "RETRYABLE_EXIT_CODES",
    "CleanUpPolicy",
    "DebugMode",
    "ElasticConfig",
    "PauseMode",
    "ReplicaDebugSet",
    "ReplicaSpec",
    "RestartPolicy",
    "RestartPolicyType",
    "RestartRule",
    "ResumeSpec",
    "RunMode",
    "RunPolicy",
    "SchedulePolicy",
    "T9kScheduler",
]

RestartPolicyType = Literal["Always", "OnFailure", "Never", "ExitCode"]
CleanUpPolicy = Literal["All", "Unfinished", "None"]

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
                    given = [c for c in info.validation_alias.choices if c in data]
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
        default=0, ge=0, description="The maximum number of restarts of one replica. Defaults to 0."
    )


class RestartRule(ApiModel):
    """A restart policy in normal form: `limit` is None where the string form sets no limit."""

    policy: RestartPolicyType
    limit: int | None = None

    @classmethod
    def of(cls, value: RestartPolicyType | RestartPolicy) -> RestartRule:
        if isinstance(value, RestartPolicy):
            return cls(policy=value.policy, limit=value.limit)
        return cls(policy=value)


class ReplicaDebugSet(ApiModel):
    """How to start the replicas of one type in debug mode."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: list[str] | None = Field(
        default=None, description="Command that replaces the containers' command."
    )


class DebugMode(_OneSpelling):
    """Whether and how to start the job in debug mode."""

    enabled: bool = _enabled_field("Whether to enable debug mode.")
    replica_specs: list[ReplicaDebugSet] = Field(
        default_factory=list, description="Per replica type overrides in debug mode."
    )


class ResumeSpec(ApiModel):
    """How to start the replicas of one type when the job resumes from pause."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: list[str] | None = Field(
        default=None, description="Command to run instead of the template's, when resuming."
    )
    args: list[str] | None = Field(
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
        default_factory=list, description="Per replica type overrides used when resuming."
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


class RunPolicy(ApiModel):
    """Runtime policies: cleanup, deadline and restart budget."""

    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        description="Seconds from the job's start after which it fails with DeadlineExceeded.",
    )
    backoff_limit: int = Field(
        default=3,
        ge=0,
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


class ElasticConfig(_OneSpelling):
    """Elastic training: the worker count may change at run time within [min, max]."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _ELASTIC_RULES}
    )

    enabled: bool = _enabled_field("Whether to enable elastic training.")
    min_replicas: int | None = Field(
        default=None, ge=1, description="Minimum number of replicas; immutable once created."
    )
    max_replicas: int | None = Field(
        default=None, ge=1, description="Maximum number of replicas; immutable once created."
    )
    expected_replicas: int | None = Field(
        default=None,
        ge=0,
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
    replicas: int = Field(default=1, ge=0, description="Number of replicas. Defaults to 1.")
    restart_policy: RestartPolicyType | RestartPolicy = Field(
        default="OnFailure",
        description="Always, OnFailure, Never or ExitCode, or the object form {policy, limit}.",
    )
    template: PodTemplate = Field(
        default_factory=dict, description="The pod template of this replica type."
    )
