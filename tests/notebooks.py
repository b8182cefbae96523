"""docs/notebooks/train.ipynb executed by a Jupyter kernel (nbclient, ipykernel), on the backend
its first cell reads from `T9KJOBS_NOTEBOOK_BACKEND`, and what its outputs must show on either:
the MLP's loss falling on every rank of world 4, the job Succeeded at its last step, the
progress bars' last frames (the widgets' state kept in the notebook), the time from `train()`
to the first step, and a function reading the notebook's state refused by name. The local tier
(tests/local/test_notebook.py) and the real one (tests/real/test_notebook.py) run it."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

from tests.repo import REPO

__all__ = ["NOTEBOOK", "check_outputs", "execute"]

NOTEBOOK = REPO / "docs/notebooks/train.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute(folder: Path, timeout: int) -> nbformat.NotebookNode:
    """The notebook run top to bottom in `folder` (the environment is the caller's), with the
    widgets' state stored in its metadata, as a saved notebook needs to show the bars; saved
    there as `executed.ipynb`."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    try:
        nbclient.NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=True,
            resources={"metadata": {"path": str(folder)}},
        ).execute()
    finally:
        nbformat.write(notebook, folder / "executed.ipynb")  # to read after a failure
    return notebook


def _text(cell: nbformat.NotebookNode) -> str:
    out = []
    for output in cell.get("outputs", []):
        out.append(output.get("text", ""))
        out.append((output.get("data") or {}).get("text/plain", ""))
    return "\n".join(t.rstrip("\n") for t in out if t)


def check_outputs(notebook: nbformat.NotebookNode, backend: str, steps: int = 60) -> float:
    """Assert what the executed notebook shows; the seconds from `train()` to the first step."""
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    texts = [_text(c) for c in cells]
    assert texts[0].strip() == repr(backend)
    logs = next(t for t in texts if "start rank=" in t)
    first = {
        int(m[1]): float(m[2]) for m in re.finditer(r"start rank=(\d) world=4 loss=(\S+)", logs)
    }
    last = {
        int(m[1]): float(m[2]) for m in re.finditer(r"done rank=(\d) world=4 last_loss=(\S+)", logs)
    }
    assert sorted(first) == sorted(last) == [0, 1, 2, 3]
    assert all(last[r] < first[r] / 5 for r in first)  # every rank's loss fell
    lines = [line for t in texts for line in t.splitlines()]
    assert any(line.startswith(f"Succeeded {steps} {{'loss':") for line in lines), lines
    # Both bars (the log's and the wait's) end at the last step, Succeeded; their widgets'
    # models are stored, and their text is the last frame.
    state = notebook.metadata["widgets"][WIDGET_STATE]["state"]
    bars = [
        o["data"]
        for c in cells
        for o in c.get("outputs", [])
        if WIDGET_VIEW in (o.get("data") or {})
    ]
    assert len(bars) == 2, bars
    for bar in bars:
        assert bar[WIDGET_VIEW]["model_id"] in state
        assert re.search(rf"Succeeded: 100%\|.*\| {steps}/{steps} \[.*loss=", bar["text/plain"])
    took = re.search(rf"{backend}: from train\(\) to the first step: (\S+)s", logs)
    assert took is not None, logs
    refusal = next(t for t in texts if "FunctionNotSendable" in t)
    assert "`samples` (a list of the notebook" in refusal
    return float(took[1])
