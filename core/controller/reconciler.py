"""One reconcile: read the job and its children from the cache, plan once, apply the Plan.

The reconciler decides nothing the planner can: `plan` says what to create, update and delete,
which Events to post, what the status is, and when it is written (`Plan.status_after_creations`
and `Plan.status_due_in`: `t9kjobs.planner.plan`, "When the status is written"). The
reconciler applies that, in the order status -> deletions -> updates -> creations, and records
the API's answers in the cache.

Writing the status first is what makes restarts crash-safe (see `t9kjobs.planner.replicas`).
A Plan whose status comes after its creations is followed at once by the next reconcile
(`Result` 0), which reads the creations from the cache; its own status is written only if a
creation fails, so that what existed is shown while the work queue retries; a Degraded
condition then says what is retried (`t9kjobs.controller.failing`). A status that may wait is
looked at again when it is due (a requeue).

Events are handed to the `EventRecorder` and never waited for, but for those of the status
write that finishes a job: they are posted first, so that a crash between the two cannot lose
the verdict's Event (the next reconcile would see a finished job and post nothing).

A reconcile that finds nothing to do (no write, no Event, no requeue) remembers what it read:
the resourceVersions of the job and its children. `unchanged` tells the operator's periodic
resync which jobs are still as that reconcile found them; `plan` is pure and time only matters
through a requeue, so reconciling such a job again would find nothing to do again. The resync
only replays the caches, so what it is there for, a change of the caches that queued nothing,
always changes a resourceVersion. At 10,000 jobs that kept waiting for kube-scheduler, the
sweeps were more than a quarter of all reconciles (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import Any

from t9kjobs.controller.applying import Applier
from t9kjobs.controller.cache import Cache
from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.failing import CannotHandle, ChildRejected
from t9kjobs.controller.limit_ranges import LimitRangeWatch
from t9kjobs.controller.metrics import Metrics
from t9kjobs.controller.nodes import NodeWatch
from t9kjobs.controller.ownership import Held, NameConflicts, controller_of
from t9kjobs.controller.progress_reader import ProgressReader
from t9kjobs.controller.result import AT_ONCE, DONE, Result
from t9kjobs.kinds import Problem
from t9kjobs.kube.informer import Store
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.loading import JobError, ParsedJobs
from t9kjobs.manager import PluginManager
from t9kjobs.models import FINISHED_PHASES, MANAGED_BY_MULTIKUEUE, Job, JobStatus, dump, manager_of
from t9kjobs.planner import Event, KueuePolicy, Observed, Plan, plan
from t9kjobs.planner.conditions import rfc3339
from t9kjobs.planner.failure import cut, degraded_status, failed_status, stored_status
from t9kjobs.planner.workloads import WORKLOAD, prebuilt_name
from t9kjobs.vocabulary import JobKey, Obj

__all__ = ["Reconciler"]

log = logging.getLogger("t9kjobs.reconciler")


# Seconds before a job whose pods' nodes could not be read yet (the node store syncing, at an
# operator's start) is planned again: no node event would queue it for a node already gone.
NODES_SYNCING_RETRY = 2.0


def _sooner(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeues; None is never."""
    return b if a is None else a if b is None else min(a, b)


def _log_created(the_plan: Plan, found: Held, jlog: JobLog) -> None:
    pods = [o for o in the_plan.create if o["kind"] == "Pod"]
    if the_plan.create and not (found and pods):  # no pod wave while a name is held
        jlog.info("created %d object(s)", len(the_plan.create) - len(found))


def _elsewhere(raw: Obj, jlog: JobLog, message: str) -> bool:
    """Whether the job's status is another controller's (`spec.managedBy`: MultiKueue's, whose
    Workload the operator makes, and whose status it writes only while no worker holds the job,
    `Queued` or `Paused`: `t9kjobs.planner.elsewhere`): a failure that would have been written
    there is logged instead."""
    manager = manager_of(raw.get("spec") or {})
    if manager is None:
        return False
    jlog.warning("managed by %s, its status is not written: %s", manager, message)
    return True


class JobLog(logging.LoggerAdapter[logging.Logger]):
    """Every line about a job names it: kind, namespace/name."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs.setdefault("extra", {}).update(self.extra or {})
        return msg, kwargs


class Reconciler:
    def __init__(
        self,
        api: Transport,
        plugins: PluginManager,
        cache: Cache,
        events: EventRecorder,
        *,
        creator: Executor | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        routine_events: bool = False,
        progress: ProgressReader | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`api`: the client of every request; `plugins`: the hooks of each kind; `cache`:
        the informers' stores, replaced whole when discovery serves more (`Operator`);
        `events`: where Events go. `creator` runs a creation wave's requests at once
        (`Applier`); routine Events (`t9kjobs.planner.Event`) are posted only with
        `routine_events`. `progress` reads running jobs' progress from their logs (none
        without). `metrics` counts the restarts each status write records (none without)."""
        self.plugins = plugins
        self.cache = cache
        self.events = events
        self.clock = clock
        self.routine_events = routine_events
        self.progress = progress
        self.metrics = metrics
        # Lost-node detection (`t9kjobs.controller.nodes`), when the operator watches nodes.
        self.nodes: NodeWatch | None = None
        # Which namespaces give pods requests by default, where the plugins make gangs.
        self.limit_ranges: LimitRangeWatch | None = None
        self.lost_node_seconds = 60.0
        self.kueue_policy = KueuePolicy()  # the operator's --kueue-* (Operator)
        self.conflicts = NameConflicts(api)
        self.apply = Applier(api, self.conflicts, creator)
        self.apply.forced = self._count_forced
        # The versions the last reconcile of a job read, when it found nothing to do; kept as
        # a hash (a 64-bit int a job, not a tuple of every child's uid and version).
        self._quiet: dict[JobKey, int] = {}
        # Each job's spec parsed and checked once a generation (`ParsedJobs`).
        self.parsed = ParsedJobs(plugins)

    def _count_forced(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.pods_force_deleted.labels(reason).inc()

    # -- the reconcile -----------------------------------------------------------------------

    def reconcile(self, key: JobKey) -> Result:
        """Bring one job a step closer to its desired state.

        A job that cannot go on ends Failed or Degraded here (`t9kjobs.controller.failing`);
        only transient API errors escape, for the work queue to retry with backoff."""
        key = JobKey(*key)
        self._quiet.pop(key, None)
        raw = self.cache.job(key)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            self.forget(key)
            return DONE  # deleted: the garbage collector removes the children
        jlog = JobLog(log, {"kind": key.kind, "job": f"{key.namespace}/{key.name}"})
        manager = manager_of(raw.get("spec") or {})
        if manager is not None and manager != MANAGED_BY_MULTIKUEUE:
            # Another controller's job (`t9kjobs.planner.elsewhere`): not even read further.
            self.forget(key)
            return DONE
        try:
            job, found = self.parsed.load(key, raw)
            if job.status.phase in FINISHED_PHASES:
                self.parsed.forget(key)  # few reconciles left: not worth its memory
            problems = [p for p in found if p.severity == "error"]
            if problems:
                raise JobError(problems)
        except JobError as exc:
            self._invalid(key, raw, exc.problems, jlog)
            return DONE
        except Exception as exc:  # a plugin's check failed on this job
            self._cannot_handle(key, raw, exc, jlog)
            return DONE
        try:
            return self._sync(key, raw, job, found, jlog)
        except CannotHandle as exc:
            self._cannot_handle(key, raw, exc.__cause__ or exc, jlog)
            return DONE
        except ChildRejected as exc:
            self._fail(key, raw, "ChildRejected", str(exc), jlog)
            return DONE
        except ApiError as exc:
            if exc.status != 409:  # a conflict is routine: the next reconcile sees the news
                self._retrying(key, exc)
            raise
        except Exception as exc:  # timeouts, connection errors: retried by the work queue
            self._retrying(key, exc)
            raise

    def trust(self, mark: Callable[[Obj, str], Obj], owner: Callable[[Obj], str | None]) -> None:
        """Write every child with `mark`, and take as a job's own only what `owner` gives it
        (`t9kjobs.controller.marks`): set once, before the first reconcile."""
        self.apply.mark = mark
        self.conflicts.owner = owner

    def forget(self, key: JobKey) -> None:
        """A deleted job: nothing about it is kept."""
        self.conflicts.forget(key)
        self._quiet.pop(key, None)
        self.parsed.forget(key)
        if self.progress is not None:
            self.progress.forget(key)

    def unchanged(self, key: JobKey) -> bool:
        """Whether the job and its children are as the last reconcile of it found them, and
        that reconcile had nothing to do (module docstring)."""
        quiet = self._quiet.get(key)
        if quiet is None:
            return False
        raw = self.cache.job(JobKey(*key))
        if raw is None:
            return False
        return self._versions(raw, self.cache.children(raw["metadata"].get("uid", ""))) == quiet

    def _versions(self, raw: Obj, children: list[Obj]) -> int:
        """What a plan of the job reads, by version: the job, its children, the kinds absent."""
        child_versions = tuple(
            (o["metadata"].get("uid"), o["metadata"].get("resourceVersion")) for o in children
        )
        return hash(
            (raw["metadata"].get("resourceVersion"), child_versions, self.cache.absent_kinds)
        )

    def _sync(
        self, key: JobKey, raw: Obj, job: Job, problems: list[Problem], jlog: JobLog
    ) -> Result:
        cache = self.cache  # one view for the whole reconcile
        uid = job.metadata.uid or ""
        children = cache.children(uid)  # as the plan reads them, and their versions
        versions = self._versions(raw, children)
        held = self.conflicts.still_held(key, uid, cache.child_stores, cache.child_resources)
        the_plan = self._plan(key, job, held, children, problems)
        if the_plan.probe:
            self.apply.probe(cache, key.namespace, the_plan.probe)  # ChildRejected: Failed
        if self.progress is not None:
            self.progress.follow(key, the_plan.progress_source)
            self.progress.want_stacks(key, the_plan.capture_stacks)
        found: Held = {}  # conflicts met by this reconcile's creations
        if the_plan.status_after_creations:
            # Creations: the status they lead to is the next reconcile's (module docstring).
            try:
                recorded = self.apply.objects(cache, key.namespace, the_plan, found)
            except BaseException:
                self._settle_status(cache, key, raw, the_plan, jlog)
                raise
            finally:
                self.conflicts.remember(key, uid, {**held, **found})
            self._record(raw, the_plan.events, [])
            _log_created(the_plan, found, jlog)
            # Without a store for what it created, the next plan could not see it: no loop.
            return AT_ONCE if recorded or found else Result(the_plan.requeue_after)
        hold = the_plan.status_due_in
        posted = [] if hold is not None else self._settle_status(cache, key, raw, the_plan, jlog)
        try:
            self.apply.objects(cache, key.namespace, the_plan, found)
        finally:
            self.conflicts.remember(key, uid, {**held, **found})
        _log_created(the_plan, found, jlog)
        self._record(raw, the_plan.events, posted)
        requeue = _sooner(the_plan.requeue_after, hold)
        if self.nodes is not None and self.nodes.syncing(children):
            # Its pods' nodes not read yet: looked at again once the node store has synced.
            requeue = _sooner(requeue, NODES_SYNCING_RETRY)
        done = (
            held
            or the_plan.delete
            or the_plan.update
            or the_plan.patch_status
            or the_plan.status_changed
        )
        if not (done or the_plan.events or requeue is not None):
            self._quiet[key] = versions
        # A conflict met now is in the status of the next reconcile, at once.
        return AT_ONCE if found else Result(requeue)

    def _plan(
        self, key: JobKey, job: Job, held: Held, children: list[Obj], problems: list[Problem]
    ) -> Plan:
        reading = self.progress.reading(key) if self.progress is not None else None
        stacks = self.progress.stacks(key) if self.progress is not None else None
        pods = [c for c in children if c.get("kind") == "Pod"]
        prebuilt, held = self._prebuilt(job, held)
        limits = self.limit_ranges
        observed = Observed.of(
            children,
            self.cache.absent_kinds,
            held,
            self.cache.kueue(),
            reading,
            nodes=self.nodes.states(pods) if self.nodes is not None else None,
            lost_node_seconds=self.lost_node_seconds,
            stacks=stacks,
            kueue_policy=self.kueue_policy,
            prebuilt=prebuilt,
            default_requests=limits is None or limits.default_requests(job.namespace),
        )
        try:
            return plan(
                job,
                observed,
                self.clock(),
                self.plugins.hooks_for(job.kind),
                warnings=problems,
                routine_events=self.routine_events,
            )
        except Exception as exc:  # the planner or a plugin hook failed: pure code, no retry
            raise CannotHandle(str(exc)) from exc

    def _prebuilt(self, job: Job, held: Held) -> tuple[Obj | None, Held]:
        """The prebuilt Workload the job names, as found: in its store, else on the API server
        (one not made for a job of ours carries no owner label, so it is not watched until
        the job adopts it: `t9kjobs.planner.prebuilt`); and `held` with its name when another
        object controls it."""
        name = prebuilt_name(job)
        if name is None or WORKLOAD not in self.cache.child_stores:
            return None, held
        found = self.cache.child_stores[WORKLOAD].get(job.namespace, name)
        if found is None:
            resource = self.cache.child_resource(WORKLOAD)
            found = self.conflicts.lookup(job.namespace, resource, name)
        controller = Store.owner_uid(found) if found is not None else None
        if found is not None and controller not in (None, job.metadata.uid):
            return found, {**held, (WORKLOAD, name): controller_of(found)}
        return found, held

    def _settle_status(
        self, cache: Cache, key: JobKey, raw: Obj, the_plan: Plan, jlog: JobLog
    ) -> list[Event]:
        """Write the Plan's status if it changed; the Events posted before it (the verdict's)."""
        if not the_plan.status_changed:
            return []
        phase = (raw.get("status") or {}).get("phase")
        posted: list[Event] = []
        if the_plan.status.finished and phase not in FINISHED_PHASES:
            for event in the_plan.events:
                self.events.post(raw, event)
                posted.append(event)
        written = dump(the_plan.status)
        self.apply.status(cache, key, raw, written)
        if self.metrics is not None:
            self.metrics.count_recoveries(key.kind, raw.get("status") or {}, written)
        if the_plan.status.phase != phase:
            jlog.info("phase %s", the_plan.status.phase)
        return posted

    def _record(self, raw: Obj, events: Sequence[Event], posted: list[Event]) -> None:
        for event in events:
            if event not in posted:
                self.events.record(raw, event)

    # -- jobs that cannot go on (t9kjobs.controller.failing) ---------------------------------

    def _status_model(self, kind: str) -> type[JobStatus]:
        info = self.plugins.kinds.get(kind)
        return info.status_model if info is not None else JobStatus

    def _invalid(self, key: JobKey, raw: Obj, problems: list[Problem], jlog: JobLog) -> None:
        """A job the plugins reject. Before it runs: Failed. Once it runs: its pods are kept,
        a Degraded condition and an event say why, and it resumes when the spec is fixed."""
        message = "; ".join(str(p) for p in problems) or "the job is not valid"
        if _elsewhere(raw, jlog, message):
            return
        if not self.cache.children(raw["metadata"].get("uid", "")):
            self._fail(key, raw, "InvalidSpec", message, jlog)
            return
        now = rfc3339(self.clock())
        status = degraded_status(
            stored_status(raw, self._status_model(key.kind)), "InvalidSpec", message, now
        )
        if status is not None:
            jlog.warning("invalid spec: %s", message)
            self.apply.status(self.cache, key, raw, dump(status))
            self.events.record(raw, Event("Warning", "InvalidSpec", cut(message)))

    def _cannot_handle(self, key: JobKey, raw: Obj, exc: BaseException, jlog: JobLog) -> None:
        message = f"the operator cannot handle this job: {type(exc).__name__}: {exc}"
        if self._fail(key, raw, "OperatorError", message, jlog):
            jlog.error("%s", message, exc_info=exc)  # the traceback once, for a bug report

    def _fail(self, key: JobKey, raw: Obj, reason: str, message: str, jlog: JobLog) -> bool:
        """End the job Failed for `reason`, once: False when it had finished already."""
        # The stored job: this reconcile may have written the status already.
        raw = self.cache.job(key) or raw
        if _elsewhere(raw, jlog, f"{reason}: {message}"):
            return False
        now = rfc3339(self.clock())
        status = failed_status(
            stored_status(raw, self._status_model(key.kind)), reason, message, now
        )
        if status is None:
            jlog.debug("finished job: %s: %s", reason, message)
            return False
        jlog.warning("failed: %s: %s", reason, message)
        try:
            self.apply.status(self.cache, key, raw, dump(status))
        except ApiError as exc:
            if exc.status == 409:
                raise  # the job changed meanwhile: decide again on the news
            jlog.error("cannot record the failure (%s): %s", reason, exc)
            return False
        self.events.record(raw, Event("Warning", reason, cut(message)))
        return True

    def _retrying(self, key: JobKey, exc: Exception) -> None:
        """Show a transient failure in a Degraded condition while it lasts (best effort)."""
        raw = self.cache.job(key)
        if raw is None or manager_of(raw.get("spec") or {}) is not None:
            return  # another controller's status (`_elsewhere`)
        now = rfc3339(self.clock())
        message = f"retrying after an API error: {exc}"
        status = degraded_status(
            stored_status(raw, self._status_model(key.kind)), "ApiError", message, now
        )
        if status is not None:
            with contextlib.suppress(Exception):
                self.apply.status(self.cache, key, raw, dump(status))
