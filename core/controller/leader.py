"""Lease-based leader election (coordination.k8s.io/v1), as client-go's: one replica
reconciles; the others wait and take over when the leader stops renewing its Lease.

Expiry is judged on this process's own monotonic clock from the moment it last saw the Lease
change, so replicas need no synchronised clocks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from t9kjobs.controller.transport import ApiError, Transport

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
    ) -> None:
        self.transport = transport
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._observed: tuple[str, str] | None = None  # (holder, renewTime)
        self._observed_at = 0.0
        self.is_leader = threading.Event()

    def _spec(self, transitions: int, acquire_time: str | None) -> dict[str, Any]:
        now = _micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        try:
            lease = self.transport.request("GET", f"{self.path}/{self.name}")
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
                self.transport.request("POST", self.path, body=body)
            except ApiError as create_exc:
                if create_exc.status == 409:
                    return False
                raise
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = time.monotonic() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        acquire = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = self._spec(transitions, acquire)
        try:
            self.transport.request("PUT", f"{self.path}/{self.name}", body=lease)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def run(self, on_started: Callable[[], None], stop: threading.Event) -> bool:
        """Block until leader, call `on_started`, renew until `stop` or until renewal fails for
        `renew_deadline`. Returns False when leadership was lost (the caller should exit)."""
        while not stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    break
            except Exception as exc:
                log.warning("leader election: %s", exc)
            stop.wait(self.retry_period)
        if stop.is_set():
            return True
        log.info(
            "became leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity
        )
        self.is_leader.set()
        threading.Thread(target=on_started, name="controller", daemon=True).start()
        last_renew = time.monotonic()
        while not stop.wait(self.retry_period):
            try:
                if self.try_acquire_or_renew():
                    last_renew = time.monotonic()
                    continue
            except Exception as exc:
                log.warning("lease renewal failed: %s", exc)
            if time.monotonic() - last_renew > self.renew_deadline:
                log.error("lost leadership of lease %s/%s", self.namespace, self.name)
                self.is_leader.clear()
                return False
        self.release()
        return True

    def release(self) -> None:
        """Give the lease up on a clean shutdown, so a standby takes over at once."""
        try:
            lease = self.transport.request("GET", f"{self.path}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self.transport.request("PUT", f"{self.path}/{self.name}", body=lease)
        except Exception as exc:
            log.warning("could not release the lease: %s", exc)
        self.is_leader.clear()
