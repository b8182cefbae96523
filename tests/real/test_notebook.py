"""docs/notebooks/train.ipynb on the real node: the same cells as on the local backend
(tests/local/test_notebook.py), executed by a Jupyter kernel with `T9KJOBS_NOTEBOOK_BACKEND=
cluster`: the MLP, a function, trained by torchrun on 2 pods of 2 processes (world 4) in the
trainer image, which carries no t9k-jobs (the runner and `t9kjobs.progress` travel in the job),
its spec changed through the kind's model (`function_job`) for an image never pulled. The
kubeconfig the kernel reads is the cluster's, its context set to the test's namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cluster import Cluster
from tests.notebooks import check_outputs, execute
from tests.operators import OperatorProcess
from tests.real.conftest import TRAINER_IMAGE

OPERATOR_ARGS = ("--progress-interval", "2")


def test_the_notebook_trains_on_four_ranks_of_the_real_node(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    for context in kubeconfig["contexts"]:
        context["context"]["namespace"] = namespace
    mine = tmp_path / "kubeconfig"
    mine.write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(mine))
    monkeypatch.setenv("T9KJOBS_NOTEBOOK_BACKEND", "cluster")
    monkeypatch.setenv("T9KJOBS_NOTEBOOK_IMAGE", TRAINER_IMAGE)
    notebook = execute(tmp_path, timeout=600)
    took = check_outputs(notebook, "cluster")
    print(f"cluster: from train() to the first step: {took:.1f}s")
