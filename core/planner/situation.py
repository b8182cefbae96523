"""What one judgement of a job reads, and what a step of it decides: two immutable values.

`plan` reads the job and its children once into a `Situation` (the pods the job wants, the
pods it has, how each replica stands), and each step of the judgement (keep running, finish,
pause, the cleanup of a finished job) returns `Changes`: what to create, update and delete,
which Events to post, when to look again. Only the status is built in place, by the steps in
turn (`t9kjobs.planner.status`); the Plan is assembled once, from the status and the Changes,
and nothing changes it after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from t9kjobs.models import Job, JobStatus, Lifecycle
from t9kjobs.objects import DesiredPod
from t9kjobs.planner.gangs import Stranded
from t9kjobs.planner.replicas import Assessment
from t9kjobs.planner.stacks import StackCapture
from t9kjobs.planner.stall import Stall
from t9kjobs.planner.types import Event, ObjectRef, Observed, Queued
from t9kjobs.vocabulary import Obj

__all__ = ["Changes", "Situation"]

_NO_CAPTURE = StackCapture()


@dataclass(frozen=True)
class Situation:
    """A job that is neither finished nor paused, as this reconcile finds it."""

    job: Job
    before: JobStatus  # the status as stored
    observed: Observed
    life: Lifecycle
    now: datetime
    ts: str  # `now` as the conditions write it
    resumed: bool  # the job was paused and is not anymore
    pods: tuple[DesiredPod, ...]  # the pods the job wants, built by its plugin
    aux: tuple[Obj, ...]  # the other children it wants (Services, ConfigMaps, ...)
    pods_by_name: Mapping[str, Obj]  # the pods it has, by name, as `remembered` keeps them
    found: Assessment  # every replica under its restart policy
    queued: Queued | None = None  # its place in a Kueue queue (t9kjobs.planner.queueing)
    # its live pods lost with their node, by name: why (t9kjobs.planner.nodes)
    lost: Mapping[str, str] = field(default_factory=dict)
    stall: Stall | None = None  # the Stalled verdict (t9kjobs.planner.stall)
    stall_recheck: float | None = None  # when to judge it again
    stacks: StackCapture = _NO_CAPTURE  # its ranks' stacks (t9kjobs.planner.stacks)
    # its gang, when it can never be complete (t9kjobs.planner.gangs)
    stranded: Stranded | None = None


@dataclass(frozen=True)
class Changes:
    """What a step of the judgement decides, besides the status."""

    create: tuple[Obj, ...] = ()
    update: tuple[Obj, ...] = ()
    delete: tuple[ObjectRef, ...] = ()
    patch_status: tuple[Obj, ...] = ()
    events: tuple[Event, ...] = ()
    # Reconcile again after this many seconds even if nothing changes (deadlines, conflicts).
    requeue_after: float | None = None
    # Children to submit as a dry run before the creations (`Plan.probe`).
    probe: tuple[Obj, ...] = ()
