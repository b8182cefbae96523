"""The status of a job that cannot go on: failed for good, or degraded while a cause lasts.

The controller decides nothing here: it says why (a reason and a message) and writes what
these functions return. A job that already finished is left alone: each returns None then, and
`degraded_status` also when the status would not change (no write for nothing).
"""

from __future__ import annotations

from pydantic import ValidationError

from t9kjobs.models import JobStatus
from t9kjobs.planner.conditions import set_condition, standing_reason
from t9kjobs.vocabulary import Obj

__all__ = ["MESSAGE_LIMIT", "cut", "degraded_status", "failed_status", "stored_status"]

# Condition and Event messages are cut here: an Event's message is at most 1 KiB.
MESSAGE_LIMIT = 1000


def cut(message: str) -> str:
    """`message`, cut to `MESSAGE_LIMIT` characters."""
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def stored_status(raw: Obj, model: type[JobStatus]) -> JobStatus:
    """The job's status as stored, or an empty one when the stored one does not parse."""
    try:
        return model.model_validate(raw.get("status") or {})
    except ValidationError:
        return model()


def failed_status(status: JobStatus, reason: str, message: str, now: str) -> JobStatus | None:
    """`status` ended Failed for `reason`; None when it had finished already."""
    if status.finished:
        return None
    out = status.model_copy(deep=True)
    out.phase = "Failed"
    out.completion_time = now
    set_condition(out, "Failed", True, reason, cut(message), now)
    out.reason = standing_reason(out)
    return out


def degraded_status(status: JobStatus, reason: str, message: str, now: str) -> JobStatus | None:
    """`status` with a Degraded condition saying why; None when nothing changed."""
    if status.finished:
        return None
    out = status.model_copy(deep=True)
    set_condition(out, "Degraded", True, reason, cut(message), now)
    return None if out == status else out
