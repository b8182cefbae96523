"""How the engine recovers from a replica's failure (`spec.recoveryPolicy`, every kind).

A field of the base `JobSpec`, so every kind (third-party ones too) and its CRD have it; the
planner reads it through `recovery_of(spec)`. Absent, the engine behaves as before it existed:
the replica's `restartPolicy` decides, every restart charged to `backoffLimit`/`limit`.

Ordered rules, first match decides (JobSet's `failurePolicy` and batch/v1's `podFailurePolicy`
are the models): a rule matches a failed replica when every matcher it has matches (OR inside
each list) and, with `replicaTypes`, the replica's type is listed. Its action restarts the
replica (`RestartReplica`), restarts every replica of the job together (`RestartJob`: a
collective whose rank died hangs the others), fails the job (`FailJob`) or restarts the
replica without charging the user's budget (`Ignore`, charged to `infrastructureRestartLimit`
instead, so that no loop is endless). `PreemptedByKueue` is the whole job's Workload evicted:
only a `FailJob` rule may name it (the job gives up instead of waiting in its queue again).
`Stalled` is the engine's verdict on a job whose progress stopped (`stall`,
`t9kjobs.planner.stall`). What the engine does not do yet is not accepted: accepting it would
be a silent lie.

Cross-field rules are declared twice, as elsewhere (`t9kjobs.models`): CEL for admission and a
pydantic validator for `t9kjobs validate`, at the same field paths. Every list has `maxItems`
and every string `maxLength` so the CEL cost estimate passes.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from t9kjobs.models._base import ApiModel
from t9kjobs.models._spellings import _OneSpelling, enabled_field
from t9kjobs.models.bounds import INT32_MAX

__all__ = [
    "DEFAULT_INFRASTRUCTURE_RESTART_LIMIT",
    "MAX_RECOVERY_RULES",
    "RECOVERY_REASONS",
    "RESTART_ACTIONS",
    "ExitCodeMatch",
    "PodConditionMatch",
    "RecoveryAction",
    "RecoveryPolicy",
    "RecoveryReason",
    "RecoveryRule",
    "StallDetection",
    "recovery_of",
]

MAX_RECOVERY_RULES = 16
MAX_EXIT_CODES = 255
DEFAULT_INFRASTRUCTURE_RESTART_LIMIT = 20
# The longest a job may wait on a node that is not Ready before its pods there count as lost.
MAX_NODE_LOST_AFTER_SECONDS = 86400

RecoveryAction = Literal["RestartReplica", "RestartJob", "FailJob", "Ignore"]
# The actions that restart, and so may say which budget they charge.
RESTART_ACTIONS = ("RestartReplica", "RestartJob")
# What the engine calls a failure (`t9kjobs.planner.failures.classify`).
# `PreemptedByKueue`: the job's Workload evicted (any Kueue reason); the whole job, never a
# replica: only a FailJob rule of its own may name it (else the eviction is a requeue).
RecoveryReason = Literal[
    "NodeLost", "Preempted", "Evicted", "OOMKilled", "Error", "Stalled", "PreemptedByKueue"
]
RECOVERY_REASONS: tuple[str, ...] = get_args(RecoveryReason)
# Reasons that come with an exit code: the only ones `onExitCodes` may be combined with.
_EXIT_REASONS = ("OOMKilled", "Error")
Budget = Literal["User", "Infrastructure"]
_Reason = Annotated[str, Field(max_length=128)]
_ReplicaType = Annotated[str, Field(max_length=63)]

_EXIT_CODE_RULES: list[JsonValue] = [
    {
        "rule": "self.values.all(x, self.values.exists_one(y, y == x))",
        "message": "values must be unique",
    },
    {
        "rule": "self.operator != 'In' || !self.values.exists(v, v == 0)",
        "message": "values may not hold 0 with operator In: a replica that exited 0 did not fail",
    },
]

_KUEUE_RULE = (
    "onReasons PreemptedByKueue goes with action FailJob only, and without replicaTypes,"
    " onExitCodes or onPodConditions: Kueue evicts the whole job, which is otherwise requeued"
)
_RULE_RULES: list[JsonValue] = [
    {
        "rule": "has(self.onExitCodes) || has(self.onPodConditions) || has(self.onReasons)",
        "message": "a rule needs onExitCodes, onPodConditions or onReasons",
    },
    {
        "rule": "!has(self.budget) || self.action in ['RestartReplica', 'RestartJob']",
        "message": "budget is for actions RestartReplica and RestartJob only (Ignore charges the"
        " infrastructure budget, FailJob none)",
    },
    {
        "rule": "!has(self.onReasons) || !('PreemptedByKueue' in self.onReasons)"
        " || (self.action == 'FailJob' && !has(self.replicaTypes) && !has(self.onExitCodes)"
        " && !has(self.onPodConditions))",
        "message": _KUEUE_RULE,
    },
    {
        "rule": "!has(self.onExitCodes) || !has(self.onReasons)"
        " || self.onReasons.all(r, r in ['OOMKilled', 'Error'])",
        "message": "onExitCodes combines only with the reasons OOMKilled and Error (the others"
        " come without an exit code)",
    },
]

_RULES_LIST_RULES: list[JsonValue] = [
    {
        "rule": "self.all(r, !has(r.name) || self.exists_one(s, has(s.name) && s.name == r.name))",
        "message": "rule names must be unique",
    },
]


class ExitCodeMatch(ApiModel):
    """Exit codes of one container, as batch/v1's `onExitCodes`."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _EXIT_CODE_RULES}
    )

    container_name: str | None = Field(
        default=None,
        max_length=63,
        description="The container whose exit code is read; default: the training container.",
    )
    operator: Literal["In", "NotIn"] = Field(
        description="In: the code is one of values; NotIn: it is none of them."
    )
    values: list[Annotated[int, Field(ge=0, le=255)]] = Field(
        min_length=1,
        max_length=MAX_EXIT_CODES,
        description="Exit codes, 0 to 255, each once; 0 not with In.",
    )

    @model_validator(mode="after")
    def _values(self) -> ExitCodeMatch:
        dupes = sorted({v for v in self.values if self.values.count(v) > 1})
        if dupes:
            raise ValueError(f"values must be unique; repeated: {', '.join(map(str, dupes))}")
        if self.operator == "In" and 0 in self.values:
            raise ValueError(
                "values may not hold 0 with operator In: a replica that exited 0 did not fail"
            )
        return self


class PodConditionMatch(ApiModel):
    """A condition of the failed pod: `DisruptionTarget`, the one the engine keeps."""

    type: Literal["DisruptionTarget"] = Field(
        description="The condition type; DisruptionTarget (the pod was disrupted: evicted,"
        " preempted, deleted by the taint manager or the pod garbage collector)."
    )
    status: Literal["True", "False", "Unknown"] = Field(
        default="True", description="The condition's status. Defaults to True."
    )
    reasons: list[_Reason] | None = Field(
        default=None,
        max_length=16,
        description="The condition's reasons that match (any one); default: any reason.",
    )


class RecoveryRule(ApiModel):
    """One rule: what failure it matches and what the engine does about it."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _RULE_RULES}
    )

    name: str | None = Field(
        default=None,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="A name for the rule, said in the status and Events; unique in the list.",
    )
    action: RecoveryAction = Field(
        description="RestartReplica (restart the failed replica), RestartJob (stop every pod of"
        " the job not ended for good, then create them all again at once), FailJob (the job"
        " fails, reason RecoveryPolicy) or Ignore (restart it, charged to the infrastructure"
        " budget only)."
    )
    budget: Budget | None = Field(
        default=None,
        description="The budget a RestartReplica or RestartJob charges (a RestartJob: 1): User"
        " (backoffLimit and the failed replica's limit; the default) or Infrastructure"
        " (infrastructureRestartLimit).",
    )
    on_exit_codes: ExitCodeMatch | None = Field(
        default=None, description="Matches the exit code of a container of the failed pod."
    )
    on_pod_conditions: list[PodConditionMatch] | None = Field(
        default=None,
        min_length=1,
        max_length=4,
        description="Matches a condition of the failed pod (any one).",
    )
    on_reasons: list[RecoveryReason] | None = Field(
        default=None,
        min_length=1,
        max_length=len(RECOVERY_REASONS),
        description="Matches the failure's reason (any one): NodeLost, Preempted, Evicted,"
        " OOMKilled, Error (any other non-zero exit), Stalled (no progress reported for longer"
        " than spec.recoveryPolicy.stall allows; the replica read is restarted) or"
        " PreemptedByKueue (the job's Workload evicted by Kueue; with FailJob only: the job"
        " fails instead of waiting in its queue again).",
    )
    replica_types: list[_ReplicaType] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="Only failures of these replica types match; default: every type.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> RecoveryRule:
        if self.on_exit_codes is None and self.on_pod_conditions is None and not self.on_reasons:
            raise ValueError("a rule needs onExitCodes, onPodConditions or onReasons")
        if self.budget is not None and self.action not in RESTART_ACTIONS:
            raise ValueError(
                "budget is for actions RestartReplica and RestartJob only (Ignore charges the"
                " infrastructure budget, FailJob none)"
            )
        if "PreemptedByKueue" in (self.on_reasons or ()) and (
            self.action != "FailJob"
            or self.replica_types is not None
            or self.on_exit_codes is not None
            or self.on_pod_conditions is not None
        ):
            raise ValueError(_KUEUE_RULE)
        if (
            self.on_exit_codes is not None
            and self.on_reasons is not None
            and any(r not in _EXIT_REASONS for r in self.on_reasons)
        ):
            raise ValueError(
                "onExitCodes combines only with the reasons OOMKilled and Error (the others"
                " come without an exit code)"
            )
        return self

    @property
    def charges(self) -> str | None:
        """The budget a match charges: User, Infrastructure, or None (FailJob)."""
        if self.action == "FailJob":
            return None
        if self.action == "Ignore":
            return "Infrastructure"
        return self.budget or "User"


_STALL_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.startupSeconds) || self.startupSeconds >= self.floorSeconds",
        "message": "startupSeconds must be at least floorSeconds",
    },
]
DEFAULT_STALL_FACTOR = 10
DEFAULT_STALL_FLOOR_SECONDS = 600
MAX_STALL_SECONDS = 7 * 24 * 3600


class StallDetection(_OneSpelling):
    """When a job whose progress stops is Stalled: no newer report for
    max(factor x the median interval between reports, floorSeconds)."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _STALL_RULES}
    )

    enabled: bool = enabled_field(
        "Whether the engine judges the job Stalled (only a job that reports progress)."
        " Defaults to true.",
        default=True,
    )
    factor: int = Field(
        default=DEFAULT_STALL_FACTOR,
        ge=1,
        le=1000,
        description="Times the median interval between two reports that advanced (the last"
        " 16) without a newer report before the job is Stalled. Defaults to 10.",
    )
    floor_seconds: int = Field(
        default=DEFAULT_STALL_FLOOR_SECONDS,
        ge=10,
        le=MAX_STALL_SECONDS,
        description="The least time without a newer report before the job is Stalled, and the"
        " time a rank's Python stacks are dumped after its last report"
        " (T9KJOBS_STALL_SECONDS). Defaults to 600.",
    )
    startup_seconds: int | None = Field(
        default=None,
        ge=10,
        le=MAX_STALL_SECONDS,
        description="Before the first report of a pod (loading a model may take long): Stalled"
        " this long after the pod was created; absent: never before the first report.",
    )
    capture_stacks: bool = Field(
        default=True,
        description="When the job is Stalled, keep the stacks the ranks dumped to their logs"
        " (faulthandler) in the ConfigMap <job>-stacks before the action of the rule matching"
        " Stalled (which waits 60 s at most for them). Defaults to true.",
    )

    @model_validator(mode="after")
    def _startup(self) -> StallDetection:
        if self.startup_seconds is not None and self.startup_seconds < self.floor_seconds:
            raise ValueError("startupSeconds must be at least floorSeconds")
        return self


class RecoveryPolicy(ApiModel):
    """How the engine recovers from a replica's failure: ordered rules, and the budget of
    restarts that are not the user's fault."""

    infrastructure_restart_limit: int = Field(
        default=DEFAULT_INFRASTRUCTURE_RESTART_LIMIT,
        ge=0,
        le=INT32_MAX,
        description="Restarts charged to the infrastructure (Ignore, and RestartReplica or"
        " RestartJob with budget Infrastructure), all replicas, before such failures are"
        " charged to the user (backoffLimit) as today. Defaults to 20.",
    )
    node_lost_after_seconds: int | None = Field(
        default=None,
        ge=0,
        le=MAX_NODE_LOST_AFTER_SECONDS,
        description="Seconds a node stays not Ready (its Ready condition False or Unknown, counted"
        " from its lastTransitionTime) before the job's pods on it are lost: failure NodeLost,"
        " force-deleted and replaced. Default: the operator's --lost-node-seconds (60).",
    )
    stall: StallDetection = Field(
        default_factory=StallDetection,
        description="When a job whose reported progress stops is Stalled (condition Stalled,"
        " then the first rule matching the reason Stalled).",
    )
    rules: list[RecoveryRule] = Field(
        default_factory=list,
        max_length=MAX_RECOVERY_RULES,
        json_schema_extra={"x-kubernetes-validations": _RULES_LIST_RULES},
        description="Ordered rules; the first that matches a failed replica decides. None"
        " matching: the built-in rule (Evicted, Preempted, NodeLost: Ignore), then the"
        " replica's restartPolicy.",
    )

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[RecoveryRule]) -> list[RecoveryRule]:
        names = [r.name for r in rules if r.name is not None]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(dupes)}")
        return rules


def recovery_of(spec: object) -> RecoveryPolicy | None:
    """The job's recovery policy, None when it has none (today's behaviour)."""
    policy = getattr(spec, "recovery_policy", None)
    return policy if isinstance(policy, RecoveryPolicy) else None
