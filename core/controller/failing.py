"""What a reconcile does when it cannot go on: a job never stalls in silence, and never costs a
traceback a retry.

Three ways a job cannot go on, each ending it `Failed` once, with a reason, a message and a
Warning Event (a job that already finished is left alone):

* `InvalidSpec`: the plugins refuse the spec (a running job is kept, `Degraded`, instead);
* `OperatorError`: the operator's own code failed on the job (a plugin hook raised): nothing
  would change on a retry;
* `ChildRejected`: the API server refused a pod, Service or other child for good (a 4xx other
  than the transient ones below), with the server's message.

Transient failures (5xx, 401/403 such as an exceeded quota, 404, 408, 409, 410, 429, timeouts,
connection errors) are retried with the work queue's backoff and shown, while they last, as a
`Degraded` condition; the next successful reconcile clears it.
"""

from __future__ import annotations

from pydantic import ValidationError

from t9kjobs.kube.transport import ApiError
from t9kjobs.models import JobStatus
from t9kjobs.planner.conditions import set_condition
from t9kjobs.vocabulary import Obj

__all__ = [
    "MESSAGE_LIMIT",
    "CannotHandle",
    "ChildRejected",
    "cut",
    "degraded_status",
    "failed_status",
    "refused_for_good",
    "stored_status",
]


# Condition and Event messages are cut here: an Event's message is at most 1 KiB.
MESSAGE_LIMIT = 1000

_TRANSIENT_4XX = frozenset({401, 403, 404, 408, 409, 410, 429})


class CannotHandle(Exception):
    """The operator's own code (the planner, a plugin hook) failed on a job."""


class ChildRejected(Exception):
    """The API server refused to create or update one of a job's children, for good."""

    def __init__(self, obj: Obj, error: ApiError) -> None:
        meta = obj.get("metadata") or {}
        body = error.body if isinstance(error.body, dict) else {}
        detail = str(body.get("message") or error)
        super().__init__(f"the API server refused {obj.get('kind')} {meta.get('name')}: {detail}")
        self.error = error


def refused_for_good(error: ApiError) -> bool:
    """A 4xx answer that the same request will get again: 400, 413, 415, 422..."""
    return 400 <= error.status < 500 and error.status not in _TRANSIENT_4XX


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
    return out


def degraded_status(status: JobStatus, reason: str, message: str, now: str) -> JobStatus | None:
    """`status` with a Degraded condition saying why; None when nothing changed."""
    if status.finished:
        return None
    out = status.model_copy(deep=True)
    set_condition(out, "Degraded", True, reason, cut(message), now)
    return None if out == status else out
