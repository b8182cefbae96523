"""No controller thread dies quietly: one that raises, or ends while the operator is not
stopping, makes the operator unhealthy and stops it."""

from __future__ import annotations

import threading

from t9kjobs.controller.threads import Supervisor


def test_a_thread_that_raises_fails_health_and_stops_the_operator() -> None:
    stop = threading.Event()
    supervisor = Supervisor(stop)
    supervisor.spawn("worker-0", lambda: stop.wait())
    assert supervisor.healthy()
    supervisor.spawn("worker-1", lambda: [][0])
    assert stop.wait(5)
    assert supervisor.failure == "thread worker-1 died"
    assert not supervisor.healthy()


def test_a_thread_that_ends_before_the_stop_is_a_failure_unless_it_finishes() -> None:
    stop = threading.Event()
    supervisor = Supervisor(stop)
    supervisor.spawn("start-up", lambda: None, finishes=True)
    ended = threading.Event()
    supervisor.spawn("informer", ended.wait)
    assert not stop.wait(0.2) and supervisor.healthy()
    ended.set()
    assert stop.wait(5)
    assert supervisor.failure == "thread informer ended"


def test_a_thread_started_elsewhere_is_watched_and_a_stop_on_purpose_is_healthy() -> None:
    stop = threading.Event()
    supervisor = Supervisor(stop)
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    supervisor.watch("informer-pods", thread)
    assert supervisor.dead() == []
    done.set()
    thread.join()
    assert supervisor.dead() == ["informer-pods"] and not supervisor.healthy()
    stop.set()  # the operator stops on purpose: what ended then is no failure
    assert supervisor.dead() == [] and supervisor.healthy()
