"""A job that stops: paused, finishing, or finished and cleaned up.

A finished job's plan is applied again on every reconcile of it, so that a crash half-way
through the cleanup is finished by the next operator; its status stays as it finished, but for
the replicas still running then, followed to their end (`settle_replicas`).
"""

from __future__ import annotations

from collections.abc import Sequence

from t9kjobs.kinds import Verdict
from t9kjobs.models import JobStatus, Lifecycle
from t9kjobs.objects import ANNOTATION_STOP_WHEN_FINISHED, LABEL_REPLICA_TYPE
from t9kjobs.planner.children import deletion, pod_state
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.history import close_recovered
from t9kjobs.planner.placement import placement
from t9kjobs.planner.situation import Changes, Situation
from t9kjobs.planner.status import (
    aggregate,
    containers,
    replica_failure,
    shown_deleted,
    write_replicas,
)
from t9kjobs.planner.types import Event, ObjectRef, Observed
from t9kjobs.vocabulary import Obj

__all__ = [
    "ACTIVE",
    "cleanup",
    "finish",
    "finished",
    "paused",
    "settle_replicas",
]

ACTIVE = ("Pending", "Running", "Unknown")
_FINAL_POD_PHASES = ("Succeeded", "Failed")


def finished(status: JobStatus, observed: Observed, life: Lifecycle) -> Changes:
    """A job that has finished: only cleanup; its replicas still active followed to their end."""
    failed = status.condition("Failed")
    deadline = failed is not None and failed.reason == "DeadlineExceeded"
    settle_replicas(status, observed)
    return Changes(delete=tuple(cleanup(observed, life, deadline=deadline)))


def paused(status: JobStatus, observed: Observed, ts: str, given_up: Sequence[Obj] = ()) -> Changes:
    """A paused job: its pods are deleted, its replicas shown Deleted; its PodGroups (what
    goes without pods) and
    `given_up` (its Workloads: its place in a queue) deleted."""
    live = [p for p in observed.pods() if not p["metadata"].get("deletionTimestamp")]
    status.phase = "Paused"
    set_condition(status, "Paused", True, "PauseEnabled", "spec.runMode.pause is enabled", ts)
    set_condition(status, "Running", False, "Paused", "the job is paused", ts)
    shown_deleted(status)
    events = [Event("Normal", "Paused", f"deleted {len(live)} pod(s)")] if live else []
    gone = [*live, *observed.without_pods(), *given_up]
    return Changes(delete=tuple(deletion(o) for o in gone), events=tuple(events))


def cleanup(observed: Observed, life: Lifecycle, *, deadline: bool) -> list[ObjectRef]:
    """Children to delete when a job has finished: pods by cleanUpPolicy, and active ones past
    a deadline; the children that go without pods (PodGroups: `Observed.without_pods`)."""
    out = [deletion(o) for o in observed.without_pods()]
    for pod in observed.pods():
        if pod["metadata"].get("deletionTimestamp"):
            continue
        replica_type = (pod["metadata"].get("labels") or {}).get(LABEL_REPLICA_TYPE, "")
        active = pod_state(pod) in ACTIVE
        keep = replica_type in life.clean_up_keeps
        policy = life.clean_up_policy
        stop = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_STOP_WHEN_FINISHED)
        if (
            ((deadline or stop) and active)
            or (not keep and policy == "All")
            or (not keep and policy == "Unfinished" and active)
        ):
            out.append(deletion(pod))
    return out


def finish(s: Situation, status: JobStatus, verdict: Verdict) -> Changes:
    """The job ends: restarts this reconcile considered are not performed, cleanup is."""
    pods_by_name, found, ts = s.pods_by_name, s.found, s.ts
    status.phase = verdict.outcome
    status.completion_time = ts
    succeeded = verdict.outcome == "Succeeded"
    set_condition(status, "Running", False, verdict.reason, verdict.message, ts)
    set_condition(
        status, "Completed" if succeeded else "Failed", True, verdict.reason, verdict.message, ts
    )
    deletes = cleanup(s.observed, s.life, deadline=verdict.reason == "DeadlineExceeded")
    # A pod the cleanup stops while it runs shows Deleted; one that had already ended keeps
    # its final phase, so the finished job's counts say how its replicas ended.
    stopped = {
        d.name for d in deletes if pod_state(pods_by_name.get(d.name)) not in _FINAL_POD_PHASES
    }
    status.backoff_count = found.backoff_performed
    if found.infra_performed or status.infrastructure_restart_count is not None:
        status.infrastructure_restart_count = found.infra_performed
    write_replicas(status, s.pods, pods_by_name, found.performed, stopped, found.counted_performed)
    replica_failure(status, found.states, ts)
    close_recovered(status, found.states, ts)
    placement(status, s.aux, s.observed, list(pods_by_name.values()), ts)
    # A success is in the Completed condition, its reason and message: a routine Event. A
    # failure is a Warning, what alerting on Events looks for.
    event = Event(
        "Normal" if succeeded else "Warning", verdict.outcome, verdict.message, routine=succeeded
    )
    return Changes(delete=tuple(deletes), events=(event,))


def settle_replicas(status: JobStatus, observed: Observed) -> None:
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
            if replica.phase not in ACTIVE or replica.uid is None:
                continue  # ended, or never had a pod (Creating): nothing to follow
            pod = pods.get(replica.name)
            if pod is not None and pod["metadata"].get("uid") != replica.uid:
                pod = None  # another incarnation: the one recorded is gone
            phase = str((pod.get("status") or {}).get("phase")) if pod is not None else ""
            if pod is not None and phase in _FINAL_POD_PHASES:
                replica.phase, replica.containers = phase, containers(pod)
            elif pod is None or pod["metadata"].get("deletionTimestamp"):
                replica.phase, replica.containers = "Deleted", []
            else:
                continue
            settled = True
    if settled:
        status.aggregate = aggregate(status.tasks)
