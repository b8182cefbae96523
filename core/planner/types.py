"""The planner's inputs and outputs: what the cluster holds for a job, and what to do about it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from t9kjobs.features import ChildKind, GangFormat
from t9kjobs.kinds import KindInfo, ReplicaState, Verdict
from t9kjobs.models import Job, JobStatus
from t9kjobs.objects import DesiredPod, Obj, object_key
from t9kjobs.planner.kueue_policy import KueuePolicy
from t9kjobs.progress import Report

__all__ = [
    "EngineHooks",
    "Event",
    "Kueue",
    "NodeState",
    "ObjectRef",
    "Observed",
    "Plan",
    "ProgressSource",
    "Queued",
    "Reading",
    "Stacks",
]


class EngineHooks(Protocol):
    """The hooks of one kind, as the planner calls them (see `t9kjobs.hooks` for contracts)."""

    info: KindInfo
    # The child kinds the configured plugins declare, by `ChildKind.key` (t9kjobs_child_kinds).
    child_kinds: Mapping[str, ChildKind]

    def build_pods(self, job: Job) -> list[DesiredPod]: ...

    def build_launch_command(self, job: Job, pod: DesiredPod) -> list[str] | None: ...

    def compute_status(self, job: Job, replicas: Sequence[ReplicaState]) -> Verdict | None: ...

    def auxiliary_objects(
        self, job: Job, pods: Sequence[DesiredPod], absent_kinds: frozenset[str]
    ) -> list[Obj]: ...

    def mutate_pod(self, job: Job, pod: DesiredPod, absent_kinds: frozenset[str]) -> None: ...

    def update_status(
        self, job: Job, status: JobStatus, children: Mapping[tuple[str, str], Obj]
    ) -> None: ...


@dataclass(frozen=True)
class Kueue:
    """What a queued job's plan reads of Kueue's cluster-wide objects (`t9kjobs.planner.queueing`):
    the ResourceFlavors by name (an admitted job's pods get their node labels and
    tolerations), the values of the WorkloadPriorityClasses and of the PriorityClasses by
    name (a Workload states its priority), the LocalQueues by (namespace, name), and whether
    `t9kScheduler.queue` may name a Kueue LocalQueue (the T9k scheduler is not there to take
    it): it does when one of that name exists in the job's namespace."""

    flavors: Mapping[str, Obj] = field(default_factory=dict)
    workload_priorities: Mapping[str, int] = field(default_factory=dict)
    pod_priorities: Mapping[str, int] = field(default_factory=dict)
    local_queues: frozenset[tuple[str, str]] = frozenset()
    t9k_queues: bool = False


@dataclass(frozen=True)
class Queued:
    """A job's place in a Kueue queue: the Workload it wants, or why it cannot have one yet.

    `refusal`: the reason the job is refused a place rather than waiting for one (it names no
    queue where one is required, its pods hold what Kueue cannot count, ...; `problem` says
    what): no pod, no Workload, a Warning Event. `ignored`: what the job asks for now that
    its Workload's queue overrides (its queue label removed or changed once queued).
    `waiting`: why a job cannot use its prebuilt Workload yet, as (reason, message)
    (`t9kjobs.planner.prebuilt`), and `adopt` the update that makes it the job's."""

    queue: str
    workload: Obj | None  # None: `problem` or `waiting` says why
    problem: str | None = None
    refusal: str | None = None
    ignored: str | None = None
    waiting: tuple[str, str] | None = None
    adopt: Obj | None = None


@dataclass(frozen=True)
class ProgressSource:
    """Where a running job's progress is read: the container of one of its pods (the pod of
    that uid, the job's own), and the regular expression its annotation gives for lines
    without the marker (None: the default)."""

    pod: str
    uid: str
    container: str | None
    replica: str
    pattern: str | None = None


@dataclass(frozen=True)
class Reading:
    """The newest report the controller read, and when the program printed it.

    By the operator's clock (None where nothing read it: tests, a plan by hand): `seen_at`,
    when this report was first read; `read_at`, the last successful read of the log, even one
    that found nothing newer. A job is Stalled only when `read_at - seen_at` passes its
    threshold (`t9kjobs.planner.stall`): the operator looked and found nothing newer, so a
    late read never makes a false stall."""

    report: Report
    time: datetime
    replica: str
    seen_at: datetime | None = None
    read_at: datetime | None = None

    def same_report(self, other: Reading | None) -> bool:
        """Whether `other` is this report (whenever it was read)."""
        return other is not None and (other.report, other.time, other.replica) == (
            self.report,
            self.time,
            self.replica,
        )


@dataclass(frozen=True)
class Stacks:
    """The ranks' Python stacks the controller read from their logs for a Stalled job
    (`t9kjobs.planner.stacks`): by pod name, its last faulthandler dump or why there is none;
    `taken_at`, when it began reading them (the operator's clock)."""

    taken_at: datetime
    dumps: Mapping[str, str]


@dataclass(frozen=True)
class NodeState:
    """A node as a plan reads it (`t9kjobs.planner.nodes`): whether the cluster still has it,
    its `Ready` condition's status and when that status began, whether it is tainted
    unreachable, whether the node store never held it."""

    name: str
    present: bool
    ready: str = "True"  # True, False or Unknown (no Ready condition yet: Unknown)
    since: datetime | None = None  # the Ready condition's lastTransitionTime
    unreachable: bool = False
    # Absent from the synced node store without the watch having seen it go (deleted while no
    # operator watched, or created a moment ago): `since` is when the controller first noticed.
    missing: bool = False


@dataclass(frozen=True)
class Observed:
    """The children of one job that the cluster holds, keyed by (kind, name).

    `absent_kinds` lists child kinds whose CRD the cluster does not serve (PodGroup without the
    T9k scheduler, TensorBoard): the planner leaves them out, says so in a condition, and tells
    the `mutate_pod` hooks, so that no pod depends on what is not there.

    `conflicts` names children the job wants whose (kind, name) an object this job does not
    control already holds, with who controls it: the planner does not create them, and says so
    in a condition and a Warning Event until they are gone.

    `kueue`: Kueue's objects, where the operator watches Workloads and the cluster serves
    them; None elsewhere. `kueue_policy`: where the administrator requires a queue, and what
    Kueue counts (the operator's `--kueue-*` options).

    `progress`: the newest progress report the controller read from the job's log since the
    operator started (`t9kjobs.planner.progress_status`); None when it read none.

    `nodes`: the nodes the job's pods name, by name (`t9kjobs.planner.nodes`); None when
    lost-node detection is off or cannot read nodes: no pod is then lost for a node reason.
    `lost_node_seconds`: how long a node stays not Ready before its pods are lost, where the
    job's `recoveryPolicy.nodeLostAfterSeconds` does not say (the operator's option).

    `stacks`: the ranks' stacks the controller read since a plan asked for them
    (`Plan.capture_stacks`); None while it has none.

    `prebuilt`: the Workload the job's label `kueue.x-k8s.io/prebuilt-workload-name` names,
    as the controller found it, the job's or not yet (`t9kjobs.planner.prebuilt`); None when
    none of that name exists, or the job names none.

    `default_requests`: whether the job's namespace gives containers requests or limits by
    default (a LimitRange), so its pods reserve resources whatever their manifests say
    (`t9kjobs.planner.idle_gangs`); True wherever the operator cannot tell.
    """

    objects: Mapping[tuple[str, str], Obj] = field(default_factory=dict)
    absent_kinds: frozenset[str] = frozenset()
    conflicts: Mapping[tuple[str, str], str] = field(default_factory=dict)
    kueue: Kueue | None = None
    progress: Reading | None = None
    nodes: Mapping[str, NodeState] | None = None
    lost_node_seconds: float = 60.0
    stacks: Stacks | None = None
    kueue_policy: KueuePolicy = field(default_factory=KueuePolicy)
    prebuilt: Obj | None = None
    default_requests: bool = True
    # How the plan treats the plugins' child kinds (replaced or updated; deleted while the job
    # has no pods, or kept): what `plan` is given as `hooks.child_kinds`, set by it.
    child_kinds: Mapping[str, ChildKind] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        objects: Iterable[Obj],
        absent_kinds: Iterable[str] = (),
        conflicts: Mapping[tuple[str, str], str] | None = None,
        kueue: Kueue | None = None,
        progress: Reading | None = None,
        *,
        nodes: Mapping[str, NodeState] | None = None,
        lost_node_seconds: float = 60.0,
        stacks: Stacks | None = None,
        kueue_policy: KueuePolicy | None = None,
        prebuilt: Obj | None = None,
        default_requests: bool = True,
    ) -> Observed:
        return cls(
            {object_key(o): o for o in objects},
            frozenset(absent_kinds),
            dict(conflicts or {}),
            kueue,
            progress,
            nodes,
            lost_node_seconds,
            stacks,
            kueue_policy or KueuePolicy(),
            prebuilt,
            default_requests,
        )

    def get(self, kind: str, name: str) -> Obj | None:
        return self.objects.get((kind, name))

    def pods(self) -> list[Obj]:
        return [o for (kind, _), o in sorted(self.objects.items()) if kind == "Pod"]

    def without_pods(self, objects: Iterable[Obj] | None = None) -> list[Obj]:
        """Those of `objects` (default: the job's children) that go while the job has no pods
        to run (`ChildKind.without_pods` False: PodGroups), not being deleted already."""
        return [
            o
            for o in (self.objects.values() if objects is None else objects)
            if (child := self.child_kinds.get(object_key(o)[0])) is not None
            and not child.without_pods
            and not o["metadata"].get("deletionTimestamp")
        ]

    def gangs(self, objects: Iterable[Obj]) -> list[tuple[Obj, GangFormat]]:
        """Those of `objects` that place the job's pods together (`ChildKind.gang`: PodGroups),
        with how the engine reads each, not being deleted already."""
        found: list[tuple[Obj, GangFormat]] = []
        for o in objects:
            child = self.child_kinds.get(object_key(o)[0])
            deleting = o["metadata"].get("deletionTimestamp")
            if child is not None and child.gang is not None and not deleting:
                found.append((o, child.gang))
        return found

    def replaced(self, kind: str) -> bool:
        """Whether an object of `kind` that differs is replaced (its spec is immutable)."""
        child = self.child_kinds.get(kind)
        return child is not None and child.replaced


@dataclass(frozen=True)
class ObjectRef:
    """A child to delete; `uid` is a precondition, so a newer object of that name survives.
    `grace_period_seconds` 0 for a pod whose containers have all exited: there is nothing to
    stop gracefully, and its replacement of the same name can be created at once. `forced`:
    why a pod that may still run is deleted at once (its node is lost: no kubelet would
    confirm a graceful deletion), counted in `t9kjobs_pods_force_deleted_total`."""

    api_version: str
    kind: str
    name: str
    uid: str | None = None
    grace_period_seconds: int | None = None
    forced: str | None = None


@dataclass(frozen=True)
class Event:
    """An Event on the job. A `routine` one says only what the job's status says as well (its
    first pods created: the Initialized condition and the replicas; a success: the Completed
    condition, its reason and message): the operator posts it only when run with
    `--routine-events`, as each costs a request a job (docs/observability.md)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    routine: bool = False


@dataclass(frozen=True)
class Plan:
    """What a reconcile must do. Applied in order: status, deletions, updates, children's
    status, creations."""

    status: JobStatus
    status_changed: bool
    create: Sequence[Obj] = ()
    update: Sequence[Obj] = ()
    delete: Sequence[ObjectRef] = ()
    # Children whose status the job's controller writes (a Workload's, for Kueue): each a
    # merge patch of the status subresource, with the resourceVersion it was computed from.
    patch_status: Sequence[Obj] = ()
    events: Sequence[Event] = ()
    # Reconcile again after this many seconds even if nothing changes (deadlines).
    requeue_after: float | None = None
    # Children the controller submits as a dry run (`dryRun=All`) before this plan's
    # creations: a queued job's children, before its Workload is made (`t9kjobs.planner.
    # admission`). One the API server refuses for good fails the job, as its creation would,
    # before Kueue admits it and holds quota for pods that cannot exist.
    probe: Sequence[Obj] = ()
    # When the status is written, if it changed: the planner's to say alone (`t9kjobs.planner.
    # plan`, "When the status is written"). `status_after_creations`: not by this reconcile,
    # whose creations change what it says (the next reconcile, at once, writes it; this one
    # only if a creation fails, to show what exists). `status_due_in`: it may wait this many
    # seconds more, to be folded into a later write; None: it is written now.
    status_after_creations: bool = False
    status_due_in: float | None = None
    # Where the controller reads the progress of a running job (`t9kjobs.planner.progress_status`);
    # None: it reads none (the job is not running, or has finished).
    progress_source: ProgressSource | None = None
    # The pods whose logs the controller reads for a Stalled job's stacks, and hands over as
    # `Observed.stacks` (`t9kjobs.planner.stacks`); empty: none wanted (any read is dropped).
    capture_stacks: Sequence[ProgressSource] = ()
