"""`t9kjobs operator`, the manager: discovery, informers, the job controller, leader election,
endpoints, shutdown.

What keeps it working, and honest about it when it cannot (docs/reliability.md):

* start-up discovery is retried with backoff while `/readyz` says not ready, and the log says
  what it waits for: a flaky API server costs a delay, not a CrashLoopBackOff;
* every long-lived thread is supervised (`threads.Supervisor`): one that dies fails
  `/healthz` and ends the process, never leaves it alive and idle;
* with leader election, the Lease has a client of its own, writes are fenced by it, and a lost
  Lease stops the workers and ends the process (`leader`);
* CRDs installed after start-up are served without a restart: discovery runs again, and the
  informers of a new kind are started and handed over in a new `Cache`.

What the events of the informers become, and the workers, are the job controller's
(`t9kjobs.controller.jobs`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kubernetes import client as k8s_client

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.jobs import JobController
from t9kjobs.controller.leader import LeaderElector
from t9kjobs.controller.limit_ranges import LimitRangeWatch
from t9kjobs.controller.marks import KEY_SECRET, Marks, load_marks
from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.nodes import NodeWatch, node_of
from t9kjobs.controller.options import Options
from t9kjobs.controller.progress_reader import ProgressReader
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.controller.startup import (
    StartupError,
    configuration,
    listen,
    listen_webhook,
    preflight,
)
from t9kjobs.controller.threads import Supervisor
from t9kjobs.kube.informer import Informer, Store
from t9kjobs.kube.resources import (
    CHILD_RESOURCES,
    KUEUE_NAMESPACED,
    KUEUE_RESOURCES,
    Resource,
    child_resource,
    job_resource,
)
from t9kjobs.kube.slimming import slimmer
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP
from t9kjobs.objects import LABEL_OWNER_KIND
from t9kjobs.planner import ProgressSource
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Operator", "Options"]

log = logging.getLogger("t9kjobs.operator")

T = TypeVar("T")


class Operator:
    def __init__(
        self,
        options: Options,
        manager: PluginManager,
        cfg: k8s_client.Configuration | None = None,
    ) -> None:
        """`cfg`: where the API server is and how to authenticate (default: from
        `options.kubeconfig`, see `load_configuration`)."""
        self.options = options
        self.manager = manager
        # The child kinds to watch: the engine's own (Workloads with --kueue auto only) and
        # those the configured plugins declare: without its option, no right on a kind.
        self.child_resources = {
            **{
                k: r
                for k, r in CHILD_RESOURCES.items()
                if k != "Workload" or options.kueue == "auto"
            },
            **{k: child_resource(c) for k, c in manager.child_kinds().items()},
        }
        self.metrics = Metrics()
        cfg = cfg or configuration(options.kubeconfig)
        self.server = str(cfg.host)
        self.identity = options.identity or f"{socket.gethostname()}_{os.getpid()}"
        creators = 2 * options.workers
        self.transport = Transport(
            cfg,
            qps=options.qps,
            burst=options.burst,
            # A connection per thread that may await an answer: workers, creators, events, watches.
            pool_size=options.workers + creators + 16,
            on_request=self.metrics.api_request,
            identity=self.identity,
        )
        self.transport.impersonate = options.impersonate
        # The Lease's own client: a renewal never waits behind the workers' requests.
        self.election_transport = Transport(
            cfg, qps=0, pool_size=2, on_request=self.metrics.api_request, identity=self.identity
        )
        self.election_transport.impersonate = options.impersonate
        self.stop = threading.Event()
        self.supervisor = Supervisor(self.stop)
        self.informers: list[Informer] = []
        # Whose a child is: the claim of its ownerReference until the marks are loaded (no
        # child store exists before that: `run_controllers`).
        self._owner: Callable[[Obj], str | None] = Store.owner_uid
        self._synced = threading.Event()
        self.leading = threading.Event()
        self._reported: set[str] = set()
        self.events = EventRecorder(self.transport, self.identity)
        self.creator = ThreadPoolExecutor(creators, thread_name_prefix="create")
        # Until discovery says otherwise, no child kind is served.
        reconciler = Reconciler(
            self.transport,
            manager,
            Cache(
                absent_kinds=frozenset(self.child_resources), child_resources=self.child_resources
            ),
            self.events,
            creator=self.creator,
            routine_events=options.routine_events,
            metrics=self.metrics,
        )
        reconciler.kueue_policy = options.kueue_policy
        self.jobs = JobController(reconciler, options, self.metrics)
        self.nodes = NodeWatch.wired(options.lost_node_seconds, self.transport, self.jobs)
        reconciler.limit_ranges = LimitRangeWatch.wired(manager.child_kinds(), self.transport)
        # A job whose progress changed is queued like one whose child changed: batched.
        reconciler.progress = ProgressReader(
            self.transport,
            lambda key: self.jobs.queue.add_after(key, options.child_batch_period),
            interval=options.progress_interval,
            first_read_after=options.progress_interval,
            qps=options.progress_qps,
            current=lambda key, source: _owns(reconciler.cache, key, source),
        )

    @property
    def cache(self) -> Cache:
        """The informers' stores, as the reconciler reads them now."""
        return self.jobs.reconciler.cache

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

    def discover(self) -> tuple[dict[str, Resource], frozenset[str]]:
        """The plugin kinds whose CRD is installed, and the child kinds the cluster lacks."""
        served = self._served(f"{API_GROUP}/v1beta1")
        kinds = {
            kind: job_resource(info)
            for kind, info in sorted(self.manager.kinds.items())
            if kind in served
        }
        absent = frozenset(
            kind
            for kind, resource in self.child_resources.items()
            if resource.group and resource.kind not in self._served(resource.api_version)
        )
        return kinds, absent

    def _report(self, kinds: dict[str, Resource], absent: frozenset[str]) -> None:
        for kind in sorted(self.manager.kinds):
            self.metrics.kinds_served.labels(kind).set(1 if kind in kinds else 0)
            if kind not in kinds and kind not in self._reported:
                log.warning(
                    "kind %s is not served: its CRD is not installed (t9kjobs crds | kubectl"
                    " apply -f -); the other kinds are served",
                    kind,
                )
        for kind in sorted(absent - self._reported):
            log.info(
                "child kind %s is not served by this cluster: jobs that need it are Degraded,"
                " features that only use it are off",
                kind,
            )
        self._reported = set(self.manager.kinds) - set(kinds) | set(absent)

    # -- running -----------------------------------------------------------------------------

    def _serve(self, kinds: dict[str, Resource], absent: frozenset[str]) -> bool:
        """Start informers for the job kinds and child kinds not served yet, wait until they
        synced, then hand their stores to the reconciler. The maps are replaced, never changed
        in place, so a worker never sees one change under it. True when anything was added."""
        namespaces: list[str | None] = list(self.options.namespaces) or [None]
        cache = self.cache
        job_stores, job_resources = dict(cache.job_stores), dict(cache.job_resources)
        child_stores = dict(cache.child_stores)
        started: list[Informer] = []
        for kind, resource in kinds.items():
            if kind in job_stores:
                continue
            store = job_stores[kind] = Store()
            job_resources[kind] = resource
            started += [
                Informer(self.transport, resource, self.jobs.on_job, namespace=ns, store=store)
                for ns in namespaces
            ]
        for kind, resource in self.child_resources.items():
            if kind in absent or kind in child_stores:
                continue
            # The Pod store's nodeName index finds the pods a node event is about.
            index = node_of if kind == "Pod" and self.nodes is not None else None
            store = child_stores[kind] = Store(slimmer(kind), owner=self._owner, index=index)
            started += [
                Informer(
                    self.transport,
                    resource,
                    self.jobs.on_child,
                    namespace=ns,
                    label_selector=LABEL_OWNER_KIND,
                    store=store,
                )
                for ns in namespaces
            ]
        kueue_stores = dict(cache.kueue_stores)
        if "Workload" in child_stores and not kueue_stores:
            # Kueue's cluster-wide objects, where its Workloads are served (Cache.kueue): all
            # of them, few; a change of one queues no job (a job that waits on one looks again).
            for kind, resource in KUEUE_RESOURCES.items():
                store = kueue_stores[kind] = Store()
                scopes = namespaces if kind in KUEUE_NAMESPACED else [None]
                started += [
                    Informer(self.transport, resource, _ignore, namespace=ns, store=store)
                    for ns in scopes
                ]
        # Child informers first: a job reconciled before its children are cached would
        # create them again (harmlessly, AlreadyExists) and report them missing.
        started.sort(key=lambda i: i.resource.kind in job_resources)
        for informer in started:
            informer.start()
            self.supervisor.watch(informer.name, informer.thread)
            self.informers.append(informer)
        for informer in started:
            while not informer.synced.wait(1.0):
                if self.stop.is_set():
                    return False
        self.jobs.reconciler.cache = Cache(
            job_resources, job_stores, child_stores, absent, kueue_stores, self.child_resources
        )
        return bool(started)

    def _at_start(self, attempt: Callable[[], T], waiting: str) -> T | None:
        """`attempt()`, retried with backoff until it answers (None if stopped meanwhile);
        each failure logged: what is awaited (`waiting`), the time to the next try, why."""
        delay = 1.0
        while not self.stop.is_set():
            try:
                return attempt()
            except Exception as exc:
                log.warning("%s; next try in %.0fs: %s", waiting, delay, exc)
            self.stop.wait(delay)
            delay = min(delay * 2, 30.0)
        return None

    def _discover_at_start(self) -> tuple[dict[str, Resource], frozenset[str]] | None:
        """Discovery, retried until it answers."""
        return self._at_start(
            self.discover,
            f"waiting for the API server's discovery of {API_GROUP}/v1beta1 (not ready until"
            " it answers)",
        )

    def _marks_at_start(self) -> Marks | None:
        """The marks of what the operator makes (`t9kjobs.controller.marks`), retried until
        the key can be read or made."""
        namespace = self.options.leader_election_namespace or _own_namespace()
        return self._at_start(
            lambda: load_marks(self.transport, namespace),
            f"cannot read or make the ownership key, Secret {namespace}/{KEY_SECRET} (the"
            " operator needs get and create on it; not ready until then)",
        )

    def run_controllers(self) -> None:
        found = self._discover_at_start()
        if found is None:
            return
        marks = self._marks_at_start()
        if marks is None:
            return
        self._owner = marks.owner
        self.jobs.reconciler.trust(marks.mark, marks.owner)
        kinds, absent = found
        self._report(kinds, absent)
        self.metrics.watch_jobs(
            lambda: (
                (kind, o) for kind, store in self.cache.job_stores.items() for o in store.all()
            )
        )
        if not self._serve(kinds, absent):
            return  # stopped while the caches synced
        self.informers += self.nodes.start(self.supervisor) if self.nodes is not None else []
        if (limits := self.jobs.reconciler.limit_ranges) is not None:
            self.informers += limits.start(self.supervisor, self.options.namespaces)
        self._synced.set()
        log.info("caches synced: %d informer(s)", len(self.informers))
        self.jobs.start(self.supervisor)
        log.info("serving kinds: %s", ", ".join(sorted(self.cache.job_resources)) or "none")
        self.supervisor.spawn("discovery", self._rediscover)

    def _rediscover(self) -> None:
        """CRDs installed after start-up (a kind, PodGroup, TensorBoard) are served without a
        restart: discovery runs again every `discovery_interval` seconds."""
        while not self.stop.wait(self.options.discovery_interval):
            try:
                kinds, absent = self.discover()
            except Exception as exc:
                log.warning("discovery failed: %s", exc)
                continue
            self._report(kinds, absent)
            if self._serve(kinds, absent):
                log.info("now serving kinds: %s", ", ".join(sorted(self.cache.job_resources)))
                self.jobs.requeue_all()  # jobs that waited for a child kind

    def ready(self) -> bool:
        """Ready once the caches are synced; a standby replica is ready while it waits."""
        standby = self.options.leader_elect and not self.leading.is_set()
        return self._synced.is_set() or standby

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT: 0. 1 when a controller thread died or the Lease was
        lost: the process should exit, and its restart is the way back."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            if threading.current_thread() is threading.main_thread():
                signal.signal(sig, lambda *_: self.stop.set())
        servers = [
            listen(
                self.options.metrics_address,
                "--metrics-bind-address",
                self.metrics.registry,
                self.ready,
                self.supervisor.healthy,
            )
        ]
        try:
            servers.append(
                listen(
                    self.options.health_address,
                    "--health-probe-bind-address",
                    None,
                    self.ready,
                    self.supervisor.healthy,
                )
            )
            # Every replica answers admission, leading or not: it judges, reads nothing.
            o = self.options
            servers.append(listen_webhook(o.webhook_address, o.webhook_cert_dir, self.manager))
            preflight(self.election_transport, self.server)  # its own client: never queued
        except StartupError:
            for started in servers:
                if started is not None:
                    started.shutdown()
            raise
        self.metrics.time_gc()
        try:
            kept = True
            if not self.options.leader_elect:
                self.supervisor.spawn("controller", self.run_controllers, finishes=True)
                self.stop.wait()
            else:
                kept = self._elect()
            if self.supervisor.failure is not None:
                log.error("exiting: %s", self.supervisor.failure)
                return 1
            return 0 if kept else 1
        finally:
            self.metrics.untime_gc()
            self._shut_down()
            for server in servers:
                if server is not None:
                    server.shutdown()

    def _elect(self) -> bool:
        o = self.options
        elector = LeaderElector(
            self.election_transport,
            o.leader_election_namespace or _own_namespace(),
            o.leader_election_id,
            self.identity,
            lease_duration=o.lease_duration,
            renew_deadline=o.renew_deadline,
            retry_period=o.retry_period,
        )
        # No write of a worker, the events threads or a creator goes out once the Lease may
        # have passed to another replica.
        self.transport.fence = elector.holds

        def lead() -> None:
            self.leading.set()
            self.metrics.is_leader.set(1)
            self.supervisor.spawn("controller", self.run_controllers, finishes=True)

        def step_down() -> None:
            self.stop.set()  # the workers' end is the point, not a failure
            self.metrics.is_leader.set(0)
            self.jobs.stop()
            for informer in self.informers:
                informer.stop()

        return elector.run(lead, step_down, self.stop)

    def _shut_down(self) -> None:
        self.stop.set()
        self.jobs.stop()
        for informer in self.informers:
            informer.stop()
        self.creator.shutdown(wait=False, cancel_futures=True)
        self.events.close()


def _ignore(event: str, obj: Obj) -> None:
    """What a change of Kueue's cluster-wide objects queues: nothing (Cache.kueue)."""


def _own_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return os.environ.get("POD_NAMESPACE", "default")


def _owns(cache: Cache, key: JobKey, source: ProgressSource) -> bool:
    """Whether the cache holds the pod `source` names, of its uid: the job's own."""
    pods = cache.child_stores.get("Pod")
    pod = pods.get(key.namespace, source.pod) if pods is not None else None
    return pod is not None and pod["metadata"].get("uid") == source.uid
