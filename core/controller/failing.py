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

This module names the causes (what the API server's answer means); the statuses they lead to
are the planner's (`t9kjobs.planner.failure`).
"""

from __future__ import annotations

from t9kjobs.kube.transport import ApiError
from t9kjobs.vocabulary import Obj

__all__ = ["CannotHandle", "ChildRejected", "refused_for_good"]


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
