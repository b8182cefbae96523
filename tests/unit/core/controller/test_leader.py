"""Leader election without split brain, against a stand-in API server over real sockets: a
renewal cannot outlive the renew deadline even when the API server hangs, writes are fenced
from the moment the Lease may have passed to another replica (even half-way through a request),
and the loss is noticed, and the workers stopped, before the Lease could expire."""

from __future__ import annotations

import threading
import time

import pytest

from t9kjobs.controller.leader import LeaderElector
from t9kjobs.kube.transport import ONE_WRITE_BYTES, Fenced, Transport
from tests.unit.core.kube.standin_api import StandInApi

LEASE, RENEW, RETRY = 4.0, 2.0, 0.25


class Election:
    """An elector running in a thread, and what happened to it."""

    def __init__(self, api: StandInApi, identity: str = "a") -> None:
        self.elector = LeaderElector(
            Transport(api.configuration(), qps=0),
            "ns",
            "lease",
            identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
        )
        self.stop = threading.Event()
        self.started = threading.Event()
        self.stopped_at: float | None = None
        self.result: list[bool] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.result.append(self.elector.run(self.started.set, self._stopped, self.stop))

    def _stopped(self) -> None:
        self.stopped_at = time.monotonic()


def renewals(api: StandInApi) -> list[float]:
    return [r.at for r in api.requests("PUT", "/leases/lease")]


def test_a_hung_api_server_ends_leadership_before_the_lease_can_expire(api: StandInApi) -> None:
    election = Election(api)
    assert election.started.wait(5)
    deadline = time.monotonic() + 5
    while len(renewals(api)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert election.elector.holds()
    api.hang()
    last = renewals(api)[-1]  # the last renewal the server took (later ones hang)
    fenced_at = None
    while fenced_at is None and time.monotonic() < last + 3 * LEASE:
        if not election.elector.holds():
            fenced_at = time.monotonic()
        time.sleep(0.01)
    election.thread.join(3 * LEASE)
    api.release()
    assert election.result == [False]  # lost: the caller exits
    assert fenced_at is not None and election.stopped_at is not None
    # Another replica may take the Lease LEASE seconds after it saw the last renewal: by then
    # this one has stopped writing (the fence) and stopped its workers (on_stopped).
    assert fenced_at - last < LEASE
    assert election.stopped_at - last < LEASE


def test_leadership_is_lost_at_once_when_another_holder_shows(api: StandInApi) -> None:
    election = Election(api)
    assert election.started.wait(5)
    lease = api.lease("ns", "lease")
    assert lease is not None
    # An administrator (or a bug) hands the Lease to another replica.
    api.leases[next(iter(api.leases))] = {
        **lease,
        "spec": {**lease["spec"], "holderIdentity": "b"},
        "metadata": {**lease["metadata"], "resourceVersion": "99999"},
    }
    election.thread.join(3 * RETRY + 2)
    assert election.result == [False]
    assert not election.elector.holds()


def test_a_clean_stop_releases_the_lease(api: StandInApi) -> None:
    election = Election(api)
    assert election.started.wait(5)
    election.stop.set()
    election.thread.join(5)
    assert election.result == [True]
    lease = api.lease("ns", "lease")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""


def test_a_write_is_refused_once_the_fence_says_so(api: StandInApi) -> None:
    transport = Transport(api.configuration(), qps=0)
    answers = iter([True, False])  # the fence holds when the headers go, not for the body
    transport.fence = lambda: next(answers, False)
    # A body too large to go with the headers (a small one goes in their write: one question).
    large = {"metadata": {"name": "p", "annotations": {"a": "x" * ONE_WRITE_BYTES}}}
    with pytest.raises(Fenced):
        transport.request("POST", "/api/v1/namespaces/ns/pods", body=large)
    time.sleep(0.2)
    # The server got half a request and never acted on it.
    assert api.requests("POST", "/pods") == []
    transport.fence = lambda: True
    transport.request("POST", "/api/v1/namespaces/ns/pods", body={"metadata": {"name": "p"}})
    transport.request("GET", "/api/v1/namespaces/ns/pods")  # reads are never fenced
    assert len(api.requests("POST", "/pods")) == 1


def test_timings_that_allow_a_split_brain_are_refused() -> None:
    with pytest.raises(ValueError, match="retry period"):
        LeaderElector(None, "ns", "lease", "a", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]
