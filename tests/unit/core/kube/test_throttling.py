"""A 429 (priority and fairness shedding load) is waited out and sent again, honouring its
Retry-After, for the whole client and not only the refused request; a Lease renewal never
waits behind a throttled workers' client. Against a stand-in API server over real sockets; the
waits are recorded, not slept, so nothing here depends on how fast the machine is."""

from __future__ import annotations

import pytest

from t9kjobs.kube.transport import (
    MAX_RETRY_AFTER,
    RETRIES_ON_429,
    ApiError,
    Transport,
    retry_after,
)
from t9kjobs.manager import PluginManager
from tests import waiting
from tests.unit.core.controller.running_operator import Running

from .standin_api import StandInApi

PODS = "/api/v1/namespaces/ns/pods"


def recording(api: StandInApi) -> tuple[Transport, list[float]]:
    """A Transport whose waits are recorded and skipped."""
    transport = Transport(api.configuration(), qps=0)
    waits: list[float] = []
    transport.sleep = waits.append
    return transport, waits


def test_a_429_is_sent_again_after_its_retry_after(api: StandInApi) -> None:
    transport, waits = recording(api)
    api.throttled, api.retry_after = 2, "3"
    answer = transport.request("POST", PODS, body={"metadata": {"name": "p"}})
    assert answer["metadata"]["name"] == "p"
    assert len(api.requests("POST", "/pods")) == 3  # refused twice, then created
    assert len(waits) == 2 and all(2.5 < w <= 3.0 for w in waits)


def test_the_wait_holds_the_clients_other_requests_too(api: StandInApi) -> None:
    transport, waits = recording(api)
    api.throttled, api.retry_after = 1, "5"
    transport.request("GET", PODS)
    # The recorded wait did not pass: the next request, of another caller, waits the rest.
    transport.request("GET", "/api/v1/namespaces/ns/services")
    assert len(waits) == 2 and 4.0 < waits[1] <= 5.0
    assert len(api.requests("GET", "/services")) == 1


def test_a_watch_opening_refused_with_429_is_opened_again(api: StandInApi) -> None:
    transport, waits = recording(api)
    api.throttled = 1
    assert list(transport.lines(PODS, {"watch": "1", "timeoutSeconds": "1"}, timeout=5)) == []
    assert len(waits) == 1
    assert len([r for r in api.requests("GET", "/pods") if r.query.get("watch")]) == 2


def test_429s_without_end_reach_the_caller_after_the_retries(api: StandInApi) -> None:
    transport, waits = recording(api)
    api.throttled, api.retry_after = RETRIES_ON_429 + 5, None
    with pytest.raises(ApiError) as caught:
        transport.request("GET", PODS)
    assert caught.value.status == 429  # for the work queue's backoff
    assert len(api.requests("GET", "/pods")) == RETRIES_ON_429 + 1
    assert waits and all(0.5 < w <= 1.0 for w in waits)  # no header: 1 s


def test_a_wait_past_the_calls_deadline_is_not_waited(api: StandInApi) -> None:
    transport, waits = recording(api)
    api.throttled, api.retry_after = 1, "30"
    with pytest.raises(ApiError) as caught:
        transport.request("GET", PODS, total=2.0)
    assert caught.value.status == 429 and waits == []


def test_retry_after_values() -> None:
    assert retry_after("2") == 2.0
    assert retry_after(None) == 1.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 1.0  # the date form: 1 s
    assert retry_after("-4") == 0.0
    assert retry_after("3600") == MAX_RETRY_AFTER


def test_the_lease_is_renewed_while_the_workers_client_is_throttled(
    api: StandInApi, manager: PluginManager
) -> None:
    running = Running(
        api, manager, leader_elect=True, lease_duration=3.0, renew_deadline=2.0, retry_period=0.2
    )
    running.start()
    try:
        waiting.until(
            lambda: api.lease("ns", "t9k-jobs-operator") is not None,
            10,
            interval=0.05,
            what="api.lease('ns', 't9k-jobs-operator') is not None",
        )
        # From now on every request but the Leases' is told to wait 60 s.
        api.throttled, api.retry_after = 10_000, "60"
        renewed = len(api.requests("PUT", "/leases/"))
        waiting.until(
            lambda: len(api.requests("PUT", "/leases/")) >= renewed + 5,
            10,
            interval=0.05,
            what="len(api.requests('PUT', '/leases/')) >= renewed + 5",
        )
        assert running.thread.is_alive()
        assert api.throttled < 10_000  # the workers' side was refused meanwhile
        lease = api.lease("ns", "t9k-jobs-operator")
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    finally:
        running.stop()
