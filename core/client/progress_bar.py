"""A job's progress as a bar while `Client.wait` and `Client.logs(follow=True)` wait: the step
of the total, the time left and the latest metrics, as the job's status says them
(`status.progress`, which the operator reads from the program's reports: docs/python.md,
"Progress"), with the phase the job is in (and why: `Queued (Preempted)`) before them.

    GenericJob/mlp Running:  40%|████      | 120/300 [00:12, about 1m35s left, loss=0.41]

The bar is tqdm's: its notebook widget in a Jupyter kernel (with ipywidgets; a text bar in
the cell without them), its text bar in a terminal. It is shown when asked (`progress_bar=True`
to a call), else as `T9KJOBS_PROGRESS_BAR` says (`1` or `0`), else where someone watches: in a
Jupyter kernel, or when standard error is a terminal; never in a pipeline's log, where a bar
redrawn with carriage returns is noise.

The time left is the operator's estimate (the pace between the program's last two reports),
not tqdm's: the bar sees the status every few seconds and would guess from those jumps. While
a log is followed, a progress line of the deciding replica (the log the operator reads) moves
the step and the metrics at once, until the status holds a newer report (`JobBar.reported`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TextIO

from t9kjobs.client.errors import ClientError
from t9kjobs.client.job_logs import LogLine
from t9kjobs.models import Job
from t9kjobs.models.job_html import duration_text, phase_text
from t9kjobs.planner.conditions import parse_time
from t9kjobs.progress import Report, parse_report

__all__ = ["ENV_PROGRESS_BAR", "JobBar", "bar_wanted", "followed", "in_notebook"]

ENV_PROGRESS_BAR = "T9KJOBS_PROGRESS_BAR"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})

# With a total: the phase, the percent, the bar, the steps, the time spent and the rest.
_WITH_TOTAL = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
# Without one (none reported yet, or a program that reports no total): the step alone.
_NO_TOTAL = "{desc}: step {n_fmt} [{elapsed}{postfix}]"


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython imported, its shell a kernel's): the
    test tqdm.autonotebook makes."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def bar_wanted(asked: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to show a bar: as asked; else as `T9KJOBS_PROGRESS_BAR` says; else in a Jupyter
    kernel, or when `stream` (standard error) is a terminal."""
    if asked is not None:
        return asked
    said = os.environ.get(ENV_PROGRESS_BAR, "").strip().lower()
    if said in _ON:
        return True
    if said in _OFF:
        return False
    if said not in ("", "auto"):
        warnings.warn(
            f"{ENV_PROGRESS_BAR}={said!r}: give 1 (a bar), 0 (none) or auto; taken as auto",
            UserWarning,
            stacklevel=3,
        )
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return in_notebook() or bool(isatty is not None and isatty())


def _bar_class(notebook: bool) -> Any:
    """tqdm's notebook bar in a kernel that has ipywidgets; its text bar otherwise."""
    if notebook:
        from tqdm import notebook as tqdm_notebook

        if tqdm_notebook.IProgress is not None:
            return tqdm_notebook.tqdm
        warnings.warn(
            "the notebook's progress bar needs ipywidgets (pip install ipywidgets): a text bar"
            " instead",
            UserWarning,
            stacklevel=4,
        )
    from tqdm import std as tqdm_std

    return tqdm_std.tqdm


class JobBar:
    """The bar of one job (`what`: `GenericJob/mlp`), made at its first `show`; every method
    does nothing when `enabled` is False. `notebook` None: as `in_notebook` says; `file`: the
    text bar's stream (standard error)."""

    def __init__(
        self,
        what: str,
        *,
        enabled: bool = True,
        notebook: bool | None = None,
        file: TextIO | None = None,
        ncols: int | None = None,
    ) -> None:
        self.what = what
        self.enabled = enabled
        self.notebook = in_notebook() if notebook is None else notebook
        self.file = file
        self.ncols = ncols
        self.bar: Any = None
        self.shown: Any = None  # the widget's display handle, in a notebook
        self.phase: str | None = None
        self.job: Job | None = None  # as last shown
        self.line: tuple[datetime, Report] | None = None  # the newest progress line seen

    def reported(self, report: Report, at: str | None) -> None:
        """A progress line the program printed at `at` (a followed log line's time): the bar
        moves at once, without waiting for the operator to read it into the status."""
        if not self.enabled or at is None:
            return
        self.line = (parse_time(at), report)
        if self.job is not None:
            self.show(self.job)

    def show(self, job: Job) -> None:
        """Draw the job as its status says now: phase, step of total, time left, metrics (the
        step and metrics of a progress line seen since, when the status is older)."""
        if not self.enabled:
            return
        self.job = job
        status = job.status
        progress = status.progress
        step = progress.step if progress is not None and progress.step is not None else 0
        total = progress.total_steps if progress is not None and progress.total_steps else None
        metrics = dict(progress.metrics) if progress is not None else {}
        said = progress.last_update_time if progress is not None else None
        if self.line is not None and (said is None or parse_time(said) < self.line[0]):
            report = self.line[1]
            step, total, metrics = report.step, report.total or total, report.metrics or metrics
        self.phase = status.phase
        desc = f"{self.what} {phase_text(status)}"
        extra = []
        if progress is not None and progress.remaining_seconds and status.phase == "Running":
            extra.append(f"about {duration_text(progress.remaining_seconds)} left")
        extra += [f"{k}={v:.4g}" for k, v in metrics.items()]
        if self.bar is None:
            bar_class = _bar_class(self.notebook)
            # The widget is displayed here, with a handle to update its output once it ends.
            widget = {"display": False} if bar_class.__module__ == "tqdm.notebook" else {}
            self.bar = bar_class(
                total=total,
                initial=step,
                desc=desc,
                postfix=", ".join(extra) or None,  # a string: tqdm shows it as it is
                bar_format=_WITH_TOTAL if total else _NO_TOTAL,
                file=self.file,
                ncols=self.ncols,
                leave=True,
                dynamic_ncols=self.ncols is None and not self.notebook,
                **widget,
            )
            if widget:
                # IPython is there (a kernel drew the widget); its display is untyped.
                ipython_display: Any = importlib.import_module("IPython.display")
                self.shown = ipython_display.display(self.bar.container, display_id=True)
        elif total != self.bar.total:
            # A total reported (or changed) since the bar was made.
            self.bar.bar_format = _WITH_TOTAL if total else _NO_TOTAL
            if hasattr(self.bar, "container"):
                # The notebook's widget takes its new maximum in `reset`, which restarts the
                # clock too: the bar's clock is kept.
                started = self.bar.start_t
                self.bar.reset(total=total)
                self.bar.start_t = started
            else:
                self.bar.total = total
        self.bar.n = step
        self.bar.set_description_str(desc, refresh=False)
        self.bar.set_postfix_str(", ".join(extra), refresh=False)
        self.bar.refresh()

    def clear(self) -> None:
        """Take the text bar off its line, for a log line to be printed there."""
        if self.bar is not None:
            self.bar.clear()

    def refresh(self) -> None:
        """Draw the text bar again, below the lines printed since `clear`."""
        if self.bar is not None:
            self.bar.refresh()

    def close(self) -> None:
        """End the bar where it stands: green once the job Succeeded, red once it Failed, as it
        was otherwise (a wait that returns at Running is no failure)."""
        if self.bar is None:
            return
        self.bar.close()
        if self.notebook and hasattr(self.bar, "container"):
            # tqdm's notebook bar turns red when closed short of its total; the job says better.
            style = {"Succeeded": "success", "Failed": "danger"}.get(self.phase or "", "")
            self.bar.container.children[1].bar_style = style
            if self.shown is not None:
                # The output's text (the widget's repr: the text bar) says the last frame, not
                # the first: a saved notebook read without the widget shows where it ended.
                self.shown.update(self.bar.container)


def followed(
    lines: Iterator[LogLine],
    bar: JobBar,
    look: Callable[[], Job],
    interval: float,
    deciding: str | None = None,
) -> Iterator[LogLine]:
    """`lines` (a followed log) with `bar` showing the job, looked at (`look`) at most every
    `interval` seconds between lines, and once more at the end; a progress line of the
    `deciding` replica (the one whose log the operator reads) moves it at once. The text bar
    is cleared for each line handed on, and drawn again when the next is asked for."""

    def show() -> None:
        # The job gone, the API server away: the log says the rest.
        with contextlib.suppress(ClientError):
            bar.show(look())

    shown = time.monotonic()
    show()
    try:
        for line in lines:
            if time.monotonic() - shown >= interval:
                show()
                shown = time.monotonic()
            report = None if line.replica != deciding or line.note else parse_report(line.text)
            if report is not None:
                bar.reported(report, line.time)
            bar.clear()
            yield line
            bar.refresh()
        show()
    finally:
        bar.close()
