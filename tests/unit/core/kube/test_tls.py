"""The Transport's TLS: the API server's certificate verified (CA and name), the client
certificate presented, and both read once for every connection (issue #50: urllib3 read them
again for each new connection, at 40 ms of CPU each under load)."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from t9kjobs.kube.transport import Transport


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 (or for another name), a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    _openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ca"),
        *("-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt")),
    )
    for name, san in (("server", "IP:127.0.0.1"), ("other", "DNS:elsewhere"), ("client", "")):
        _openssl(
            *("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}"),
            *("-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr")),
        )
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n" if san else "")
        _openssl(
            *("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt")),
            *("-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1"),
            *("-extfile", str(d / f"{name}.ext"), "-out", str(d / f"{name}.crt")),
        )
    return d


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        subject = dict(item[0] for item in peer["subject"])
        body = json.dumps({"user": subject["commonName"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        """The body read as its Content-Length says, sent back."""
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(pki: Path, cert: str) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    context.verify_mode = ssl.CERT_REQUIRED  # a client certificate or nothing
    context.load_verify_locations(pki / "ca.crt")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server(pki: Path) -> Iterator[str]:
    yield from _serve(pki, "server")


@pytest.fixture
def misnamed(pki: Path) -> Iterator[str]:
    yield from _serve(pki, "other")


def _configuration(host: str, pki: Path, copy: Path) -> k8s_client.Configuration:
    """A configuration whose files are copies in `copy` (the test removes them)."""
    cfg = k8s_client.Configuration()
    cfg.host = host
    for name in ("ca.crt", "client.crt", "client.key"):
        (copy / name).write_bytes((pki / name).read_bytes())
    cfg.ssl_ca_cert = str(copy / "ca.crt")
    cfg.cert_file = str(copy / "client.crt")
    cfg.key_file = str(copy / "client.key")
    return cfg


def test_every_connection_presents_the_client_certificate_read_once(
    server: str, pki: Path, tmp_path: Path
) -> None:
    transport = Transport(_configuration(server, pki, tmp_path), qps=0)
    assert transport.request("GET", "/api") == {"user": "client"}
    # The files gone (a kubeconfig's certificate data is written to temporary files), a new
    # connection still has them: they were read when the Transport was made.
    for name in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / name).unlink()
    transport._pool.clear()  # the next request opens a new connection
    assert transport.request("GET", "/api") == {"user": "client"}


def test_a_server_whose_certificate_names_another_host_is_refused(
    misnamed: str, pki: Path, tmp_path: Path
) -> None:
    transport = Transport(_configuration(misnamed, pki, tmp_path), qps=0)
    with pytest.raises(Exception, match=r"(?i)certificate|hostname|doesn.t match"):
        transport.request("GET", "/api", total=5)


def test_a_request_and_its_small_body_are_one_tls_write(
    server: str, pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One record and one system call a request, not one for the headers and one for the body
    (issue #50; `t9kjobs.kube.transport._FencedHTTPConnection`)."""
    transport = Transport(_configuration(server, pki, tmp_path), qps=0)
    transport.request("GET", "/api")  # connected: the handshake's writes are not counted
    writes: list[bytes] = []
    real = ssl.SSLSocket.send

    def recorded(self: ssl.SSLSocket, data: Any, flags: int = 0) -> int:
        if not self.server_side:
            writes.append(bytes(data))
        return real(self, data, flags)

    monkeypatch.setattr(ssl.SSLSocket, "send", recorded)
    body = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
    assert transport.request("PUT", "/apis/x/v1/namespaces/ns/xs/p/status", body=body) == body
    [write] = writes
    assert write.startswith(b"PUT /apis/x/v1/namespaces/ns/xs/p/status HTTP/1.1\r\n")
    assert json.loads(write.partition(b"\r\n\r\n")[2]) == body
