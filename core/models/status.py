"""The observed state of a job, as written to its `/status` subresource.

Choices where the references disagree (see docs/api.md): the per-pod list is `replicas` (the
API reference's spelling), the finished condition is `Completed`. `startTime` and
`completionTime` are added as batch/v1 Job has them; `activeDeadlineSeconds` counts from
`startTime`. `replicas[].restartCount` records the restarts of one replica, so that a restart is
counted exactly once even when the operator dies between counting it and deleting the pod.

Version skew: during a rolling upgrade an older operator may read a status that a newer one
wrote. What it does not know it writes back as it found it: fields of the status and of a
condition it has no name for, and conditions of types it has no name for. A phase it does not
know it recomputes. (Tasks and aggregate are rebuilt on every reconcile, from what this version
knows.)
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from t9kjobs.models._base import ApiModel
from t9kjobs.models.history import MAX_RESTART_HISTORY, RestartRecord
from t9kjobs.models.run_mode import RunModeName

__all__ = [
    "FINISHED_PHASES",
    "Aggregate",
    "CheckpointStatus",
    "ConditionType",
    "ContainerStatus",
    "DependentStatus",
    "JobCondition",
    "JobPhase",
    "JobStatus",
    "ReplicaStatus",
    "TaskStatus",
    "TrainingProgress",
]

JobPhase = Literal[
    "Queued", "Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"
]
ConditionType = Literal[
    "Admitted",
    "Initialized",
    "Scheduled",
    "Running",
    "ReplicaFailure",
    "Completed",
    "Failed",
    "Paused",
    "Degraded",
    "Stalled",
]
# The intervals between reports `status.progress` keeps (`t9kjobs.planner.stall`).
MAX_RECENT_INTERVALS = 16
FINISHED_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})
_PHASES: frozenset[str] = frozenset(get_args(JobPhase))
_TYPES: frozenset[str] = frozenset(get_args(ConditionType))


class _StatusModel(ApiModel):
    # Status is ours to write; fields added by a newer operator must not break an older one.
    model_config = ConfigDict(extra="ignore")


class _KeepsUnknownFields(_StatusModel):
    """What a newer version wrote and this one does not know is written back unchanged. It is
    not in the schema: the CRD prunes what it does not declare, and these are what a newer CRD
    declares."""

    _unknown_fields: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_unknown(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        data, aside = cls._set_aside(dict(data))
        model = handler(data)
        if isinstance(model, _KeepsUnknownFields):
            known = {info.alias or name for name, info in cls.model_fields.items()}
            model._unknown_fields = {
                k: v for k, v in data.items() if k not in known and k not in cls.model_fields
            }
            model._keep_aside(aside)
        return model

    @model_serializer(mode="wrap")
    def _with_unknown(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            out = {**self._unknown_fields, **out}
            self._put_back(out)
        return out

    @classmethod
    def _set_aside(cls, data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """Take out of `data` the values this version cannot validate (kept by `_keep_aside`)."""
        return data, None

    def _keep_aside(self, aside: Any) -> None:
        """Hold what `_set_aside` took out."""

    def _put_back(self, out: dict[str, Any]) -> None:
        """Put what `_keep_aside` holds back into the serialised form."""


class ContainerStatus(_StatusModel):
    """The observed state of one container."""

    name: str = Field(description="Container name.")
    state: str = Field(description="waiting, running or terminated.")
    exit_code: int | None = Field(default=None, description="Exit code, if terminated.")
    reason: str | None = Field(default=None, description="Why it is in this state (OOMKilled...).")


class ReplicaStatus(_StatusModel):
    """The observed state of one replica (one pod name)."""

    name: str = Field(description="Pod name.")
    uid: str | None = Field(default=None, description="Pod uid.")
    phase: str = Field(description="Pod phase, or Creating / Deleted while the pod is absent.")
    containers: list[ContainerStatus] = Field(default_factory=list)
    restart_count: int = Field(default=0, description="Restarts of this replica performed.")
    counted_restarts: int | None = Field(
        default=None,
        description="Restarts of this replica charged to the user's budget (its limit,"
        " backoffLimit); written only when it differs from restartCount (restarts charged to"
        " the infrastructure by spec.recoveryPolicy); absent: restartCount.",
    )

    @property
    def counted(self) -> int:
        """Restarts of this replica charged to the user's budget."""
        return self.restart_count if self.counted_restarts is None else self.counted_restarts


class TaskStatus(_StatusModel):
    """The observed state of one replica type."""

    type: str = Field(description="Replica type.")
    restart_count: int = Field(default=0, description="Restarts performed for this type.")
    replicas: list[ReplicaStatus] = Field(
        default_factory=list, description="The replicas of this type, one per pod name."
    )


class Aggregate(_StatusModel):
    """How many replicas are in each state."""

    creating: int = Field(default=0, description="Replicas whose pod is being created.")
    pending: int = Field(default=0, description="Replicas whose pod is Pending.")
    running: int = Field(default=0, description="Replicas whose pod is Running.")
    succeeded: int = Field(default=0, description="Replicas whose pod Succeeded.")
    failed: int = Field(default=0, description="Replicas whose pod Failed.")
    unknown: int = Field(default=0, description="Replicas whose pod state is Unknown.")
    deleted: int = Field(default=0, description="Replicas whose pod was deleted.")


class DependentStatus(ApiModel):
    """The status of a child object the job depends on (its TensorBoard)."""

    # Status is ours to write; fields added by a newer operator must not break an older one.
    model_config = ApiModel.model_config | ConfigDict(extra="ignore")

    name: str | None = Field(default=None, description="Name of the sub-resource.")
    dependent: dict[str, Any] | None = Field(
        default=None, description="ObjectReference of the Kubernetes object."
    )
    ready: bool = Field(default=False, description="Whether the sub-resource is ready to work.")
    reason: str | None = Field(default=None, description="Why it is in this status.")
    action: str | None = Field(default=None, description="Action taken to reconcile it.")
    note: str | None = Field(default=None, description="More information about this status.")
    type: str | None = Field(default=None, description="Normal or Warning.")


class TrainingProgress(_StatusModel):
    """Training progress as the job's program reports it (`t9kjobs.progress`), read by the
    operator from the log of the job's deciding replica."""

    step: int | None = Field(default=None, ge=0, description="The step the program reached.")
    total_steps: int | None = Field(
        default=None, ge=0, description="The steps the program will run, when it says."
    )
    percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="step of totalSteps, from 0 to 100; 100 once the job Succeeded.",
    )
    remaining_seconds: int | None = Field(
        default=None,
        ge=0,
        description="An estimate of the time left: the steps left at the pace between the last"
        " two reports.",
    )
    metrics: dict[str, float] = Field(
        default_factory=dict,
        max_length=16,
        description="The latest metrics the program reported, by name (loss, accuracy...).",
    )
    replica: str | None = Field(
        default=None, description="The replica whose log reported it, e.g. `master-0`."
    )
    last_update_time: str | None = Field(
        default=None, description="When the program printed its latest report (RFC 3339)."
    )
    recent_intervals: list[float] = Field(
        default_factory=list,
        max_length=MAX_RECENT_INTERVALS,
        description="Seconds between successive reports that advanced, by the program's"
        " clock, the newest last (at most 16): the pace spec.recoveryPolicy.stall judges by.",
    )


class CheckpointStatus(_StatusModel):
    """The newest checkpoint the program reported under spec.checkpoint.path."""

    path: str = Field(max_length=1024, description="The checkpoint, as the program named it.")
    step: int | None = Field(default=None, ge=0, description="The step it holds, when said.")
    time: str | None = Field(default=None, description="When it was reported (RFC 3339).")
    replica: str | None = Field(
        default=None, description="The replica whose log reported it, e.g. `master-0`."
    )


class JobCondition(_KeepsUnknownFields):
    """One observation of the job's state; lastTransitionTime changes only with `status`."""

    type: ConditionType = Field(
        description="Initialized, Running, ReplicaFailure, Completed, Failed, Paused or Degraded."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="Why the condition last changed.")
    message: str | None = Field(default=None, description="What happened, for people.")
    last_transition_time: str | None = Field(
        default=None, description="When the condition's status last changed (RFC 3339)."
    )


class JobStatus(_KeepsUnknownFields):
    """The status subresource shared by every kind; a kind may extend it (KindInfo.status_model)."""

    _unknown_conditions: list[Any] = PrivateAttr(default_factory=list)

    phase: JobPhase | None = Field(
        default=None,
        description=(
            "Queued (waiting for admission by Kueue), Pending, Running, Paused, Resuming,"
            " Succeeded, Failed or Unknown."
        ),
    )
    tasks: list[TaskStatus] = Field(default_factory=list, description="Status by replica type.")
    aggregate: Aggregate = Field(
        default_factory=Aggregate, description="How many replicas are in each state."
    )
    conditions: list[JobCondition] = Field(
        default_factory=list, description="The latest observations of the job's state."
    )
    backoff_count: int = Field(
        default=0,
        description="Restarts charged to backoffLimit, all replicas: every restart performed,"
        " but those spec.recoveryPolicy charges to the infrastructure.",
    )
    infrastructure_restart_count: int | None = Field(
        default=None,
        description="Restarts charged to spec.recoveryPolicy.infrastructureRestartLimit, all"
        " replicas; absent: none.",
    )
    restart_history: list[RestartRecord] | None = Field(
        default=None,
        max_length=MAX_RESTART_HISTORY,
        description="The restarts the engine performed (jobs with spec.recoveryPolicy), newest"
        " last, at most 16: when, which replica, why, the rule and budget, the time to recover;"
        " absent: none.",
    )
    steps_lost: int | None = Field(
        default=None,
        ge=0,
        description="Training steps lost to restarts, all of restartHistory (also the entries"
        " dropped from it); absent: none known.",
    )
    last_recovery_seconds: int | None = Field(
        default=None,
        ge=0,
        description="Seconds from the latest recovered failure to every replica Running or"
        " Succeeded again.",
    )
    lost_nodes: list[str] | None = Field(
        default=None,
        max_length=16,
        description="Nodes on which the job lost a pod (newest last, at most 16): the pods it"
        " creates since prefer other nodes.",
    )
    start_time: str | None = Field(
        default=None, description="When the job started; activeDeadlineSeconds counts from it."
    )
    completion_time: str | None = Field(default=None, description="When the job finished.")
    selector: str | None = Field(
        default=None,
        description="Label selector of the job's pods, for the scale subresource (autoscalers).",
    )
    ready: str | None = Field(
        default=None,
        description="Replicas running / replicas the job has now, e.g. `2/3`: the REPLICAS"
        " column of `kubectl get`.",
    )
    run_mode: RunModeName | None = Field(
        default=None, description="The run mode in force: Immediate, Debug or Pause."
    )
    progress: TrainingProgress | None = Field(
        default=None,
        description="Training progress as the program reports it (docs/python.md, Progress):"
        " step, total, percent, time left, metrics. Frozen once the job finished; 100 percent"
        " when it Succeeded.",
    )
    checkpoint: CheckpointStatus | None = Field(
        default=None,
        description="The newest checkpoint the program reported under spec.checkpoint.path;"
        " every pod created after it gets its path in T9KJOBS_RESUME_FROM.",
    )
    reason: str | None = Field(
        default=None,
        description="Why the job stands where it does, when it does not go on by itself: the"
        " reason of its Failed condition; while it waits for Kueue's admission, the reason of"
        " its False Admitted condition (`Queued`, `Inadmissible`, `Preempted`...); or"
        " `Unschedulable` while its gang cannot be placed (a False Scheduled condition); while a"
        " restart is under way, the failure's reason (restartHistory). The REASON column of"
        " `kubectl get`.",
    )

    @classmethod
    def _set_aside(cls, data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """Conditions of types unknown here are set aside; an unknown phase is recomputed."""
        unknown: list[Any] = []
        conditions = data.get("conditions")
        if isinstance(conditions, list):
            unknown = [c for c in conditions if isinstance(c, dict) and c.get("type") not in _TYPES]
            data["conditions"] = [c for c in conditions if not any(c is u for u in unknown)]
        if data.get("phase") is not None and data["phase"] not in _PHASES:
            del data["phase"]
        return data, unknown

    def _keep_aside(self, aside: Any) -> None:
        self._unknown_conditions = list(aside or [])

    def _put_back(self, out: dict[str, Any]) -> None:
        if self._unknown_conditions:
            out["conditions"] = [*out.get("conditions", []), *self._unknown_conditions]

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    def condition(self, type_: ConditionType) -> JobCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)
