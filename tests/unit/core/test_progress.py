"""The progress line convention (`t9kjobs.progress`): what `report` prints is what the operator
reads back, and what is not a report is not read as one."""

from __future__ import annotations

import io

import pytest

from t9kjobs import progress
from t9kjobs.progress import MARKER, Report, latest_report, latest_report_at, parse_report, report


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_last_printed", 0.0)
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_what_report_prints_parses_back() -> None:
    out = io.StringIO()
    assert report(120, 300, loss=0.41, accuracy=0.875, out=out)
    line = out.getvalue()
    assert line == f"{MARKER} step=120 total=300 loss=0.41 accuracy=0.875\n"
    assert parse_report(line) == Report(120, 300, {"loss": 0.41, "accuracy": 0.875}, marked=True)
    assert Report(120, 300).percent == 40.0


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
