"""Jobs the scheduling plugin's tests start from: the GenericJob DDP example with a T9k scheduler,
and the elastic minima."""

from __future__ import annotations

from typing import Any

import yaml

from t9kjobs.vocabulary import Obj
from tests.repo import REPO
from tests.unit.plugins.deepspeed.jobs import with_spec
from tests.unit.plugins.pytorch.helpers import manifest, replica

SCHEDULER = {"t9kScheduler": {"queue": "team-a", "priority": 7}}


def generic_ddp(**spec: Any) -> Obj:
    doc: Obj = yaml.safe_load((REPO / "examples/genericjob/torch-ddp.yaml").read_text())
    doc["metadata"].update(namespace="ns", uid="job-uid")
    doc["spec"].update(spec)
    return doc


# Jobs (with t9kScheduler), their pods, and how many they cannot run without: a T9k
# PodGroup's minMember, a kube-scheduler PodGroup's minCount (test_native_gang).
MINIMA = [
    # master + elastic workers: minReplicas does not count the master.
    (
        manifest(
            replica("master"),
            replica("worker", 3),
            elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 5},
            scheduler=SCHEDULER,
        ),
        4,
        3,
    ),
    # no master type: index 0 of the first type is the master and scales with the rest.
    (
        manifest(
            replica("node", 3),
            elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 5},
            scheduler=SCHEDULER,
        ),
        3,
        2,
    ),
    # not elastic: every pod.
    (manifest(replica("master"), replica("worker", 3), scheduler=SCHEDULER), 4, 4),
    (
        with_spec(
            elastic={
                "enabled": True,
                "minReplicas": 1,
                "maxReplicas": 4,
                "expectedReplicas": 3,
            },
            scheduler=SCHEDULER,
        ),
        3,
        1,
    ),
    (with_spec(scheduler=SCHEDULER), 2, 2),
]


MINIMA_IDS = [
    "pytorch-master-elastic",
    "pytorch-elastic",
    "pytorch",
    "deepspeed-elastic",
    "deepspeed",
]
