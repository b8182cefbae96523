"""A stand-in API server over HTTP on loopback, for the unit tests whose point is timing or
sockets (leader election under a hung server, watches that die without a word, discovery that
fails at start-up): the operator talks to it through its real `Transport`, so timeouts, pools
and rate limiters are the real ones. End-to-end tests use the real control plane instead.

It serves: discovery of the job group (the other groups are not served); Leases, in memory,
with resourceVersions and 409 for a stale update; empty lists; watches that say nothing and end
after their `timeoutSeconds` (or never, when `silent`); lists, of what a test put in `objects`
(by collection path) or empty; a status write to a listed object, merged into it; any other
write, echoed back with a uid and a resourceVersion; a Secret (the operator's ownership key) as
an API server does: a GET of one is 404 until it is created, then what was created. It can hang every request (`hang()`: a frozen API server), or answer 503
to the next discovery requests (`discovery_failures`), or 429 with a Retry-After to the next
requests other than the Leases' (`throttled`, `retry_after`: priority and fairness shedding a
busy client). Every request is logged with the time it
arrived and its user agent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s_client

from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP
from t9kjobs.vocabulary import Obj

LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


@dataclass(frozen=True)
class Request:
    at: float  # time.monotonic() when it arrived
    method: str
    path: str
    query: dict[str, str]
    user_agent: str
    body: Obj | None


class StandInApi:
    def __init__(self, manager: PluginManager) -> None:
        self.resources = [
            {"name": info.plural, "kind": kind, "namespaced": True}
            for kind, info in sorted(manager.kinds.items())
        ]
        self.leases: dict[str, Obj] = {}
        self.objects: dict[str, list[Obj]] = {}  # what lists answer, by collection path
        self.secrets: dict[str, Obj] = {}  # by path: the Secrets created
        self.discovery_failures = 0
        self.throttled = 0  # the next requests (not the Leases') answered 429
        self.retry_after: str | None = "1"  # their Retry-After header (None: none)
        self.silent = False  # watches never end: a stream that died without a word
        self.log: list[Request] = []
        self._rv = itertools.count(100)
        self._lock = threading.Lock()
        self._hung = threading.Event()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    # -- the test's side ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def configuration(self) -> k8s_client.Configuration:
        cfg = k8s_client.Configuration()
        cfg.host = self.url
        return cfg

    def hang(self) -> None:
        """From now on, requests get no answer (until `release`)."""
        self._hung.set()

    def release(self) -> None:
        self._hung.clear()

    def requests(self, method: str | None = None, path: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.log if method in (None, r.method) and path in r.path]

    def lease(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self.leases.get(f"{LEASES}{namespace}/leases/{name}")

    def close(self) -> None:
        self._closing.set()
        self._hung.clear()
        self._server.shutdown()
        self._server.server_close()

    # -- the server's side -------------------------------------------------------------------

    def _answer(self, method: str, path: str, query: dict[str, str], body: Obj | None) -> Any:
        """(status, body) of a plain request, or "watch"."""
        if method == "GET" and path == f"/apis/{API_GROUP}/v1beta1":
            with self._lock:
                if self.discovery_failures > 0:
                    self.discovery_failures -= 1
                    return 503, {"kind": "Status", "message": "the server is starting"}
            return 200, {"kind": "APIResourceList", "resources": self.resources}
        if method == "GET" and path.count("/") == 3 and path.startswith("/apis/"):
            return 404, {"kind": "Status", "message": f"{path}: not served"}
        if path.startswith(LEASES):
            return self._lease(method, path, body)
        if method == "GET" and query.get("watch"):
            return "watch"
        if "/secrets/" in path and method == "GET":
            with self._lock:
                found = self.secrets.get(path)
            return (200, found) if found else (404, {"kind": "Status", "message": "not found"})
        if method == "GET":
            items = self.objects.get(path, [])
            return 200, {"metadata": {"resourceVersion": str(next(self._rv))}, "items": items}
        if method == "PUT" and path.endswith("/status"):
            return self._status(path, body or {})
        answer = dict(body or {})
        answer["metadata"] = {
            **answer.get("metadata", {}),
            "uid": f"uid-{next(self._rv)}",
            "resourceVersion": str(next(self._rv)),
        }
        if method == "POST" and path.endswith("/secrets"):
            answer["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
            with self._lock:
                self.secrets[f"{path}/{answer['metadata']['name']}"] = answer
        return (201 if method == "POST" else 200), answer

    def _status(self, path: str, body: Obj) -> tuple[int, Obj]:
        """A status write to a listed object: its status replaced, everything else kept (the
        writer sends no spec); to any other, echoed back."""
        parts = path.split("/")  # .../namespaces/NS/RESOURCE/NAME/status
        namespace, resource, name = parts[-4], parts[-3], parts[-2]
        with self._lock:
            for collection, items in self.objects.items():
                if not collection.endswith(f"/{resource}"):
                    continue
                for i, item in enumerate(items):
                    meta = item["metadata"]
                    if (meta["name"], meta.get("namespace")) == (name, namespace):
                        meta = {**meta, "resourceVersion": str(next(self._rv))}
                        items[i] = {**item, "metadata": meta, "status": body.get("status")}
                        return 200, items[i]
        meta = {**body.get("metadata", {}), "resourceVersion": str(next(self._rv))}
        return 200, {**body, "metadata": meta}

    def _throttle(self, path: str) -> bool:
        """Whether this request is one of the `throttled` (never a Lease's)."""
        with self._lock:
            if self.throttled <= 0 or path.startswith(LEASES):
                return False
            self.throttled -= 1
            return True

    def _lease(self, method: str, path: str, body: Obj | None) -> tuple[int, Obj]:
        with self._lock:
            if method == "POST" and body is not None:
                path = f"{path}/{body['metadata']['name']}"
                if path in self.leases:
                    return 409, {"kind": "Status", "reason": "AlreadyExists"}
            current = self.leases.get(path)
            if method == "GET":
                if current is None:
                    return 404, {"kind": "Status", "reason": "NotFound"}
                return 200, current
            assert body is not None
            if method == "PUT":
                if current is None:
                    return 404, {"kind": "Status", "reason": "NotFound"}
                if (
                    body["metadata"].get("resourceVersion")
                    != current["metadata"]["resourceVersion"]
                ):
                    return 409, {"kind": "Status", "reason": "Conflict"}
            stored = {
                **body,
                "metadata": {**body["metadata"], "resourceVersion": str(next(self._rv))},
            }
            self.leases[path] = stored
            return (201 if method == "POST" else 200), stored

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with api._lock:
                    api.log.append(
                        Request(
                            time.monotonic(),
                            method,
                            url.path,
                            query,
                            self.headers.get("User-Agent", ""),
                            body,
                        )
                    )
                while api._hung.is_set() and not api._closing.is_set():
                    time.sleep(0.01)
                if api._throttle(url.path):
                    self._reply(429, {"kind": "Status", "code": 429}, api.retry_after)
                    return
                answer = api._answer(method, url.path, query, body)
                if answer == "watch":
                    self._watch(float(query.get("timeoutSeconds", "300")))
                    return
                self._reply(*answer)

            def _reply(self, status: int, payload: Obj, retry_after: str | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(data)

            def _watch(self, seconds: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                ends = time.monotonic() + seconds
                while not api._closing.is_set() and (api.silent or time.monotonic() < ends):
                    time.sleep(0.05)
                self.close_connection = True

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler
