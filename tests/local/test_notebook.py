"""docs/notebooks/train.ipynb, executed by a Jupyter kernel (nbclient, ipykernel) on the local
backend, as a reader runs it: the MLP trained from a function in a cell (torchrun, world 4),
its loss falling, the progress bars' last frames, and a function reading the notebook's state
refused by name (tests/notebooks.py). The real tier runs it on the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local.conftest import TORCHRUN_ENV
from tests.notebooks import check_outputs, execute


def test_the_notebook_trains_from_a_function(
    torch_python: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("T9KJOBS_NOTEBOOK_BACKEND", raising=False)  # its default: local
    monkeypatch.setenv("T9KJOBS_LOCAL_PYTHON", torch_python)
    for name, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(name, value)
    notebook = execute(tmp_path, timeout=300)
    took = check_outputs(notebook, "local")
    print(f"local: from train() to the first step: {took:.1f}s")
