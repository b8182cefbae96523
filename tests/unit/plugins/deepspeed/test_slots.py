"""`config.slotsPerWorker`: the hostfile's `slots=N`, by default the worker's GPU count.

The API reference: "normally set to the number of GPUs requested for each replica". Unset, it is
the training container's `nvidia.com/gpu` limit (else request, as PyTorchTrainingJob's
`procPerNode: gpu`), else 1; `status.slotsPerWorker` shows the value used.
"""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.planner import Observed, plan
from t9kjobs.render import render_job
from tests.unit.conftest import NOW
from tests.unit.plugins.deepspeed.jobs import base_manifest, container


def _job(slots: int | None, resources: dict[str, Any] | None) -> dict[str, Any]:
    doc = base_manifest()
    if slots is None:
        del doc["spec"]["config"]["slotsPerWorker"]
    else:
        doc["spec"]["config"]["slotsPerWorker"] = slots
    if resources is not None:
        container(doc)["resources"] = resources
    return doc


GPUS_4 = {"limits": {"nvidia.com/gpu": 4}, "requests": {"nvidia.com/gpu": 4}}


@pytest.mark.parametrize(
    ("slots", "resources", "used"),
    [
        (None, GPUS_4, 4),
        (None, {"limits": {"nvidia.com/gpu": "2", "cpu": "8"}}, 2),
        (None, {"requests": {"nvidia.com/gpu": 3}}, 3),
        (None, {"limits": {"cpu": "8"}}, 1),
        (None, None, 1),
        (None, {"limits": {"nvidia.com/gpu": 0}}, 1),  # a CPU worker still has one slot
        (2, GPUS_4, 2),  # written: it wins
    ],
    ids=["limit-4", "limit-2-string", "request-3", "no-gpu", "no-resources", "zero-gpu", "set-2"],
)
def test_slots_default_to_the_gpu_count_and_status_shows_them(
    make_job: Any, manager: Any, slots: int | None, resources: dict[str, Any] | None, used: int
) -> None:
    job = make_job(_job(slots, resources))
    objects = {o["metadata"]["name"]: o for o in render_job(job, manager)}
    assert objects["ds-hostfile"]["data"]["hostfile"] == (
        f"ds-worker-0.ds slots={used}\nds-worker-1.ds slots={used}\n"
    )
    first = plan(job, Observed(), NOW, manager.hooks_for("DeepSpeedJob"))
    assert first.status.model_dump(by_alias=True)["slotsPerWorker"] == used


def test_the_spec_keeps_slots_unset_when_unset(make_job: Any) -> None:
    """No default in the spec (nor in the CRD): `kubectl get -o yaml` shows what was written."""
    job = make_job(_job(None, GPUS_4))
    assert job.spec.config.slots_per_worker is None
