"""Builders of PyTorchTrainingJob manifests for the tests, and readers of rendered pods."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml

from t9kjobs.objects import find_container
from t9kjobs.vocabulary import Obj
from tests.repo import REPO

__all__ = [
    "EXAMPLES",
    "NOW",
    "Obj",
    "container",
    "env_of",
    "example",
    "manifest",
    "replica",
]

EXAMPLES = REPO / "examples" / "pytorchtrainingjob"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def container(name: str = "pytorch", **fields: Any) -> Obj:
    return {"name": name, "image": "pytorch/pytorch:2.0.0", **fields}


def replica(type_: str, replicas: int = 1, *containers: Obj, **fields: Any) -> Obj:
    """A replica spec; its one container runs `python train.py` unless `containers` are given."""
    default = [container(command=["python", "train.py"])]
    return {
        "type": type_,
        "replicas": replicas,
        "template": {"spec": {"containers": list(containers) or default}},
        **fields,
    }


def manifest(*replicas: Obj, name: str = "job", **spec: Any) -> Obj:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "job-uid"},
        "spec": {"replicaSpecs": list(replicas), **spec},
    }


def example(name: str) -> Obj:
    doc: Obj = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    return doc


def env_of(pod: Obj) -> dict[str, str]:
    """The env of a pod's training container (named `python`, else the first)."""
    c = find_container(pod, "python")
    assert c is not None
    return {e["name"]: e["value"] for e in c.get("env") or [] if "value" in e}


# What the operator sets on every training container (docs/pytorch.md, "Environment"), spelled
# out here rather than read from the code: a name renamed there must fail here.
OPERATOR_ENV = [
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_WORLD_SIZE",
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_RDZV_BACKEND",
    "PET_RDZV_ENDPOINT",
    "PET_RDZV_ID",
    "PET_RDZV_CONF",
]
