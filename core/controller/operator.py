"""`t9kjobs operator`: discovery, informers, workers, leader election, endpoints, shutdown."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from t9kjobs.controller.informer import Informer, Store
from t9kjobs.controller.leader import LeaderElector
from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.reconciler import JobKey, Reconciler
from t9kjobs.controller.resources import CHILD_RESOURCES, Resource, job_resource
from t9kjobs.controller.server import serve
from t9kjobs.controller.transport import ApiError, Transport, load_configuration
from t9kjobs.controller.workqueue import WorkQueue
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP
from t9kjobs.objects import LABEL_OWNER_KIND

__all__ = ["Operator", "Options"]

log = logging.getLogger("t9kjobs.operator")
Obj = dict[str, Any]


@dataclass
class Options:
    kubeconfig: str | None = None
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    workers: int = 8
    qps: float = 50.0
    burst: int = 100
    leader_elect: bool = False
    leader_election_namespace: str = ""
    leader_election_id: str = "t9k-jobs-operator"
    metrics_address: str = "127.0.0.1:8080"
    health_address: str = "127.0.0.1:8081"
    identity: str = ""
    impersonate: str | None = None


class Operator:
    def __init__(self, options: Options, manager: PluginManager) -> None:
        self.options = options
        self.manager = manager
        self.metrics = Metrics()
        cfg = load_configuration(options.kubeconfig)
        self.transport = Transport(
            cfg,
            qps=options.qps,
            burst=options.burst,
            pool_size=options.workers + 16,
            on_request=self.metrics.api_request,
        )
        self.transport.impersonate = options.impersonate
        self.identity = options.identity or f"{socket.gethostname()}_{os.getpid()}"
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self.stop = threading.Event()
        self.informers: list[Informer] = []
        self.job_stores: dict[str, Store] = {}
        self.job_resources: dict[str, Resource] = {}
        self.child_stores: dict[str, Store] = {}
        self._synced = threading.Event()
        self.leading = threading.Event()

    # -- discovery ---------------------------------------------------------------------------

    def _served(self, group_version: str) -> set[str]:
        """Kinds the API server serves in a group/version (empty when it serves none)."""
        try:
            answer = self.transport.request("GET", f"/apis/{group_version}")
        except ApiError as exc:
            if exc.status == 404:
                return set()
            raise
        return {r["kind"] for r in answer.get("resources", []) if "/" not in r["name"]}

    def discover(self) -> frozenset[str]:
        """Serve each plugin kind whose CRD is installed; return the absent child kinds."""
        served = self._served(f"{API_GROUP}/v1beta1")
        for kind, info in sorted(self.manager.kinds.items()):
            if kind in served:
                self.job_resources[kind] = job_resource(info)
                self.metrics.kinds_served.labels(kind).set(1)
            else:
                self.metrics.kinds_served.labels(kind).set(0)
                log.warning(
                    "kind %s is not served: its CRD is not installed (t9kjobs crds | kubectl"
                    " apply -f -); the other kinds are served",
                    kind,
                )
        absent = set()
        for kind, resource in CHILD_RESOURCES.items():
            if resource.group and kind not in self._served(resource.api_version):
                absent.add(kind)
                log.info("child kind %s is not served by this cluster", kind)
        return frozenset(absent)

    # -- events -> queue ---------------------------------------------------------------------

    def _on_job(self, event: str, obj: Obj) -> None:
        if event != "DELETED":
            meta = obj["metadata"]
            self.queue.add((obj["kind"], meta["namespace"], meta["name"]))

    def _on_child(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") in self.job_resources
                and str(ref.get("apiVersion", "")).startswith(API_GROUP + "/")
            ):
                self.queue.add((ref["kind"], meta["namespace"], ref["name"]))

    # -- running -----------------------------------------------------------------------------

    def _start_informers(self, absent: frozenset[str]) -> None:
        namespaces: list[str | None] = list(self.options.namespaces) or [None]
        for kind, resource in self.job_resources.items():
            store = self.job_stores[kind] = Store()
            for ns in namespaces:
                self.informers.append(
                    Informer(self.transport, resource, self._on_job, namespace=ns, store=store)
                )
        for kind, resource in CHILD_RESOURCES.items():
            if kind in absent:
                continue
            store = self.child_stores[kind] = Store()
            for ns in namespaces:
                self.informers.append(
                    Informer(
                        self.transport,
                        resource,
                        self._on_child,
                        namespace=ns,
                        label_selector=LABEL_OWNER_KIND,
                        store=store,
                    )
                )
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            while not informer.synced.wait(1.0):
                if self.stop.is_set():
                    return
        self._synced.set()
        log.info("caches synced: %d informer(s)", len(self.informers))

    def _work(self, reconciler: Reconciler) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            self.metrics.queue_depth.set(len(self.queue))
            kind = key[0]
            started = time.monotonic()
            try:
                requeue = reconciler.reconcile(key)
            except ApiError as exc:
                result = "conflict" if exc.status == 409 else "error"
                if exc.status != 409:
                    log.warning(
                        "reconcile failed: %s",
                        exc,
                        extra={"kind": kind, "job": f"{key[1]}/{key[2]}"},
                    )
                self.queue.add_rate_limited(key)
            except Exception:
                result = "error"
                log.exception("reconcile failed", extra={"kind": kind, "job": f"{key[1]}/{key[2]}"})
                self.queue.add_rate_limited(key)
            else:
                result = "ok"
                self.queue.forget(key)
                if requeue is not None:
                    self.queue.add_after(key, requeue + 0.5)
            finally:
                self.queue.done(key)
                self.metrics.reconciles.labels(kind, result).inc()
                self.metrics.reconcile_seconds.labels(kind).observe(time.monotonic() - started)

    def run_controllers(self) -> None:
        absent = self.discover()
        if not self.job_resources:
            log.error("no kind is served: install the CRDs (kubectl apply -f crds/)")
        self.metrics.watch_jobs(
            lambda: (
                (kind, str((o.get("status") or {}).get("phase") or "Pending"))
                for kind, store in self.job_stores.items()
                for o in store.all()
            )
        )
        self._start_informers(absent)
        reconciler = Reconciler(
            self.transport,
            self.manager,
            self.job_resources,
            self.job_stores,
            self.child_stores,
            absent,
            identity=self.identity,
        )
        for i in range(self.options.workers):
            threading.Thread(
                target=self._work, args=(reconciler,), name=f"worker-{i}", daemon=True
            ).start()
        log.info("serving kinds: %s", ", ".join(sorted(self.job_resources)) or "none")

    def ready(self) -> bool:
        """Ready once the caches are synced; a standby replica is ready while it waits."""
        standby = self.options.leader_elect and not self.leading.is_set()
        return self._synced.is_set() or standby

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            if threading.current_thread() is threading.main_thread():
                signal.signal(sig, lambda *_: self.stop.set())
        servers = [
            serve(self.options.metrics_address, self.metrics.registry, self.ready),
            serve(self.options.health_address, None, self.ready),
        ]
        try:
            if not self.options.leader_elect:
                self.run_controllers()
                self.stop.wait()
                return 0
            namespace = self.options.leader_election_namespace or _own_namespace()
            elector = LeaderElector(
                self.transport, namespace, self.options.leader_election_id, self.identity
            )

            def lead() -> None:
                self.leading.set()
                self.metrics.is_leader.set(1)
                self.run_controllers()

            kept = elector.run(lead, self.stop)
            return 0 if kept else 1
        finally:
            self.stop.set()
            self.queue.shutdown()
            for informer in self.informers:
                informer.stop()
            for server in servers:
                if server is not None:
                    server.shutdown()


def _own_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return os.environ.get("POD_NAMESPACE", "default")
