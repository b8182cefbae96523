"""A work queue of job keys, as client-go's: a key is queued at most once, never handed to two
workers at once (a key added while it is processed is queued again when it is done), retried
with a per-key exponential backoff on failure, and can be added after a delay (deadlines, and
the batching of child changes). A key waits in the delay at most once: adding it again keeps the
earlier due time, so a burst of changes to one job costs one reconcile, as client-go's delaying
queue does. Dropping the later time is safe: every reconcile returns its own next deadline."""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from typing import Generic, TypeVar

__all__ = ["WorkQueue"]

K = TypeVar("K")


class WorkQueue(Generic[K]):
    def __init__(self, base_delay: float = 0.05, max_delay: float = 60.0) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}  # the due time of each delayed key; heap entries
        # whose time differs are stale (the key was re-added earlier) and skipped
        self._failures: dict[K, int] = {}
        self._seq = 0
        self._cond = threading.Condition()
        self._shutdown = False
        self._base = base_delay
        self._max = max_delay

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def add(self, key: K) -> None:
        with self._cond:
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        with self._cond:
            if self._shutdown or self._waiting.get(key, due + 1) <= due:
                return
            self._waiting[key] = due
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Add `key` after its backoff (doubling with each failure in a row); the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay: float = min(self._base * 2.0**n, self._max)
        self.add_after(key, delay)
        return delay

    def failures(self, key: K) -> int:
        """How many times in a row `key` failed (since its last `forget`)."""
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        """Move due delayed keys to the queue; seconds until the next one is due."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._waiting.get(key) != due:
                continue
            del self._waiting[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self) -> K | None:
        """The next key to process (blocks); None once the queue is shut down, even if keys
        are still queued: a worker that outlives the shutdown (a replica that lost its Lease)
        must not reconcile anything more."""
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                wait = self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                self._cond.wait(timeout=wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
