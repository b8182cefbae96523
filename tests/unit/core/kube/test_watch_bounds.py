"""Watches are bounded: the server is asked to end each one, the client drops a stream that
says nothing for a little longer, and connections have TCP keepalive, so a stream that died
without a word (an API server frozen, or gone with its host) is replaced in under a minute,
from the last resourceVersion. Against a stand-in API server over real sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

from t9kjobs.kube.informer import Informer
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.transport import Transport
from t9kjobs.vocabulary import Obj

from .standin_api import StandInApi


def watches(api: StandInApi) -> list[Any]:
    return [r for r in api.requests("GET", "/pods") if r.query.get("watch")]


def test_a_silent_stream_is_dropped_and_the_watch_resumes(api: StandInApi) -> None:
    api.silent = True  # the server never ends a watch, and never says a word on it
    informer = Informer(
        Transport(api.configuration(), qps=0),
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: None,
        watch_timeout=1,
        read_slack=1.0,
    )
    informer.start()
    try:
        deadline = time.monotonic() + 30
        while len(watches(api)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        informer.stop()
    first, second = watches(api)[:2]
    assert first.query["timeoutSeconds"] == "1"
    # Dropped after its bound (1 s + 1 s of slack), then resumed where it was.
    assert 2.0 <= second.at - first.at < 10.0
    assert second.query["resourceVersion"] == first.query["resourceVersion"]
    assert len(api.requests("GET", "/pods")) - len(watches(api)) == 1  # no relist for that


class RecordingTransport:
    def __init__(self) -> None:
        self.streams: list[tuple[dict[str, Any], float]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    def stream(self, path: str, query: dict[str, Any], timeout: float) -> Iterator[Obj]:
        self.streams.append((query, timeout))
        return iter(())


def test_by_default_a_dead_stream_is_replaced_in_under_a_minute() -> None:
    transport = RecordingTransport()
    informer = Informer(transport, CHILD_RESOURCES["Pod"], lambda kind, obj: None)  # type: ignore[arg-type]
    informer.start()
    deadline = time.monotonic() + 5
    while len(transport.streams) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    informer.stop()
    asked = {int(q["timeoutSeconds"]) for q, _ in transport.streams}
    assert q_bookmarks(transport.streams) == {"true"}
    assert len(asked) > 1  # jittered: informers started together do not come back together
    # The client gives up on a stream that said nothing for that long; then one second of
    # backoff before the watch is made again.
    assert max(timeout for _, timeout in transport.streams) + 1 < 60
    assert all(timeout > int(q["timeoutSeconds"]) for q, timeout in transport.streams)


def q_bookmarks(streams: list[tuple[dict[str, Any], float]]) -> set[str]:
    return {q["allowWatchBookmarks"] for q, _ in streams}


def test_connections_have_tcp_keepalive(api: StandInApi) -> None:
    transport = Transport(api.configuration(), qps=0)
    transport.request("GET", "/api/v1/pods")
    pool = transport._pool.connection_from_url(api.url)
    connection = pool.pool.get(block=False)  # type: ignore[union-attr]
    sock = connection.sock
    assert sock is not None
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 15
