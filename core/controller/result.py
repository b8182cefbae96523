"""What a reconcile tells the work queue: done until something changes, or look again.

`reconcile` used to return `float | None`, where `0.0` meant "at once" and `None` "done": a
value a reader had to know. `Result` says it by name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AT_ONCE", "DONE", "Result"]


@dataclass(frozen=True)
class Result:
    """`requeue_after`: seconds until the job is reconciled again even if nothing changes
    (a deadline, a fold, a name held by another object); 0 at once (what this reconcile did
    is in the cache, and the next one takes it from there); None when only a change brings it
    back."""

    requeue_after: float | None = None

    @property
    def done(self) -> bool:
        return self.requeue_after is None

    @property
    def at_once(self) -> bool:
        return self.requeue_after == 0


DONE = Result()
AT_ONCE = Result(0.0)
