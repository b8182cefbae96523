"""`t9kjobs operator`: discovery, informers, workers, leader election, endpoints, shutdown.

What keeps it working, and honest about it when it cannot (docs/reliability.md):

* start-up discovery is retried with backoff while `/readyz` says not ready, and the log says
  what it waits for: a flaky API server costs a delay, not a CrashLoopBackOff;
* every long-lived thread is supervised (`threads.Supervisor`): one that dies fails
  `/healthz` and ends the process, never leaves it alive and idle;
* with leader election, the Lease has a client of its own, writes are fenced by it, and a lost
  Lease stops the workers and ends the process (`leader`);
* every job in flight is queued again every `resync_period` (jittered), so a missed event
  costs at most that long; left out of the sweep are a finished job whose replicas have all
  ended (`in_flight`): nothing is left to do for it, and 10,000 finished jobs cost a sweep
  3-4 CPU seconds (docs/benchmarks.md); and a job whose cache is as a reconcile that had
  nothing to do found it (`Reconciler.unchanged`): a missed event changed its cache.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kubernetes import client as k8s_client

from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.leader import LeaderElector
from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.controller.startup import StartupError, configuration, listen, preflight
from t9kjobs.controller.threads import Supervisor
from t9kjobs.controller.workers import work
from t9kjobs.controller.workqueue import WorkQueue
from t9kjobs.kube.informer import Informer, Store
from t9kjobs.kube.resources import (
    CHILD_RESOURCES,
    OPTIONAL_CHILD_KINDS,
    Resource,
    job_resource,
)
from t9kjobs.kube.slimming import slimmer
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP, FINISHED_PHASES
from t9kjobs.objects import LABEL_OWNER_KIND
from t9kjobs.settings import NetworkPolicySettings, Settings, configure
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Operator", "Options"]

log = logging.getLogger("t9kjobs.operator")


@dataclass
class Options:
    kubeconfig: str | None = None
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    workers: int = 8
    # A client limit only has to stop a runaway loop: the API server protects itself with
    # priority and fairness, and a 429 is waited out (transport). 200/400 came close to
    # bounding a burst of 500 jobs; 500/1,000 is about the most the benchmark's API server
    # took (527 pod creations a second; docs/benchmarks.md).
    qps: float = 500.0
    burst: int = 1000
    leader_elect: bool = False
    leader_election_namespace: str = ""
    leader_election_id: str = "t9k-jobs-operator"
    metrics_address: str = "127.0.0.1:8080"
    health_address: str = "127.0.0.1:8081"
    identity: str = ""
    impersonate: str | None = None
    discovery_interval: float = 30.0
    # Events that say only what a job's status says too (its first pods created, a success):
    # a request a job each, so off unless asked for (t9kjobs.planner.Event).
    routine_events: bool = False
    # A change of a child (or of a job's status) queues the job after this long, once per
    # window: the pods of a job that start or end together cost one reconcile and one status
    # write (the Job controller of kube-controller-manager batches its pod events by 1 s too).
    child_batch_period: float = 1.0
    # A pod that has just finished may decide its job: its job is queued after this shorter
    # window instead, so that the verdict follows the deciding replica within about it (pods
    # that finish together still share the window, and one status write).
    finished_pod_batch_period: float = 0.25
    # Every job is reconciled again this often (+-10%), so that a missed event is not missed
    # for ever; 0 turns it off.
    resync_period: float = 600.0
    # The Lease: held for lease_duration after a renewal; a leader that could not renew for
    # renew_deadline stops; attempts every retry_period (client-go's defaults).
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # A NetworkPolicy per job (the networkpolicy feature plugin; off: clusters whose network
    # plugin does not enforce NetworkPolicies ignore them, and it is a request per job).
    network_policy: NetworkPolicySettings = field(default_factory=NetworkPolicySettings)


ACTIVE_COUNTS = ("creating", "pending", "running", "unknown")


def in_flight(job: Obj) -> bool:
    """Whether the job, as its status says, may still have work for a reconcile: it has not
    finished, or a replica of it has not ended yet (a finished job follows its replicas to
    their end). A finished job's cleanup ran when it finished, and a failed deletion is
    retried by the work queue; a new pod, or a change of one still active, queues it."""
    status = job.get("status") or {}
    if status.get("phase") not in FINISHED_PHASES:
        return True
    aggregate = status.get("aggregate") or {}
    return any(aggregate.get(count) for count in ACTIVE_COUNTS)


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
        # What feature plugins read (t9kjobs.settings), set before any job is planned; and the
        # child kinds to watch: an optional one only when its option is on, so that without
        # it the operator needs no right on it.
        configure(Settings(network_policy=options.network_policy))
        optional = {"NetworkPolicy"} if options.network_policy.enabled else set()
        self.child_resources = {
            kind: resource
            for kind, resource in CHILD_RESOURCES.items()
            if kind not in OPTIONAL_CHILD_KINDS or kind in optional
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
            # A connection for every thread that may wait on an answer: workers, creators,
            # the events thread and the informers' watches.
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
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self.stop = threading.Event()
        self.supervisor = Supervisor(self.stop)
        self.informers: list[Informer] = []
        self.job_stores: dict[str, Store] = {}
        self.job_resources: dict[str, Resource] = {}
        self.child_stores: dict[str, Store] = {}
        self._synced = threading.Event()
        self.leading = threading.Event()
        self._reported: set[str] = set()
        self._generations: dict[JobKey, int | None] = {}  # the last seen, by the job informers
        self.events = EventRecorder(self.transport, self.identity)
        self.creator = ThreadPoolExecutor(creators, thread_name_prefix="create")
        self.reconciler = Reconciler(
            self.transport,
            manager,
            self.job_resources,
            self.job_stores,
            self.child_stores,
            frozenset(self.child_resources),
            self.events,
            self.creator,
            routine_events=options.routine_events,
        )

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
            if resource.group and kind not in self._served(resource.api_version)
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
                "child kind %s is not served by this cluster; jobs that need it are Degraded", kind
            )
        self._reported = set(self.manager.kinds) - set(kinds) | set(absent)

    # -- events -> queue ---------------------------------------------------------------------

    def _on_job(self, event: str, obj: Obj) -> None:
        """A new job or a changed spec is reconciled at once. A change that leaves the spec's
        generation as it was (the status: another writer's, or our own write whose echo came
        before its answer) is batched like a child's: reconciling on it at once would write the
        status again for every pod that moved meanwhile."""
        meta = obj["metadata"]
        key = (obj["kind"], meta["namespace"], meta["name"])
        if event == "DELETED":
            self._generations.pop(key, None)
            self.reconciler.forget(key)
            return
        generation = meta.get("generation")
        if self._generations.get(key) == generation:
            self.queue.add_after(key, self.options.child_batch_period)
        else:
            self._generations[key] = generation
            self.queue.add(key)

    def _on_child(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        finished = (
            obj.get("kind") == "Pod"
            and event != "DELETED"
            and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        )
        delay = (
            self.options.finished_pod_batch_period if finished else self.options.child_batch_period
        )
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") in self.job_resources
                and str(ref.get("apiVersion", "")).startswith(API_GROUP + "/")
            ):
                key = (ref["kind"], meta["namespace"], ref["name"])
                if (finished or event == "DELETED") and self._done_with(key):
                    continue
                # A finished pod may decide its job: ahead of the jobs still to start.
                self.queue.add_after(key, delay, urgent=finished)

    def _done_with(self, key: JobKey) -> bool:
        """Whether the job has finished and its replicas have all ended: a child of it that
        goes away, or a pod of it that changes once ended, leaves it nothing to do (a finished
        job's plan only deletes what still exists and follows the replicas still active).
        kube-controller-manager's pod collector, once 12,500 pods have ended, marks and then
        deletes thousands of them in a long run: two events a pod, no work."""
        store = self.job_stores.get(key[0])
        job = store.get(key[1], key[2]) if store is not None else None
        return job is not None and not in_flight(job)

    # -- running -----------------------------------------------------------------------------

    def _serve(self, kinds: dict[str, Resource], absent: frozenset[str]) -> bool:
        """Start informers for the job kinds and child kinds not served yet, wait until they
        synced, then hand their stores to the reconciler. The maps are replaced, never changed
        in place, so a worker never sees one change under it. True when anything was added."""
        namespaces: list[str | None] = list(self.options.namespaces) or [None]
        job_stores, job_resources = dict(self.job_stores), dict(self.job_resources)
        child_stores = dict(self.child_stores)
        started: list[Informer] = []
        for kind, resource in kinds.items():
            if kind in job_stores:
                continue
            store = job_stores[kind] = Store()
            job_resources[kind] = resource
            started += [
                Informer(self.transport, resource, self._on_job, namespace=ns, store=store)
                for ns in namespaces
            ]
        for kind, resource in self.child_resources.items():
            if kind in absent or kind in child_stores:
                continue
            store = child_stores[kind] = Store(slimmer(kind))
            started += [
                Informer(
                    self.transport,
                    resource,
                    self._on_child,
                    namespace=ns,
                    label_selector=LABEL_OWNER_KIND,
                    store=store,
                )
                for ns in namespaces
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
        self.job_stores, self.job_resources, self.child_stores = (
            job_stores,
            job_resources,
            child_stores,
        )
        self.reconciler.job_stores = job_stores
        self.reconciler.job_resources = job_resources
        self.reconciler.child_stores = child_stores
        self.reconciler.absent_kinds = absent
        return bool(started)

    def _discover_at_start(self) -> tuple[dict[str, Resource], frozenset[str]] | None:
        """Discovery, retried with backoff until it answers (None if stopped meanwhile)."""
        delay = 1.0
        while not self.stop.is_set():
            try:
                return self.discover()
            except Exception as exc:
                log.warning(
                    "waiting for the API server's discovery of %s/v1beta1 (not ready until it"
                    " answers); next try in %.0fs: %s",
                    API_GROUP,
                    delay,
                    exc,
                )
            self.stop.wait(delay)
            delay = min(delay * 2, 30.0)
        return None

    def run_controllers(self) -> None:
        found = self._discover_at_start()
        if found is None:
            return
        kinds, absent = found
        self._report(kinds, absent)
        self.metrics.watch_jobs(
            lambda: (
                (kind, str((o.get("status") or {}).get("phase") or "Pending"))
                for kind, store in self.job_stores.items()
                for o in store.all()
            )
        )
        if not self._serve(kinds, absent):
            return  # stopped while the caches synced
        self._synced.set()
        log.info("caches synced: %d informer(s)", len(self.informers))
        for i in range(self.options.workers):
            self.supervisor.spawn(
                f"worker-{i}", lambda: work(self.queue, self.reconciler, self.metrics)
            )
        log.info("serving kinds: %s", ", ".join(sorted(self.job_resources)) or "none")
        self.supervisor.spawn("discovery", self._rediscover)
        if self.options.resync_period > 0:
            self.supervisor.spawn("resync", self._resync)

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
                log.info("now serving kinds: %s", ", ".join(sorted(self.job_resources)))
                self.requeue_all()  # jobs that waited for a child kind

    def _resync(self) -> None:
        """Every job in flight again every `resync_period` (+-10%, so replicas and restarts do
        not line up), spread over a tenth of the period rather than all at once."""
        period = self.options.resync_period
        while not self.stop.wait(period * random.uniform(0.9, 1.1)):
            queued, left = self.requeue_all(spread=period / 10, settled_too=False)
            log.info("resync: %d job(s) queued, %d unchanged or settled", queued, left)

    def requeue_all(self, spread: float = 0.0, settled_too: bool = True) -> tuple[int, int]:
        """Queue every job the stores hold, each after a random delay up to `spread`; with
        `settled_too` False, only those still `in_flight` and changed since a reconcile that
        had nothing to do. How many were queued, and how many left out."""
        queued = left = 0
        for kind, store in self.job_stores.items():
            for job in store.all():
                meta = job["metadata"]
                key = (kind, meta["namespace"], meta["name"])
                if not settled_too and (not in_flight(job) or self.reconciler.unchanged(key)):
                    left += 1
                    continue
                self.queue.add_after(key, random.uniform(0, spread))
                queued += 1
        return queued, left

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
            self.queue.shutdown()
            for informer in self.informers:
                informer.stop()

        return elector.run(lead, step_down, self.stop)

    def _shut_down(self) -> None:
        self.stop.set()
        self.queue.shutdown()
        for informer in self.informers:
            informer.stop()
        self.creator.shutdown(wait=False, cancel_futures=True)
        self.events.close()


def _own_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return os.environ.get("POD_NAMESPACE", "default")
