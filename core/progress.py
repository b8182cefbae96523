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

Two keys are reserved, not metrics: `checkpoint=/ckpt/step-1200` (a path without whitespace,
at most `MAX_CHECKPOINT_BYTES`) and `checkpoint_step=1200` name the newest checkpoint the
program saved (`checkpoint_saved`); the operator records it in `status.checkpoint` and hands it
to every pod it creates afterwards (`T9KJOBS_RESUME_FROM`, docs/lifecycle.md, "Checkpoints").

A hung program is seen by what it no longer prints: `report` (on every rank, printing on rank
0 only) re-arms `faulthandler.dump_traceback_later` for `T9KJOBS_STALL_SECONDS` when the pod
has it, so that a rank that stops reporting dumps every thread's Python stack to its standard
error, even one blocked in a collective that holds the GIL (the watchdog is a C thread). And
`on_stop` lets a program save before the operator's SIGTERM (or SIGHUP: ssh-launched ranks get
it when their worker's sshd stops) turns into SIGKILL (`stop_requested`).

Jobs that print no report still show progress when their log has lines such as `step 120/300`
or `Epoch 3/10` (`PROGRESS_PATTERN`), or matches the regular expression (RE2's syntax) in their
annotation `batch.tensorstack.dev/progress-pattern` (named groups `done` and `total`); such a
line gives no metrics.

Why a log line and not a request to the operator: the line needs nothing from the pod (no
token, no route to the operator, no network policy exception) and cannot speak for another
job, since the operator reads it from the pods it created; docs/architecture.md, "Progress".

Reading a log cannot stall the operator, whatever the log or the job's pattern
(docs/security.md): every pattern (the marked line's, `PROGRESS_PATTERN`, the job's own) is
matched by RE2, whose time is linear in the line and which lets go of the GIL while it matches;
a line is cut to `MAX_LINE_BYTES` first (a report is a short line), a read stops when its
`budget` of CPU time is spent, keeping the newest report found, and a job's pattern is taken
only when RE2 reads it, at most `MAX_PATTERN_LENGTH` characters and `MAX_PATTERN_PROGRAM`
instructions, with a group `done` (`pattern_problem`). A number is whole ASCII digits that fit
a signed 64-bit integer, a metric a finite number written in ASCII; anything else is no value.

`report` needs the standard library alone, so that a training image can carry this file
alone, and is harmless anywhere: outside a job it prints the line like any other. The parser
needs google-re2 (imported on first use, so that `report` never does).
"""

from __future__ import annotations

import faulthandler
import functools
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "ANNOTATION_PROGRESS_PATTERN",
    "ENV_STALL_SECONDS",
    "INT64_MAX",
    "MARKER",
    "MAX_CHECKPOINT_BYTES",
    "MAX_LINE_BYTES",
    "MAX_METRICS",
    "MAX_PATTERN_LENGTH",
    "MAX_PATTERN_PROGRAM",
    "PROGRESS_PATTERN",
    "Report",
    "checkpoint_saved",
    "latest_report",
    "latest_report_at",
    "linear",
    "on_stop",
    "parse_report",
    "pattern_problem",
    "report",
    "stop_requested",
]

MARKER = "T9KJOBS_PROGRESS"
# The reserved keys of a marked line that name a checkpoint (not metrics), and the longest path.
CHECKPOINT_KEY = "checkpoint"
CHECKPOINT_STEP_KEY = "checkpoint_step"
MAX_CHECKPOINT_BYTES = 1024
# What the engine sets in every pod of a job that asks for stall detection: the seconds after a
# report at which the ranks' stacks are dumped.
ENV_STALL_SECONDS = "T9KJOBS_STALL_SECONDS"
MAX_METRICS = 16
ANNOTATION_PROGRESS_PATTERN = "batch.tensorstack.dev/progress-pattern"
PROGRESS_PATTERN = (
    r"(?i)\b(?:step|epoch|iter(?:ation)?)\b\s*[=:#]?\s*(?P<done>\d+)(?:\s*/\s*(?P<total>\d+))?"
)
# What the API takes of a step or a total (an integer field: int64).
INT64_MAX = 2**63 - 1
# A line is cut to this many bytes (its last, cut word dropped) before anything matches it:
# a report is a short line, and no line then costs more than this much matching.
MAX_LINE_BYTES = 4096
# A job's own pattern: at most this many characters, and this many RE2 instructions once
# compiled (PROGRESS_PATTERN takes 54; `\pL` alone some 600), compiled within _MAX_MEM.
MAX_PATTERN_LENGTH = 512
MAX_PATTERN_PROGRAM = 4000
_MAX_MEM = 256 * 1024  # RE2's budget for one pattern: its program and its DFA's cache

_MARKED = rf"\b{MARKER}\b((?:\s+[^\s=]+=\S*)*)"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,62}")  # no nested repetition: linear
_NUMBER = frozenset("0123456789+-.eE")  # what a metric is written with (no `nan`, no `1_0`)
_RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@dataclass(frozen=True)
class Report:
    """One progress report: the step reached, the total when known, the metrics (by name);
    `marked`: made by the convention's marked line (not by a free-form one)."""

    step: int
    total: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    marked: bool = False
    checkpoint: str | None = None
    checkpoint_step: int | None = None

    @property
    def percent(self) -> float | None:
        """Of the total, from 0 to 100 (a step past the total is 100); None without a total."""
        if self.total is None or self.total <= 0:
            return None
        return round(min(100.0, 100.0 * max(0, self.step) / self.total), 1)


def _whole(text: str) -> int | None:
    """A whole number in ASCII digits that fits the API's int64; None for anything else (`²`
    is a digit to `str.isdigit` and no number to `int`)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 32:
        return None
    value = int(text)
    return value if value <= INT64_MAX else None


def _finite(text: str) -> float | None:
    """A finite number written in ASCII (`0.41`, `-1e-3`); None for anything else."""
    if not text or not _NUMBER.issuperset(text):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# -- reading: RE2 ------------------------------------------------------------------------------


@functools.cache
def _re2() -> Any:
    """google-re2, imported on first use: `report` needs the standard library alone.

    Its match runs with the GIL released (its binding's `Match` holds a
    `py::gil_scoped_release` while RE2 matches), so even a long match leaves the operator's
    other threads (the Lease's renewal, /healthz, the workers) running."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    return re2


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2 within `_MAX_MEM` (re2.error when it cannot be)."""
    re2 = _re2()
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # a refusal is said by pattern_problem, not on stderr
    return re2.compile(pattern, options)


def linear(pattern: str) -> Any:
    """`pattern` compiled by RE2, once: what reads text a tenant's pods wrote (their progress
    lines here, their stack dumps in `t9kjobs.planner.stacks`) matches it in time linear in
    the text, with the GIL let go (`_re2`). Its `match`, `search` and `start` take and give
    positions in characters, as `re`'s do."""
    return _compiled(pattern)


def pattern_problem(pattern: str) -> str | None:
    """Why a job's `batch.tensorstack.dev/progress-pattern` cannot be used, or None: RE2
    must read it (no backreferences, no lookaround: a match takes time linear in the line),
    within `MAX_PATTERN_LENGTH` characters and `MAX_PATTERN_PROGRAM` instructions, and it
    must have a named group `done`."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"a pattern of {len(pattern)} characters; at most {MAX_PATTERN_LENGTH} are taken"
    try:
        regex = _compiled(pattern)
    except _re2().error as exc:
        said = exc.args[0] if exc.args else exc
        said = said.decode(errors="replace") if isinstance(said, bytes) else str(said)
        if "pattern too large" in said:
            return f"too large: RE2 compiles it within {_MAX_MEM // 1024} KiB, and cannot"
        return (
            f"not a regular expression RE2 reads ({said}): RE2 syntax, without"
            " backreferences or lookaround, matches in time linear in the line"
        )
    if regex.programsize > MAX_PATTERN_PROGRAM:
        return (
            f"too large: RE2 compiles it to {regex.programsize} instructions; at most"
            f" {MAX_PATTERN_PROGRAM} are taken"
        )
    if "done" not in regex.groupindex:
        return r"no named group `done`, the step reached (e.g. `step (?P<done>\d+)`)"
    return None


def _bounded(line: str) -> bytes:
    """The line as UTF-8, cut to `MAX_LINE_BYTES`; a cut line loses its last word too, so
    that no number is read cut short."""
    data = line[:MAX_LINE_BYTES].encode(errors="replace")
    if len(data) <= MAX_LINE_BYTES and len(line) <= MAX_LINE_BYTES:
        return data
    data = data[:MAX_LINE_BYTES]
    return data[: max(data.rfind(b" "), data.rfind(b"\t"), 0)]


def _marked(data: bytes) -> Report | None:
    if MARKER.encode() not in data:  # no RE2 for the many lines without the word
        return None
    found = _compiled(_MARKED).search(data)
    if found is None:
        return None
    pairs: dict[str, str] = {}
    for word in found.group(1).decode(errors="replace").split():
        name, equals, value = word.partition("=")
        if equals:
            pairs[name] = value
    step = _whole(pairs.pop("step", ""))
    if step is None:
        return None
    total_text = pairs.pop("total", None)
    total = _whole(total_text) if total_text is not None else None
    checkpoint = pairs.pop(CHECKPOINT_KEY, None)
    if checkpoint is not None and not _checkpoint_path(checkpoint):
        checkpoint = None
    step_text = pairs.pop(CHECKPOINT_STEP_KEY, None)
    checkpoint_step = _whole(step_text) if step_text is not None and checkpoint else None
    metrics: dict[str, float] = {}
    for name, text in pairs.items():
        value = _finite(text)
        if value is not None and _NAME.fullmatch(name) and len(metrics) < MAX_METRICS:
            metrics[name] = value
    return Report(step, total, metrics, True, checkpoint, checkpoint_step)


def _checkpoint_path(path: str) -> bool:
    """Whether a line can carry `path` as its checkpoint: not empty, no whitespace, at most
    `MAX_CHECKPOINT_BYTES` bytes."""
    return (
        bool(path)
        and not any(c.isspace() for c in path)
        and (len(path.encode(errors="replace")) <= MAX_CHECKPOINT_BYTES)
    )


def parse_report(line: str) -> Report | None:
    """The report a line makes by the convention (module docstring), else None."""
    return _marked(_bounded(line))


def _free_form(data: bytes, regex: Any) -> Report | None:
    match = regex.search(data)
    if match is None:
        return None
    groups = match.groupdict()
    step = _whole((groups.get("done") or b"").decode(errors="replace"))
    if step is None:
        return None
    total = _whole((groups.get("total") or b"").decode(errors="replace"))
    return Report(step, total)


def latest_report(
    lines: Iterable[str], pattern: str | None = None, *, budget: float | None = None
) -> Report | None:
    """The newest report of `lines` (oldest first): the last marked line, else the last line
    `pattern` matches (`PROGRESS_PATTERN` when None). ValueError for a pattern that
    `pattern_problem` refuses. `budget`: the seconds of this thread's CPU time the search may
    take (None: no bound); spent, it stops with the newest report found so far."""
    found = latest_report_at(lines, pattern, budget=budget)
    return found[1] if found is not None else None


def latest_report_at(
    lines: Iterable[str], pattern: str | None = None, *, budget: float | None = None
) -> tuple[int, Report] | None:
    """`latest_report`, with the index of the line that made it.

    The lines are read newest first: the first marked line met ends the search, and once a
    free-form report is found only marked lines are looked for."""
    if pattern:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise ValueError(f"{ANNOTATION_PROGRESS_PATTERN}: {problem}")
    regex = _compiled(pattern or PROGRESS_PATTERN)
    texts = list(lines)
    deadline = None if budget is None else time.thread_time() + budget
    free: tuple[int, Report] | None = None
    for i in range(len(texts) - 1, -1, -1):
        if deadline is not None and time.thread_time() > deadline:
            break  # spent: what was found stands
        data = _bounded(texts[i])
        report = _marked(data)
        if report is not None:
            return i, report
        if free is None and (report := _free_form(data, regex)) is not None:
            free = (i, report)
    return free


_last_printed = 0.0
_last_armed = 0.0
_last_total: int | None = None
_checkpoint: tuple[str, int] | None = None  # the newest one saved: every later line repeats it
_stop = False


def _rank() -> str:
    return next((os.environ[v] for v in _RANK_VARIABLES if v in os.environ), "0")


def _arm_stack_dump(now: float) -> None:
    """Dump every thread's stack to standard error `T9KJOBS_STALL_SECONDS` after this call,
    unless called again before (at most once a second: re-arming is a syscall or two)."""
    global _last_armed
    seconds = _whole(os.environ.get(ENV_STALL_SECONDS, ""))
    if not seconds or (_last_armed and now - _last_armed < 1.0):
        return
    _last_armed = now
    faulthandler.dump_traceback_later(seconds, exit=False)


def _print(parts: list[str], out: TextIO | None) -> None:
    if _checkpoint is not None:
        parts += [f"{CHECKPOINT_KEY}={_checkpoint[0]}", f"{CHECKPOINT_STEP_KEY}={_checkpoint[1]}"]
    # One write, the newline in it: ranks sharing a stdout (torchrun's on one pod) never merge
    # lines, as print's separate write of the newline lets them (a line ending
    # `loss=0.05done rank=1 ...` loses its metric).
    stream = out or sys.stdout
    stream.write(" ".join(parts) + "\n")
    stream.flush()


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
    does not take, is left out. On every rank it re-arms the stack dump of a hung program
    (module docstring), and every line repeats the newest checkpoint saved."""
    global _last_printed, _last_total
    now = time.monotonic()
    _arm_stack_dump(now)
    if _rank() != "0":
        return False
    final = total is not None and step == total
    if not final and _last_printed and now - _last_printed < every:
        return False
    _last_printed = now
    parts = [MARKER, f"step={int(step)}"]
    if total is not None:
        _last_total = int(total)
        parts.append(f"total={int(total)}")
    for name, value in metrics.items():
        number = _finite(str(value))
        if number is not None and _NAME.fullmatch(name):
            parts.append(f"{name}={number:.6g}")
    _print(parts, out)
    return True


def checkpoint_saved(path: str, step: int, *, out: TextIO | None = None) -> bool:
    """Say that the checkpoint `path` (holding step `step`) is saved: a line at once on rank 0
    (no rate limit), and every later `report` line repeats it, so that the operator, which reads
    only the newest line, cannot miss it. False, and nothing said, for a path no line can carry
    (empty, with whitespace, longer than `MAX_CHECKPOINT_BYTES`) or on another rank."""
    global _checkpoint
    if not _checkpoint_path(str(path)):
        return False
    _checkpoint = (str(path), int(step))
    if _rank() != "0":
        return False
    parts = [MARKER, f"step={int(step)}"]
    if _last_total is not None:
        parts.append(f"total={_last_total}")
    _print(parts, out)
    return True


def on_stop(handler: Callable[[], None] | None = None) -> None:
    """Catch the stop the operator causes (SIGTERM; SIGHUP, which ssh-launched ranks get when
    their worker's sshd stops): `stop_requested()` turns True and `handler`, if any, runs. The
    pod has `T9KJOBS_STOP_GRACE_SECONDS` from then to save before SIGKILL. Call it from the
    main thread (Python's rule for signal handlers)."""

    def caught(signum: int, frame: object) -> None:
        global _stop
        _stop = True
        if handler is not None:
            handler()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, caught)


def stop_requested() -> bool:
    """Whether a stop was caught since `on_stop` (the program should save and exit)."""
    return _stop
