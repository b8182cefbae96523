"""Conditions and timestamps: a condition's lastTransitionTime moves only when its status does."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from t9kjobs.models.status import ConditionType, JobCondition, JobStatus

__all__ = ["first_created", "last_change", "parse_time", "rfc3339", "set_condition"]


def rfc3339(now: datetime) -> str:
    """`now` as the API server writes a Time: UTC, whole seconds (`2026-01-01T12:00:00Z`).
    By `isoformat`, not `strftime` (the C library's, behind a rewrite of the format): a plan
    writes several, and strftime was 2% of the operator's CPU on the benchmark (issue #50)."""
    return now.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def parse_time(text: str) -> datetime:
    """A time as the API server writes it: RFC 3339 in seconds (`2026-01-01T12:00:00Z`, a
    condition's) or with a fraction (a MicroTime, an Event's `eventTime`); UTC when no zone."""
    parsed = datetime.fromisoformat(text)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)


def first_created(objs: Iterable[dict[str, Any]]) -> datetime | None:
    """The earliest creationTimestamp of `objs`; None when none of them has one."""
    times = [
        parse_time(str(o["metadata"]["creationTimestamp"]))
        for o in objs
        if o["metadata"].get("creationTimestamp")
    ]
    return min(times, default=None)


def last_change(pod: dict[str, Any]) -> datetime | None:
    """The newest time a pod's status records (its conditions' transitions, its containers'
    starts and ends): when it last changed; None when it records none."""
    status = pod.get("status") or {}
    stamps = [c.get("lastTransitionTime") for c in status.get("conditions") or []]
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        for state in (cs.get("state") or {}).values():
            if isinstance(state, dict):
                stamps += [state.get("startedAt"), state.get("finishedAt")]
    times = []
    for stamp in stamps:
        try:
            times.append(parse_time(str(stamp)))
        except ValueError:
            continue
    return max(times, default=None)


def set_condition(
    status: JobStatus,
    type_: ConditionType,
    value: bool,
    reason: str,
    message: str,
    now: str,
) -> None:
    new_status: Literal["True", "False"] = "True" if value else "False"
    current = status.condition(type_)
    if current is None:
        status.conditions.append(
            JobCondition(
                type=type_,
                status=new_status,
                reason=reason,
                message=message,
                last_transition_time=now,
            )
        )
        return
    if current.status != new_status:
        current.last_transition_time = now
    current.status = new_status
    current.reason = reason
    current.message = message


def standing_reason(status: JobStatus) -> str | None:
    """`status.reason`: why a job stands where it does, when it does not go on by itself (the
    reason of its Failed condition, or, while it is unfinished, of a False Admitted condition:
    it waits in a queue; or of a False Scheduled one: its gang waits for room; or `Stalled`
    while its progress has stopped; or, while a restart is under way, the reason of the failure
    it recovers from)."""
    failed, scheduled = status.condition("Failed"), status.condition("Scheduled")
    admitted = status.condition("Admitted")
    if failed is not None and failed.status == "True":
        return failed.reason
    if admitted is not None and admitted.status == "False" and not status.finished:
        return admitted.reason
    if scheduled is not None and scheduled.status == "False" and not status.finished:
        return scheduled.reason
    stalled = status.condition("Stalled")
    if stalled is not None and stalled.status == "True" and not status.finished:
        return "Stalled"  # its progress stopped (t9kjobs.planner.stall)
    if not status.finished:
        # A restart under way: the failure it recovers from (`t9kjobs.planner.history`).
        return next(
            (e.reason for e in reversed(status.restart_history or []) if e.recovered_time is None),
            None,
        )
    return None
