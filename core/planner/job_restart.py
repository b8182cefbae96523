"""`RestartJob`: a replica's failure restarts every replica of the job together.

A collective (torchrun, DeepSpeed, ColossalAI) whose rank died leaves the other ranks hung in
their next collective call, or worse, running on with a world that is no longer whole; a
restart of the one replica rejoins nothing. So the recovery rule's `RestartJob` stops every pod
of the job not ended for good (its own grace: SIGTERM, time to save), creates **none** until no
pod of an older incarnation is left, then creates them all at once, so that they join their gang
(one PodGroup) together. A replica that ended for good (Succeeded under a policy but `Always`)
stays: its work never runs twice.

The restart charges 1 to its rule's budget and to the failed replica's `countedRestarts`
(`t9kjobs.planner.replicas`); every replica it restarts gets incarnation + 1 (`restartCount`,
the pod annotation), charged nowhere. All of it is written in the status before any pod is
deleted, with the history entry that keeps the creations waiting (`waits`): an operator that
dies after that write finds pods of older incarnations than recorded, deletes them, charges
nothing again and creates nothing before they are all gone.

Kept out of `replicas` (the per-replica assessment), which it widens to the whole job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from t9kjobs.kinds import ReplicaState
from t9kjobs.models import JobStatus
from t9kjobs.objects import ANNOTATION_INCARNATION, DesiredPod, Obj

__all__ = ["COMPLETED", "STOPPING", "incarnation", "restart_whole_job", "waits"]

# The reason of a restart after a success (restartPolicy Always), in the history.
COMPLETED = "Completed"
# A replica whose live pod a job restart stops (not failing: ReplicaFailure leaves it out).
STOPPING = "Stopping"


def incarnation(pod: Obj) -> int:
    """The pod's incarnation (its replica's restarts when it was created); 0 when unsaid."""
    value = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_INCARNATION, "0")
    try:
        return int(value)
    except ValueError:
        return 0


def restart_whole_job(
    pods: Iterable[DesiredPod],
    observed: Mapping[str, Obj],
    states: list[ReplicaState],
    restart: list[tuple[DesiredPod, Obj]],
    counts: dict[str, int],
) -> set[str]:
    """Widen this reconcile's restarts to every replica not ended for good (module
    docstring): each gets incarnation + 1 in `counts`, its live pod is added to `restart` (to
    be deleted) and its state becomes `Stopping` (`Restarting` for a pod that had ended).
    `states` and `restart` are changed in place; the names of every replica the job restart
    restarts are returned (those already restarting included)."""
    by_name = {d.name: d for d in pods}
    restarting = {d.name for d, _ in restart}
    members = set(restarting)
    for i, state in enumerate(states):
        if state.final or state.name in restarting:
            continue
        desired = by_name[state.name]
        pod = observed.get(state.name)
        counts[state.name] = counts.get(state.name, 0) + 1
        members.add(state.name)
        new_state = state.state
        if pod is not None and not pod["metadata"].get("deletionTimestamp"):
            restart.append((desired, pod))
            new_state = "Restarting" if state.state in ("Succeeded", "Failed") else STOPPING
        states[i] = replace(state, state=new_state, restarts=counts[state.name])
    return members


def waits(status: JobStatus, pods: Iterable[Obj], recorded: Mapping[str, int]) -> bool:
    """Whether the job's pods must not be created yet: a job restart is under way (its
    history entry is open) and a pod of an older incarnation than its replica's recorded
    restarts is still there, being stopped or not."""
    open_restart = any(
        e.action == "RestartJob" and e.recovered_time is None for e in status.restart_history or []
    )
    if not open_restart:
        return False
    return any(incarnation(pod) < recorded.get(pod["metadata"]["name"], 0) for pod in pods)
