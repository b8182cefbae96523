"""The validating admission webhook: `kubectl apply` refuses every job `t9kjobs validate` refuses.

The CRDs' schema and CEL rules cannot see inside the schemaless pod templates, nor run the
plugins' checks, which are Python; without this webhook the API server admits such a job and the
operator fails it a moment later (`InvalidSpec`). Here the API server asks first, and the answer
is `t9kjobs.loading.judge`'s, the very call `validate` makes: one verdict, in the same words,
each problem naming its field. Warnings that are not refusals go back as admission warnings,
which kubectl prints.

Every replica serves it, the leader or not: it reads nothing of the cluster and writes nothing,
so a standby answers as well as the leader, and admission survives a failover (the chart's
Service selects every replica). It dispatches on the object's kind to the loaded plugins, so a
third-party kind is judged by its own plugin as in `validate`.

HTTPS only (the API server calls webhooks over TLS): the certificate and key are read from
`tls.crt` and `tls.key` of a directory, as controller-runtime names them, and read again when
they change (a Secret mounted there is renewed in place); the TLS handshake runs in the
connection's own thread, so a slow or silent client holds up no other request.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from t9kjobs.controller.server import parse_address, respond
from t9kjobs.kube.decoding import loads
from t9kjobs.loading import judge
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP
from t9kjobs.vocabulary import Obj

__all__ = [
    "CERT_FILE",
    "KEY_FILE",
    "PATH",
    "WebhookServer",
    "review",
    "serve_webhook",
    "tls_context",
]

log = logging.getLogger("t9kjobs.webhook")

# Where the API server posts its AdmissionReviews (the ValidatingWebhookConfiguration's path).
PATH = "/validate"
CERT_FILE, KEY_FILE = "tls.crt", "tls.key"
# An AdmissionReview of an UPDATE carries the job twice; the API server takes 3 MiB a request.
MAX_BODY = 8 * 1024 * 1024
# Seconds a connection may stay silent: the API server's timeoutSeconds is far shorter.
IDLE_TIMEOUT = 30.0
# What the API server shows of one warning (longer ones it may cut): a warning is one line.
MAX_WARNING = 256


def _denial(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"allowed": False, "status": {"code": code, "reason": reason, "message": message}}


def _verdict(request: Obj, manager: PluginManager) -> dict[str, Any]:
    """The response of one AdmissionRequest, but its uid."""
    obj = request.get("object")
    if not isinstance(obj, dict):
        return _denial(400, "BadRequest", "the admission request carries no object")
    kind = obj.get("kind")
    if request.get("operation") not in ("CREATE", "UPDATE") or kind not in manager.kinds:
        # Not ours to judge (a kind of the group no plugin here serves, a DELETE): the
        # webhook's rules send neither, and refusing them would block what it cannot judge.
        return {"allowed": True}
    verdict = judge(obj, manager)
    errors, warnings = verdict.errors, verdict.warnings
    name = (obj.get("metadata") or {}).get("name") or request.get("name") or ""
    if errors:
        said = "; ".join(str(p) for p in errors)
        return _denial(422, "Invalid", f'{kind}.{API_GROUP} "{name}" is invalid: {said}')
    answer: dict[str, Any] = {"allowed": True}
    if warnings:
        # kubectl says "Warning:" before each: the path and message, as validate words them.
        lines = (f"{w.path}: {w.message}" for w in warnings)
        answer["warnings"] = [" ".join(line.split())[:MAX_WARNING] for line in lines]
    return answer


def review(body: bytes, manager: PluginManager) -> dict[str, Any]:
    """The AdmissionReview answering the AdmissionReview `body` (admission.k8s.io/v1).

    Decoded without recursion (`t9kjobs.kube.decoding`): a job nested thousands of levels
    deep inside a pod template is refused with its path, as by `validate`, not a crash."""
    try:
        sent = loads(body)
    except ValueError as exc:
        sent = {"_undecodable": str(exc)}
    request = sent.get("request") if isinstance(sent, dict) else None
    if not isinstance(request, dict):
        response = _denial(400, "BadRequest", "not an AdmissionReview of admission.k8s.io/v1")
        uid = ""
    else:
        uid = str(request.get("uid", ""))
        try:
            response = _verdict(request, manager)
        except Exception:  # a bug here refuses this one job, never the replica's webhook
            log.exception("webhook: cannot judge an admission request")
            response = _denial(500, "InternalError", "internal error of the t9k-jobs webhook")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, **response},
    }


class WebhookServer(ThreadingHTTPServer):
    """A threading HTTP server whose connections are TLS, each handshaken in its own thread
    with the certificate of `cert_dir` as it is now."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], cert_dir: str, manager: PluginManager) -> None:
        self.cert_dir = cert_dir
        self.manager = manager
        self._lock = threading.Lock()
        self._version = _version(cert_dir)
        self._context = tls_context(cert_dir)
        super().__init__(address, _Handler)

    @property
    def context(self) -> ssl.SSLContext:
        """The TLS context, made again when the files changed; the last good one while the new
        files do not make one (a renewal half written), said in the log."""
        with self._lock:
            try:
                version = _version(self.cert_dir)
                if version != self._version:
                    self._context, self._version = tls_context(self.cert_dir), version
                    log.info("webhook: certificate of %s read again", self.cert_dir)
            except (OSError, ssl.SSLError) as exc:
                log.warning("webhook: keeping the last certificate: %s", exc)
            return self._context

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs in the connection's thread: the TLS handshake first (a failed one is the
        client's problem, logged at debug), then the HTTP exchange."""
        assert isinstance(request, socket.socket)
        request.settimeout(IDLE_TIMEOUT)
        try:
            secured = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            log.debug("webhook: TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    # Keep-alive: the API server sends its next review on the same connection, without a new
    # TLS handshake (every answer has its Content-Length).
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out as two writes; with Nagle's algorithm the
    # second waited for the API server's delayed ACK of the first, 40 ms a create
    # (bench/admission_cost.py, docs/benchmarks.md).
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True  # the body is not read: nothing more on this one
            self._send(413, b"an AdmissionReview of 1 byte to 8 MiB\n", "text/plain")
            return
        body = self.rfile.read(length)  # read whatever the path: the connection stays usable
        if self.path.partition("?")[0] != PATH:
            self._send(404, b"not found\n", "text/plain")
            return
        answer = review(body, self.server.manager)
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        respond(self, code, body, content_type)

    def log_message(self, format: str, *args: object) -> None:
        return  # one line a job created is noise; refusals reach the user, not the log


def tls_context(cert_dir: str) -> ssl.SSLContext:
    """A server context with `cert_dir`'s certificate and key (TLS 1.2 at least)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(os.path.join(cert_dir, CERT_FILE), os.path.join(cert_dir, KEY_FILE))
    return context


def _version(cert_dir: str) -> tuple[int, int]:
    """When the certificate and key last changed (through the Secret volume's symlinks)."""
    return (
        os.stat(os.path.join(cert_dir, CERT_FILE)).st_mtime_ns,
        os.stat(os.path.join(cert_dir, KEY_FILE)).st_mtime_ns,
    )


def serve_webhook(address: str, cert_dir: str, manager: PluginManager) -> WebhookServer | None:
    """Serve the webhook at `address` (`host:port`, `:port`; port 0: off) in a daemon thread.

    Raises ValueError for an address that is not one, OSError when the port cannot be bound or
    the certificate read, ssl.SSLError for a certificate and key that do not match."""
    host, port = parse_address(address)
    if port == 0:
        return None
    server = WebhookServer((host, port), cert_dir, manager)
    threading.Thread(target=server.serve_forever, name=f"webhook-{port}", daemon=True).start()
    return server
