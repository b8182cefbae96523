"""The status a judgement writes: each replica and its containers, the counts by phase, the
job's phase and its conditions. Every function here changes the status it is given; `plan`
calls them on its own copy, never on the stored one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from t9kjobs.kinds import ReplicaState
from t9kjobs.models import Aggregate, ContainerStatus, JobStatus, ReplicaStatus, TaskStatus
from t9kjobs.objects import ANNOTATION_LAUNCH_COMMAND, ENV_LAUNCH_COMMAND, DesiredPod
from t9kjobs.planner.children import pod_state
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.placement import placement
from t9kjobs.planner.situation import Situation
from t9kjobs.vocabulary import Obj

__all__ = [
    "aggregate",
    "containers",
    "count_ready",
    "phase_and_conditions",
    "replica_failure",
    "shown_deleted",
    "write_replicas",
]


def count_ready(status: JobStatus) -> None:
    """`status.ready`: running replicas of all desired, as `kubectl get` shows it."""
    desired = sum(len(task.replicas) for task in status.tasks)
    status.ready = f"{status.aggregate.running}/{desired}"


def containers(pod: Obj) -> list[ContainerStatus]:
    """Each container of a pod as the job's status shows it: its state, exit code, reason."""
    out = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        name = next(iter(state), "waiting")
        detail = state.get(name) or {}
        out.append(
            ContainerStatus(
                name=cs.get("name", ""),
                state=name,
                exit_code=detail.get("exitCode"),
                reason=detail.get("reason"),
            )
        )
    return out


def aggregate(tasks: Sequence[TaskStatus]) -> Aggregate:
    """How many replicas are in each phase; a phase the model has no count for is unknown."""
    counts = Aggregate()
    for replica in (r for task in tasks for r in task.replicas):
        field = replica.phase.lower()
        field = field if field in Aggregate.model_fields else "unknown"
        setattr(counts, field, getattr(counts, field) + 1)
    return counts


def write_replicas(
    status: JobStatus,
    pods: Sequence[DesiredPod],
    pods_by_name: Mapping[str, Obj],
    counts: dict[str, int],
    deleted: set[str],
    counted: Mapping[str, int] | None = None,
) -> None:
    """`status.tasks` and `status.aggregate` from the desired pods and the pods that exist:
    `counts` are the restarts to record, `deleted` the replicas stopped by this reconcile,
    `counted` the restarts charged to the user (`countedRestarts`, written where they differ
    from `counts`)."""
    recorded_by_type = {t.type: t.restart_count for t in status.tasks}
    recorded = {r.name: r.restart_count for t in status.tasks for r in t.replicas}
    tasks: dict[str, TaskStatus] = {}
    new_restarts: dict[str, int] = {}
    for desired in pods:
        pod = pods_by_name.get(desired.name)
        phase = "Deleted" if desired.name in deleted else pod_state(pod)
        task = tasks.setdefault(desired.replica_type, TaskStatus(type=desired.replica_type))
        restarts = counts.get(desired.name, 0)
        task.restart_count += restarts
        new_restarts[desired.replica_type] = new_restarts.get(desired.replica_type, 0) + max(
            0, restarts - recorded.get(desired.name, 0)
        )
        task.replicas.append(
            ReplicaStatus(
                name=desired.name,
                uid=pod["metadata"].get("uid") if pod is not None else None,
                phase=phase,
                containers=containers(pod) if pod is not None else [],
                restart_count=restarts,
                counted_restarts=_counted(counted, desired.name, restarts),
            )
        )
    # A type's count never goes back: the restarts of replicas scaled away stay counted, and
    # a type scaled to nothing keeps its entry while it has any.
    for type_, before in recorded_by_type.items():
        if type_ in tasks:
            task = tasks[type_]
            task.restart_count = max(task.restart_count, before + new_restarts.get(type_, 0))
        elif before > 0:
            tasks[type_] = TaskStatus(type=type_, restart_count=before)
    status.tasks = list(tasks.values())
    status.aggregate = aggregate(status.tasks)


def _counted(counted: Mapping[str, int] | None, name: str, restarts: int) -> int | None:
    """A replica's `countedRestarts`: None (absent) when it is its restart count."""
    if counted is None or name not in counted or counted[name] == restarts:
        return None
    return counted[name]


def phase_and_conditions(s: Situation, status: JobStatus, absent: list[tuple[str, str]]) -> None:
    """Phase and conditions of a job that keeps running; `absent`: the children not created
    because the cluster does not serve their kind."""
    states, life, ts, resumed = s.found.states, s.life, s.ts, s.resumed
    all_exist = all(p.name in s.pods_by_name for p in s.pods)
    initialized = status.condition("Initialized")
    if all_exist:
        set_condition(status, "Initialized", True, "PodsCreated", "all pods are created", ts)
    elif initialized is None or initialized.reason == "NameConflict":
        set_condition(status, "Initialized", False, "CreatingPods", "creating pods", ts)
    if resumed:
        set_condition(status, "Paused", False, "Resumed", "spec.runMode.pause is disabled", ts)

    up = bool(states) and all(s.state in ("Running", "Succeeded") for s in states)
    if life.run_mode.debugging:
        status.phase = "Running"
        set_condition(
            status,
            "Running",
            True,
            "DebugMode",
            "the job is in debug mode (spec.runMode.debug): pods run the debug command and"
            " their exits do not finish the job; a pod's launch command is in its"
            f" annotation {ANNOTATION_LAUNCH_COMMAND} and in ${ENV_LAUNCH_COMMAND}",
            ts,
        )
    elif up or status.phase == "Running":
        status.phase = "Running"
        set_condition(status, "Running", True, "PodsRunning", "all pods are running", ts)
    elif resumed and status.phase in ("Paused", "Resuming"):
        status.phase = "Resuming"
    else:
        status.phase = "Pending"

    replica_failure(status, states, ts)
    placement(status, s.aux, s.observed, list(s.pods_by_name.values()), ts)
    if absent:
        kinds = ", ".join(sorted({kind for kind, _ in absent}))
        names = ", ".join(f"{kind}/{name}" for kind, name in sorted(absent))
        set_condition(
            status,
            "Degraded",
            True,
            "DependencyMissing",
            f"the cluster does not serve {kinds} (its CRD is not installed): {names} not"
            " created; the job runs without it",
            ts,
        )
    elif status.condition("Degraded") is not None:
        # Whatever degraded the job (a missing dependency, an invalid spec, an API error while
        # creating its children) is gone: this reconcile got this far.
        set_condition(
            status,
            "Degraded",
            False,
            "Resolved",
            "every dependency exists, the spec is valid and the API server answers",
            ts,
        )


def replica_failure(status: JobStatus, states: list[ReplicaState], ts: str) -> None:
    """`ReplicaFailure` names every failing replica, in the write that ends a job too."""
    # A replica restarted after a success (policy Always) is not failing.
    failing = [
        s for s in states if s.state == "Failed" or (s.state == "Restarting" and s.exit_code != 0)
    ]
    if failing:
        message = "; ".join(s.failure for s in failing)
        set_condition(status, "ReplicaFailure", True, "ReplicaFailed", message, ts)
    elif status.condition("ReplicaFailure") is not None:
        set_condition(status, "ReplicaFailure", False, "NoFailure", "no replica is failing", ts)


def shown_deleted(status: JobStatus) -> None:
    """Every replica shown Deleted, with no pod: the job has none for now (paused, queued)."""
    status.aggregate = Aggregate(deleted=sum(len(t.replicas) for t in status.tasks))
    for task in status.tasks:
        for replica in task.replicas:
            replica.phase, replica.uid, replica.containers = "Deleted", None, []
