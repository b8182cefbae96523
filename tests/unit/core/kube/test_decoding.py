"""No single object stops an informer (#20): a job nested too deep for Python's JSON decoder is
decoded cut, keeping its identity, and is then refused as nested too deep; an event a handler
cannot take is skipped, and the watch goes on."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client as k8s_client

from t9kjobs.kube.decoding import DECODE_DEPTH, TOO_DEEP, loads
from t9kjobs.kube.informer import Informer
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.transport import Transport
from t9kjobs.loading import depth_problem
from tests.unit.core.kube.scripted import ScriptedTransport, pod

TRICKY = '[{ not ] a } bracket \\" ['  # brackets, an escaped quote, a backslash


def deep_job(name: str, depth: int) -> str:
    nested = "[" * depth + '"x"' + "]" * depth
    return (
        f'{{"kind": "DeepSpeedJob", "metadata": {{"name": "{name}", "namespace": "ns",'
        f' "resourceVersion": "7"}}, "spec": {{"worker": {{"template": {{"spec": {{"d": {nested}'
        f', "s": {json.dumps(TRICKY)}}}}}}}}}}}'
    )


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    return depth


def test_a_job_too_deep_for_the_decoder_keeps_its_identity_and_is_refused() -> None:
    job = loads(deep_job("deep", 5000).encode())
    assert job["metadata"] == {"name": "deep", "namespace": "ns", "resourceVersion": "7"}
    template = job["spec"]["worker"]["template"]["spec"]
    assert template["s"] == TRICKY  # brackets inside strings are text
    assert depth_of(template["d"]) == DECODE_DEPTH - 5  # 5 levels above it, then cut
    inner = template["d"]
    while isinstance(inner, list):
        inner = inner[0]
    assert inner == TOO_DEEP
    problem = depth_problem(job)
    assert problem is not None and problem.path.startswith("spec.worker.template.spec.d[0]")


def test_a_list_with_one_deep_item_keeps_every_item() -> None:
    body = f'{{"metadata": {{"resourceVersion": "9"}}, "items": [{deep_job("a", 3000)}, '
    body += '{"metadata": {"name": "b", "namespace": "ns"}}]}'
    listed = loads(body)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b"]


def test_shallow_text_decodes_as_json_loads_does() -> None:
    text = deep_job("shallow", 50)
    assert loads(text) == json.loads(text)


def test_a_watch_delivers_a_deep_job_over_http() -> None:
    lines = [
        json.dumps({"type": "ADDED", "object": pod("before", "1")}),
        f'{{"type": "ADDED", "object": {deep_job("deep", 4000)}}}',
        json.dumps({"type": "ADDED", "object": pod("after", "9")}),
    ]

    class Watch(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Watch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = k8s_client.Configuration()
        cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
        events = list(Transport(cfg).stream("/api/v1/pods", {"watch": "1"}, timeout=10))
    finally:
        server.shutdown()
    assert [e["object"]["metadata"]["name"] for e in events] == ["before", "deep", "after"]


def test_an_event_the_handler_cannot_take_is_skipped_and_the_watch_goes_on() -> None:
    transport = ScriptedTransport(
        lists=[{"metadata": {"resourceVersion": "1"}, "items": []}],
        watches=[
            [
                {"type": "ADDED", "object": pod("bad", "2")},
                {"type": "ADDED", "object": pod("good", "3")},
            ]
        ],
    )
    seen: list[str] = []

    def handler(kind: str, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise KeyError("namespace")
        seen.append(obj["metadata"]["name"])

    informer = Informer(transport, CHILD_RESOURCES["Pod"], handler)  # type: ignore[arg-type]
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    assert seen == ["good"]
    # The watch resumed after both events: the bad one is not delivered again and again.
    assert transport.watched_from == ["1", "3"]
