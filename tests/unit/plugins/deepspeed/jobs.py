"""DeepSpeedJob manifests for the tests: one base job, changed per test."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["base_manifest", "container", "with_spec"]

_BASE: dict[str, Any] = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "DeepSpeedJob",
    "metadata": {"name": "ds", "namespace": "team", "uid": "uid-1"},
    "spec": {
        "config": {
            "slotsPerWorker": 2,
            "run": {"python": ["/workspace/train.py", "--epochs=3"]},
        },
        "worker": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "worker",
                            "image": "deepspeed:latest",
                            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                        }
                    ]
                }
            },
        },
    },
}


def base_manifest() -> dict[str, Any]:
    """A valid DeepSpeedJob `ds` in namespace `team`: 2 workers, 2 slots, a python script."""
    return copy.deepcopy(_BASE)


def with_spec(**changes: Any) -> dict[str, Any]:
    """The base manifest with top-level spec fields replaced (`config=...`, `worker=...`)."""
    doc = base_manifest()
    doc["spec"].update(copy.deepcopy(changes))
    return doc


def container(doc: dict[str, Any]) -> dict[str, Any]:
    """The training container of a manifest's worker template, to change in place."""
    result: dict[str, Any] = doc["spec"]["worker"]["template"]["spec"]["containers"][0]
    return result
