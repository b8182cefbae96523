"""The operator's long-lived threads, none of which may die quietly.

A controller whose worker, informer or discovery thread died looks healthy from outside while it
reconciles nothing; with leader election it even goes on renewing its Lease, so no standby can
take over. So every such thread is started or registered here: one that raises, or ends while
the operator is not stopping, is logged with its traceback, fails `/healthz`, and stops the
operator, whose process then exits non-zero (a Deployment restarts it; a standby takes the
Lease, released on the way out).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Supervisor"]

log = logging.getLogger("t9kjobs.threads")


class Supervisor:
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.failure: str | None = None  # the first thread that died, and how
        self._watched: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def spawn(self, name: str, target: Callable[[], None], *, finishes: bool = False) -> None:
        """Run `target` in a daemon thread `name`. Its exception, or its return before `stop`
        unless it `finishes` (a start-up task), is a failure."""

        def run() -> None:
            try:
                target()
            except BaseException:
                if not self.stop.is_set():
                    self._fail(name, "died", exc_info=True)
                return
            if not finishes and not self.stop.is_set():
                self._fail(name, "ended")

        thread = threading.Thread(target=run, name=name, daemon=True)
        if not finishes:
            self.watch(name, thread)
        thread.start()

    def watch(self, name: str, thread: threading.Thread) -> None:
        """Count a thread started elsewhere (an informer's) among those that must not end."""
        with self._lock:
            self._watched[name] = thread

    def dead(self) -> list[str]:
        """Watched threads that ended (none while the operator stops on purpose)."""
        with self._lock:
            threads = list(self._watched.items())
        if self.stop.is_set() and self.failure is None:
            return []
        return sorted(name for name, thread in threads if thread.ident and not thread.is_alive())

    def healthy(self) -> bool:
        return self.failure is None and not self.dead()

    def _fail(self, name: str, how: str, *, exc_info: bool = False) -> None:
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = f"thread {name} {how}"
        log.error("controller thread %s %s: the operator stops", name, how, exc_info=exc_info)
        if first:
            self.stop.set()
