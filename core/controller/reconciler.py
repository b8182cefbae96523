"""One reconcile: read the job and its children from the stores, plan, apply the Plan.

The Plan is applied in the order status -> deletions -> updates -> creations. Writing the status
first is what makes restarts crash-safe (see `t9kjobs.planner.replicas`); a Plan that deletes
nothing writes it last instead, planned again once its creations are in the stores.

A new job (no status yet) whose pods all exist and wait to run writes no status until they run,
or `FOLDED_STATUS_SECONDS` after their creation at the latest (the reconciles their changes
bring, batched, look again): its first write is most often Running already, and its start costs
one status write instead of two ("Pending", then "Running"). The status write is the dearest
request a job makes, three pod creations' worth of kube-apiserver CPU (docs/benchmarks.md). A job
whose pods run within that time never shows Pending; its `startTime` is still its pods'
creation (`t9kjobs.planner.plan`). Anything else is written at once: a failed creation, a name
conflict, a missing dependency, a failing replica, a verdict, and any job with a status already
(a resumed one, one being repaired).

Creations go in two waves, each wave's requests at once: the objects pods use (Services,
ConfigMaps, Secrets, PodGroups), then the pods; a job's pods cost one round trip, not one each.
Events are handed to the `EventRecorder` and never waited for, but for those of the status
write that finishes a job: they are posted first, so that a crash between the two cannot lose
the verdict's Event (the next reconcile would see a finished job and post nothing). When a
reconcile plans twice (creations, then the status they lead to), the Events of both plans are
posted, each once. Every answer from the API server goes straight into the stores, so the next
reconcile of the same job sees what this one did even before the watch reports it. NotFound and
Conflict are normal, and so is AlreadyExists for an object this job controls (names are
deterministic, so a retry can never create a duplicate); one it does not control is a conflict
(`t9kjobs.controller.ownership`).

A reconcile that finds nothing to do (no write, no Event, no requeue) remembers what it read: the
resourceVersions of the job and its children. `unchanged` tells the operator's periodic resync
which jobs are still as that reconcile found them; `plan` is pure and time only matters through
a requeue, so reconciling such a job again would find nothing to do again. The resync only
replays the caches, so what it is there for, a change of the caches that queued nothing, always
changes a resourceVersion. At 10,000 jobs that kept waiting for kube-scheduler, the sweeps were
more than a quarter of all reconciles (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.failing import (
    CannotHandle,
    ChildRejected,
    cut,
    degraded_status,
    failed_status,
    refused_for_good,
    stored_status,
)
from t9kjobs.controller.ownership import Held, NameConflicts, controller_of
from t9kjobs.kinds import Problem
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES, Resource
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.loading import JobError, check_job, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import FINISHED_PHASES, Job, JobStatus, dump
from t9kjobs.planner import Event, ObjectRef, Observed, Plan, plan
from t9kjobs.planner.conditions import first_created, rfc3339
from t9kjobs.ssh import fill_generated_secret
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["FOLDED_STATUS_SECONDS", "Reconciler"]


log = logging.getLogger("t9kjobs.reconciler")

# A new job's first status is written by the reconcile after its creations: at the latest this
# long after them, when no change of its pods brings that reconcile sooner (pods no scheduler
# binds: a missing t9k-scheduler, no room).
FOLDED_STATUS_SECONDS = 3.0


def _sooner(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeues; None is never."""
    return b if a is None else a if b is None else min(a, b)


class JobLog(logging.LoggerAdapter[logging.Logger]):
    """Every line about a job names it: kind, namespace/name."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs.setdefault("extra", {}).update(self.extra or {})
        return msg, kwargs


def _with_warnings(the_plan: Plan, found: list[Problem]) -> Plan:
    """The Plan, with a Warning event per validation warning when it creates pods.

    Warnings say how the pods differ from what the user wrote (a command the operator replaces),
    so they are said when pods are built from the spec: at the start, a restart, a relaunch.
    """
    warnings = [p for p in found if p.severity == "warning"]
    if not warnings or not any(o["kind"] == "Pod" for o in the_plan.create):
        return the_plan
    said = [Event("Warning", "SpecWarning", f"{p.path}: {p.message}") for p in warnings]
    return replace(the_plan, events=(*said, *the_plan.events))


class Reconciler:
    def __init__(
        self,
        transport: Transport,
        manager: PluginManager,
        job_resources: Mapping[str, Resource],
        job_stores: Mapping[str, Store],
        child_stores: Mapping[str, Store],
        absent_kinds: frozenset[str],
        events: EventRecorder,
        creator: Executor | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        routine_events: bool = False,
    ) -> None:
        """`creator` runs the requests of a creation wave at once (serially without one); it
        may be shared by all workers, and its size bounds the creations in flight. Routine
        Events (`t9kjobs.planner.Event`) are posted only with `routine_events`."""
        self.transport = transport
        self.manager = manager
        self.job_resources = job_resources
        self.job_stores = job_stores
        self.child_stores = child_stores
        self.absent_kinds = absent_kinds
        self.events = events
        self.creator = creator
        self.clock = clock
        self.routine_events = routine_events
        self.conflicts = NameConflicts(transport)
        # The versions the last reconcile of a job read, when it found nothing to do; kept as
        # a hash (a 64-bit int a job, not a tuple of every child's uid and version).
        self._quiet: dict[JobKey, int] = {}

    # -- the reconcile -----------------------------------------------------------------------

    def reconcile(self, key: JobKey) -> float | None:
        """Bring one job a step closer to its desired state; seconds until it must run again.

        A job that cannot go on ends Failed or Degraded here (`t9kjobs.controller.failing`);
        only transient API errors escape, for the work queue to retry with backoff."""
        kind, namespace, name = key
        self._quiet.pop(key, None)
        raw = self.job_stores[kind].get(namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            self.forget(key)
            return None  # deleted: the garbage collector removes the children
        jlog = JobLog(log, {"kind": kind, "job": f"{namespace}/{name}"})
        try:
            job = parse_job(raw, self.manager)
            found = check_job(job, self.manager)
            problems = [p for p in found if p.severity == "error"]
            if problems:
                raise JobError(problems)
        except JobError as exc:
            self._invalid(key, raw, exc.problems, jlog)
            return None
        except Exception as exc:  # a plugin's check failed on this job
            self._cannot_handle(key, raw, exc, jlog)
            return None
        try:
            return self._sync(key, raw, job, found, jlog)
        except CannotHandle as exc:
            self._cannot_handle(key, raw, exc.__cause__ or exc, jlog)
            return None
        except ChildRejected as exc:
            self._fail(key, raw, "ChildRejected", str(exc), jlog)
            return None
        except ApiError as exc:
            if exc.status != 409:  # a conflict is routine: the next reconcile sees the news
                self._retrying(key, exc)
            raise
        except Exception as exc:  # timeouts, connection errors: retried by the work queue
            self._retrying(key, exc)
            raise

    def forget(self, key: JobKey) -> None:
        """A deleted job: nothing about it is kept."""
        self.conflicts.forget(key)
        self._quiet.pop(key, None)

    def unchanged(self, key: JobKey) -> bool:
        """Whether the job and its children are as the last reconcile of it found them, and
        that reconcile had nothing to do (module docstring)."""
        quiet = self._quiet.get(key)
        if quiet is None:
            return False
        raw = self.job_stores[key[0]].get(key[1], key[2])
        if raw is None:
            return False
        return self._versions(raw, self._children(raw["metadata"].get("uid", ""))) == quiet

    def _children(self, uid: str) -> list[Obj]:
        return [o for store in self.child_stores.values() for o in store.owned_by(uid)]

    def _versions(self, raw: Obj, children: list[Obj]) -> int:
        """What a plan of the job reads, by version: the job, its children, the kinds absent."""
        child_versions = tuple(
            (o["metadata"].get("uid"), o["metadata"].get("resourceVersion")) for o in children
        )
        return hash((raw["metadata"].get("resourceVersion"), child_versions, self.absent_kinds))

    def _sync(
        self, key: JobKey, raw: Obj, job: Job, problems: list[Problem], jlog: JobLog
    ) -> float | None:
        namespace = key[1]
        uid = job.metadata.uid or ""
        children = self._children(uid)  # as the plan reads them, and their versions
        versions = self._versions(raw, children)
        held = self.conflicts.still_held(key, uid, self.child_stores)
        found: Held = {}  # conflicts met by this reconcile's creations
        the_plan = self._worth_saying(_with_warnings(self._plan(job, held, children), problems))
        if the_plan.delete or not the_plan.create:
            hold = None if the_plan.delete else self._first_status_due(raw, the_plan)
            posted = [] if hold is not None else self._settle_status(key, raw, the_plan, jlog)
            try:
                self._apply(namespace, the_plan, jlog, found)
            finally:
                self.conflicts.remember(key, uid, {**held, **found})
            self._record(raw, the_plan.events, posted)
            requeue = _sooner(the_plan.requeue_after, hold)
            done = held or the_plan.delete or the_plan.update or the_plan.status_changed
            if not (done or the_plan.events or requeue is not None):
                self._quiet[key] = versions
            # A conflict met now is in the status of the next reconcile, at once.
            return 0.0 if found else requeue
        # Creations without deletions: no restart count to protect, so the status need not
        # come first. A failed creation still shows what exists at once.
        try:
            self._apply(namespace, the_plan, jlog, found)
        except BaseException:
            self._settle_status(key, raw, self._settled(key, job, held, found), jlog)
            raise
        settled = self._settled(key, job, held, found)
        later = [e for e in settled.events if e not in the_plan.events]
        hold = self._first_status_due(raw, settled)
        posted = [] if hold is not None else self._settle_status(key, raw, settled, jlog)
        self._record(raw, [*the_plan.events, *later], posted)
        return _sooner(settled.requeue_after, hold)

    def _settled(self, key: JobKey, job: Job, held: Held, found: Held) -> Plan:
        """The Plan once this reconcile's creations are in the stores (answers and conflicts)."""
        self.conflicts.remember(key, job.metadata.uid or "", {**held, **found})
        uid = job.metadata.uid or ""
        return self._worth_saying(self._plan(job, {**held, **found}, self._children(uid)))

    def _first_status_due(self, raw: Obj, the_plan: Plan) -> float | None:
        """Seconds a new job's first status write may still wait (module docstring); None
        when it is written now.

        Only a job with no status yet, all of whose pods exist and wait to run with nothing
        else to say (Pending, and no condition but Initialized True), waits: until they run,
        or `FOLDED_STATUS_SECONDS` after the first of them was created."""
        status = the_plan.status
        if raw.get("status") or status.phase != "Pending":
            return None
        initialized = status.condition("Initialized")
        if initialized is None or initialized.status != "True" or len(status.conditions) > 1:
            return None
        pods = self.child_stores.get("Pod")
        created = first_created(pods.owned_by(raw["metadata"].get("uid", "")) if pods else [])
        if created is None:
            return None  # no time to count from: written now
        left = FOLDED_STATUS_SECONDS - (self.clock() - created).total_seconds()
        return left if left > 0 else None

    def _plan(self, job: Job, held: Held, children: list[Obj]) -> Plan:
        try:
            return plan(
                job,
                Observed.of(children, self.absent_kinds, held),
                self.clock(),
                self.manager.hooks_for(job.kind),
            )
        except Exception as exc:  # the planner or a plugin hook failed: pure code, no retry
            raise CannotHandle(str(exc)) from exc

    def _worth_saying(self, the_plan: Plan) -> Plan:
        """The Plan without its routine Events, unless they are posted too."""
        if self.routine_events or not any(e.routine for e in the_plan.events):
            return the_plan
        return replace(the_plan, events=tuple(e for e in the_plan.events if not e.routine))

    def _settle_status(self, key: JobKey, raw: Obj, the_plan: Plan, jlog: JobLog) -> list[Event]:
        """Write the Plan's status if it changed; the Events posted before it (the verdict's)."""
        if not the_plan.status_changed:
            return []
        phase = (raw.get("status") or {}).get("phase")
        posted: list[Event] = []
        if the_plan.status.finished and phase not in FINISHED_PHASES:
            for event in the_plan.events:
                self.events.post(raw, event)
                posted.append(event)
        self._write_status(key, raw, dump(the_plan.status))
        if the_plan.status.phase != phase:
            jlog.info("phase %s", the_plan.status.phase)
        return posted

    def _apply(self, namespace: str, the_plan: Plan, jlog: JobLog, found: Held) -> None:
        """Deletions, updates and creations of the Plan (not its status, not its events);
        names held by objects the job does not control go into `found`."""
        for ref in the_plan.delete:
            self._delete(namespace, ref)
        for obj in the_plan.update:
            self._update(namespace, obj)
        self._create_all(namespace, [o for o in the_plan.create if o["kind"] != "Pod"], found)
        if found:
            # Ownership before use: an object the pods would use (a Secret, a ConfigMap, the
            # Service that names them) is held by another; the next plan says so, no pod.
            return
        self._create_all(namespace, [o for o in the_plan.create if o["kind"] == "Pod"], found)
        if the_plan.create:
            jlog.info("created %d object(s)", len(the_plan.create) - len(found))

    def _record(self, raw: Obj, events: Sequence[Event], posted: list[Event]) -> None:
        for event in events:
            if event not in posted:
                self.events.record(raw, event)

    # -- writes ------------------------------------------------------------------------------

    def _write_status(self, key: JobKey, raw: Obj, status: Obj) -> None:
        kind, namespace, name = key
        # The status subresource takes only the status (and the resourceVersion): the spec is
        # not sent, so a job of any size or depth costs the same small write.
        body: Obj = {k: raw[k] for k in ("apiVersion", "kind", "metadata") if k in raw}
        body["status"] = status
        answer = self.transport.request(
            "PUT", self.job_resources[kind].path(namespace, name, "status"), body=body
        )
        self.job_stores[kind].put(answer)

    def _store_for(self, kind: str) -> Store | None:
        return self.child_stores.get(kind)

    def _resource(self, kind: str) -> Resource:
        return CHILD_RESOURCES[kind]

    def _create_all(self, namespace: str, objs: list[Obj], found: Held) -> None:
        """Create `objs` at once; the first error once every request has ended. Names held by
        objects the job does not control go into `found`."""
        if self.creator is None or len(objs) < 2:
            outcomes = [self._create(namespace, obj) for obj in objs]
        else:
            futures = [self.creator.submit(self._create, namespace, obj) for obj in objs]
            errors = [e for e in (f.exception() for f in futures) if e is not None]
            outcomes = [f.result() for f in futures if f.exception() is None]
            if errors:
                found.update(o for o in outcomes if o is not None)
                raise errors[0]
        found.update(o for o in outcomes if o is not None)

    def _create(self, namespace: str, obj: Obj) -> tuple[tuple[str, str], str] | None:
        """Create `obj`; its (kind, name) and holder if an object this job does not control
        already has the name."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        resource = self._resource(kind)
        body = fill_generated_secret(obj)
        try:
            answer = self.transport.request("POST", resource.path(namespace), body=body)
        except ApiError as exc:
            if exc.status != 409:
                if refused_for_good(exc):
                    raise ChildRejected(obj, exc) from exc
                raise
            existing = self.conflicts.lookup(namespace, kind, name)
            if existing is None:
                raise  # gone since: the retry creates it
            if Store.owner_uid(existing) != Store.owner_uid(obj):
                return (kind, name), controller_of(existing)
            answer = existing  # an earlier attempt made it
        store = self._store_for(kind)
        if store is not None:
            store.put(answer)
        return None

    def _update(self, namespace: str, obj: Obj) -> None:
        resource = self._resource(obj["kind"])
        try:
            answer = self.transport.request(
                "PUT", resource.path(namespace, obj["metadata"]["name"]), body=obj
            )
        except ApiError as exc:
            if refused_for_good(exc):
                raise ChildRejected(obj, exc) from exc
            raise
        store = self._store_for(obj["kind"])
        if store is not None:
            store.put(answer)

    def _delete(self, namespace: str, ref: ObjectRef) -> None:
        resource = self._resource(ref.kind)
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if ref.uid:
            body["preconditions"] = {"uid": ref.uid}
        if ref.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = ref.grace_period_seconds
        try:
            answer = self.transport.request("DELETE", resource.path(namespace, ref.name), body=body)
        except ApiError as exc:
            if exc.status in (404, 409):  # gone already, or replaced by a newer object
                return
            raise
        store = self._store_for(ref.kind)
        if store is None:
            return
        if answer.get("kind") == ref.kind and (answer.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            store.put(answer)
        else:
            store.remove(namespace, ref.name)

    # -- jobs that cannot go on (t9kjobs.controller.failing) -------------------------------------

    def _status_model(self, kind: str) -> type[JobStatus]:
        info = self.manager.kinds.get(kind)
        return info.status_model if info is not None else JobStatus

    def _invalid(self, key: JobKey, raw: Obj, problems: list[Problem], jlog: JobLog) -> None:
        """A job the plugins reject. Before it runs: Failed. Once it runs: its pods are kept,
        a Degraded condition and an event say why, and it resumes when the spec is fixed."""
        message = "; ".join(str(p) for p in problems) or "the job is not valid"
        uid = raw["metadata"].get("uid", "")
        if not any(store.owned_by(uid) for store in self.child_stores.values()):
            self._fail(key, raw, "InvalidSpec", message, jlog)
            return
        now = rfc3339(self.clock())
        status = degraded_status(
            stored_status(raw, self._status_model(key[0])), "InvalidSpec", message, now
        )
        if status is not None:
            jlog.warning("invalid spec: %s", message)
            self._write_status(key, raw, dump(status))
            self.events.record(raw, Event("Warning", "InvalidSpec", cut(message)))

    def _cannot_handle(self, key: JobKey, raw: Obj, exc: BaseException, jlog: JobLog) -> None:
        message = f"the operator cannot handle this job: {type(exc).__name__}: {exc}"
        if self._fail(key, raw, "OperatorError", message, jlog):
            jlog.error("%s", message, exc_info=exc)  # the traceback once, for a bug report

    def _fail(self, key: JobKey, raw: Obj, reason: str, message: str, jlog: JobLog) -> bool:
        """End the job Failed for `reason`, once: False when it had finished already."""
        # The stored job: this reconcile may have written the status already.
        raw = self.job_stores[key[0]].get(key[1], key[2]) or raw
        now = rfc3339(self.clock())
        status = failed_status(stored_status(raw, self._status_model(key[0])), reason, message, now)
        if status is None:
            jlog.debug("finished job: %s: %s", reason, message)
            return False
        jlog.warning("failed: %s: %s", reason, message)
        try:
            self._write_status(key, raw, dump(status))
        except ApiError as exc:
            if exc.status == 409:
                raise  # the job changed meanwhile: decide again on the news
            jlog.error("cannot record the failure (%s): %s", reason, exc)
            return False
        self.events.record(raw, Event("Warning", reason, cut(message)))
        return True

    def _retrying(self, key: JobKey, exc: Exception) -> None:
        """Show a transient failure in a Degraded condition while it lasts (best effort)."""
        raw = self.job_stores[key[0]].get(key[1], key[2])
        if raw is None:
            return
        now = rfc3339(self.clock())
        message = f"retrying after an API error: {exc}"
        status = degraded_status(
            stored_status(raw, self._status_model(key[0])), "ApiError", message, now
        )
        if status is not None:
            with contextlib.suppress(Exception):
                self._write_status(key, raw, dump(status))
