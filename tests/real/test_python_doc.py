"""docs/python.md's walkthrough, run as written on the real node: every `python` block is a
cell, run in order in one namespace of names, from the repository's root, with a kubeconfig
whose context names this test's namespace (what a user's notebook would have). A block marked
`python norun` is a fragment of a training script, not a cell."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from t9kjobs.client import Client, JobNotFound
from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.repo import REPO

OPERATOR_ARGS = ("--progress-interval", "2")

DOC = REPO / "docs/python.md"


def cells(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_the_doc_has_the_cells_the_issue_asks_for() -> None:
    found = cells(DOC.read_text())
    code = "\n".join(found)
    for call in ("Client()", "client.create(", "client.logs(", "client.wait(", "client.delete("):
        assert call in code, call
    assert "report(step" not in code  # the training-script fragment is not a cell


def test_the_walkthrough_runs_as_written(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(Path(cluster.kubeconfig).read_bytes())
    cluster.kubectl(
        "--kubeconfig",
        str(kubeconfig),
        "config",
        "set-context",
        "--current",
        f"--namespace={namespace}",
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.chdir(REPO)
    names: dict[str, object] = {"__name__": "__walkthrough__"}
    outputs = []
    for i, cell in enumerate(cells(DOC.read_text())):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(cell, f"docs/python.md cell {i + 1}", "exec"), names)
        outputs.append(out.getvalue())
    text = "\n".join(outputs)
    print(text)  # the session, for the log
    connect, create, running, logs, finished, events, invalid, deleted = outputs
    assert connect.split()[0] == namespace and "GenericJob" in connect
    assert create.split() == ["GenericJob", "generic-mlp", "GenericJobSpec"]
    assert running.splitlines()[-1].startswith("Running")
    assert "[master-0] done rank=0 world=3" in logs, logs
    assert re.search(r"^\[master-0\] T9KJOBS_PROGRESS step=300 total=300 loss=", logs, re.M)
    assert finished.splitlines()[-1].startswith("Succeeded 100.0 300 {'loss': ")
    assert any(
        line.startswith("Pod/generic-mlp-master-0 Scheduled") for line in events.splitlines()
    )
    assert "spec.replicaSpecs[0].replicas" in invalid
    assert deleted.strip() == "[]"
    with pytest.raises(JobNotFound):
        Client(kubeconfig=kubeconfig).get("gj/generic-mlp")
    assert cluster.kubectl("-n", namespace, "get", "pods", "-o", "name").stdout == ""
