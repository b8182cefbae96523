"""What the client raises: one exception type per thing a caller may want to handle, each with
a message a person can read, never an HTTP body.

Every exception is a `ClientError`. A job refused (by our checks before anything is sent, or
by the API server's schema and CEL rules) is `JobInvalid`, with each problem's field path; an
answer of the API server is `from_api_error`'s mapping of its status and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t9kjobs.kinds import Problem
from t9kjobs.kube.transport import ApiError

__all__ = [
    "ApiFailure",
    "ClientError",
    "Forbidden",
    "JobEnded",
    "JobExists",
    "JobInvalid",
    "JobNotFound",
    "NoCluster",
    "NoLog",
    "UnknownKind",
    "WaitTimeout",
    "from_api_error",
]


class ClientError(Exception):
    """Anything the client could not do; its message says what and why, in one line."""


class NoCluster(ClientError):
    """No cluster to talk to: no kubeconfig and not in a pod, or the API server unreachable."""


class UnknownKind(ClientError):
    """A kind no loaded plugin serves."""


class JobInvalid(ClientError):
    """A job refused, with every problem's field path (`spec.replicaSpecs[0].replicas`)."""

    def __init__(self, what: str, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        said = "; ".join(str(p) for p in self.problems) or "refused"
        super().__init__(f"{what} is invalid: {said}")

    @property
    def fields(self) -> list[str]:
        return [p.path for p in self.problems]


class JobNotFound(ClientError):
    """No job of that kind and name in the namespace."""


class JobExists(ClientError):
    """A job of that kind and name exists already."""


class Forbidden(ClientError):
    """The API server refused the request to this user (RBAC, an admission policy)."""


class NoLog(ClientError):
    """A replica's log cannot be read: its pod is gone, not started, or on a simulated node."""


class WaitTimeout(ClientError):
    """A wait ended at its timeout; `job` is the job as last seen."""

    def __init__(self, message: str, job: Any = None) -> None:
        super().__init__(message)
        self.job = job


class JobEnded(ClientError):
    """A job finished in a phase other than the one waited for (Failed while waiting for
    Succeeded); `job` is the finished job."""

    def __init__(self, message: str, job: Any = None) -> None:
        super().__init__(message)
        self.job = job


class ApiFailure(ClientError):
    """Any other refusal of the API server: its HTTP status, reason and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{reason or 'HTTP ' + str(status)}: {message}")


def _causes(body: Any) -> list[Problem]:
    details = body.get("details") if isinstance(body, dict) else None
    causes = (details or {}).get("causes") or []
    return [
        Problem(str(c.get("field") or "<object>"), str(c.get("message") or c.get("reason") or ""))
        for c in causes
        if isinstance(c, dict)
    ]


def from_api_error(exc: ApiError, what: str) -> ClientError:
    """The exception for the API server's refusal `exc` of a request about `what`
    (`GenericJob/mnist in namespace team-a`)."""
    message = str(exc.body.get("message", "")) if isinstance(exc.body, dict) else ""
    message = message or (str(exc.body)[:300] if exc.body else f"HTTP {exc.status}")
    reason = exc.reason
    if exc.status == 404:
        return JobNotFound(f"{what} not found")
    if exc.status == 409 and reason == "AlreadyExists":
        return JobExists(f"{what} exists already")
    if exc.status == 422 or reason == "Invalid":
        problems = _causes(exc.body) or [Problem("<object>", message)]
        return JobInvalid(what, problems)
    if exc.status == 403:
        return Forbidden(f"{what}: forbidden: {message}")
    return ApiFailure(exc.status, reason, message)
