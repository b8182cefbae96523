"""A request's headers and its small body go to the socket in one write (issue #50: urllib3
writes them apart, two system calls and, over TLS, two records a request); a large body is
still sent whole; a fenced write sends nothing. Against the stand-in API server over a real
socket; the writes are those the connection hands to its socket (`http.client`'s `send`)."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from t9kjobs.kube.transport import ONE_WRITE_BYTES, Fenced, Transport

from .standin_api import StandInApi

PODS = "/api/v1/namespaces/ns/pods"


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write of a client connection to its socket."""
    sent: list[bytes] = []
    real = http.client.HTTPConnection.send

    def recorded(self: http.client.HTTPConnection, data: Any) -> None:
        sent.append(bytes(data))
        real(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", recorded)
    return sent


def test_a_small_body_goes_in_the_write_of_the_headers(
    api: StandInApi, writes: list[bytes]
) -> None:
    transport = Transport(api.configuration(), qps=0)
    body = {"metadata": {"name": "p", "labels": {"a": "b"}}}
    answer = transport.request("POST", PODS, body=body)
    assert answer["metadata"]["name"] == "p"
    [write] = writes
    head, _, sent = write.partition(b"\r\n\r\n")
    assert head.startswith(f"POST {PODS} HTTP/1.1\r\n".encode())
    assert json.loads(sent) == body
    assert f"Content-Length: {len(sent)}".encode() in head.split(b"\r\n")
    [request] = api.requests("POST", "/pods")
    assert request.body == body  # the server read the whole body, as long as it was said


def test_every_request_of_a_kept_connection_is_one_write(
    api: StandInApi, writes: list[bytes]
) -> None:
    transport = Transport(api.configuration(), qps=0)
    for name in ("a", "b", "c"):
        transport.request("POST", PODS, body={"metadata": {"name": name}})
    transport.request("GET", PODS)
    assert [w.split(b" ", 1)[0] for w in writes] == [b"POST", b"POST", b"POST", b"GET"]
    assert [r.body["metadata"]["name"] for r in api.requests("POST", "/pods")] == ["a", "b", "c"]  # type: ignore[index]


def test_a_large_body_is_sent_whole(api: StandInApi, writes: list[bytes]) -> None:
    transport = Transport(api.configuration(), qps=0)
    body = {"metadata": {"name": "p", "annotations": {"a": "x" * ONE_WRITE_BYTES}}}
    transport.request("PUT", PODS + "/p", body=body)
    head, body_written = writes
    assert head.endswith(b"\r\n\r\n") and json.loads(body_written) == body
    [request] = api.requests("PUT", "/pods/p")
    assert request.body == body


def test_a_fenced_write_sends_nothing(api: StandInApi, writes: list[bytes]) -> None:
    transport = Transport(api.configuration(), qps=0)
    transport.fence = lambda: False
    with pytest.raises(Fenced):
        transport.request("POST", PODS, body={"metadata": {"name": "p"}})
    assert writes == []
    transport.fence = lambda: True
    transport.request("POST", PODS, body={"metadata": {"name": "p"}})
    assert len(writes) == 1 and len(api.requests("POST", "/pods")) == 1
