"""`client.train` on the real node: the MLP of tests/local/mlp_function.py, a function, trained by
torchrun on 2 pods of 2 processes (world 4) in the trainer image. The image carries no t9k-jobs:
the runner and `t9kjobs.progress` travel in the job. The rest of the spec is set through the
kind's model (`function_job`), as docs/python.md shows."""

from __future__ import annotations

import re

from t9kjobs.client import Client
from t9kjobs.models import RunPolicy
from tests.cluster import Cluster
from tests.local.mlp_function import train_mlp
from tests.operators import OperatorProcess

OPERATOR_ARGS = ("--progress-interval", "2")
TRAINER = "localhost/t9kjobs-trainer:latest"


def test_a_function_trains_on_four_ranks_of_the_real_node(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    job = client.function_job(
        train_mlp, kwargs={"steps": 40}, nodes=2, procs_per_node=2, image=TRAINER, name="fn-mlp"
    )
    for replicas in job.spec.replica_specs:
        for container in replicas.template["spec"]["containers"]:
            container["imagePullPolicy"] = "IfNotPresent"  # no registry: imported into the node
    job.spec.run_policy = RunPolicy(clean_up_policy="None")  # every rank's log kept
    job = client.create(job)
    done = client.wait(job, timeout=600)
    lines = [line.text for line in client.logs(job, all_replicas=True)]
    assert done.status.phase == "Succeeded", "\n".join(lines[-40:])
    starts = [re.search(r"start rank=(\d) world=4 loss=(\S+)", t) for t in lines]
    first = {int(m[1]): float(m[2]) for m in starts if m is not None}
    assert sorted(first) == [0, 1, 2, 3]
    progress = done.status.progress
    assert progress is not None and (progress.step, progress.total_steps) == (40, 40)
    assert progress.metrics["loss"] < first[0] / 5  # rank 0's loss fell
