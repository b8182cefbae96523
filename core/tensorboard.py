"""A job's TensorBoard: `spec.tensorboardSpec` → an owned `TensorBoard` → `status.tensorboard`.

TensorStack's kinds commonly offer a TensorBoard (tensorstack.dev/v1beta1) created with the job
to show its training logs. The pieces a kind needs are here, so that every kind spells them the
same way:

* in its spec model, the field `tensorboard_spec: dict[str, Any] | None = tensorboard_spec_field()`
  (kept as written: the CRD preserves its unknown fields, T9k's TensorBoard controller owns it);
* in `t9kjobs_build_objects`, `*tensorboard_objects(job, spec.tensorboard_spec)`: a TensorBoard
  named after the job, owned by it (deleted with it, and when the field is removed);
* as its `status_model`, `TensorBoardJobStatus` (or a subclass), and in `t9kjobs_update_status`,
  `status.tensorboard = tensorboard_status(job, children)` when the field is set.

Without the TensorBoard CRD the job still runs: the engine leaves the child out and sets the
condition `Degraded` (see `t9kjobs_mutate_pod`'s `absent_kinds`), and `tensorboard_status`
reports it `NotFound`, not ready, with a note saying when it will be created.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from t9kjobs.models import DependentStatus, Job, JobStatus
from t9kjobs.objects import Obj, owner_labels, owner_reference

__all__ = [
    "TENSORBOARD_API_VERSION",
    "TENSORBOARD_KIND",
    "TensorBoardJobStatus",
    "tensorboard",
    "tensorboard_objects",
    "tensorboard_spec_field",
    "tensorboard_status",
]

TENSORBOARD_API_VERSION = "tensorstack.dev/v1beta1"
TENSORBOARD_KIND = "TensorBoard"


def tensorboard_spec_field() -> Any:
    """The spec field `tensorboardSpec`: optional, free-form (the TensorBoard's own spec)."""
    return Field(
        default=None,
        description=f"Spec of a TensorBoard ({TENSORBOARD_API_VERSION}) created with the job,"
        " named after it, to show the training logs.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class TensorBoardJobStatus(JobStatus):
    """The shared job status plus the TensorBoard's."""

    tensorboard: DependentStatus | None = Field(
        default=None, description="The status of the TensorBoard, if the job has one."
    )


def tensorboard(job: Job, spec: Obj) -> Obj:
    """The job's TensorBoard: named after the job (as T9k names it), `spec` copied as given."""
    return {
        "apiVersion": TENSORBOARD_API_VERSION,
        "kind": TENSORBOARD_KIND,
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": owner_labels(job),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": copy.deepcopy(spec),
    }


def tensorboard_objects(job: Job, spec: Obj | None) -> list[Obj]:
    """The TensorBoard to create for `spec.tensorboardSpec`: none when it is unset."""
    return [] if spec is None else [tensorboard(job, spec)]


def _ready(board: Obj) -> bool:
    conditions = (board.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def tensorboard_status(job: Job, children: Mapping[tuple[str, str], Obj]) -> DependentStatus:
    """`status.tensorboard` from the observed children: ready when its `Ready` condition is
    True; `NotFound` while the cluster holds none (not created yet, or its CRD not installed)."""
    ref = {
        "apiVersion": TENSORBOARD_API_VERSION,
        "kind": TENSORBOARD_KIND,
        "name": job.name,
        "namespace": job.namespace,
    }
    found = children.get((TENSORBOARD_KIND, job.name))
    if found is None:
        return DependentStatus(
            name="tensorboard",
            dependent=ref,
            ready=False,
            reason="NotFound",
            action="Create",
            note=f"the TensorBoard is created when the cluster serves {TENSORBOARD_API_VERSION}",
            type="Warning",
        )
    ready = _ready(found)
    return DependentStatus(
        name="tensorboard",
        dependent={**ref, "uid": found["metadata"].get("uid")},
        ready=ready,
        reason="Ready" if ready else "NotReady",
        action="None",
        type="Normal",
    )
