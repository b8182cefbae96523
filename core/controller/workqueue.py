"""A work queue of job keys, as client-go's: a key is queued at most once, never handed to two
workers at once (a key added while it is processed is queued again when it is done), retried
with a per-key exponential backoff on failure, and can be added after a delay (deadlines, and
the batching of child changes). A key waits in the delay at most once: adding it again keeps the
earlier due time, so a burst of changes to one job costs one reconcile, as client-go's delaying
queue does. Dropping the later time is safe: every reconcile returns its own next deadline.

An **urgent** key (a job one of whose pods has finished: its verdict may be due) is handed out
before every key that is not. Measured in a burst of 5,000 jobs (docs/benchmarks.md): with one
first-in-first-out line, a job whose master finished waited behind every job not yet started,
up to 118 s for its verdict; the urgent keys are few (one or two a job), so the jobs waiting to
start lose little. A key is in one line at a time as far as workers can tell: it may sit in both,
and the entry found second is passed over (it is no longer dirty, or it is being processed)."""

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
        self._urgent_queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._urgent: set[K] = set()  # dirty keys to hand out first
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}  # the due time of each delayed key; heap entries
        # whose time differs are stale (the key was re-added earlier) and skipped
        self._waiting_urgent: set[K] = set()  # delayed keys any of whose adds was urgent
        self._failures: dict[K, int] = {}
        self._seq = 0
        self._cond = threading.Condition()
        self._shutdown = False
        self._base = base_delay
        self._max = max_delay

    def __len__(self) -> int:
        """Keys waiting for a worker (not those being processed, even if dirty again)."""
        with self._cond:
            return len(self._dirty) - sum(1 for k in self._processing if k in self._dirty)

    def add(self, key: K, urgent: bool = False) -> None:
        with self._cond:
            self._add(key, urgent)

    def _add(self, key: K, urgent: bool) -> None:
        if self._shutdown:
            return
        if key in self._dirty:
            if urgent and key not in self._urgent:  # queued already: move it up the line
                self._urgent.add(key)
                if key not in self._processing:
                    self._urgent_queue.append(key)
                    self._cond.notify()
            return
        self._dirty.add(key)
        if urgent:
            self._urgent.add(key)
        if key not in self._processing:
            (self._urgent_queue if urgent else self._queue).append(key)
            self._cond.notify()

    def add_after(self, key: K, delay: float, urgent: bool = False) -> None:
        if delay <= 0:
            self.add(key, urgent)
            return
        due = time.monotonic() + delay
        with self._cond:
            if self._shutdown:
                return
            if urgent and key in self._waiting:
                self._waiting_urgent.add(key)
            if self._waiting.get(key, due + 1) <= due:
                return
            if urgent:
                self._waiting_urgent.add(key)
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
            urgent = key in self._waiting_urgent
            self._waiting_urgent.discard(key)
            self._add(key, urgent)
        return self._delayed[0][0] - now if self._delayed else None

    def _pop(self) -> K | None:
        """The next key a worker may take, urgent ones first; None if there is none. Entries
        of keys no longer dirty or being processed are stale copies, dropped here."""
        for line in (self._urgent_queue, self._queue):
            while line:
                key = line.popleft()
                if key in self._dirty and key not in self._processing:
                    return key
        return None

    def get(self) -> K | None:
        """The next key to process (blocks); None once the queue is shut down, even if keys
        are still queued: a worker that outlives the shutdown (a replica that lost its Lease)
        must not reconcile anything more."""
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                wait = self._promote_due()
                key = self._pop()
                if key is not None:
                    self._dirty.discard(key)
                    self._urgent.discard(key)
                    self._processing.add(key)
                    return key
                self._cond.wait(timeout=wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                (self._urgent_queue if key in self._urgent else self._queue).append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
