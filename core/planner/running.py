"""A job that keeps running: what to create, restart, relaunch, update and delete.

Ownership before use: while any name the job needs is held by an object it does not control
(a planted Secret or ConfigMap its pods would mount, a Service that would name them, a pod of
its name), no pod of the job is created; its `Initialized` condition and one Warning Event say
which object holds which name, and the job is looked at again every `CONFLICT_RETRY_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Mapping

from t9kjobs.models import JobStatus
from t9kjobs.objects import (
    ANNOTATION_DEFAULT_CONTAINER,
    ANNOTATION_INCARNATION,
    ANNOTATION_SPEC_HASH,
    ANNOTATION_STOP_WHEN_FINISHED,
    ANNOTATION_TRAINING_CONTAINER,
    find_container,
    object_key,
    spec_hash,
)
from t9kjobs.planner.checkpoints import resume_values, resumed_from
from t9kjobs.planner.children import deletion, pod_state, subset
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.failures import exit_code_of
from t9kjobs.planner.gangs import GANG_INCOMPLETE_SECONDS, overdue
from t9kjobs.planner.history import close_recovered, record_restarts
from t9kjobs.planner.job_restart import waits
from t9kjobs.planner.nodes import FORCED_LOST, avoid
from t9kjobs.planner.placement import rejoin_or_alone
from t9kjobs.planner.situation import Changes, Situation
from t9kjobs.planner.status import phase_and_conditions, write_replicas
from t9kjobs.planner.types import Event, ObjectRef
from t9kjobs.vocabulary import Obj

__all__ = ["CONFLICT_RETRY_SECONDS", "conflict_message", "running"]

# While a name the job needs is held by another object, look again this often.
CONFLICT_RETRY_SECONDS = 10.0


def running(s: Situation, status: JobStatus, requeue: float | None) -> Changes:
    """A job that goes on: create what is missing, restart what failed, relaunch pods whose
    spec changed, update the other children whose content changed, delete what is no longer
    wanted. `requeue`: when the deadline, if any, is due."""
    found, observed, pods, pods_by_name = s.found, s.observed, s.pods, s.pods_by_name
    pod_creates: list[Obj] = []
    aux_creates: list[Obj] = []
    updates: list[Obj] = []
    deletes: list[ObjectRef] = []
    events: list[Event] = []

    restarting = {d.name for d, _ in found.restart}
    if found.decided:
        saved = resumed_from(s.job, status)
        resume_step = saved.step if saved is not None else None
        record_restarts(status, found.decided, found.job_restart, pods_by_name, s.ts, resume_step)
    # Ownership before use: while any name the job needs is held by an object it does not
    # control (a planted Secret or ConfigMap its pods would mount, a Service that would name
    # them, a pod of its name), no pod of the job is created. See the condition. A job
    # restart creates its pods once every pod of an older incarnation is gone, all at once.
    blocked = (
        bool(observed.conflicts)
        or _gang_going(s)
        or waits(status, observed.pods(), found.restarts_recorded)
    )
    for desired in pods:
        manifest = desired.manifest
        digest = spec_hash(manifest)
        current = pods_by_name.get(desired.name)
        if current is None and blocked:
            continue
        if current is None:
            incarnation = found.restarts_recorded.get(desired.name, 0)
            annotations = manifest["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION_INCARNATION] = str(incarnation)
            # After the hash, as the incarnation: a new checkpoint relaunches no running pod.
            resume_values(s.job, status, desired, incarnation)
            annotations[ANNOTATION_SPEC_HASH] = digest
            # After the hash too: pods an older operator created are not relaunched for it.
            trains = find_container(manifest, desired.training_container)
            if trains is not None:
                annotations[ANNOTATION_TRAINING_CONTAINER] = str(trains["name"])
                annotations.setdefault(ANNOTATION_DEFAULT_CONTAINER, str(trains["name"]))
            if desired.stop_when_finished:
                annotations[ANNOTATION_STOP_WHEN_FINISHED] = "true"
            pod_creates.append(manifest)
        elif (
            desired.recreate_on_change
            and desired.name not in restarting
            and not current["metadata"].get("deletionTimestamp")
            and (current["metadata"].get("annotations") or {}).get(ANNOTATION_SPEC_HASH) != digest
        ):
            deletes.append(deletion(current))
            events.append(Event("Normal", "Relaunching", f"{desired.name}: its spec changed"))
    for desired, pod in found.restart:
        lost = s.lost.get(desired.name)
        deletes.append(deletion(pod, force=FORCED_LOST if lost is not None else None))
        if lost is not None:
            events.append(Event("Warning", "NodeLost", f"{desired.name} force-deleted: {lost}"))
        if desired.name in found.job_members:
            continue  # said once for the whole job, below
        code = exit_code_of(pod, desired.training_container)
        events.append(
            Event(
                "Warning",
                "Restarting",
                f"{desired.name} {pod_state(pod).lower()}"
                + (f" with exit code {code}" if code is not None else "")
                + f"; restart {found.restarts_recorded.get(desired.name, 0)}"
                + (f" ({found.why[desired.name]})" if desired.name in found.why else ""),
            )
        )
    if found.job_restart is not None:
        events.append(_job_restart_event(s, found.job_restart))
    # Said with the restart it leads to (once: a restart is decided once); a failure it leaves
    # as it ended is said by the ReplicaFailure condition and the verdict.
    for name, rule in [(n, r) for n, r in found.spent.items() if n in restarting]:
        events.append(
            Event(
                "Warning",
                "InfrastructureBudgetSpent",
                f"{name}: rule {rule} matched its failure, but the infrastructure budget is spent"
                f" ({found.infra_count} restarts, spec.recoveryPolicy.infrastructureRestartLimit):"
                " the next rule or its restartPolicy decides, charged to the user",
            )
        )
    gang = s.stranded
    if gang is not None:
        left = overdue(s.before, s.now)
        if left == 0 and gang.separable:
            deletes.extend(gang.deletions())
            names = ", ".join(p["metadata"]["name"] for p in gang.waiting)
            events.append(
                Event(
                    "Warning",
                    "GangIncomplete",
                    f"{gang.message}: {names} deleted, to be placed again out of the gang",
                )
            )
        else:
            # The condition is written now (or was): look again when the bound is due.
            due = GANG_INCOMPLETE_SECONDS if left is None else left
            requeue = due if requeue is None else min(requeue, due)
    desired_names = {p.name for p in pods}
    for name, pod in pods_by_name.items():
        if name not in desired_names and not pod["metadata"].get("deletionTimestamp"):
            deletes.append(deletion(pod))  # scaled down, or no longer part of the job

    absent: list[tuple[str, str]] = []
    desired_aux = set()
    for obj in s.aux:
        key = object_key(obj)
        desired_aux.add(key)
        if key[0] in observed.absent_kinds:
            absent.append(key)
            continue
        current = observed.get(*key)
        if current is None:
            if key not in observed.conflicts:
                aux_creates.append(obj)
        elif not _needs_update(obj, current):
            continue
        elif observed.replaced(key[0]):
            if not current["metadata"].get("deletionTimestamp"):
                deletes.append(deletion(current))  # created again once it is gone
        else:
            updated = dict(obj)
            updated["metadata"] = {
                **obj["metadata"],
                "resourceVersion": current["metadata"].get("resourceVersion"),
            }
            updates.append(updated)
    for key, obj in sorted(observed.objects.items()):
        if key[0] != "Pod" and key not in desired_aux:
            deletes.append(deletion(obj))

    if pod_creates:
        # A replacement's old pod may still be listed: it is leaving, not a member.
        live = {n: p for n, p in pods_by_name.items() if n not in restarting}
        rejoin_or_alone(pod_creates, live, observed.gangs(s.aux))
        for manifest in pod_creates:
            avoid(manifest, status.lost_nodes)  # after the spec hash: never a relaunch
        names = ", ".join(o["metadata"]["name"] for o in pod_creates)
        # A job's first pods: its Initialized condition and replicas say so too. Pods created
        # again (a restart's replacement, a relaunch, a resume, a pod deleted by hand) are news.
        first = not s.before.tasks
        events.append(Event("Normal", "PodsCreated", f"created {names}", routine=first))

    conflict = conflict_message(observed.conflicts)
    if conflict is not None:
        initialized = s.before.condition("Initialized")
        if initialized is None or initialized.message != conflict:
            events.append(Event("Warning", "NameConflict", conflict))
        requeue = min(requeue or CONFLICT_RETRY_SECONDS, CONFLICT_RETRY_SECONDS)

    status.backoff_count = found.backoff_count
    if found.infra_count or status.infrastructure_restart_count is not None:
        status.infrastructure_restart_count = found.infra_count
    write_replicas(
        status, pods, pods_by_name, found.restarts_recorded, found.overridden, found.counted
    )
    phase_and_conditions(s, status, absent)
    close_recovered(status, found.states, s.ts)
    if conflict is not None:
        set_condition(status, "Initialized", False, "NameConflict", conflict, s.ts)
    return Changes(
        # What pods use (ConfigMaps, Secrets, their PodGroup) exists before they do.
        create=(*aux_creates, *pod_creates),
        update=tuple(updates),
        delete=tuple(deletes),
        events=tuple(events),
        requeue_after=requeue,
    )


def _job_restart_event(s: Situation, trigger: str) -> Event:
    """The Warning Event of a job restart: the failure, the rule, what is stopped."""
    decision, failure = s.found.decided[trigger]
    budget = (decision.budget or "User").lower()
    stopped = sorted(s.found.job_members)
    return Event(
        "Warning",
        "RestartingJob",
        f"{failure.describe(trigger)}; restart the job (rule {decision.rule}, {budget} budget):"
        f" stopping {', '.join(stopped)}; created again once all are gone",
    )


def _gang_going(s: Situation) -> bool:
    """Whether a PodGroup the job wants is still being deleted (kube-scheduler's waits for the
    pods of a paused job to go, podgroup-protection): new pods would join the group on its way
    out, and keep it from going. They are created once it is gone, with a new one."""
    for obj in s.observed.without_pods(s.aux):
        current = s.observed.get(*object_key(obj))
        if current is not None and current["metadata"].get("deletionTimestamp"):
            return True
    return False


def _needs_update(desired: Obj, current: Obj) -> bool:
    kind = desired["kind"]
    if kind == "Secret":
        return False  # generated key material is never rewritten
    if kind == "ConfigMap":
        # Its annotations too: the stacks of a later stall may read as the earlier ones.
        notes = current["metadata"].get("annotations") or {}
        return desired.get("data") != current.get("data") or not subset(
            desired["metadata"].get("annotations") or {}, notes
        )
    return not subset(desired.get("spec"), current.get("spec"))


def conflict_message(conflicts: Mapping[tuple[str, str], str]) -> str | None:
    """What holds the names the job needs, for its condition and Warning Event."""
    if not conflicts:
        return None
    held = "; ".join(
        f"{kind} {name} exists and this job does not control it ({holder})"
        for (kind, name), holder in sorted(conflicts.items())
    )
    return f"{held}: no pod of the job is created while it exists"
