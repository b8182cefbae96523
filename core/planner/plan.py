"""`plan(job, observed, now, hooks) -> Plan`: the whole lifecycle engine as one pure function.

No I/O, no clock (`now` is an argument), no randomness: the same inputs give the same Plan. The
controller applies the Plan; running `plan` again on the state that results is always safe,
which is what makes a crash at any point recoverable.

The order of judgement, each step only if the previous one did not decide:
finished job (only cleanup, never regress) -> pause -> deadline -> framework verdict ->
restart budget -> keep running (create what is missing, restart what failed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from t9kjobs.kinds import ReplicaState, Verdict
from t9kjobs.models import (
    Aggregate,
    ContainerStatus,
    Job,
    JobStatus,
    Lifecycle,
    ReplicaStatus,
    TaskStatus,
)
from t9kjobs.objects import (
    ANNOTATION_INCARNATION,
    ANNOTATION_LAUNCH_COMMAND,
    ANNOTATION_SPEC_HASH,
    ANNOTATION_STOP_WHEN_FINISHED,
    ENV_LAUNCH_COMMAND,
    LABEL_REPLICA_TYPE,
    DesiredPod,
    Obj,
    owner_labels,
    spec_hash,
)
from t9kjobs.planner.conditions import first_created, parse_time, rfc3339, set_condition
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.replicas import Assessment, assess, exit_code_of, pod_state, remembered
from t9kjobs.planner.types import EngineHooks, Event, ObjectRef, Observed, Plan

__all__ = ["plan"]

_ACTIVE = ("Pending", "Running", "Unknown")
# While a name the job needs is held by another object, look again this often.
CONFLICT_RETRY_SECONDS = 10.0
_FINAL_POD_PHASES = ("Succeeded", "Failed")


def plan(job: Job, observed: Observed, now: datetime, hooks: EngineHooks) -> Plan:
    before = job.status
    status = before.model_copy(deep=True)
    ts = rfc3339(now)
    life = job.spec.lifecycle()
    if status.finished:
        # Applied again on every reconcile of a finished job, so that a crash half-way through
        # the cleanup is finished by the next operator. Its status stays as it finished, but
        # for the replicas still running then, followed to their end (_settle_replicas).
        failed = status.condition("Failed")
        deadline = failed is not None and failed.reason == "DeadlineExceeded"
        _settle_replicas(status, observed)
        return _result(before, status, delete=_cleanup(observed, life, deadline=deadline))
    status.run_mode = life.run_mode.name
    if life.run_mode.paused:
        return _paused(before, status, observed, ts)

    status.selector = ",".join(f"{k}={v}" for k, v in owner_labels(job).items())
    paused = status.condition("Paused")
    resumed = paused is not None
    if paused is not None and paused.status == "True":
        # Like a batch/v1 Job resumed from suspension, the deadline counts from the resume.
        status.start_time = ts
    elif status.start_time is None:
        # The job's first status may be written a reconcile after its pods were created
        # (`t9kjobs.controller.reconciler`), or by an operator that took over from one that
        # created them: the job started when its first pod was created.
        created = first_created(observed.pods())
        status.start_time = rfc3339(now if created is None else min(now, created))
    pods = desired_pods(job, hooks, life, resumed, observed.absent_kinds)
    aux = hooks.auxiliary_objects(job, pods)
    replicas = [r for t in status.tasks for r in t.replicas]
    pods_by_name = remembered(pods, {p["metadata"]["name"]: p for p in observed.pods()}, replicas)
    recorded = {r.name: r.restart_count for r in replicas}
    found = assess(pods, pods_by_name, recorded, status.backoff_count, life)

    verdict, requeue = _deadline(life, status, now, found.states)
    debugging = life.run_mode.debugging
    if verdict is None and not debugging:
        verdict = hooks.compute_status(job, found.states)
        exceeded = found.backoff_exceeded
        if exceeded is not None and (verdict is None or verdict.outcome == "Failed"):
            # Restarts exhausted fail the job whatever the framework would wait for.
            verdict = _backoff_verdict(exceeded, life)
    if verdict is not None:
        result = _finish(before, status, verdict, pods, pods_by_name, found, observed, life, ts)
    else:
        result = _running(
            job,
            before,
            status,
            pods,
            aux,
            pods_by_name,
            found,
            observed,
            life,
            ts,
            requeue,
            resumed,
        )
    hooks.update_status(job, result.status, observed.objects)
    return replace(result, status_changed=result.status != before)


def _result(
    before: JobStatus,
    status: JobStatus,
    *,
    create: Sequence[Obj] = (),
    update: Sequence[Obj] = (),
    delete: Sequence[ObjectRef] = (),
    events: Sequence[Event] = (),
    requeue_after: float | None = None,
) -> Plan:
    if not before.finished:  # a finished job's status is what it was when it finished
        desired = sum(len(task.replicas) for task in status.tasks)
        status.ready = f"{status.aggregate.running}/{desired}"
    return Plan(
        status=status,
        status_changed=status != before,
        create=tuple(create),
        update=tuple(update),
        delete=tuple(delete),
        events=tuple(events),
        requeue_after=requeue_after,
    )


def _ref(obj: Obj) -> ObjectRef:
    meta = obj["metadata"]
    exited = obj["kind"] == "Pod" and pod_state(obj) in ("Succeeded", "Failed")
    return ObjectRef(
        str(obj.get("apiVersion", "v1")),
        str(obj["kind"]),
        meta["name"],
        meta.get("uid"),
        0 if exited else None,
    )


def _paused(before: JobStatus, status: JobStatus, observed: Observed, ts: str) -> Plan:
    live = [p for p in observed.pods() if not p["metadata"].get("deletionTimestamp")]
    status.phase = "Paused"
    set_condition(status, "Paused", True, "PauseEnabled", "spec.runMode.pause is enabled", ts)
    set_condition(status, "Running", False, "Paused", "the job is paused", ts)
    status.aggregate = Aggregate(deleted=sum(len(t.replicas) for t in status.tasks))
    for task in status.tasks:
        for replica in task.replicas:
            replica.phase, replica.uid, replica.containers = "Deleted", None, []
    events = [Event("Normal", "Paused", f"deleted {len(live)} pod(s)")] if live else []
    return _result(before, status, delete=[_ref(p) for p in live], events=events)


def _deadline(
    life: Lifecycle, status: JobStatus, now: datetime, states: list[ReplicaState]
) -> tuple[Verdict | None, float | None]:
    if life.active_deadline_seconds is None or status.start_time is None:
        return None, None
    elapsed = (now - parse_time(status.start_time)).total_seconds()
    remaining = life.active_deadline_seconds - elapsed
    if remaining > 0:
        return None, remaining
    message = (
        f"the job was active longer than spec.runPolicy.activeDeadlineSeconds"
        f" ({life.active_deadline_seconds}s)"
    )
    return Verdict("Failed", "DeadlineExceeded", message, states), None


def _backoff_verdict(replica: ReplicaState, life: Lifecycle) -> Verdict:
    return Verdict(
        "Failed",
        "BackoffLimitExceeded",
        f"{replica.failure}; restarts exhausted (spec.runPolicy.backoffLimit={life.backoff_limit})",
        (replica,),
    )


def _cleanup(observed: Observed, life: Lifecycle, *, deadline: bool) -> list[ObjectRef]:
    """Pods to delete when a job has finished: by cleanUpPolicy, and active ones past a deadline."""
    out = []
    for pod in observed.pods():
        if pod["metadata"].get("deletionTimestamp"):
            continue
        replica_type = (pod["metadata"].get("labels") or {}).get(LABEL_REPLICA_TYPE, "")
        active = pod_state(pod) in _ACTIVE
        keep = replica_type in life.clean_up_keeps
        policy = life.clean_up_policy
        stop = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_STOP_WHEN_FINISHED)
        if (
            ((deadline or stop) and active)
            or (not keep and policy == "All")
            or (not keep and policy == "Unfinished" and active)
        ):
            out.append(_ref(pod))
    return out


def _finish(
    before: JobStatus,
    status: JobStatus,
    verdict: Verdict,
    pods: list[DesiredPod],
    pods_by_name: dict[str, Obj],
    found: Assessment,
    observed: Observed,
    life: Lifecycle,
    ts: str,
) -> Plan:
    """The job ends: restarts this reconcile considered are not performed, cleanup is."""
    status.phase = verdict.outcome
    status.completion_time = ts
    succeeded = verdict.outcome == "Succeeded"
    set_condition(status, "Running", False, verdict.reason, verdict.message, ts)
    set_condition(
        status, "Completed" if succeeded else "Failed", True, verdict.reason, verdict.message, ts
    )
    deletes = _cleanup(observed, life, deadline=verdict.reason == "DeadlineExceeded")
    # A pod the cleanup stops while it runs shows Deleted; one that had already ended keeps
    # its final phase, so the finished job's counts say how its replicas ended.
    stopped = {
        d.name for d in deletes if pod_state(pods_by_name.get(d.name)) not in _FINAL_POD_PHASES
    }
    status.backoff_count = found.backoff_performed
    _write_replicas(status, pods, pods_by_name, found.performed, stopped)
    _replica_failure(status, found.states, ts)
    # A success is in the Completed condition, its reason and message: a routine Event. A
    # failure is a Warning, what alerting on Events looks for.
    event = Event(
        "Normal" if succeeded else "Warning", verdict.outcome, verdict.message, routine=succeeded
    )
    return _result(before, status, delete=deletes, events=[event])


def _running(
    job: Job,
    before: JobStatus,
    status: JobStatus,
    pods: list[DesiredPod],
    aux: list[Obj],
    pods_by_name: dict[str, Obj],
    found: Assessment,
    observed: Observed,
    life: Lifecycle,
    ts: str,
    requeue: float | None,
    resumed: bool,
) -> Plan:
    pod_creates: list[Obj] = []
    aux_creates: list[Obj] = []
    updates: list[Obj] = []
    deletes: list[ObjectRef] = []
    events: list[Event] = []

    restarting = {d.name for d, _ in found.restart}
    # Ownership before use: while any name the job needs is held by an object it does not
    # control (a planted Secret or ConfigMap its pods would mount, a Service that would name
    # them, a pod of its name), no pod of the job is created. See the condition.
    blocked = bool(observed.conflicts)
    for desired in pods:
        manifest = desired.manifest
        digest = spec_hash(manifest)
        current = pods_by_name.get(desired.name)
        if current is None and blocked:
            continue
        if current is None:
            annotations = manifest["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION_INCARNATION] = str(found.restarts_recorded.get(desired.name, 0))
            annotations[ANNOTATION_SPEC_HASH] = digest
            if desired.stop_when_finished:
                annotations[ANNOTATION_STOP_WHEN_FINISHED] = "true"
            pod_creates.append(manifest)
        elif (
            desired.recreate_on_change
            and desired.name not in restarting
            and not current["metadata"].get("deletionTimestamp")
            and (current["metadata"].get("annotations") or {}).get(ANNOTATION_SPEC_HASH) != digest
        ):
            deletes.append(_ref(current))
            events.append(Event("Normal", "Relaunching", f"{desired.name}: its spec changed"))
    for desired, pod in found.restart:
        deletes.append(_ref(pod))
        code = exit_code_of(pod, desired.training_container)
        events.append(
            Event(
                "Warning",
                "Restarting",
                f"{desired.name} {pod_state(pod).lower()}"
                + (f" with exit code {code}" if code is not None else "")
                + f"; restart {found.restarts_recorded.get(desired.name, 0)}",
            )
        )
    desired_names = {p.name for p in pods}
    for name, pod in pods_by_name.items():
        if name not in desired_names and not pod["metadata"].get("deletionTimestamp"):
            deletes.append(_ref(pod))  # scaled down, or no longer part of the job

    absent: list[tuple[str, str]] = []
    desired_aux = set()
    for obj in aux:
        key = (obj["kind"], obj["metadata"]["name"])
        desired_aux.add(key)
        if obj["kind"] in observed.absent_kinds:
            absent.append(key)
            continue
        current = observed.get(*key)
        if current is None:
            if key not in observed.conflicts:
                aux_creates.append(obj)
        elif _needs_update(obj, current):
            updated = dict(obj)
            updated["metadata"] = {
                **obj["metadata"],
                "resourceVersion": current["metadata"].get("resourceVersion"),
            }
            updates.append(updated)
    for key, obj in sorted(observed.objects.items()):
        if key[0] != "Pod" and key not in desired_aux:
            deletes.append(_ref(obj))

    if pod_creates:
        names = ", ".join(o["metadata"]["name"] for o in pod_creates)
        # A job's first pods: its Initialized condition and replicas say so too. Pods created
        # again (a restart's replacement, a relaunch, a resume, a pod deleted by hand) are news.
        first = not before.tasks
        events.append(Event("Normal", "PodsCreated", f"created {names}", routine=first))

    conflict = _conflict_message(observed.conflicts)
    if conflict is not None:
        initialized = before.condition("Initialized")
        if initialized is None or initialized.message != conflict:
            events.append(Event("Warning", "NameConflict", conflict))
        requeue = min(requeue or CONFLICT_RETRY_SECONDS, CONFLICT_RETRY_SECONDS)

    status.backoff_count = found.backoff_count
    _write_replicas(status, pods, pods_by_name, found.restarts_recorded, set())
    _phase_and_conditions(status, found.states, pods, pods_by_name, life, ts, resumed, absent)
    if conflict is not None:
        set_condition(status, "Initialized", False, "NameConflict", conflict, ts)
    return _result(
        before,
        status,
        # What pods use (ConfigMaps, Secrets, their PodGroup) exists before they do.
        create=aux_creates + pod_creates,
        update=updates,
        delete=deletes,
        events=events,
        requeue_after=requeue,
    )


def _needs_update(desired: Obj, current: Obj) -> bool:
    kind = desired["kind"]
    if kind == "Secret":
        return False  # generated key material is never rewritten
    if kind == "ConfigMap":
        return bool(desired.get("data") != current.get("data"))
    return not _subset(desired.get("spec"), current.get("spec"))


def _subset(want: Any, have: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(_subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


def _containers(pod: Obj) -> list[ContainerStatus]:
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


def _settle_replicas(status: JobStatus, observed: Observed) -> None:
    """A finished job's replicas that were still active when it finished get the phase their
    pod ends in, or Deleted once it is stopped or gone; phases already final never change.

    A job can finish while some of its pods run on: a PyTorchTrainingJob succeeds when its
    master does, and the other ranks exit a moment later (seen on the real node: the status
    said 1 succeeded and 2 running for ever after all three had trained). The counts then say
    how every replica ended, as those recorded at the finish do."""
    pods = {p["metadata"]["name"]: p for p in observed.pods()}
    settled = False
    for task in status.tasks:
        for replica in task.replicas:
            if replica.phase not in _ACTIVE or replica.uid is None:
                continue  # ended, or never had a pod (Creating): nothing to follow
            pod = pods.get(replica.name)
            if pod is not None and pod["metadata"].get("uid") != replica.uid:
                pod = None  # another incarnation: the one recorded is gone
            phase = str((pod.get("status") or {}).get("phase")) if pod is not None else ""
            if pod is not None and phase in _FINAL_POD_PHASES:
                replica.phase, replica.containers = phase, _containers(pod)
            elif pod is None or pod["metadata"].get("deletionTimestamp"):
                replica.phase, replica.containers = "Deleted", []
            else:
                continue
            settled = True
    if settled:
        status.aggregate = _aggregate(status.tasks)


def _aggregate(tasks: Sequence[TaskStatus]) -> Aggregate:
    """How many replicas are in each phase; a phase the model has no count for is unknown."""
    aggregate = Aggregate()
    for replica in (r for task in tasks for r in task.replicas):
        field = replica.phase.lower()
        field = field if field in Aggregate.model_fields else "unknown"
        setattr(aggregate, field, getattr(aggregate, field) + 1)
    return aggregate


def _write_replicas(
    status: JobStatus,
    pods: list[DesiredPod],
    pods_by_name: dict[str, Obj],
    counts: dict[str, int],
    deleted: set[str],
) -> None:
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
                containers=_containers(pod) if pod is not None else [],
                restart_count=restarts,
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
    status.aggregate = _aggregate(status.tasks)


def _phase_and_conditions(
    status: JobStatus,
    states: list[ReplicaState],
    pods: list[DesiredPod],
    pods_by_name: dict[str, Obj],
    life: Lifecycle,
    ts: str,
    resumed: bool,
    absent: list[tuple[str, str]],
) -> None:
    all_exist = all(p.name in pods_by_name for p in pods)
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

    _replica_failure(status, states, ts)
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


def _replica_failure(status: JobStatus, states: list[ReplicaState], ts: str) -> None:
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


def _conflict_message(conflicts: Mapping[tuple[str, str], str]) -> str | None:
    """What holds the names the job needs, for its condition and Warning Event."""
    if not conflicts:
        return None
    held = "; ".join(
        f"{kind} {name} exists and this job does not control it ({holder})"
        for (kind, name), holder in sorted(conflicts.items())
    )
    return f"{held}: no pod of the job is created while it exists"
