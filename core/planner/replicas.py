"""Each replica's state from its pod, and the restart decision its policy makes.

A restart is recorded in the job's status (`replicas[].restartCount`, `backoffCount`) in the same
write that precedes deleting the failed pod; the replacement pod carries its incarnation in an
annotation. A failed pod whose incarnation is below the recorded count was already counted, so a
crash between the status write and the delete never counts a restart twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from t9kjobs.kinds import ReplicaState
from t9kjobs.models import RETRYABLE_EXIT_CODES, Lifecycle
from t9kjobs.objects import ANNOTATION_INCARNATION, DesiredPod, Obj

__all__ = ["Assessment", "assess", "exit_code_of", "exit_of", "pod_state"]


def pod_state(pod: Obj | None) -> str:
    if pod is None:
        return "Creating"
    if pod["metadata"].get("deletionTimestamp"):
        return "Deleted"
    return str((pod.get("status") or {}).get("phase") or "Pending")


def exit_of(pod: Obj, training_container: str | None) -> tuple[str, int] | None:
    """(container, exit code) of the training container, else of the first container with a
    non-zero one, else of the first that terminated; None while none has terminated."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    codes: dict[str, int] = {}
    for cs in statuses:
        terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        if terminated and terminated.get("exitCode") is not None:
            codes[str(cs.get("name"))] = int(terminated["exitCode"])
    if training_container in codes:
        return str(training_container), codes[str(training_container)]
    nonzero = [(name, code) for name, code in codes.items() if code != 0]
    if nonzero:
        return nonzero[0]
    return next(iter(codes.items()), None)


def exit_code_of(pod: Obj, training_container: str | None) -> int | None:
    """The exit code `exit_of` reports, if any."""
    found = exit_of(pod, training_container)
    return found[1] if found else None


def _incarnation(pod: Obj) -> int:
    value = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_INCARNATION, "0")
    try:
        return int(value)
    except ValueError:
        return 0


@dataclass
class Assessment:
    """All replicas of a job, and the restarts this reconcile decides."""

    states: list[ReplicaState]
    restart: list[tuple[DesiredPod, Obj]]  # (replica, finished pod to delete and recreate)
    performed: dict[str, int]  # pod name -> restarts performed before this reconcile
    restarts_recorded: dict[str, int]  # pod name -> restarts after this reconcile
    backoff_performed: int  # restarts of all replicas performed before this reconcile
    backoff_count: int  # ... and after it
    backoff_exceeded: ReplicaState | None


def assess(
    pods: list[DesiredPod],
    observed: dict[str, Obj],
    recorded: dict[str, int],
    backoff_count: int,
    life: Lifecycle,
) -> Assessment:
    """Each replica's state under its restart policy, and which finished pods to replace.

    A replica whose restart is refused (its `limit` reached, or the job's `backoffLimit`) stays
    as it ended: Succeeded, or Failed for good. Only a refused restart of a *failed* replica
    exhausts the backoff budget (`backoff_exceeded`); a succeeded one under `Always` just stops.
    A replica being replaced is `Restarting`, whether its pod failed or (`Always`) succeeded,
    so that no framework takes it for finished.
    """
    performed = dict(recorded)
    for desired in pods:
        pod = observed.get(desired.name)
        if pod is not None:
            # A pod of incarnation n proves n restarts, whatever the status says (a status
            # restored from a backup, say): never count fewer than were performed.
            performed[desired.name] = max(performed.get(desired.name, 0), _incarnation(pod))
    backoff_count = max(backoff_count, sum(performed.get(p.name, 0) for p in pods))
    backoff_before = backoff_count
    states: list[ReplicaState] = []
    restart: list[tuple[DesiredPod, Obj]] = []
    counts = dict(performed)
    exceeded: ReplicaState | None = None
    for desired in pods:
        pod = observed.get(desired.name)
        state = pod_state(pod)
        done = counts.get(desired.name, 0)
        exited = exit_of(pod, desired.training_container) if pod is not None else None
        container, code = exited if exited else (None, None)
        rule = desired.restart
        finished = state in ("Succeeded", "Failed")
        wants_restart = finished and (
            rule.policy == "Always"
            or (state == "Failed" and rule.policy == "OnFailure")
            or (state == "Failed" and rule.policy == "ExitCode" and code in RETRYABLE_EXIT_CODES)
        )
        final = False
        if pod is not None and finished and _incarnation(pod) < done:
            # Counted by an earlier reconcile that did not get to delete the pod.
            restart.append((desired, pod))
            state = "Restarting"
        elif not wants_restart:
            final = finished
        elif rule.limit is not None and done >= rule.limit:
            final = True
        elif life.backoff_limit is not None and backoff_count >= life.backoff_limit:
            final = True
            if state == "Failed" and exceeded is None:
                exceeded = ReplicaState(
                    desired.replica_type,
                    desired.index,
                    desired.name,
                    state,
                    code,
                    True,
                    done,
                    container,
                )
        elif pod is not None:
            restart.append((desired, pod))
            counts[desired.name] = done + 1
            backoff_count += 1
            state = "Restarting"
        states.append(
            ReplicaState(
                desired.replica_type,
                desired.index,
                desired.name,
                state,
                code,
                final,
                counts.get(desired.name, 0),
                container,
            )
        )
    return Assessment(states, restart, performed, counts, backoff_before, backoff_count, exceeded)
