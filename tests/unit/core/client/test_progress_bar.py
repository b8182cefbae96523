"""The bar `Client.wait` and `Client.logs(follow=True)` show (`t9kjobs.client.progress_bar`): its
text as a terminal gets it, the notebook's widget as a kernel would display it (rendered here
without a browser: ipywidgets keeps its values), which of the two a kernel gets, and when a bar
is shown at all. The same bar across a Kueue preemption, on a cluster: tests/e2e/test_kueue.py."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from typing import Any

import pytest
from kubernetes import client as k8s_client

from t9kjobs.client import Client
from t9kjobs.client.job_logs import LogLine
from t9kjobs.client.progress_bar import (
    ENV_PROGRESS_BAR,
    JobBar,
    bar_wanted,
    followed,
    in_notebook,
)
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.progress import parse_report
from tests.unit.core.client.feedback import ScriptedReader, stored

RUNNING = {
    "phase": "Running",
    "progress": {
        "step": 120,
        "totalSteps": 300,
        "percent": 40,
        "remainingSeconds": 95,
        "metrics": {"loss": 0.41, "accuracy": 0.8712345},
    },
}
SUCCEEDED = {
    "phase": "Succeeded",
    "progress": {"step": 300, "totalSteps": 300, "percent": 100, "metrics": {"loss": 0.12}},
}


def job(manager: PluginManager, status: dict[str, Any]) -> Job:
    return parse_job(stored(status), manager)


def frames(text: str) -> list[str]:
    """What a terminal showed, frame by frame: each redraw starts with a carriage return."""
    return [f.rstrip("\n") for f in text.split("\r") if f.strip()]


def test_the_text_bar_says_phase_steps_time_left_and_metrics(manager: PluginManager) -> None:
    out = io.StringIO()
    bar = JobBar("GenericJob/mlp", file=out, ncols=110, notebook=False)
    bar.show(job(manager, {"phase": "Queued", "reason": "Preempted"}))
    bar.show(job(manager, RUNNING))
    bar.show(job(manager, SUCCEEDED))
    bar.close()
    shown = frames(out.getvalue())
    assert re.fullmatch(r"GenericJob/mlp Queued \(Preempted\): step 0 \[00:0\d\]", shown[0])
    running = next(f for f in shown if "Running" in f)
    assert re.fullmatch(
        r"GenericJob/mlp Running:  40%\|[#0-9]+ +\| 120/300 \[00:0\d, about 1m35s left,"
        r" loss=0\.41, accuracy=0\.8712\]",
        running,
    ), running
    assert re.fullmatch(
        r"GenericJob/mlp Succeeded: 100%\|#+\| 300/300 \[00:0\d, loss=0\.12\]", shown[-1]
    )
    assert out.getvalue().endswith("\n")  # the last frame stays, on a line of its own
    assert len(shown[-1]) == 110  # as wide as asked


def test_a_bar_that_is_off_draws_nothing(manager: PluginManager) -> None:
    out = io.StringIO()
    bar = JobBar("GenericJob/mlp", enabled=False, file=out, notebook=False)
    bar.show(job(manager, RUNNING))
    bar.close()
    assert out.getvalue() == "" and bar.bar is None


def test_the_notebook_widget_holds_the_same_and_ends_in_the_jobs_colour(
    manager: PluginManager,
) -> None:
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):  # display() without a kernel prints the widget
        bar = JobBar("GenericJob/mlp", notebook=True)
        bar.show(job(manager, {"phase": "Pending"}))
        bar.show(job(manager, RUNNING))
        label, progress, stats = bar.bar.container.children
        assert type(progress).__name__ == "FloatProgress"
        assert (progress.value, progress.max) == (120, 300)
        assert label.value.replace("\u2007", " ") == "GenericJob/mlp Running:  40%"
        assert stats.value.replace("\u2007", " ") == (
            " 120/300 [00:00, about 1m35s left, loss=0.41, accuracy=0.8712]"
        )
        failed = {**RUNNING, "phase": "Failed", "reason": "ReplicaFailed"}
        bar.show(job(manager, failed))
        bar.close()
    assert "GenericJob/mlp Pending: step 0" in shown.getvalue()
    assert label.value.startswith("GenericJob/mlp\u2007Failed\u2007(ReplicaFailed)")
    assert progress.bar_style == "danger"


@pytest.mark.parametrize(("phase", "style"), [("Succeeded", "success"), ("Running", "")])
def test_a_notebook_bar_is_red_only_for_a_failed_job(
    manager: PluginManager, phase: str, style: str
) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        bar = JobBar("GenericJob/mlp", notebook=True)
        bar.show(job(manager, {**RUNNING, "phase": phase}))  # short of its total
        bar.close()
    assert bar.bar.container.children[1].bar_style == style


class _Handle:
    """The display handle a kernel's `display(..., display_id=True)` returns: its updates kept."""

    def __init__(self, shown: Any) -> None:
        self.texts = [repr(shown)]

    def update(self, shown: Any) -> None:
        self.texts.append(repr(shown))


def test_a_notebook_bars_output_text_ends_as_its_last_frame(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles: list[_Handle] = []

    def display(shown: Any, display_id: bool = False) -> _Handle | None:
        assert display_id  # a handle, to update the output once the bar ends
        handles.append(_Handle(shown))
        return handles[-1]

    monkeypatch.setattr("IPython.display.display", display)
    bar = JobBar("GenericJob/mlp", notebook=True)
    bar.show(job(manager, {"phase": "Pending"}))
    bar.show(job(manager, RUNNING))
    bar.show(job(manager, SUCCEEDED))
    bar.close()
    assert len(handles) == 1  # one output, displayed once
    first, last = handles[0].texts
    assert first.startswith("GenericJob/mlp Pending: step 0")
    assert re.match(r"GenericJob/mlp Succeeded: 100%\|#+\| 300/300 \[.*loss=0.12\]$", last), last


class _Kernel:
    """What `IPython.get_ipython()` returns in a Jupyter kernel, as far as tqdm and we look."""

    def __init__(self) -> None:
        self.config = {"IPKernelApp": {"connection_file": "kernel.json"}}


def test_in_a_jupyter_kernel_the_notebook_bar_is_chosen(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not in_notebook()
    fake = types.ModuleType("IPython")
    fake.get_ipython = _Kernel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert in_notebook()
    bar = JobBar("GenericJob/mlp")
    assert bar.notebook
    assert bar_wanted(None, io.StringIO())  # in a kernel, with no terminal
    monkeypatch.setattr("tqdm.notebook.IProgress", None)  # a kernel without ipywidgets
    text = io.StringIO()
    with pytest.warns(UserWarning, match="needs ipywidgets"):
        JobBar("GenericJob/mlp", notebook=True, file=text).show(job(manager, RUNNING))
    assert "GenericJob/mlp Running:  40%" in text.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_shown_as_asked_else_as_the_environment_says_else_where_one_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_PROGRESS_BAR, raising=False)
    assert bar_wanted(None, _Terminal()) and not bar_wanted(None, io.StringIO())
    assert not bar_wanted(False, _Terminal()) and bar_wanted(True, io.StringIO())
    monkeypatch.setenv(ENV_PROGRESS_BAR, "0")
    assert not bar_wanted(None, _Terminal()) and bar_wanted(True, _Terminal())
    monkeypatch.setenv(ENV_PROGRESS_BAR, "on")
    assert bar_wanted(None, io.StringIO())
    monkeypatch.setenv(ENV_PROGRESS_BAR, "maybe")
    with pytest.warns(UserWarning, match=r"T9KJOBS_PROGRESS_BAR='maybe': give 1 .* auto"):
        assert not bar_wanted(None, io.StringIO())


def test_followed_lines_clear_the_bar_and_it_is_drawn_again_below_them(
    manager: PluginManager,
) -> None:
    out = io.StringIO()
    bar = JobBar("GenericJob/mlp", file=out, ncols=90, notebook=False)
    looks = [RUNNING, RUNNING, RUNNING, SUCCEEDED]  # at the start, at each line, at the end
    lines = [LogLine("master-0", f"step {n}") for n in (1, 2)]
    printed = []
    for line in followed(iter(lines), bar, lambda: job(manager, looks.pop(0)), interval=0.0):
        out.write(f"{line}\n")  # what the caller prints, where the bar was
        printed.append(out.getvalue())
    text = out.getvalue()
    assert "[master-0] step 1\n" in text and "[master-0] step 2\n" in text
    # Before each line the bar's line was blanked (tqdm's clear: spaces, then back).
    before_first = printed[0][: printed[0].index("[master-0] step 1")]
    assert before_first.endswith("\r" + " " * 90 + "\r")
    assert frames(text)[-1].startswith("GenericJob/mlp Succeeded: 100%")
    assert looks == []


def _client(manager: PluginManager, reader: ScriptedReader) -> Client:
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")  # never asked: the reader answers
    client = Client(api_client=k8s_client.ApiClient(cfg), namespace="team-a", plugins=manager)
    client.reader = reader  # type: ignore[assignment]
    return client


def test_wait_draws_the_bar_on_standard_error_when_asked(
    manager: PluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    client = _client(manager, ScriptedReader({"phase": "Pending"}, RUNNING, SUCCEEDED))
    done = client.wait("gj/mlp", interval=0, progress_bar=True)
    assert done.status.phase == "Succeeded"
    captured = capsys.readouterr()
    assert captured.out == ""
    shown = frames(captured.err)
    assert shown[0].startswith("GenericJob/mlp Pending: step 0 [")
    assert any(f.startswith("GenericJob/mlp Running:  40%|") for f in shown), shown
    assert shown[-1].startswith("GenericJob/mlp Succeeded: 100%|")
    client.wait("gj/mlp", interval=0, progress_bar=False)
    assert capsys.readouterr().err == ""


def test_a_progress_line_of_the_deciding_replica_moves_the_bar_before_the_status_does(
    manager: PluginManager,
) -> None:
    read = {
        **RUNNING,
        "progress": {**RUNNING["progress"], "lastUpdateTime": "2026-11-28T11:00:00Z"},
    }
    newer = {
        "phase": "Running",
        "progress": {"step": 160, "totalSteps": 300, "lastUpdateTime": "2026-11-28T11:00:10Z"},
    }
    looks = [read, read]  # at the start and at the end: both older than the line
    lines = [
        LogLine(
            "master-0", "T9KJOBS_PROGRESS step=150 total=300 loss=0.3", "2026-11-28T11:00:05.5Z"
        ),
        LogLine("worker-1", "T9KJOBS_PROGRESS step=299 total=300", "2026-11-28T11:00:06Z"),
    ]
    out = io.StringIO()
    bar = JobBar("GenericJob/mlp", file=out, ncols=100, notebook=False)
    shown = list(
        followed(iter(lines), bar, lambda: job(manager, looks.pop(0)), 3600, deciding="master-0")
    )
    assert shown == lines and looks == []
    drawn = [f for f in frames(out.getvalue()) if "/300" in f]
    # The status first, then the line's step and metrics, the time left still the status's.
    assert "120/300" in drawn[0] and drawn[0].endswith("loss=0.41, accuracy=0.8712]")
    assert "150/300" in drawn[-1] and drawn[-1].endswith("about 1m35s left, loss=0.3]")
    assert "299/300" not in out.getvalue()  # another replica's line: not what the operator reads
    # A status older than the line leaves the line's step; a newer one takes over.
    again = io.StringIO()
    bar = JobBar("GenericJob/mlp", file=again, ncols=100, notebook=False)
    bar.show(job(manager, read))
    report = parse_report(lines[0].text)
    assert report is not None
    bar.reported(report, lines[0].time)
    bar.show(job(manager, read))
    assert "150/300" in frames(again.getvalue())[-1]
    bar.show(job(manager, newer))
    assert "160/300" in frames(again.getvalue())[-1]
