"""An example manifest on the local backend, as written but for where the script is and its
size: the PyTorchTrainingJob MLP (torchrun, two processes a pod) on a master and one worker
(world 4: the machine has 2 cores), the trainer image's examples/mlp.py taken from the
repository. The function path is the notebook's
(tests/local/test_notebook.py)."""

from __future__ import annotations

import re

import yaml

from t9kjobs.client.local import LocalClient
from tests.local.conftest import TORCHRUN_ENV
from tests.repo import REPO

EXAMPLE = REPO / "examples/pytorchtrainingjob/mlp-cpu.yaml"
SCRIPT = REPO / "hack/images/trainer/examples/mlp.py"


def test_the_torchrun_example_trains_here(local: LocalClient, torch_python: str) -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    for replicas in manifest["spec"]["replicaSpecs"]:
        replicas["replicas"] = 1
        for container in replicas["template"]["spec"]["containers"]:
            container["args"] = [str(SCRIPT), "--steps=40", "--log-every=20"]
            container["env"] = [{"name": k, "value": v} for k, v in TORCHRUN_ENV.items()]
    local.python = torch_python
    job = local.create(manifest)
    done = local.wait(job, timeout=180, interval=0.5)
    lines = [line.text for line in local.logs(job, all_replicas=True)]
    assert done.status.phase == "Succeeded", "\n".join(lines[-30:])
    found = [
        re.search(r"done rank=(\d) world=4 first_loss=(\S+) last_loss=(\S+)", t) for t in lines
    ]
    losses = {int(m[1]): (float(m[2]), float(m[3])) for m in found if m is not None}
    assert sorted(losses) == [0, 1, 2, 3]
    assert all(last < first / 5 for first, last in losses.values())
    progress = done.status.progress
    assert progress is not None and (progress.step, progress.total_steps) == (40, 40)
