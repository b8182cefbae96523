"""Two operator replicas with leader election, each a process of its own, kept running as their
Deployment would keep them: one that exits (killed, or ending itself after it lost the Lease) is
started again a second later. Each start gets a new identity (`a-1`, `a-2`, ...), so that the
Lease and the audit log tell the incarnations apart."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from t9kjobs.kube.transport import Transport
from t9kjobs.testing.harness.process import OperatorProcess
from tests.waiting import until

__all__ = ["LEASE", "Replicas"]

LEASE = "t9k-jobs-operator"


class Replicas:
    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        logs: Path,
        transport: Transport,
        flags: tuple[str, ...] = (),
    ) -> None:
        """`flags`: more of `t9kjobs operator`'s, for every replica."""
        self.kubeconfig = kubeconfig
        self.flags = flags
        self.namespace = namespace
        self.logs = logs
        self.transport = transport
        self.exits: list[tuple[str, int | None]] = []  # (identity, exit code), in order
        self._running: dict[str, tuple[str, OperatorProcess]] = {}  # slot -> (identity, process)
        self._starts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, daemon=True)

    def start(self, slots: tuple[str, ...] = ("a", "b")) -> None:
        for slot in slots:
            self._launch(slot)
        self._keeper.start()

    def _launch(self, slot: str) -> None:
        n = self._starts[slot] = self._starts.get(slot, 0) + 1
        identity = f"{slot}-{n}"
        flags: tuple[str, ...] = ("--leader-elect", "--leader-election-namespace", self.namespace)
        # Every verdict's Event, the routine Succeeded too: the tier checks that no verdict is
        # ever written without its Event, whatever kills the operator between the two.
        flags += ("--routine-events", *self.flags)
        process = OperatorProcess(
            self.kubeconfig,
            *flags,
            "--identity",
            identity,
            "--log-format",
            "json",
            "--log-level",
            "debug",  # the watches' starts and ends: what a stuck job's post-mortem needs
            log=self.logs / f"{identity}.log",
        )
        with self._lock:
            self._running[slot] = (identity, process)

    def _keep(self) -> None:
        while not self._stop.wait(0.2):
            with self._lock:
                ended = [(s, i, p) for s, (i, p) in self._running.items() if p.exited()]
            for slot, identity, process in ended:
                self.exits.append((identity, process.stop()))
                with self._lock:
                    del self._running[slot]
                if not self._stop.wait(1.0):
                    self._launch(slot)

    # -- who leads ---------------------------------------------------------------------------

    def holder(self) -> str | None:
        """The identity the Lease names (None if it cannot be read, or names nobody)."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{LEASE}"
        try:
            lease = self.transport.request("GET", path, timeout=5)
        except Exception:  # the API server restarting, say
            return None
        return str((lease.get("spec") or {}).get("holderIdentity") or "") or None

    def process(self, identity: str) -> OperatorProcess | None:
        with self._lock:
            return next((p for i, p in self._running.values() if i == identity), None)

    def alive(self, identity: str) -> bool:
        process = self.process(identity)
        return process is not None and not process.exited()

    def wait_leader(self, other_than: str = "", timeout: float = 90) -> tuple[str, float]:
        """A live replica other than `other_than` holding the Lease, and when it was seen."""

        def leader() -> tuple[str, float] | None:
            holder = self.holder()
            if holder and holder != other_than and self.alive(holder):
                return holder, time.time()
            return None

        return until(
            leader,
            timeout,
            interval=0.2,
            what=f"a live replica other than {other_than!r} to hold the Lease",
        )

    # -- faults ------------------------------------------------------------------------------

    def signal(self, identity: str, sig: signal.Signals) -> None:
        process = self.process(identity)
        assert process is not None, f"{identity} is not running"
        os.kill(process.pid, sig)

    def wait_exit(self, identity: str, timeout: float = 60) -> int | None:
        codes = until(
            lambda: [code for i, code in self.exits if i == identity],
            timeout,
            interval=0.1,
            what=f"{identity} to exit",
        )
        return codes[0]

    def stop(self) -> None:
        """SIGTERM every replica (a clean stop releases the Lease)."""
        self._stop.set()
        self._keeper.join(10)
        with self._lock:
            running = list(self._running.values())
        for identity, process in running:
            self.exits.append((identity, process.stop()))
