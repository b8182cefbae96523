"""HTTP endpoints: `/metrics` (Prometheus), `/healthz` (every controller thread alive),
`/readyz` (caches synced)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["parse_address", "respond", "serve"]


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` or `:port` (all interfaces); port 0 disables the endpoint."""
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


def respond(handler: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str) -> None:
    """One whole answer of the operator's endpoints (metrics, probes, the webhook): a
    Content-Length always, so a kept-alive connection knows where the answer ends."""
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def serve(
    address: str,
    registry: CollectorRegistry | None,
    ready: Callable[[], bool],
    healthy: Callable[[], bool],
) -> ThreadingHTTPServer | None:
    host, port = parse_address(address)
    if port == 0:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics" and registry is not None:
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                ok = healthy()
                self._send(200 if ok else 500, b"ok\n" if ok else b"unhealthy\n", "text/plain")
            elif self.path == "/readyz":
                ok = ready()
                self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n", "text/plain")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            respond(self, code, body, content_type)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds are not worth a log line

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{port}", daemon=True).start()
    return server
