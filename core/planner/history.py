"""`status.restartHistory`: an entry for each restart the engine performs, closed once the job
has recovered; the totals `stepsLost` and `lastRecoverySeconds`.

Entries are written by the plan that decides the restart, in the status write that precedes
the deletion of any pod (`t9kjobs.models.history`): a replay after a crash decides nothing
again (`t9kjobs.planner.replicas` sees the pods of older incarnations) and so writes nothing
again. Only jobs with a `spec.recoveryPolicy` get entries, so that older jobs' status stays as
it was (their restarts are in `restartCount`, `backoffCount` and the Restarting Events).

The operator counts its metrics from the entries a status write adds and closes
(`new_and_recovered`), compared with the status before it: a write that failed counts
nothing, and the retry counts once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from t9kjobs.kinds import ReplicaState
from t9kjobs.models import JobStatus
from t9kjobs.models.history import MAX_HISTORY_MESSAGE, MAX_RESTART_HISTORY, RestartRecord
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.failures import Failure
from t9kjobs.planner.rules import BUILTIN_LABEL, RESTART_POLICY, Decision
from t9kjobs.vocabulary import Obj

__all__ = [
    "close_recovered",
    "new_and_recovered",
    "record_restarts",
    "rule_name",
    "steps_lost",
]

_RULES_PREFIX = "spec.recoveryPolicy."


def steps_lost(step: int | None, checkpoint_step: int | None = None) -> int | None:
    """Training steps a restart makes the program do again: from the last checkpoint it
    resumes from to the step it reached; all of them without a checkpoint; None when the
    program reports no step."""
    if step is None:
        return None
    return max(0, step - (checkpoint_step or 0))


def rule_name(label: str) -> str:
    """The rule as the history names it: `bad-input`, `rules[2]`, `builtin:infrastructure`,
    `restartPolicy` (from the label the Events use, `bad-input (spec.recoveryPolicy.rules[0])`)."""
    if label in (BUILTIN_LABEL, RESTART_POLICY):
        return label
    name, _, _ = label.partition(" (")
    return name.removeprefix(_RULES_PREFIX)


def _finished_at(pod: Obj | None) -> str | None:
    for cs in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        for where in ("state", "lastState"):
            terminated = (cs.get(where) or {}).get("terminated") or {}
            if terminated.get("finishedAt"):
                return str(terminated["finishedAt"])
    return None


def _action(decision: Decision, job_restart: bool) -> str:
    if job_restart:
        return "RestartJob"
    return "Ignore" if decision.action == "Ignore" else "RestartReplica"


def _new_steps_lost(status: JobStatus, resume_step: int | None) -> int | None:
    """The steps the program will do again: those it reached since the checkpoint it resumes
    from (`resume_step`; none: all of them), when it reported any since the last restart."""
    progress = status.progress
    if progress is None or progress.step is None:
        return None
    history = status.restart_history or []
    if history and (progress.last_update_time or "") <= history[-1].time:
        return None  # no report since the last restart: its step was counted then
    return steps_lost(progress.step, resume_step)


def record_restarts(
    status: JobStatus,
    decided: Mapping[str, tuple[Decision, Failure]],
    job_restart: str | None,
    pods: Mapping[str, Obj],
    ts: str,
    resume_step: int | None = None,
) -> None:
    """An entry for each restart this plan decided (`decided`, in the order of the job's
    replicas), the oldest dropped past `MAX_RESTART_HISTORY`; `status.stepsLost` grows.
    `resume_step`: the step of the checkpoint the restarted pods resume from."""
    lost = _new_steps_lost(status, resume_step)
    for name, (decision, failure) in decided.items():
        pod = pods.get(name)
        message = failure.describe(name)
        entry = RestartRecord(
            time=ts,
            failure_time=_finished_at(pod),
            replica=name,
            action=_action(decision, name == job_restart),
            reason=failure.reason,
            exit_code=failure.exit_code,
            node=((pod or {}).get("spec") or {}).get("nodeName"),
            rule=rule_name(decision.rule),
            budget=decision.budget or "None",
            steps_lost=lost,
            message=message[:MAX_HISTORY_MESSAGE],
        )
        if lost is not None:
            status.steps_lost = (status.steps_lost or 0) + lost
            lost = 0  # the job lost them once, whatever number of replicas failed
        status.restart_history = [*(status.restart_history or []), entry][-MAX_RESTART_HISTORY:]


def close_recovered(status: JobStatus, states: Sequence[ReplicaState], ts: str) -> None:
    """Every open entry closed at `ts` when every replica is Running or Succeeded again;
    `lastRecoverySeconds` from the newest one's failure (else decision) to now."""
    if not states or not all(s.state in ("Running", "Succeeded") for s in states):
        return
    closed: RestartRecord | None = None
    for entry in status.restart_history or []:
        if entry.recovered_time is None:
            entry.recovered_time = ts
            closed = entry
    if closed is not None:
        began = parse_time(closed.failure_time or closed.time)
        status.last_recovery_seconds = max(0, round((parse_time(ts) - began).total_seconds()))


def _key(entry: Obj) -> tuple[object, ...]:
    return (entry.get("time"), entry.get("replica"), entry.get("action"))


def new_and_recovered(
    before: Iterable[Obj], after: Iterable[Obj]
) -> tuple[list[Obj], list[tuple[Obj, float]]]:
    """The entries `after` (a written status's history) adds to `before` (the stored one's),
    and those it closes with the seconds each took to recover: what the metrics count."""
    old = {_key(e): e for e in before}
    added, recovered = [], []
    for entry in after:
        known = old.get(_key(entry))
        if known is None:
            added.append(entry)
        if entry.get("recoveredTime") and (known is None or not known.get("recoveredTime")):
            began = parse_time(str(entry.get("failureTime") or entry["time"]))
            seconds = (parse_time(str(entry["recoveredTime"])) - began).total_seconds()
            recovered.append((entry, max(0.0, seconds)))
    return added, recovered
