"""Training progress: what a training script reports, and how the operator reads it back.

A script calls `report(step, total, loss=...)`; it prints one line to standard output,

    T9KJOBS_PROGRESS step=120 total=300 loss=0.41 accuracy=0.87

and the operator reads the newest such line from the log of the job's deciding replica
(master-0, launcher, worker-0) into `status.progress` (docs/python.md, "Progress"). A script
that cannot import this module prints the same line itself: a word `T9KJOBS_PROGRESS`, then
`name=value` pairs separated by spaces, anywhere in a line (a launcher's prefix such as pdsh's
`worker-0: ` in front is fine). `step` is a whole number, `total` too when given; every other
pair whose value is a finite number is a metric (at most `MAX_METRICS`, names of at most 63
characters). A line without the word is no report, whatever else it says.

Jobs that print no report still show progress when their log has lines such as `step 120/300`
or `Epoch 3/10` (`PROGRESS_PATTERN`), or matches the regular expression in their annotation
`batch.tensorstack.dev/progress-pattern` (named groups `done` and `total`); such a line gives
no metrics.

Why a log line and not a request to the operator: the line needs nothing from the pod (no
token, no route to the operator, no network policy exception) and cannot speak for another
job, since the operator reads it from the pods it created; docs/architecture.md, "Progress".

Standard library only, so that a training image can carry this file alone; `report` is
harmless anywhere: outside a job it prints the line like any other.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

__all__ = [
    "ANNOTATION_PROGRESS_PATTERN",
    "MARKER",
    "MAX_METRICS",
    "PROGRESS_PATTERN",
    "Report",
    "latest_report",
    "latest_report_at",
    "parse_report",
    "report",
]

MARKER = "T9KJOBS_PROGRESS"
MAX_METRICS = 16
ANNOTATION_PROGRESS_PATTERN = "batch.tensorstack.dev/progress-pattern"
PROGRESS_PATTERN = (
    r"(?i)\b(?:step|epoch|iter(?:ation)?)\b\s*[=:#]?\s*(?P<done>\d+)(?:\s*/\s*(?P<total>\d+))?"
)

_MARKED = re.compile(rf"\b{MARKER}\b((?:\s+[^\s=]+=\S*)*)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,62}$")
_RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@dataclass(frozen=True)
class Report:
    """One progress report: the step reached, the total when known, the metrics (by name);
    `marked`: made by the convention's marked line (not by a free-form one)."""

    step: int
    total: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    marked: bool = False

    @property
    def percent(self) -> float | None:
        """Of the total, from 0 to 100 (a step past the total is 100); None without a total."""
        if self.total is None or self.total <= 0:
            return None
        return round(min(100.0, 100.0 * self.step / self.total), 1)


def _whole(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 18 else None


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_report(line: str) -> Report | None:
    """The report a line makes by the convention (module docstring), else None."""
    found = _MARKED.search(line)
    if found is None:
        return None
    pairs = dict(p.split("=", 1) for p in found.group(1).split())
    step = _whole(pairs.pop("step", ""))
    if step is None:
        return None
    total_text = pairs.pop("total", None)
    total = _whole(total_text) if total_text is not None else None
    metrics: dict[str, float] = {}
    for name, text in pairs.items():
        value = _finite(text)
        if value is not None and _NAME.match(name) and len(metrics) < MAX_METRICS:
            metrics[name] = value
    return Report(step, total, metrics, marked=True)


def _free_form(line: str, regex: re.Pattern[str]) -> Report | None:
    match = regex.search(line)
    if match is None:
        return None
    groups = match.groupdict()
    step = _whole(groups.get("done") or "")
    if step is None:
        return None
    total = _whole(groups.get("total") or "")
    return Report(step, total)


def latest_report(lines: Iterable[str], pattern: str | None = None) -> Report | None:
    """The newest report of `lines` (oldest first): the last marked line, else the last line
    `pattern` matches (`PROGRESS_PATTERN` when None). ValueError for a pattern that is not a
    regular expression."""
    found = latest_report_at(lines, pattern)
    return found[1] if found is not None else None


def latest_report_at(lines: Iterable[str], pattern: str | None = None) -> tuple[int, Report] | None:
    """`latest_report`, with the index of the line that made it."""
    try:
        regex = re.compile(pattern or PROGRESS_PATTERN)
    except re.error as exc:
        raise ValueError(f"{ANNOTATION_PROGRESS_PATTERN}: {exc}") from None
    marked: tuple[int, Report] | None = None
    free: tuple[int, Report] | None = None
    for i, line in enumerate(lines):
        report = parse_report(line)
        if report is not None:
            marked = (i, report)
        elif marked is None and (report := _free_form(line, regex)) is not None:
            free = (i, report)
    return marked or free


_last_printed = 0.0


def _rank() -> str:
    return next((os.environ[v] for v in _RANK_VARIABLES if v in os.environ), "0")


def report(
    step: int,
    total: int | None = None,
    *,
    every: float = 1.0,
    out: TextIO | None = None,
    **metrics: float,
) -> bool:
    """Report training progress: `step` of `total`, and metrics such as `loss=0.41`.

    Only rank 0 reports (the environment's RANK, else OMPI_COMM_WORLD_RANK or PMI_RANK; none
    set: a single process), at most once every `every` seconds but always at `step == total`,
    so that calling it on every step costs nothing. True when a line was printed. Never
    raises for a bad value: a metric that is not a finite number, or a name the convention
    does not take, is left out."""
    global _last_printed
    if _rank() != "0":
        return False
    now = time.monotonic()
    final = total is not None and step == total
    if not final and _last_printed and now - _last_printed < every:
        return False
    _last_printed = now
    parts = [MARKER, f"step={int(step)}"]
    if total is not None:
        parts.append(f"total={int(total)}")
    for name, value in metrics.items():
        number = _finite(str(value))
        if number is not None and _NAME.match(name):
            parts.append(f"{name}={number:.6g}")
    stream = out or sys.stdout
    print(" ".join(parts), file=stream, flush=True)
    return True
