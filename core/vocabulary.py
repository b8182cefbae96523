"""The words every layer shares, defined once: `Obj` (a Kubernetes object as JSON) and `JobKey`
(which job a reconcile is about).

Objects stay JSON dicts end to end (the API's answers, the stores, the planner's output, the
plugins' pods): building model classes for every pod would cost more than the reconcile
(docs/architecture.md). Only jobs are parsed into models (`t9kjobs.models`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["JobKey", "Obj"]

Obj = dict[str, Any]


class JobKey(NamedTuple):
    """A job by kind, namespace and name: what the work queue holds and a reconcile is for."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, job: Obj) -> JobKey:
        """The key of a job object (its kind and metadata)."""
        meta = job["metadata"]
        return cls(job["kind"], meta["namespace"], meta["name"])

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
