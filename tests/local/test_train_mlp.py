"""The MLP trained from a function on the local backend: torchrun on 2 "nodes" of 2 processes
(world 4), c10d on localhost, the loss falling, the progress in the job's status."""

from __future__ import annotations

import re

from t9kjobs.client.local import LocalClient
from tests.local.conftest import TORCHRUN_ENV
from tests.local.mlp_function import train_mlp


def test_the_mlp_trains_on_four_local_ranks(local: LocalClient, torch_python: str) -> None:
    local.python = torch_python
    job = local.train(
        train_mlp, kwargs={"steps": 40}, nodes=2, procs_per_node=2, env=TORCHRUN_ENV, name="mlp"
    )
    done = local.wait(job, timeout=180)
    lines = [line.text for line in local.logs(job, all_replicas=True)]
    assert done.status.phase == "Succeeded", "\n".join(lines[-30:])
    starts = [re.search(r"start rank=(\d) world=(\d) loss=(\S+)", t) for t in lines]
    found = {int(m[1]): float(m[3]) for m in starts if m is not None and m[2] == "4"}
    assert sorted(found) == [0, 1, 2, 3]
    progress = done.status.progress
    assert progress is not None and (progress.step, progress.total_steps) == (40, 40)
    assert progress.metrics["loss"] < found[0] / 5  # rank 0's loss fell
    assert sum("done rank=" in t for t in lines) == 4
