"""All HTTP to the API server goes through `Transport`: auth, TLS, client-side rate limiting,
request metrics. Objects stay plain JSON dicts: building the kubernetes client's model classes
for every pod would cost more CPU than the whole reconcile.

Connections have TCP keepalive, so a peer that vanished without a word (a host that died, a
network cut) is noticed in about half a minute even on an idle stream. A `fence` refuses every
write once it says so (a replica whose Lease may have passed to another). It is asked right
before each piece of the request goes to the socket, so no queue, limiter, pool or connect wait,
and no freeze of the process (SIGSTOP) between two sends, can carry a write past it: a request
stopped half-way is dropped with its connection, and the server never acts on it. The user
agent names the replica (`t9k-jobs-operator/<version> (<identity>)`), so the API server's audit
log tells replicas apart.

An answer of 429 (Too Many Requests: the API server's priority and fairness shedding load) is
not an error the caller sees at once: the request was not executed, so it is sent again after
the answer's Retry-After (1 s without one, at most `MAX_RETRY_AFTER`), up to `RETRIES_ON_429`
times, as client-go does. The wait holds every request of this Transport, not only the one that
was refused: the server asked this client to slow down. The leader election has a Transport of
its own, so a throttled workers' client never delays a Lease renewal.

The kubernetes client package is used only to read kubeconfig / in-cluster configuration.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.ssl_ import create_urllib3_context

from t9kjobs.kube.decoding import loads
from t9kjobs.vocabulary import Obj

__all__ = [
    "MAX_RETRY_AFTER",
    "ONE_WRITE_BYTES",
    "RETRIES_ON_429",
    "ApiError",
    "Fenced",
    "RateLimiter",
    "Transport",
    "default_namespace",
    "load_configuration",
    "retry_after",
    "user_agent",
]


class ApiError(Exception):
    def __init__(self, status: int, body: Obj | str) -> None:
        self.status = status
        self.body = body
        message = body.get("message", "") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"HTTP {status}: {message}")

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


class Fenced(Exception):
    """A write the fence refused: this replica may no longer be the leader."""


def user_agent(identity: str = "") -> str:
    """`t9k-jobs-operator/<version>`, with `(<identity>)` when one is given."""
    try:
        release = version("t9k-jobs")
    except PackageNotFoundError:  # running from a source tree that was never installed
        release = "dev"
    return f"t9k-jobs-operator/{release}" + (f" ({identity})" if identity else "")


# Probe an idle connection after 15 s, then every 5 s; 3 unanswered probes close it (~30 s).
KEEPALIVE = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 15),
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5),
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3),
]


# The fence of the write this thread is sending, if any (read by the connections below).
_sending = threading.local()


# A body up to this size goes out in the same write as the request's headers.
ONE_WRITE_BYTES = 64 * 1024


class _FencedHTTPConnection(HTTPConnection):
    """A connection that sends a request's headers and a small bytes body in one write, and
    asks the fence before each write.

    urllib3 2 sends the headers (`endheaders()`, without the body), then the body, each in a
    write of its own (http.client of Python 3.11 too): two TLS records and two system calls a
    request, the headers' write alone 15% of the operator's CPU on the benchmark (issue #50).
    So urllib3 is given no body but its Content-Length, the headers' block is its only write,
    and `send` appends the held body to it. A body over ONE_WRITE_BYTES goes as urllib3 sends
    it, not copied: it takes several TLS records anyway."""

    _with_headers: bytes | None = None

    def request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        given = {k.lower() for k in headers or {}}
        if (
            isinstance(body, bytes)
            and body
            and len(body) <= ONE_WRITE_BYTES
            and not kwargs.get("chunked")
            and not given & {"content-length", "transfer-encoding"}
        ):
            self._with_headers = body
            headers = {**(headers or {}), "Content-Length": str(len(body))}
            body = None
        try:
            super().request(method, url, body, headers, **kwargs)
        finally:
            self._with_headers = None

    def send(self, data: Any) -> None:
        _check_fence()
        body, self._with_headers = self._with_headers, None
        super().send(data if body is None else data + body)


class _FencedHTTPSConnection(_FencedHTTPConnection, HTTPSConnection):
    """The same over TLS."""


class _FencedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _FencedHTTPConnection


class _FencedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _FencedHTTPSConnection


def _check_fence() -> None:
    fence: Callable[[], bool] | None = getattr(_sending, "fence", None)
    if fence is not None and not fence():
        raise Fenced("write refused: this replica may have lost its Lease")


def load_configuration(
    kubeconfig: str | None = None, context: str | None = None
) -> k8s_client.Configuration:
    """`kubeconfig`, else $KUBECONFIG, else ~/.kube/config, else the in-cluster config;
    `context` names another context of the kubeconfig than its current one."""
    cfg = k8s_client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if kubeconfig or context or os.path.exists(path):
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


_POD_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's current context (or of `context`), else the pod's
    own (in a cluster), else `default`: what kubectl uses when no --namespace is given."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if kubeconfig or context or os.path.exists(path):
        contexts, current = k8s_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        if context is not None:
            current = next((c for c in contexts or [] if c.get("name") == context), None)
        return str(((current or {}).get("context") or {}).get("namespace") or "default")
    try:
        with open(_POD_NAMESPACE) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


class RateLimiter:
    """A token bucket: `qps` requests a second on average, bursts of up to `burst`."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.qps
            time.sleep(wait)


RequestHook = Callable[[str, str, int], None]  # (verb, path, status code)

RETRIES_ON_429 = 10
MAX_RETRY_AFTER = 60.0


def retry_after(value: str | None) -> float:
    """Seconds a 429's Retry-After asks for: its delay-seconds (the form the API server sends),
    1 when it is missing or not a number, at most `MAX_RETRY_AFTER`."""
    try:
        seconds = float(value) if value is not None else 1.0
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _tls_context(cfg: k8s_client.Configuration) -> ssl.SSLContext:
    """One TLS context for every connection of a Transport, its CA and client certificate read
    once. Given files instead, urllib3 builds a context for each new connection and reads them
    again (the client key checked for a passphrase first): a creator thread's first request
    cost it 40 ms of CPU in the 500-job burst (docs/benchmarks.md, issue #50)."""
    context = create_urllib3_context(
        cert_reqs=ssl.CERT_REQUIRED if cfg.verify_ssl else ssl.CERT_NONE
    )
    if cfg.verify_ssl:
        if cfg.ssl_ca_cert:
            context.load_verify_locations(cfg.ssl_ca_cert)
        else:
            context.load_default_certs()
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return context


class Transport:
    def __init__(
        self,
        cfg: k8s_client.Configuration,
        qps: float = 50.0,
        burst: int = 100,
        pool_size: int = 32,
        on_request: RequestHook | None = None,
        identity: str = "",
    ) -> None:
        self._cfg = cfg
        self._host = cfg.host.rstrip("/")
        kwargs: dict[str, Any] = {
            "maxsize": pool_size,
            "block": False,
            "socket_options": HTTPConnection.default_socket_options + KEEPALIVE,
            "cert_reqs": "CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE",
            "ssl_context": _tls_context(cfg),
        }
        if getattr(cfg, "tls_server_name", None):
            kwargs["server_hostname"] = cfg.tls_server_name
        self._pool = urllib3.PoolManager(**kwargs)
        self._pool.pool_classes_by_scheme = {"http": _FencedHTTPPool, "https": _FencedHTTPSPool}
        self.limiter = RateLimiter(qps, burst)
        self._on_request = on_request
        self.impersonate: str | None = None
        self.user_agent = user_agent(identity)
        # Called right before each write goes out; False refuses it (`Fenced`).
        self.fence: Callable[[], bool] | None = None
        self.sleep: Callable[[float], None] = time.sleep  # a test records the waits
        self._resume_at = 0.0  # monotonic time before which no request goes out (a 429's wait)
        self._resume_lock = threading.Lock()

    def _hold_while_throttled(self, deadline: float | None) -> None:
        """Wait out the Retry-After of the last 429; ApiError 429 if it ends past `deadline`."""
        with self._resume_lock:
            resume_at = self._resume_at
        wait = resume_at - time.monotonic()
        if wait <= 0:
            return
        if deadline is not None and resume_at > deadline:
            raise ApiError(
                429, {"message": f"throttled for {wait:.1f}s more than the call may take"}
            )
        self.sleep(wait)

    def _throttled(self, response: urllib3.BaseHTTPResponse, attempt: int) -> bool:
        """Whether `response` is a 429 to send again after its Retry-After (set for all)."""
        if response.status != 429 or attempt >= RETRIES_ON_429:
            return False
        wait = retry_after(response.headers.get("Retry-After"))
        with self._resume_lock:
            self._resume_at = max(self._resume_at, time.monotonic() + wait)
        return True

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        total: float | None,
        verb: str,
        **kwargs: Any,
    ) -> urllib3.BaseHTTPResponse:
        """One request through the rate limiter and the fence, sent again on a 429 after its
        Retry-After (module docstring); `verb` names it in the request metric."""
        deadline = time.monotonic() + total if total is not None else None
        attempt = 0
        while True:
            self._hold_while_throttled(deadline)
            self.limiter.acquire()
            _sending.fence = self.fence if method != "GET" else None
            try:
                response = self._pool.request(
                    method, self._url(path, query), retries=False, **kwargs
                )
            finally:
                _sending.fence = None
            if self._on_request is not None:
                self._on_request(verb, path, response.status)
            if not self._throttled(response, attempt):
                return response
            response.drain_conn()
            response.release_conn()
            attempt += 1

    def _headers(
        self, content_type: str | None, accept: str = "application/json"
    ) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        token = self._cfg.get_api_key_with_prefix(
            "authorization"
        ) or self._cfg.get_api_key_with_prefix("BearerToken")
        if token:
            headers["Authorization"] = token
        if self.impersonate:
            headers["Impersonate-User"] = self.impersonate
        return headers

    def _url(self, path: str, query: dict[str, Any] | None) -> str:
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return self._host + path + ("?" + urlencode(query) if query else "")

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        accept: str = "application/json",
        total: float | None = None,
    ) -> Obj:
        """One API call; the decoded JSON answer, or ApiError for a status >= 400. `accept`
        may ask for another form of the answer (a Table: `application/json;as=Table;...`).
        `timeout` bounds each wait for the server; `total` the whole call, connecting
        included."""
        data = json.dumps(body).encode() if body is not None else None
        response = self._send(
            method,
            path,
            query,
            total,
            method,
            body=data,
            headers=self._headers(content_type if data is not None else None, accept),
            timeout=urllib3.Timeout(connect=min(10.0, timeout), read=timeout, total=total),
        )
        try:
            decoded: Obj | str = loads(response.data) if response.data else {}
        except ValueError:
            decoded = response.data.decode(errors="replace")
        if response.status >= 400:
            raise ApiError(response.status, decoded)
        return decoded if isinstance(decoded, dict) else {}

    def stream(
        self, path: str, query: dict[str, Any], timeout: float, accept: str = "application/json"
    ) -> Iterator[Obj]:
        """A watch: one decoded event per line until the server closes it, or until no byte
        came for `timeout` seconds (a stream that died without a word). `accept` may ask for
        another form of the objects (PartialObjectMetadata: `t9kjobs.kube.resources`)."""
        for line in self.lines(path, query, timeout, verb="WATCH", accept=accept):
            if line.strip():
                yield loads(line)

    def lines(
        self,
        path: str,
        query: dict[str, Any],
        timeout: float,
        verb: str = "GET",
        accept: str = "application/json",
    ) -> Iterator[bytes]:
        """The answer's lines as they arrive (a watch, a followed log), without their newline;
        a last line without one too; `timeout` bounds each wait for a byte. ApiError for a
        status >= 400."""
        response = self._send(
            "GET",
            path,
            query,
            None,
            verb,
            headers=self._headers(None, accept),
            timeout=urllib3.Timeout(connect=10.0, read=timeout),
            preload_content=False,
        )
        try:
            if response.status >= 400:
                data = response.data
                try:
                    body: Obj | str = json.loads(data)
                except ValueError:
                    body = data.decode(errors="replace")
                raise ApiError(response.status, body)
            buffer = b""
            for chunk in response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    yield line
            if buffer:
                yield buffer
        finally:
            response.release_conn()
