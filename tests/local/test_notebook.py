"""docs/notebooks/train.ipynb, executed by a Jupyter kernel (nbclient, ipykernel) on the local
backend: the MLP trained from a function in a cell (torchrun, world 4), its loss falling, and a
function reading the notebook's state refused by name."""

from __future__ import annotations

import re

import nbclient
import nbformat
import pytest

from tests.local.conftest import TORCHRUN_ENV
from tests.repo import REPO

NOTEBOOK = REPO / "docs/notebooks/train.ipynb"


def _text(cell: nbformat.NotebookNode) -> str:
    out = []
    for output in cell.get("outputs", []):
        out.append(output.get("text", ""))
        out.append((output.get("data") or {}).get("text/plain", ""))
    return "".join(out)


def test_the_notebook_trains_from_a_function(
    torch_python: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("T9KJOBS_LOCAL_PYTHON", torch_python)
    for name, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    texts = [_text(c) for c in notebook.cells if c.cell_type == "code"]
    logs = next(t for t in texts if "start rank=" in t)
    first = {
        int(m[1]): float(m[2]) for m in re.finditer(r"start rank=(\d) world=4 loss=(\S+)", logs)
    }
    last = {
        int(m[1]): float(m[2]) for m in re.finditer(r"done rank=(\d) world=4 last_loss=(\S+)", logs)
    }
    assert sorted(first) == sorted(last) == [0, 1, 2, 3]
    assert all(last[r] < first[r] / 5 for r in first)  # every rank's loss fell
    assert any(t.startswith("Succeeded 60 {'loss':") for t in texts)
    refusal = next(t for t in texts if "FunctionNotSendable" in t)
    assert "`samples` (a list of the notebook" in refusal
