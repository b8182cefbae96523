"""Lease-based leader election (coordination.k8s.io/v1), as client-go's: one replica
reconciles; the others wait and take over when the leader stops renewing its Lease.

Expiry is judged on this process's own monotonic clock from the moment it last saw the Lease
change, so replicas need no synchronised clocks.

No split brain. Another replica may take the Lease `lease_duration` after it saw our last
renewal, which the server received after we sent it. So this replica holds the right to write
(`holds()`, the transport's fence) for `renew_deadline` (< `lease_duration`) after the start of
its last successful renewal, and not a moment longer; every request of a renewal is bounded by
what is left of that deadline, so a hung API server cannot keep a renewal (and the replica's
belief that it leads) alive past it. The election has a client of its own: it never waits
behind the workers' rate limiter or connections. When the deadline passes, or the Lease shows
another holder, leadership is lost: `on_stopped` stops the workers and `run` returns False, and
the caller exits, as controller-runtime's managers do (a restart is the only clean way back to
a standby's state). SIGSTOP and SIGCONT are the same case: the fence is judged on a monotonic
clock that ran on while the process was stopped.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.vocabulary import Obj

__all__ = ["LeaderElector"]

log = logging.getLogger("t9kjobs.leader")


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        transport: Transport,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError(
                f"leader election needs retry period ({retry_period}s) < renew deadline"
                f" ({renew_deadline}s) < lease duration ({lease_duration}s)"
            )
        self.transport = transport
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.holder = ""  # the holder the Lease showed when last read
        self._observed: tuple[str, str] | None = None  # (holder, renewTime)
        self._observed_at = 0.0
        self._valid_until = 0.0
        self.is_leader = threading.Event()

    def holds(self) -> bool:
        """Whether this replica may still write: it leads, and its last renewal started less
        than the renew deadline ago."""
        return self.is_leader.is_set() and self.clock() < self._valid_until

    def _spec(self, transitions: int, acquire_time: str | None) -> Obj:
        now = _micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _call(self, method: str, path: str, deadline: float, body: Obj | None = None) -> Obj:
        """One request that cannot outlive `deadline` (a monotonic time)."""
        left = deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the renew deadline passed")
        return self.transport.request(method, path, body=body, timeout=left, total=left)

    def try_acquire_or_renew(self, deadline: float) -> bool:
        """One attempt to take or keep the Lease, every request bounded by `deadline`."""
        try:
            lease = self._call("GET", f"{self.path}/{self.name}", deadline)
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, None),
            }
            try:
                self._call("POST", self.path, deadline, body)
            except ApiError as create_exc:
                if create_exc.status == 409:
                    return False
                raise
            self.holder = self.identity
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        self.holder = holder
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = self.clock() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        acquire = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = self._spec(transitions, acquire)
        try:
            self._call("PUT", f"{self.path}/{self.name}", deadline, lease)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote it since we read it
                return False
            raise
        self.holder = self.identity
        return True

    def run(
        self, on_started: Callable[[], None], on_stopped: Callable[[], None], stop: threading.Event
    ) -> bool:
        """Block until leader, call `on_started`, renew until `stop` (then release the Lease)
        or until leadership is lost (then call `on_stopped`). False when it was lost: the
        caller should exit."""
        while not stop.is_set():
            started = self.clock()
            try:
                if self.try_acquire_or_renew(started + self.renew_deadline):
                    break
            except Exception as exc:
                log.warning("leader election: %s", exc)
            # Jittered as client-go's, so standbys do not all ask at once.
            stop.wait(self.retry_period * (1 + 1.2 * random.random()))
        if stop.is_set():
            return True
        self._valid_until = started + self.renew_deadline
        self.is_leader.set()
        log.info(
            "became leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity
        )
        on_started()
        renewed = started
        while True:
            left = renewed + self.renew_deadline - self.clock()
            if stop.wait(max(0.0, min(self.retry_period, left))):
                break
            started = self.clock()
            deadline = renewed + self.renew_deadline
            try:
                if started < deadline and self.try_acquire_or_renew(deadline):
                    renewed = started
                    self._valid_until = started + self.renew_deadline
                    continue
            except Exception as exc:
                log.warning("lease renewal failed: %s", exc)
            taken = self.holder not in ("", self.identity)
            if taken or self.clock() >= deadline:
                self.is_leader.clear()
                log.error(
                    "lost leadership of lease %s/%s (%s): stopping",
                    self.namespace,
                    self.name,
                    f"now held by {self.holder}" if taken else "not renewed in time",
                )
                on_stopped()
                return False
        self.release()
        return True

    def release(self) -> None:
        """Give the Lease up on a clean shutdown, so a standby takes over at once. The fence
        closes first, and writes already on their way get a moment to land: none of ours may
        arrive after the Lease names nobody."""
        if not self.holds():
            self.is_leader.clear()
            return
        deadline = self._valid_until
        self.is_leader.clear()
        time.sleep(0.2)
        try:
            lease = self._call("GET", f"{self.path}/{self.name}", deadline)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self._call("PUT", f"{self.path}/{self.name}", deadline, lease)
        except Exception as exc:
            log.warning("could not release the lease: %s", exc)
