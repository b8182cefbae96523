"""The progress reader (`t9kjobs.controller.progress_reader`): what it asks the API server for, how
often, and what it hands to the next plan; the API swapped for a recording fake."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from t9kjobs.controller.progress_reader import (
    LIMIT_BYTES,
    MAX_BACKOFF,
    STACK_LIMIT_BYTES,
    STACK_TAIL_LINES,
    TAIL_LINES,
    ProgressReader,
    newest_report,
)
from t9kjobs.kube.transport import ApiError
from t9kjobs.planner import ProgressSource
from t9kjobs.progress import MARKER, Report
from t9kjobs.vocabulary import JobKey

KEY = JobKey("GenericJob", "ns", "mlp")
SOURCE = ProgressSource("mlp-worker-0", "uid-0", "trainer", "worker-0")
LOG = "/api/v1/namespaces/ns/pods/mlp-worker-0/log"


class FakeApi:
    def __init__(self) -> None:
        self.logs: dict[str, list[str] | Exception] = {}
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def lines(self, path: str, query: dict[str, Any], timeout: float) -> Iterator[bytes]:
        self.asked.append((path, dict(query)))
        answer = self.logs.get(path, [])
        if isinstance(answer, Exception):
            raise answer
        return iter(line.encode() for line in answer)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reader(api: FakeApi, queued: list[JobKey], clock: Clock, **kw: Any) -> ProgressReader:
    return ProgressReader(api, queued.append, clock=clock, **kw)  # type: ignore[arg-type]


def test_a_new_report_is_kept_and_the_job_queued_once() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock)
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = [
        "2026-01-01T12:00:01.5Z starting",
        f"2026-01-01T12:00:02.25Z {MARKER} step=10 total=100 loss=0.9",
        "2026-01-01T12:00:03Z saving",
    ]
    [(key, source)] = reader.due(clock(), 10)
    reader.read(key, source)
    reading = reader.reading(KEY)
    assert reading is not None and reading.report == Report(10, 100, {"loss": 0.9}, marked=True)
    assert reading.time.isoformat() == "2026-01-01T12:00:02.250000+00:00"
    assert queued == [KEY]
    path, query = api.asked[0]
    assert path == LOG
    assert query == {
        "container": "trainer",
        "timestamps": "true",
        "tailLines": TAIL_LINES,
        "limitBytes": LIMIT_BYTES,
        "sinceTime": None,
    }
    # Not due again before the interval; then asked only since the newest line read.
    assert reader.due(clock(), 10) == []
    clock.now += 30
    reader.read(*reader.due(clock(), 10)[0])
    assert api.asked[1][1]["sinceTime"] == "2026-01-01T12:00:03Z"
    assert queued == [KEY]  # the same report: nothing new to write


def test_reads_are_bounded_per_job_and_in_all() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock, interval=30.0)
    keys = [JobKey("GenericJob", "ns", f"j{i}") for i in range(5)]
    for i, key in enumerate(keys):
        clock.now = 1000.0 + i  # followed one after the other: the oldest first
        reader.follow(key, SOURCE)
    clock.now = 1010.0
    assert [k for k, _ in reader.due(clock(), 3)] == keys[:3]
    for key, source in reader.due(clock(), 5):
        reader.read(key, source)
    assert reader.due(clock(), 5) == []
    clock.now = 1040.0
    assert len(reader.due(clock(), 5)) == 5


def test_an_unreadable_log_is_asked_again_later_and_later() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock, interval=30.0)
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = ApiError(500, {"message": "dial tcp 127.0.0.1:10250: connection refused"})
    waits = []
    for _ in range(7):
        start = clock.now
        reader.read(KEY, SOURCE)
        [due] = [t for k, t in reader._due.items() if k == KEY]
        waits.append(due - start)
        clock.now = due
    assert waits == [30, 60, 120, 240, 480, MAX_BACKOFF, MAX_BACKOFF]
    api.logs[LOG] = [f"2026-01-01T12:00:02Z {MARKER} step=1"]
    reader.read(KEY, SOURCE)
    assert reader.reading(KEY) is not None and queued == [KEY]


def test_a_job_no_longer_followed_is_neither_read_nor_remembered() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock)
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = [f"2026-01-01T12:00:02Z {MARKER} step=1"]
    reader.read(KEY, SOURCE)
    reader.follow(KEY, None)
    assert reader.reading(KEY) is None and reader.due(clock.now + 999, 5) == []
    reader.read(KEY, SOURCE)  # a read that raced with the stop keeps nothing
    assert reader.reading(KEY) is None and queued == [KEY]
    assert reader.following() == 0


def test_free_form_lines_do_not_undo_a_marked_report() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock)
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = [f"2026-01-01T12:00:02Z {MARKER} step=10 total=100"]
    reader.read(KEY, SOURCE)
    api.logs[LOG] = ["2026-01-01T12:00:09Z step 12 rank=1 loss=0.5"]  # another rank's line
    reader.read(KEY, SOURCE)
    reading = reader.reading(KEY)
    assert reading is not None and reading.report == Report(10, 100, marked=True)
    assert queued == [KEY]


def test_a_job_that_starts_running_is_first_read_one_interval_later() -> None:
    """A program that has just started has reported nothing (and a node that keeps no logs
    refuses the read): its first read waits `first_read_after`; a replacement pod of a job
    followed already is read at once."""
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock, first_read_after=30.0)
    reader.follow(KEY, SOURCE)
    assert reader.due(clock(), 10) == []
    clock.now += 29.9
    assert reader.due(clock(), 10) == []
    clock.now += 0.1
    [(key, source)] = reader.due(clock(), 10)
    reader.read(key, source)
    assert reader.due(clock(), 10) == []
    replacement = ProgressSource("mlp-worker-0", "uid-1", "trainer", "worker-0")
    reader.follow(KEY, replacement)
    assert reader.due(clock(), 10) == [(KEY, replacement)]


def test_a_new_pod_to_read_is_read_from_its_start() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock)
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = ["2026-01-01T12:00:02Z hello"]
    reader.read(KEY, SOURCE)
    other = ProgressSource("mlp-master-0", "uid-1", "trainer", "master-0")
    reader.follow(KEY, other)
    reader.read(KEY, other)
    assert api.asked[-1][1]["sinceTime"] is None


def test_a_pod_that_is_not_the_jobs_own_is_never_read() -> None:
    """Security (docs/security.md, threat 12): a pod that took the name of the job's
    deciding replica (another uid) speaks for no job."""
    api, queued, clock = FakeApi(), [], Clock()
    owned = {"uid-0"}
    reader = ProgressReader(
        api,  # type: ignore[arg-type]
        queued.append,
        clock=clock,
        current=lambda key, source: source.uid in owned,
    )
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = [f"2026-01-01T12:00:02Z {MARKER} step=99 total=100"]
    owned.clear()  # the pod of that name is another's now
    reader.read(KEY, SOURCE)
    assert api.asked == [] and reader.reading(KEY) is None and queued == []
    assert reader.due(clock(), 5) == []  # asked again after the interval
    owned.add("uid-0")
    clock.now += 30
    reader.read(*reader.due(clock(), 5)[0])
    assert reader.reading(KEY) is not None


def test_the_thread_keeps_to_its_rate() -> None:
    api, queued = FakeApi(), []
    reader = ProgressReader(api, queued.append, interval=0.0, qps=20.0)  # type: ignore[arg-type]
    for i in range(50):
        reader.follow(JobKey("GenericJob", "ns", f"j{i}"), SOURCE)
    stop = threading.Event()
    thread = threading.Thread(target=reader.run, args=(stop,))
    start = time.monotonic()
    thread.start()
    time.sleep(1.0)
    stop.set()
    thread.join(timeout=5)
    elapsed = time.monotonic() - start
    # At most qps a second, and a burst of one second's worth.
    assert 0 < len(api.asked) <= 20 * elapsed + 20


@pytest.mark.parametrize("qps", [0.0, -1.0])
def test_no_rate_no_reads(qps: float) -> None:
    api = FakeApi()
    reader = ProgressReader(api, lambda key: None, qps=qps)  # type: ignore[arg-type]
    reader.follow(KEY, SOURCE)
    reader.run(threading.Event())  # returns at once
    assert api.asked == []


# -- a hostile log or pattern stalls nothing (docs/security.md) ----------------------------------


def _largest_gap(work: Callable[[], None], tick: float = 0.01) -> tuple[float, float]:
    """Run `work` in a thread of its own, as the reader runs, while another thread (a Lease's
    renewal, /healthz) wakes every `tick` seconds: the longest the ticker went without
    running, and how long the work took."""
    ticks: list[float] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(tick)

    def timed() -> None:
        try:
            work()
        finally:
            done.set()

    beside = threading.Thread(target=ticker, name="lease")
    beside.start()
    time.sleep(5 * tick)  # the ticker at its pace first
    start = time.perf_counter()
    reader = threading.Thread(target=timed, name="progress")
    reader.start()
    reader.join()
    took = time.perf_counter() - start
    beside.join()
    ticks.append(time.perf_counter())
    return max(b - a for a, b in itertools.pairwise(ticks)), took


def _hostile_log(text: str) -> list[str]:
    """Timestamped lines of `text` after one ordinary report, LIMIT_BYTES of them at most."""
    stamp = "2026-01-01T12:00:03Z"
    count = (LIMIT_BYTES - 40) // (len(stamp) + 1 + len(text) + 1)
    return ["2026-01-01T12:00:02Z step 3/10", *[f"{stamp} {text}"] * count]


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        # The built-in pattern's worst: `step`, then 16 KiB of blanks.
        (None, "step" + " " * 16 * 1024 + "x", Report(3, 10)),
        # A job's pattern of nested repetition, lines of 40 digits then no match.
        (r"(?P<done>(?:\d+)+)$", ("1" * 40 + "a ") * 30, Report(10)),
    ],
    ids=["step-then-blanks", "nested-repetition"],
)
def test_a_hostile_log_leaves_other_threads_running(
    pattern: str | None, text: str, expected: Report
) -> None:
    """The reader's read of a 256 KiB hostile log, in its own thread, while a second thread
    ticks every 10 ms: the ticker never waits long, and the report is still found. Python's
    `re` held the GIL for seconds per line here (docs/security.md)."""
    api, queued = FakeApi(), []
    reader = ProgressReader(api, queued.append)  # type: ignore[arg-type]
    source = ProgressSource("mlp-worker-0", "uid-0", "trainer", "worker-0", pattern)
    reader.follow(KEY, source)
    log = _hostile_log(text)
    api.logs[LOG] = log
    assert LIMIT_BYTES / 2 < sum(len(line) + 1 for line in log) <= LIMIT_BYTES
    gap, took = _largest_gap(lambda: reader.read(KEY, source))
    assert gap < 0.5, f"the ticker waited {gap:.3f} s (the read took {took:.3f} s)"
    reading = reader.reading(KEY)
    assert reading is not None and reading.report == expected


@pytest.mark.parametrize("pattern", ["(a+)+$", r"(?=step)step (?P<done>\d+)"])
def test_a_pattern_re2_refuses_is_ignored(pattern: str) -> None:
    """`(a+)+$` took Python's `re` seconds at 24 `a`, forever at 40; it has no group `done`
    and is refused (and ignored here, read as no pattern), as RE2's unreadable ones are."""
    hostile = "a" * 40 + "!"
    lines = [f"2026-01-01T12:00:02Z {hostile}", "2026-01-01T12:00:03Z step 4/10 aaaa"]
    start = time.perf_counter()
    found = newest_report([*lines, f"2026-01-01T12:00:04Z {hostile}"], pattern)
    assert time.perf_counter() - start < 0.5
    assert found is not None and found[0] == Report(4, 10)


def test_a_reading_says_when_it_was_first_seen_and_last_looked_for() -> None:
    """What a stall is judged by (`t9kjobs.planner.stall`): a read that finds nothing newer
    moves `read_at` only, and queues nothing; a newer report starts `seen_at` again."""
    api, queued, clock = FakeApi(), [], Clock()
    wall = [datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)]
    reader = _reader(api, queued, clock, interval=1.0, wall=lambda: wall[0])
    reader.follow(KEY, SOURCE)
    api.logs[LOG] = [f"2026-01-01T12:00:02Z {MARKER} step=10 total=100"]
    reader.read(KEY, SOURCE)
    first = reader.reading(KEY)
    assert first is not None and first.seen_at == first.read_at == wall[0]
    api.logs[LOG] = []  # nothing since
    wall[0] += timedelta(seconds=40)
    reader.read(KEY, SOURCE)
    quiet = reader.reading(KEY)
    assert quiet is not None and (quiet.seen_at, quiet.read_at) == (first.seen_at, wall[0])
    assert queued == [KEY]
    api.logs[LOG] = [f"2026-01-01T12:00:52Z {MARKER} step=20 total=100"]
    wall[0] += timedelta(seconds=5)
    reader.read(KEY, SOURCE)
    newer = reader.reading(KEY)
    assert newer is not None and newer.seen_at == newer.read_at == wall[0]
    assert queued == [KEY, KEY]


def test_stacks_asked_for_are_read_once_within_the_rate_and_handed_over() -> None:
    """Each pod's log once (a token each), its last dump or why none; the job queued once
    all are read; asking again reads nothing more; a plan that asks nothing drops them."""
    api, queued, clock = FakeApi(), [], Clock()
    wall = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    reader = _reader(api, queued, clock, wall=lambda: wall)
    w1 = ProgressSource("mlp-worker-1", "uid-1", "trainer", "worker-1")
    api.logs[LOG] = [
        "step 40",
        "Timeout (0:00:20)!",
        "Thread 0x00007f1 (most recent call first):",
        '  File "/app/mlp.py", line 88 in hang',
        "after",
    ]
    api.logs[LOG.replace("worker-0", "worker-1")] = RuntimeError("container not found")
    reader.want_stacks(KEY, [SOURCE, w1])
    [(key, first)] = reader.stack_reads(1)
    reader.read_stacks(key, first)
    assert reader.stacks(KEY) is None and queued == []
    assert api.asked == [
        (
            LOG,
            {
                "container": "trainer",
                "tailLines": STACK_TAIL_LINES,
                "limitBytes": STACK_LIMIT_BYTES,
            },
        )
    ]
    [(key, second)] = reader.stack_reads(5)
    reader.read_stacks(key, second)
    stacks = reader.stacks(KEY)
    assert stacks is not None and stacks.taken_at == wall and queued == [KEY]
    assert stacks.dumps == {
        "mlp-worker-0": "Timeout (0:00:20)!\nThread 0x00007f1 (most recent call first):\n"
        '  File "/app/mlp.py", line 88 in hang\n',
        "mlp-worker-1": "log not read: container not found\n",
    }
    reader.want_stacks(KEY, [SOURCE, w1])  # the next plans ask until they keep them
    assert reader.stack_reads(5) == [] and reader.stacks(KEY) == stacks
    reader.want_stacks(KEY, [])
    assert reader.stacks(KEY) is None


def test_stacks_of_a_pod_that_is_not_the_jobs_are_not_read() -> None:
    api, queued, clock = FakeApi(), [], Clock()
    reader = _reader(api, queued, clock, current=lambda key, source: False)
    reader.want_stacks(KEY, [SOURCE])
    [(key, source)] = reader.stack_reads(1)
    reader.read_stacks(key, source)
    stacks = reader.stacks(KEY)
    assert api.asked == [] and stacks is not None
    assert stacks.dumps == {"mlp-worker-0": "not read: the pod is not the job's any more\n"}
