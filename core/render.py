"""What the operator would create for a job at its start, without a cluster."""

from __future__ import annotations

from datetime import UTC, datetime

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import Obj
from t9kjobs.planner import Observed, plan

__all__ = ["render_job"]

_KIND_ORDER = {"Secret": 0, "ConfigMap": 1, "Service": 2, "PodGroup": 3, "Pod": 5}
# Rendering reads no clock: the objects at a job's start do not depend on the time.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def render_job(job: Job, manager: PluginManager) -> list[Obj]:
    """Every child the first reconcile of `job` creates, Secrets before Pods, each by name."""
    fresh = job.model_copy(update={"status": manager.kind_info(job.kind).status_model()})
    created = plan(fresh, Observed(), _EPOCH, manager.hooks_for(job.kind)).create
    return sorted(
        created,
        key=lambda o: (_KIND_ORDER.get(o["kind"], 4), o["kind"], o["metadata"]["name"]),
    )
