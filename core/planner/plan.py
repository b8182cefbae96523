"""`plan(job, observed, now, hooks) -> Plan`: the whole lifecycle engine as one pure function.

No I/O, no clock (`now` is an argument), no randomness: the same inputs give the same Plan. The
controller applies the Plan; running `plan` again on the state that results is always safe,
which is what makes a crash at any point recoverable.

The order of judgement, each step only if the previous one did not decide:
finished job (only cleanup, never regress; `stopping`) -> pause -> deadline -> framework
verdict -> restart budget -> keep running (create what is missing, restart what failed;
`running`). Each step returns its `Changes` and writes the status (`status`); the Plan is built
once, at the end, with what only the whole knows: the validation warnings said with new pods,
the routine Events left out unless asked for, and how long a new job's first status may wait.

When the status is written is decided here, and only here (the Plan's `status_after_creations`
and `status_due_in`; the reconciler obeys). The status write is the dearest request a job makes,
three pod creations' worth of kube-apiserver CPU (docs/benchmarks.md), so a change is written
when it says something, and folded into a later write when it can wait:

- A plan that creates (and deletes nothing) writes no status: its creations change what the
  status says (the pods exist now, with their uids); the next reconcile writes it. But for the
  plan that resumes a paused job: `Resuming` is the answer to the user's own change of the
  spec, written before the pods are created, as a pause is written before its deletions; left
  to the next reconcile, pods that run by then would take the job from `Paused` straight to
  `Running`.
- A plan that deletes writes it now, before the deletions (a restart is recorded before its
  pod goes: `t9kjobs.planner.replicas`).
- A new job's first status waits, when its pods all exist and wait to run with nothing else
  to say, until they run, or `FOLDED_STATUS_SECONDS` after the first of them was created at the
  latest: its first write is most often Running already, one write instead of two ("Pending",
  then "Running"). Its `startTime` is still its pods' creation.
- A change of replicas alone (the same pods, in another phase or container state: a worker
  that ended before its master, the last pods of a finished job ending) waits until
  `FOLDED_REPLICAS_SECONDS` after it happened, by the pods' own clock: a write that says more
  (the verdict) takes it along if it comes first, and the pods of a job that end a second apart
  cost one write, not one each. In a 500-job burst these were 0.3 writes a job (issue #50).
- Anything else (a phase, a condition, a restart, progress) is written now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from t9kjobs.kinds import Problem, ReplicaState, Verdict
from t9kjobs.models import Job, JobStatus, Lifecycle, RecoveryPolicy, manager_of, recovery_of
from t9kjobs.objects import owner_labels
from t9kjobs.planner.admission import (
    admission,
    evicted_for_good,
    finished_workloads,
    label_ignored,
    while_kueue_replaces,
)
from t9kjobs.planner.checkpoints import record_checkpoint
from t9kjobs.planner.conditions import (
    first_created,
    last_change,
    parse_time,
    rfc3339,
    standing_reason,
)
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.elsewhere import left_alone
from t9kjobs.planner.gangs import GANG_INCOMPLETE, overdue, stranded
from t9kjobs.planner.idle_gangs import without_idle_gangs
from t9kjobs.planner.nodes import as_lost, bound_of, lost_pods, remember_lost, with_lost_nodes
from t9kjobs.planner.placement import held_gangs
from t9kjobs.planner.progress_status import complete_progress, progress_source, record_progress
from t9kjobs.planner.queueing import queued
from t9kjobs.planner.replicas import assess, remembered
from t9kjobs.planner.running import running
from t9kjobs.planner.situation import Changes, Situation
from t9kjobs.planner.stacks import capture, stacks_name
from t9kjobs.planner.stall import judge, say, stall_of
from t9kjobs.planner.status import count_ready
from t9kjobs.planner.stopping import finish, finished, paused
from t9kjobs.planner.types import EngineHooks, Event, Observed, Plan, ProgressSource
from t9kjobs.planner.workloads import WORKLOAD, workload_objects

__all__ = ["FOLDED_REPLICAS_SECONDS", "FOLDED_STATUS_SECONDS", "plan"]

# A new job's first status is written at the latest this long after its first pod's creation,
# when no change of its pods brings it sooner (pods no scheduler binds: no room).
FOLDED_STATUS_SECONDS = 3.0
# A change of replicas alone is written at the latest this long after it happened.
FOLDED_REPLICAS_SECONDS = 5.0


def plan(
    job: Job,
    observed: Observed,
    now: datetime,
    hooks: EngineHooks,
    *,
    warnings: Sequence[Problem] = (),
    routine_events: bool = True,
) -> Plan:
    """What to do about `job`, whose children are `observed`, at `now`; a job another
    controller manages (`spec.managedBy`) is left alone (`t9kjobs.planner.elsewhere`).

    `warnings`: the validation warnings of the job's spec, said as Warning Events whenever the
    plan creates pods (they say how the pods differ from what the user wrote, so they are said
    when pods are built from the spec: at the start, a restart, a relaunch). Routine Events
    (`Event.routine`) are left out unless `routine_events`."""
    observed = replace(observed, child_kinds=hooks.child_kinds)
    manager = manager_of(job.spec)
    if manager is not None:
        return left_alone(job, observed, hooks, manager, rfc3339(now))
    before = job.status
    status = before.model_copy(deep=True)
    life = job.spec.lifecycle()
    ts = rfc3339(now)
    source: ProgressSource | None = None
    asked: tuple[ProgressSource, ...] = ()
    said: list[Event] = []
    if status.finished:
        changes = finished(status, observed, life)
    else:
        said += record_checkpoint(job, status, observed.progress)
        record_progress(status, observed.progress)
        status.run_mode = life.run_mode.name
        if life.run_mode.paused:
            given_up = workload_objects(list(observed.objects.values()))
            changes = paused(status, observed, ts, given_up)
            count_ready(status)
        else:
            s = _situation(job, status, observed, now, life, hooks)
            held = None
            q = s.queued
            quit_queue = evicted_for_good(job, observed, s.found.states) if q else None
            if quit_queue is not None:
                held = finish(s, status, quit_queue)
                count_ready(status)
            # A refused job is held even where Workloads are not served (`queueing`).
            elif q is not None and (WORKLOAD not in observed.absent_kinds or q.refusal):
                held = admission(job, q, status, observed, s.pods, ts, aux=s.aux)
            if held is None:
                changes = _judge(s, status, hooks)
                if q is not None:  # Kueue's TAS: no pod for a failed node's slot
                    changes = while_kueue_replaces(changes, job, observed)
                if status.phase == "Running":
                    source = progress_source(job, s.pods, s.pods_by_name)
                    stacks = s.stacks.ask or s.stacks.hold
                    said += say(status, s.stall, ts, stacks_name(job.name) if stacks else None)
                    changes = _recheck(_recheck(changes, s.stall_recheck), s.stacks.requeue)
                    asked = s.stacks.ask
            else:
                changes = held
                count_ready(status)
            ignored = label_ignored(q, before, status)
            if ignored:
                changes = replace(changes, events=(*changes.events, *ignored))
    if status.phase == "Succeeded" and before.phase != "Succeeded":
        complete_progress(status)
    if status.finished:
        # Its Workload is declared Finished by the plan that finishes the job, or by a later
        # one if that write failed, once no pod of the job holds resources: the quota goes
        # back to the queue.
        changes = finished_workloads(changes, status, observed, ts)
    changes = with_lost_nodes(changes, observed, now, bound_of(recovery_of(job.spec), observed))
    if said:
        changes = replace(changes, events=(*said, *changes.events))
    built = _built(before, status, changes, observed, now, warnings, routine_events)
    return replace(built, progress_source=source, capture_stacks=asked)


def _judge(s: Situation, status: JobStatus, hooks: EngineHooks) -> Changes:
    """A job that is neither finished nor paused: its verdict, or what keeps it running."""
    job, life = s.job, s.life
    verdict, requeue = _deadline(life, status, s.now, s.found.states)
    if verdict is None and not life.run_mode.debugging and s.found.fail is not None:
        verdict = s.found.fail  # a recovery rule's FailJob: the job fails whatever else says
    if verdict is None and not life.run_mode.debugging:
        verdict = _gang_verdict(s)
    if verdict is None and not life.run_mode.debugging:
        verdict = hooks.compute_status(job, s.found.states)
        exceeded = s.found.backoff_exceeded
        if exceeded is not None and (verdict is None or verdict.outcome == "Failed"):
            # Restarts exhausted fail the job whatever the framework would wait for.
            verdict = _backoff_verdict(exceeded, life)
    changes = finish(s, status, verdict) if verdict is not None else running(s, status, requeue)
    count_ready(status)
    hooks.update_status(job, status, s.observed.objects)
    return changes


def _recheck(changes: Changes, seconds: float | None) -> Changes:
    """`changes`, looked at again within `seconds` (a stall due: `t9kjobs.planner.stall`)."""
    if seconds is None:
        return changes
    due = seconds if changes.requeue_after is None else min(changes.requeue_after, seconds)
    return replace(changes, requeue_after=due)


def _situation(
    job: Job,
    status: JobStatus,
    observed: Observed,
    now: datetime,
    life: Lifecycle,
    hooks: EngineHooks,
) -> Situation:
    """Read the job once: the pods it wants and has, each replica assessed. Its status gets
    the selector and, on a start or a resume, the start time."""
    ts = rfc3339(now)
    before = job.status
    status.selector = ",".join(f"{k}={v}" for k, v in owner_labels(job).items())
    was_paused = status.condition("Paused")
    resumed = was_paused is not None
    if was_paused is not None and was_paused.status == "True":
        # Like a batch/v1 Job resumed from suspension, the deadline counts from the resume.
        status.start_time = ts
    elif status.start_time is None:
        # The job's first status may be written a reconcile after its pods were created
        # (`FOLDED_STATUS_SECONDS`), or by an operator that took over from one that created
        # them: the job started when its first pod was created.
        created = first_created(observed.pods())
        status.start_time = rfc3339(now if created is None else min(now, created))
    pods = desired_pods(job, hooks, life, resumed, observed.absent_kinds)
    aux = without_idle_gangs(
        hooks.auxiliary_objects(job, pods, observed.absent_kinds), pods, observed
    )
    # Its place in a queue, built from its pods as the plugins made them (an admission then
    # adds its flavors to them: `t9kjobs.planner.queueing`).
    in_queue = queued(job, pods, observed)
    if in_queue is not None and in_queue.workload is not None:
        aux = [*aux, in_queue.workload]
    replicas = [r for t in status.tasks for r in t.replicas]
    have = {p["metadata"]["name"]: p for p in observed.pods()}
    pods_by_name = remembered(pods, have, replicas)
    recorded = {r.name: r.restart_count for r in replicas}
    recovery = recovery_of(job.spec)
    bound = bound_of(recovery, observed)
    # A pod lost with its node is judged as a failed one (`t9kjobs.planner.nodes`); by the
    # built-in rule even in a job without a recoveryPolicy: no kubelet will ever end it.
    lost_all = lost_pods(have.values(), observed.nodes, now, bound)
    status.lost_nodes = remember_lost(
        status.lost_nodes, sorted({w.node for w in lost_all.values()})
    )
    # Judged as failed: the live ones (a Terminating pod's node is remembered all the same).
    lost_now = {
        n: w for n, w in lost_all.items() if not have[n]["metadata"].get("deletionTimestamp")
    }
    for name, why in lost_now.items():
        pods_by_name = {**pods_by_name, name: as_lost(pods_by_name[name], why)}
    if lost_now and recovery is None:
        recovery = RecoveryPolicy()
    stalled, recheck = None, None
    if before.phase == "Running" and not life.run_mode.debugging:
        source = progress_source(job, pods, pods_by_name)
        read = pods_by_name.get(source.pod) if source is not None else None
        stalled, recheck = judge(stall_of(job.spec), status, observed.progress, source, read, now)
    # The stacks first: the rule's action waits for them (`t9kjobs.planner.stacks`).
    stacks = capture(job, before, stalled, observed, pods, pods_by_name, now)
    if stacks.config_map is not None:
        aux = [*aux, stacks.config_map]
    held = ("ConfigMap", stacks_name(job.name))
    if held in observed.conflicts:
        # Another's object of that name costs the stacks (`capture`), never the pods: no pod
        # uses it, so it holds none back as a name the pods need would.
        kept = {k: v for k, v in observed.conflicts.items() if k != held}
        observed = replace(observed, conflicts=kept)
    found = assess(
        pods,
        pods_by_name,
        recorded,
        status.backoff_count,
        life,
        recovery=recovery,
        counted={r.name: r.counted for r in replicas},
        infra_count=status.infrastructure_restart_count or 0,
        stalled=stalled.pod if stalled is not None and not stacks.hold else None,
    )
    return Situation(
        job=job,
        before=before,
        observed=observed,
        life=life,
        now=now,
        ts=ts,
        resumed=resumed,
        pods=tuple(pods),
        aux=tuple(aux),
        pods_by_name=pods_by_name,
        found=found,
        queued=in_queue,
        lost={name: why.why for name, why in lost_now.items()},
        stall=stalled,
        stall_recheck=recheck,
        stacks=stacks,
        stranded=stranded(held_gangs(aux, observed), pods_by_name.values()),
    )


def _built(
    before: JobStatus,
    status: JobStatus,
    changes: Changes,
    observed: Observed,
    now: datetime,
    warnings: Sequence[Problem],
    routine_events: bool,
) -> Plan:
    """The Plan, once: the status and the changes, the Events worth saying, the fold."""
    events = changes.events
    said = [p for p in warnings if p.severity == "warning"]
    if said and any(o["kind"] == "Pod" for o in changes.create):
        events = (
            *(Event("Warning", "SpecWarning", f"{p.path}: {p.message}") for p in said),
            *events,
        )
    if not routine_events:
        events = tuple(e for e in events if not e.routine)
    status.reason = standing_reason(status)
    return Plan(
        status=status,
        status_changed=status != before,
        create=changes.create,
        update=changes.update,
        delete=changes.delete,
        patch_status=changes.patch_status,
        events=events,
        requeue_after=changes.requeue_after,
        probe=changes.probe,
        status_after_creations=bool(changes.create)
        and not changes.delete
        and not _resumes(before, status),
        status_due_in=None if changes.delete else _status_due(before, status, observed, now),
    )


def _resumes(before: JobStatus, status: JobStatus) -> bool:
    """The plan that takes a paused job to `Resuming` (module docstring)."""
    return before.phase == "Paused" and status.phase == "Resuming"


def _status_due(
    before: JobStatus, status: JobStatus, observed: Observed, now: datetime
) -> float | None:
    """Seconds the status write may still wait (module docstring); None: written now."""
    first = _first_status_due(before, status, observed, now)
    return first if first is not None else _replicas_due(before, status, observed, now)


def _replicas_due(
    before: JobStatus, status: JobStatus, observed: Observed, now: datetime
) -> float | None:
    """Seconds a change of replicas alone may still wait: until `FOLDED_REPLICAS_SECONDS`
    after the oldest change of a pod it records; None when anything else changed, or a
    changed replica's pod says nothing of when it changed."""
    if before == type(before)() or before == status:
        return None
    rest = status.model_copy(
        update={"tasks": before.tasks, "aggregate": before.aggregate, "ready": before.ready}
    )
    if rest != before:
        return None
    was = {r.name: r for t in before.tasks for r in t.replicas}
    pods = {p["metadata"]["name"]: p for p in observed.pods()}
    times: list[datetime] = []
    for replica in (r for t in status.tasks for r in t.replicas):
        old = was.get(replica.name)
        if old == replica:
            continue
        same_pod = old is not None and (old.uid, old.restart_count, old.counted_restarts) == (
            replica.uid,
            replica.restart_count,
            replica.counted_restarts,
        )
        changed = last_change(pods[replica.name]) if same_pod and replica.name in pods else None
        if changed is None:
            return None
        times.append(changed)
    if not times:
        return None  # a task's restart count alone: written now
    # A pod's clock ahead of ours never makes a change wait longer than the bound.
    left = min(
        FOLDED_REPLICAS_SECONDS, FOLDED_REPLICAS_SECONDS - (now - min(times)).total_seconds()
    )
    return left if left > 0 else None


def _first_status_due(
    before: JobStatus, status: JobStatus, observed: Observed, now: datetime
) -> float | None:
    """Seconds a new job's first status write may still wait (module docstring); None when it
    is written now.

    Only a job with no status yet, all of whose pods exist and wait to run with nothing else
    to say (Pending, and no condition but Initialized True), waits: until they run, or
    `FOLDED_STATUS_SECONDS` after the first of them was created."""
    if before != type(before)() or status.phase != "Pending":
        return None
    initialized = status.condition("Initialized")
    if initialized is None or initialized.status != "True" or len(status.conditions) > 1:
        return None
    created = first_created(observed.pods())
    if created is None:
        return None  # no time to count from: written now
    left = FOLDED_STATUS_SECONDS - (now - created).total_seconds()
    return left if left > 0 else None


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


def _gang_verdict(s: Situation) -> Verdict | None:
    """A gang that can never be complete, and whose members cannot be placed on their own
    (the T9k scheduler's), fails the job once the bound is due (`t9kjobs.planner.gangs`)."""
    gang = s.stranded
    if gang is None or gang.separable or overdue(s.before, s.now) != 0:
        return None
    message = f"{gang.message}; its scheduler places none of them on its own"
    return Verdict("Failed", GANG_INCOMPLETE, message, tuple(s.found.states))


def _backoff_verdict(replica: ReplicaState, life: Lifecycle) -> Verdict:
    return Verdict(
        "Failed",
        "BackoffLimitExceeded",
        f"{replica.failure}; restarts exhausted (spec.runPolicy.backoffLimit={life.backoff_limit})",
        (replica,),
    )
