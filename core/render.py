"""What the operator would create for a job at its start, without a cluster.

The plugins are configured as the operator's command line would configure them (the same
options, the same defaults: `t9kjobs render --gang-scheduling native ...`). The cluster is
taken to serve every child kind but those of alpha APIs (`v1alpha2`: off unless the cluster's
feature gates turn them on, e.g. kube-scheduler's PodGroup): what the operator does on such a
cluster is what render shows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import Obj
from t9kjobs.planner import Observed, plan

__all__ = ["render_job"]

# What pods use exists before them; the other kinds by name between.
_KIND_ORDER = {"Secret": 0, "ConfigMap": 1, "Service": 2, "Pod": 5}
# Rendering reads no clock: the objects at a job's start do not depend on the time.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def render_job(job: Job, manager: PluginManager) -> list[Obj]:
    """Every child the first reconcile of `job` creates, Secrets before Pods, each by name."""
    fresh = job.model_copy(update={"status": manager.kind_info(job.kind).status_model()})
    alpha = frozenset(
        key
        for key, child in manager.child_kinds().items()
        if "alpha" in child.api_version.rpartition("/")[2]
    )
    created = plan(fresh, Observed(absent_kinds=alpha), _EPOCH, manager.hooks_for(job.kind)).create
    return sorted(
        created,
        key=lambda o: (_KIND_ORDER.get(o["kind"], 4), o["kind"], o["metadata"]["name"]),
    )
