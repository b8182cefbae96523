"""The progress line convention (`t9kjobs.progress`): what `report` prints is what the operator
reads back, and what is not a report is not read as one."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from t9kjobs import progress
from t9kjobs.progress import (
    INT64_MAX,
    MARKER,
    MAX_LINE_BYTES,
    PROGRESS_PATTERN,
    Report,
    latest_report,
    latest_report_at,
    parse_report,
    pattern_problem,
    report,
)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_last_printed", 0.0)
    monkeypatch.setattr(progress, "_last_armed", 0.0)
    monkeypatch.setattr(progress, "_last_total", None)
    monkeypatch.setattr(progress, "_checkpoint", None)
    monkeypatch.setattr(progress, "_stop", False)
    monkeypatch.delenv("T9KJOBS_STALL_SECONDS", raising=False)
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_what_report_prints_parses_back() -> None:
    out = io.StringIO()
    assert report(120, 300, loss=0.41, accuracy=0.875, out=out)
    line = out.getvalue()
    assert line == f"{MARKER} step=120 total=300 loss=0.41 accuracy=0.875\n"
    assert parse_report(line) == Report(120, 300, {"loss": 0.41, "accuracy": 0.875}, marked=True)
    assert Report(120, 300).percent == 40.0


class _Writes(io.StringIO):
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_a_report_is_one_write_with_its_newline() -> None:
    # Ranks sharing a stdout (torchrun's on one pod) write between two writes of a line.
    out = _Writes()
    assert report(3, 3, out=out, loss=0.5)
    assert out.writes == ["T9KJOBS_PROGRESS step=3 total=3 loss=0.5\n"]


def test_report_leaves_out_what_the_convention_does_not_take() -> None:
    out = io.StringIO()
    report(1, loss=float("nan"), lr=float("inf"), out=out, **{"bad name": 1.0, "ok/x": 2})
    assert out.getvalue() == f"{MARKER} step=1 ok/x=2\n"


def test_only_rank_zero_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setenv("RANK", "3")
    assert not report(1, 10, out=out)
    monkeypatch.setenv("RANK", "0")
    assert report(1, 10, out=out)
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    assert not report(2, 10, out=out)
    assert out.getvalue().count(MARKER) == 1


def test_report_prints_at_most_once_a_second_but_always_the_last_step() -> None:
    out = io.StringIO()
    printed = [report(step, 100, out=out) for step in range(1, 100)]
    assert printed[0] and not any(printed[1:])  # a tight loop: the first only
    assert report(100, 100, out=out)  # the final step is never held back
    assert report(5, 10, every=0.0, out=out)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"{MARKER} step=5", Report(5, marked=True)),
        (f"worker-0: {MARKER} step=7 total=9 loss=1e-3", Report(7, 9, {"loss": 0.001}, True)),
        (f"{MARKER} total=9 step=3 note=warm", Report(3, 9, marked=True)),
        (f"{MARKER} step=-1 total=9", None),
        (f"{MARKER} step=x", None),
        (f"{MARKER}", None),
        ("step=5 total=10", None),
        (f"NOT{MARKER} step=5", None),
    ],
)
def test_lines(line: str, expected: Report | None) -> None:
    assert parse_report(line) == expected


def test_metrics_are_bounded() -> None:
    many = " ".join(f"m{i}={i}" for i in range(40))
    found = parse_report(f"{MARKER} step=1 {many}")
    assert found is not None and len(found.metrics) == 16


def test_a_marked_line_wins_over_free_form_lines_after_it() -> None:
    lines = ["step 3/10", f"{MARKER} step=4 total=10 loss=0.5", "step 9/10 of something else"]
    assert latest_report_at(lines) == (1, Report(4, 10, {"loss": 0.5}, marked=True))


def test_free_form_lines_when_nothing_is_marked() -> None:
    lines = ["starting", "step 1 rank=0 loss=2.0", "Epoch 3/10 loss=0.5", "saving", "done"]
    assert latest_report(lines) == Report(3, 10)
    assert latest_report(["iter=500/1000"]) == Report(500, 1000)
    assert latest_report(["stepping", "steps=300", "no progress here"]) is None
    own = latest_report(["[42 of 50] batches"], r"\[(?P<done>\d+) of (?P<total>\d+)\]")
    assert own is not None and own.percent == 84.0
    with pytest.raises(ValueError, match=r"batch\.tensorstack\.dev/progress-pattern: "):
        latest_report(["x"], "(unclosed")


def test_percent_is_capped_and_needs_a_total() -> None:
    assert Report(12, 10).percent == 100.0
    assert Report(1, 3).percent == 33.3
    assert Report(5).percent is None and Report(5, 0).percent is None


# -- hostile logs and patterns (docs/security.md): nothing a job prints or annotates stalls the
# operator, and no odd number breaks a read.


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("(a+)+$", "no named group `done`"),  # catastrophic for a backtracking engine
        (r"(?P<done>\d+) (a)\2", "not a regular expression RE2 reads"),  # a backreference
        (r"(?=step)step (?P<done>\d+)", "not a regular expression RE2 reads"),  # lookahead
        (r"(?<!no )step (?P<done>\d+)", "not a regular expression RE2 reads"),  # lookbehind
        (r"step (?P<done>\d+)\Z", "not a regular expression RE2 reads"),  # Python's \Z
        ("(unclosed", "not a regular expression RE2 reads"),
        ("x" * 500 + r"(?P<done>\d+)", "a pattern of 513 characters"),
        (r"(?P<done>\d+).{1000}", "too large: RE2 compiles it to 8008 instructions"),
        (r"(?P<done>\d+)\pL{1000}", "too large: RE2 compiles it within 256 KiB"),  # max_mem
    ],
)
def test_a_pattern_re2_cannot_match_in_linear_time_is_refused(pattern: str, said: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and said in problem
    with pytest.raises(ValueError, match=r"^batch\.tensorstack\.dev/progress-pattern: "):
        latest_report(["step 1"], pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        PROGRESS_PATTERN,
        r"\[(?P<done>\d+) of (?P<total>\d+)\]",
        r"(?i)epoch\s*(?P<done>\d+)\s*/\s*(?P<total>\d+)",
        r"\pL+ (?P<done>\d+)",
        "x" * 499 + r"(?P<done>\d+)",  # 512 characters
    ],
)
def test_a_pattern_re2_reads_with_a_done_group_is_taken(pattern: str) -> None:
    assert pattern_problem(pattern) is None


def test_a_pattern_catastrophic_for_backtracking_is_linear_here() -> None:
    """Python's `re` takes of the order of 2**40 steps for this line; RE2 a few microseconds."""
    pattern = r"(?P<done>(?:\d+)+)$"
    assert pattern_problem(pattern) is None  # RE2 reads it: taken, and harmless
    lines = ["1" * 40 + "a"] * 200
    start = time.perf_counter()
    assert latest_report(lines, pattern) is None
    assert latest_report([*lines, "42"], pattern) == Report(42)
    assert time.perf_counter() - start < 0.5


def test_step_then_a_long_run_of_blanks_is_read_in_linear_time() -> None:
    """The built-in pattern backtracked quadratically in Python's `re`: 16 KiB took seconds."""
    hostile = "step" + " " * 16 * 1024 + "x"
    log = ["step 3/10", *[hostile] * (256 * 1024 // len(hostile))]
    start = time.perf_counter()
    assert latest_report([hostile]) is None
    assert latest_report_at(log) == (0, Report(3, 10))
    assert time.perf_counter() - start < 0.5


def test_a_line_is_cut_and_its_cut_number_not_read() -> None:
    # The number crosses MAX_LINE_BYTES: read whole it is 12345678; cut short, no number.
    line = "a" * (MAX_LINE_BYTES - 11) + " step 12345678"
    assert latest_report([line[-40:]]) == Report(12345678)
    assert latest_report([line]) is None
    assert parse_report("x" * MAX_LINE_BYTES + f" {MARKER} step=5") is None
    assert parse_report(f"{MARKER} step=5 " + "y" * MAX_LINE_BYTES) == Report(5, marked=True)
    assert latest_report(["\ud800 step 3/10"]) == Report(3, 10)  # a lone surrogate: no error


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"{MARKER} step=\u00b2", None),  # `²`: a digit to str.isdigit, no number to int()
        (f"{MARKER} step=\u0661\u0662", None),  # Arabic-Indic digits: int() reads them
        (f"{MARKER} step=12 total=1\u00b2", Report(12, marked=True)),
        (f"{MARKER} step=12 loss=\u0661.5 lr=1_0 acc=0.5", Report(12, None, {"acc": 0.5}, True)),
        (
            f"{MARKER} step=1 a=nan b=inf c=-inf d=1e400 e=1e308",
            Report(1, None, {"e": 1e308}, True),
        ),
        (f"{MARKER} step={INT64_MAX} total={INT64_MAX}", Report(INT64_MAX, INT64_MAX, {}, True)),
        (f"{MARKER} step={INT64_MAX + 1}", None),  # over the API's int64
        (f"{MARKER} step=7 total={10**30}", Report(7, marked=True)),
        (f"{MARKER} step=0000000000000000000000000000007", Report(7, marked=True)),
        # A blank that RE2's \s is not and str.split's is: a word without `=` is no pair.
        (f"{MARKER} step=3 x=1\u00a0y", Report(3, None, {"x": 1.0}, True)),
    ],
)
def test_odd_numbers_are_no_values(line: str, expected: Report | None) -> None:
    assert parse_report(line) == expected


def test_odd_digits_in_free_form_lines_are_no_report_and_break_no_read() -> None:
    assert latest_report(["step \u00b2", "Epoch \u00b3/10"]) is None
    assert latest_report(["step 3/10", "step 4/\u00b9\u2070"]) == Report(4)
    # The newest line's odd number makes no report; the read goes on to an older one.
    assert latest_report([f"{MARKER} step=5", f"{MARKER} step=\u00b2"]) == Report(5, marked=True)


def test_a_read_stops_when_its_budget_is_spent_keeping_the_newest_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [f"{MARKER} step=1 total=10", "step 7/10", "saving", "step 9/10"]
    assert latest_report_at(lines) == (0, Report(1, 10, marked=True))  # unbounded: all read
    ticks = iter(range(100))  # a CPU clock that moves a second each time it is read
    monkeypatch.setattr(progress.time, "thread_time", lambda: float(next(ticks)))
    # Started at 0 with 2.5 s to spend: two lines read, the newest two, and the report found.
    assert latest_report_at(lines, budget=2.5) == (3, Report(9, 10))
    assert latest_report_at(lines, budget=0.0) is None  # nothing read


def test_report_needs_the_standard_library_alone(tmp_path: Path) -> None:
    """A training image may carry the file alone, without google-re2 (imported on first use)."""
    shutil.copy(progress.__file__, tmp_path / "alone.py")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import alone;"
        " alone.report(3, 10, loss=0.5); alone.checkpoint_saved('/c/s-3', 3); alone.on_stop();"
        " assert 're2' not in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"{MARKER} step=3 total=10 loss=0.5\n"
        f"{MARKER} step=3 total=10 checkpoint=/c/s-3 checkpoint_step=3\n"
    )


def test_checkpoint_keys_are_reserved_not_metrics() -> None:
    line = f"{MARKER} step=1234 total=5000 loss=0.4 checkpoint=/ckpt/step-1200 checkpoint_step=1200"
    assert parse_report(line) == Report(
        1234, 5000, {"loss": 0.4}, True, checkpoint="/ckpt/step-1200", checkpoint_step=1200
    )
    # A checkpoint_step without a checkpoint names nothing; neither is a metric.
    assert parse_report(f"{MARKER} step=5 checkpoint_step=3") == Report(5, marked=True)
    too_long = "/" + "a" * 1024
    assert parse_report(f"{MARKER} step=5 checkpoint={too_long}") == Report(5, marked=True)


def test_checkpoint_saved_prints_at_once_and_every_later_report_repeats_it() -> None:
    out = io.StringIO()
    assert report(1199, 5000, loss=0.5, out=out)
    assert progress.checkpoint_saved("/ckpt/step-1200", 1200, out=out)  # no rate limit
    assert report(1300, 5000, every=0.0, out=out)
    lines = out.getvalue().splitlines()
    assert (
        lines[1] == f"{MARKER} step=1200 total=5000 checkpoint=/ckpt/step-1200 checkpoint_step=1200"
    )
    assert parse_report(lines[2]) == Report(1300, 5000, {}, True, "/ckpt/step-1200", 1200)
    assert not progress.checkpoint_saved("/ckpt/with space", 1300, out=out)


def test_report_rearms_the_stack_dump_on_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    armed: list[float] = []
    monkeypatch.setattr(
        progress.faulthandler, "dump_traceback_later", lambda s, exit: armed.append(s)
    )
    monkeypatch.setenv("T9KJOBS_STALL_SECONDS", "600")
    monkeypatch.setenv("RANK", "3")
    assert not report(1, 10)  # rank 3 prints nothing, but arms
    assert armed == [600]
    assert not report(2, 10)  # within a second: not again
    assert armed == [600]


def test_on_stop_catches_sigterm_and_sighup() -> None:
    import os
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    called: list[bool] = []
    try:
        progress.on_stop(lambda: called.append(True))
        assert not progress.stop_requested()
        os.kill(os.getpid(), signal.SIGHUP)
        assert progress.stop_requested() and called == [True]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
