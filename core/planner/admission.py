"""What a plan does with a queued job's Workload: no pod until it is admitted, then its pods
with their flavors (`admission`); its pods deleted, without a failure, when it is evicted, and
its quota given back once they are gone; `Finished` once no pod of the finished job holds
resources (`finished_workloads`); a Warning when the job names another queue than its
Workload's (`label_ignored`).

It exists apart from `t9kjobs.planner.queueing` because the two are different steps of a plan
(`t9kjobs.planner.plan`) that read different things: where a job waits and the Workload it
wants are decided from the job and its pods as the plugins built them; this acts on what Kueue
said of that Workload, after a pause and before the job's replicas are judged (a held job is
not judged, so an eviction counts no restart), and once the job is finished. The protocol as a
whole: `t9kjobs.planner.queueing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from t9kjobs.kinds import ReplicaState, Verdict
from t9kjobs.models import Job, JobStatus, recovery_of
from t9kjobs.objects import DesiredPod
from t9kjobs.planner.children import deletion, subset
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.prebuilt import PREBUILT_MISMATCH
from t9kjobs.planner.queueing import QUEUE_LABEL_IGNORED
from t9kjobs.planner.rules import kueue_rule
from t9kjobs.planner.situation import Changes
from t9kjobs.planner.status import shown_deleted
from t9kjobs.planner.topology import topology_admitted
from t9kjobs.planner.types import Event, Kueue, Observed, Queued
from t9kjobs.planner.workloads import (
    WORKLOAD,
    condition_of,
    condition_true,
    pod_set_name,
    status_patch,
    workload_name,
    workload_objects,
)
from t9kjobs.vocabulary import Obj

__all__ = ["admission", "evicted_for_good", "finished_workloads", "label_ignored"]

# A job whose Workload cannot be built yet (its priority class is missing) looks again this often.
RETRY_SECONDS = 10.0
# Phases of a pod that holds nothing on its node any more.
_ENDED = ("Succeeded", "Failed")


def admission(
    job: Job,
    q: Queued,
    status: JobStatus,
    observed: Observed,
    pods: Sequence[DesiredPod],
    ts: str,
    *,
    aux: Sequence[Obj] = (),
) -> Changes | None:
    """None when the job may run: its Workload is admitted (its pods then carry their
    flavors' node labels and tolerations, set here in place). Otherwise what a job waiting in
    its queue does: no pod, the Workload made or mended, the phase `Queued`; or what a job
    refused a place does (`Queued.refusal`): no pod and no Workload, a Warning."""
    name = workload_name(job)
    current = observed.get(WORKLOAD, name)
    if q.refusal is not None:
        return _refusal(q.refusal, q.problem or q.refusal, status, observed, current, ts)
    note = q.ignored

    def said(message: str) -> str:
        return f"{message}; {note}" if note else message

    if q.waiting is not None:  # its prebuilt Workload is not there, or not usable yet
        reason, message = q.waiting
        return _held(
            status,
            observed,
            ts,
            reason,
            said(message),
            requeue=1.0 if q.adopt is not None else RETRY_SECONDS,
            changes=Changes(update=(q.adopt,) if q.adopt is not None else ()),
            warning=reason == PREBUILT_MISMATCH,
        )
    if current is not None and current["metadata"].get("deletionTimestamp"):
        current = None
        going = True
    else:
        going = False
    wanted = q.workload
    if (
        current is not None
        and wanted is not None
        and subset(wanted["spec"], current.get("spec"))
        and condition_true(current, "Admitted")
        and not condition_true(current, "Evicted")
        and (current.get("status") or {}).get("admission")
    ):
        missing = _with_flavors(pods, current, observed.kueue or Kueue())
        if missing is None:
            cq = current["status"]["admission"].get("clusterQueue", "")
            set_condition(
                status,
                "Admitted",
                True,
                "Admitted",
                said(f"admitted by ClusterQueue {cq} (LocalQueue {q.queue}, Workload {name})"),
                ts,
            )
            return None
        return _held(status, observed, ts, "Queued", said(f"admitted, but {missing}"), requeue=1.0)

    creates: list[Obj] = []
    probe: tuple[Obj, ...] = ()
    deletes = []
    patches: list[Obj] = []
    requeue = None
    if q.problem is not None:
        reason, message, requeue = "Inadmissible", q.problem, RETRY_SECONDS
    elif (WORKLOAD, name) in observed.conflicts:
        holder = observed.conflicts[(WORKLOAD, name)]
        reason = "NameConflict"
        message = f"Workload {name} exists and this job does not control it ({holder})"
        requeue = RETRY_SECONDS
    elif current is None:
        if not going and wanted is not None:
            creates.append(wanted)
            probe = _probe(pods, aux)
        reason, message = "Queued", f"waiting in LocalQueue {q.queue} (Workload {name})"
    elif wanted is not None and not subset(wanted["spec"], current.get("spec")):
        # Its pods changed (an elastic job scaled): Kueue counts them anew, in a new Workload.
        deletes.append(deletion(current))
        reason = "Queued"
        message = f"the job's pods changed: Workload {name} is made again, to be queued anew"
    else:
        reason, message = _waiting(current, q.queue, name)
        evicted = condition_of(current, "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            reason = str(evicted.get("reason") or "Evicted")
            message = f"evicted by Kueue ({reason}): {evicted.get('message') or ''}".rstrip(": ")
            if not observed.pods() and condition_true(current, "QuotaReserved"):
                patches.append(_cleared(current, evicted, ts))
    return _held(
        status,
        observed,
        ts,
        reason,
        said(message),
        requeue=requeue,
        changes=Changes(
            create=tuple(creates),
            delete=tuple(deletes),
            patch_status=tuple(patches),
            probe=probe,
        ),
    )


def _probe(pods: Sequence[DesiredPod], aux: Sequence[Obj]) -> tuple[Obj, ...]:
    """What a queued job's Workload is made with: its children as a dry run (`Plan.probe`),
    one pod of each replica type (the others differ by their index) and every other child.
    A job the API server would refuse one of fails now, not once Kueue has admitted it."""
    first: dict[str, Obj] = {}
    for pod in pods:
        first.setdefault(pod.replica_type, pod.manifest)
    return (*first.values(), *(o for o in aux if o.get("kind") != WORKLOAD))


def evicted_for_good(
    job: Job, observed: Observed, states: Sequence[ReplicaState]
) -> Verdict | None:
    """The job's verdict when Kueue evicts its Workload and a recovery rule names
    `PreemptedByKueue`: Failed, reason RecoveryPolicy, instead of a requeue (its pods are then
    stopped and its Workload finished: `finished_workloads`)."""
    rule = kueue_rule(recovery_of(job.spec))
    current = observed.get(WORKLOAD, workload_name(job))
    if rule is None or current is None or not condition_true(current, "Evicted"):
        return None
    evicted = condition_of(current, "Evicted") or {}
    why = str(evicted.get("reason") or "Evicted")
    said = str(evicted.get("message") or "").rstrip(".")
    message = f"evicted by Kueue ({why}{': ' + said if said else ''}); rule {rule} fails the job"
    return Verdict("Failed", "RecoveryPolicy", message, tuple(states))


def _refusal(
    reason: str,
    message: str,
    status: JobStatus,
    observed: Observed,
    current: Obj | None,
    ts: str,
) -> Changes:
    """A job refused a place in a queue: no pod, and no Workload (one it had, its pods
    changed since, is deleted: its place is given up); `Queued`, its Admitted condition and a
    Warning Event say why, once. Looked at again every `RETRY_SECONDS` (a default LocalQueue
    or Kueue's CRDs may come meanwhile)."""
    gone = []
    if current is not None and not current["metadata"].get("deletionTimestamp"):
        gone.append(deletion(current))
    return _held(
        status,
        observed,
        ts,
        reason,
        message,
        requeue=RETRY_SECONDS,
        changes=Changes(delete=tuple(gone)),
        warning=True,
    )


def label_ignored(q: Queued | None, before: JobStatus, status: JobStatus) -> tuple[Event, ...]:
    """A Warning, once, when the job names another queue (or none) than its Workload's: its
    Admitted condition's message says it from then on."""
    if q is None or not q.ignored:
        return ()
    was = before.condition("Admitted")
    now = status.condition("Admitted")
    if now is None or q.ignored not in (now.message or ""):
        return ()
    if was is not None and q.ignored in (was.message or ""):
        return ()
    return (Event("Warning", QUEUE_LABEL_IGNORED, q.ignored),)


def _waiting(workload: Obj, queue: str, name: str) -> tuple[str, str]:
    """Why an unadmitted Workload waits, in Kueue's words."""
    reserved = condition_of(workload, "QuotaReserved")
    if reserved is not None and reserved.get("status") == "True":
        return "Queued", f"quota reserved in LocalQueue {queue}; waiting for admission checks"
    said = str((reserved or {}).get("message") or "")
    if reserved is not None and reserved.get("reason") == "Inadmissible":
        return "Inadmissible", f"LocalQueue {queue}: {said}" if said else f"LocalQueue {queue}"
    tail = f": {said}" if said else f" (Workload {name})"
    return "Queued", f"waiting in LocalQueue {queue}{tail}"


def _held(
    status: JobStatus,
    observed: Observed,
    ts: str,
    reason: str,
    message: str,
    *,
    requeue: float | None = None,
    changes: Changes | None = None,
    warning: bool = False,
) -> Changes:
    """A job that waits for admission: no pod (those it has are deleted, its PodGroups too).
    A `warning` (a refusal) is said as a Warning Event, never a routine one."""
    live = [p for p in observed.pods() if not p["metadata"].get("deletionTimestamp")]
    events: list[Event] = []
    was = status.condition("Admitted")
    kind: Literal["Normal", "Warning"] = "Warning" if warning else "Normal"
    if live:
        events.append(
            Event(kind, reason, f"{message}; deleted {len(live)} pod(s), the job waits again")
        )
    elif was is None or was.reason != reason:
        events.append(Event(kind, reason, message, routine=was is None and not warning))
    status.phase = "Queued"
    status.start_time = None  # its deadline counts from its admission
    set_condition(status, "Admitted", False, reason, message, ts)
    if status.condition("Running") is not None:
        set_condition(status, "Running", False, reason, "the job waits in its queue", ts)
    if live or status.tasks:
        shown_deleted(status)
    gone = [*live, *observed.without_pods()]
    changes = changes or Changes()
    return Changes(
        create=changes.create,
        update=changes.update,
        delete=(*changes.delete, *(deletion(o) for o in gone)),
        patch_status=changes.patch_status,
        events=tuple(events),
        requeue_after=requeue,
        probe=changes.probe,
    )


def _cleared(workload: Obj, evicted: Obj, ts: str) -> Obj:
    """The status patch that gives an evicted Workload's quota back (`jobframework`: its job
    stopped, the reservation is unset; Requeued True after a preemption or a node failure)."""
    message = str(evicted.get("message") or "")
    reason = str(evicted.get("reason") or "")
    generation = workload["metadata"].get("generation")

    def condition(type_: str, value: str, why: str, said: str) -> Obj:
        out: Obj = {
            "type": type_,
            "status": value,
            "reason": why,
            "message": said,
            "lastTransitionTime": ts,
        }
        if generation is not None:
            out["observedGeneration"] = generation
        return out

    requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
    changed = {
        "QuotaReserved": condition("QuotaReserved", "False", "Pending", message),
        "Admitted": condition(
            "Admitted", "False", "NoReservation", "The workload has no reservation"
        ),
        "Requeued": condition("Requeued", requeued, reason or "Evicted", message),
    }
    conditions = [
        changed.pop(c["type"], c) for c in (workload.get("status") or {}).get("conditions") or []
    ]
    conditions += list(changed.values())
    return status_patch(workload, {"conditions": conditions, "admission": None})


def finished_workloads(changes: Changes, status: JobStatus, observed: Observed, ts: str) -> Changes:
    """A finished job's `changes` with its Workloads marked `Finished` (their quota goes back
    to the queue) once no pod of the job holds resources on its node: not while one still
    runs, or is still being stopped (`cleanUpPolicy: None` keeps a replica that runs on after
    the job's verdict). A Workload Kueue evicts meanwhile (preempted, deactivated) gets those
    pods deleted, as an admitted job's would be, so that its quota can go."""
    workloads = [
        w
        for w in workload_objects(list(observed.objects.values()))
        if not condition_true(w, "Finished")
    ]
    holding = [p for p in observed.pods() if (p.get("status") or {}).get("phase") not in _ENDED]
    if workloads and holding:
        if not any(condition_true(w, "Evicted") for w in workloads):
            return replace(changes, patch_status=())
        deleting = {d.name for d in changes.delete}
        stop = [
            deletion(p)
            for p in holding
            if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in deleting
        ]
        return replace(changes, delete=(*changes.delete, *stop), patch_status=())
    return replace(changes, patch_status=_finished(workloads, status, ts))


def _finished(workloads: Sequence[Obj], status: JobStatus, ts: str) -> tuple[Obj, ...]:
    completed = status.condition("Completed")
    failed = status.condition("Failed")
    ended = completed if completed is not None and completed.status == "True" else failed
    reason = "Succeeded" if status.phase == "Succeeded" else "Failed"
    message = (ended.message if ended is not None else None) or f"the job {reason.lower()}"
    out = []
    for workload in workloads:
        conditions = [
            c
            for c in (workload.get("status") or {}).get("conditions") or []
            if c.get("type") != "Finished"
        ]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": reason,
                "message": message[:32768],
                "lastTransitionTime": ts,
            }
        )
        out.append(status_patch(workload, {"conditions": conditions}))
    return tuple(out)


def _with_flavors(pods: Sequence[DesiredPod], workload: Obj, kueue: Kueue) -> str | None:
    """Give each pod the node labels and tolerations of the flavors assigned to its podSet, and,
    where Kueue placed it by topology, its ungater's gate, labels and annotations
    (`t9kjobs.planner.topology`); what is missing when a flavor is not known here yet (None
    when all are)."""
    assignments = {
        str(a.get("name")): a
        for a in (workload.get("status") or {}).get("admission", {}).get("podSetAssignments") or []
    }
    for pod in pods:
        assigned = assignments.get(pod_set_name(pod.replica_type))
        names = sorted({str(f) for f in ((assigned or {}).get("flavors") or {}).values()})
        spec = pod.manifest["spec"]
        for name in names:
            flavor = kueue.flavors.get(name)
            if flavor is None:
                return f"its ResourceFlavor {name} is not known to the operator yet"
            flavor_spec = flavor.get("spec") or {}
            if flavor_spec.get("nodeLabels"):
                spec["nodeSelector"] = {
                    **(spec.get("nodeSelector") or {}),
                    **flavor_spec["nodeLabels"],
                }
            tolerations = list(spec.get("tolerations") or [])
            for toleration in flavor_spec.get("tolerations") or []:
                if toleration not in tolerations:
                    tolerations.append(toleration)
            if tolerations:
                spec["tolerations"] = tolerations
    topology_admitted(pods, workload, {p.name: pod_set_name(p.replica_type) for p in pods})
    return None
