"""The work queue's guarantees: dedup, one worker per key, delayed and rate-limited adds."""

from __future__ import annotations

import threading
import time

from t9kjobs.controller.workqueue import WorkQueue


def test_a_key_is_queued_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.get() == "a"
    assert q.get() == "b"


def test_a_key_added_while_processing_comes_back_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = q.get()
    q.add("a")  # an event arrives mid-reconcile
    assert len(q) == 0  # not handed to a second worker
    q.done(key)  # type: ignore[arg-type]
    assert q.get() == "a"


def test_add_after_delays_the_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("late", 0.2)
    q.add("now")
    assert q.get() == "now"
    started = time.monotonic()
    assert q.get() == "late"
    assert time.monotonic() - started >= 0.15


def test_a_delayed_key_waits_once_and_keeps_the_earlier_time() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):  # a burst of child changes: one reconcile
        q.add_after("job", 0.1)
    q.add_after("job", 30)  # a later deadline does not push it back
    started = time.monotonic()
    assert q.get() == "job"
    assert 0.05 <= time.monotonic() - started < 5
    q.done("job")
    q.add("other")
    assert q.get() == "other"  # "job" did not come back from the queued duplicates
    assert len(q) == 0
    assert q._waiting == {}  # nothing delayed is left to bring it back


def test_an_earlier_time_moves_a_delayed_key_forward() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("job", 30)
    q.add_after("job", 0.05)
    started = time.monotonic()
    assert q.get() == "job"
    assert time.monotonic() - started < 5


def test_rate_limited_retries_back_off_exponentially_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=1.0)
    delays = []
    for _ in range(3):
        q.add_rate_limited("k")
        started = time.monotonic()
        q.done(q.get())  # type: ignore[arg-type]
        delays.append(time.monotonic() - started)
    assert delays[2] > delays[0]
    q.forget("k")
    assert q._failures == {}


def test_shutdown_releases_waiting_workers() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.shutdown()
    t.join(2)
    assert got == [None]


def test_nothing_is_handed_out_after_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("queued")
    q.add_after("due", 0.01)
    time.sleep(0.05)
    q.shutdown()
    assert q.get() is None  # neither the queued key nor the one that fell due
    q.add("late")  # an informer event after the shutdown
    assert q.get() is None


def test_an_urgent_key_is_handed_out_before_earlier_ones() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("new-1", "new-2", "new-3"):
        q.add(key)
    q.add("finished", urgent=True)
    assert [q.get() for _ in range(4)] == ["finished", "new-1", "new-2", "new-3"]


def test_a_queued_key_made_urgent_moves_up_and_is_handed_out_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("c", urgent=True)
    assert len(q) == 3
    assert [q.get() for _ in range(3)] == ["c", "a", "b"]
    assert len(q) == 0
    q.add("d")
    assert q.get() == "d"  # the copy of "c" left in the plain line is dropped, not handed out


def test_a_key_is_never_handed_to_two_workers_through_both_lines() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a", urgent=True)
    key = q.get()
    assert key == "a"
    q.add("a")  # dirty again while processed: waits for done()
    q.add("b")
    assert q.get() == "b"  # the stale copy of "a" in the plain line is passed over
    assert len(q) == 0
    q.done("a")
    assert q.get() == "a"


def test_a_key_made_urgent_while_processed_comes_back_urgent() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("job")
    assert q.get() == "job"
    q.add("other")
    q.add("job", urgent=True)  # its pod finished mid-reconcile
    q.done("job")
    assert q.get() == "job"
    assert q.get() == "other"


def test_a_delayed_urgent_add_stays_urgent_when_an_earlier_plain_add_is_due_first() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("job", 0.05)  # a child changed
    q.add_after("job", 0.2, urgent=True)  # then a pod finished: keeps the earlier time
    q.add("new")
    time.sleep(0.1)
    assert q.get() == "job"
    assert q.get() == "new"
