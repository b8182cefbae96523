"""An API server for the conformance kit's admission tier: one of the author's, or one of its own.

What a user's `kubectl apply` meets is the API server: the CRD's schema, its defaults and its
CEL rules. The kit checks a plugin against a real one: `--t9kjobs-kubeconfig PATH` names a
cluster to use; otherwise the kit starts etcd and kube-apiserver of its own (in a temporary
folder, on free loopback ports, in about three seconds; no controller, no node) from the first
folder holding `etcd` and `kube-apiserver` among `$T9KJOBS_BIN_DIR`, the binaries
t9k-jobs' local cluster builds (`make cluster-build`) or `t9kjobs-kit-binaries` builds
anywhere (`~/.cache/t9kjobs/bin/k8s-*`), and `$PATH`;
without them, it uses the cluster of `$KUBECONFIG` when that is set. The server started here
lives as long as the kit's pytest session, and is stopped (and its folder removed) when it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from t9kjobs.testing.harness.process import free_port

__all__ = [
    "NEEDED",
    "ApiServer",
    "ApiServerError",
    "cache_bins",
    "find_binaries",
    "local_api_server",
]

NEEDED = ("etcd", "kube-apiserver")
_START_TIMEOUT = 60.0


class ApiServerError(Exception):
    """No API server could be had; the message says what to do."""


@dataclass(frozen=True)
class ApiServer:
    """A cluster the kit talks to: its kubeconfig, and where it came from."""

    kubeconfig: Path
    origin: str  # for the report header: "started from <dir>" or "KUBECONFIG=<path>"
    started: bool = False  # by the kit, for this session only


def _get(url: str, token: str | None) -> int:
    """The status of a GET on loopback (the server's own certificate is not checked)."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def cache_bins() -> Path:
    """Where t9k-jobs' local control plane keeps its binaries (hack/cluster/common.sh)."""
    root = os.environ.get("T9KJOBS_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "t9kjobs"
    )
    return Path(root, "bin")


def _cache_bin_dirs() -> list[Path]:
    found = cache_bins().glob("k8s-*")
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _has_all(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in NEEDED)


def find_binaries() -> Path | None:
    """The first folder with etcd and kube-apiserver (see the module's docstring)."""
    candidates = [Path(p) for p in [os.environ.get("T9KJOBS_BIN_DIR")] if p]
    candidates += _cache_bin_dirs()
    on_path = [shutil.which(name) for name in NEEDED]
    if all(on_path) and len({Path(str(p)).parent for p in on_path}) == 1:
        candidates.append(Path(str(on_path[0])).parent)
    return next((c for c in candidates if _has_all(c)), None)


def _kubeconfig(path: Path, server: str, token: str, ca: Path) -> None:
    """A kubeconfig trusting the server's own certificate (kube-apiserver made it at start)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: kit\n  cluster:\n    server: {server}\n"
        f"    certificate-authority: {ca}\n"
        f"users:\n- name: kit\n  user:\n    token: {token}\n"
        "contexts:\n- name: kit\n  context: {cluster: kit, user: kit}\n"
        "current-context: kit\n"
    )
    path.chmod(0o600)


def _service_account_keys(folder: Path) -> tuple[Path, Path]:
    """The key pair kube-apiserver insists on for service-account tokens (none are issued)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / "sa.key", folder / "sa.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


_PR_SET_PDEATHSIG = 1


def _die_with_the_kit() -> None:
    """In the child, before exec: SIGKILL when the kit's process dies, however it dies. A
    pytest killed outright (a CI job's timeout, a mutation run's limit) runs no teardown, and
    its etcd and kube-apiserver were left running. SIGKILL, not SIGTERM: a kube-apiserver
    told to stop as its etcd goes waits for it for ever (seen), and nothing of a throwaway
    server needs a graceful end (Linux only; elsewhere the teardown stops them)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Processes:
    """etcd and kube-apiserver, their output in log files, stopped in reverse order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_the_kit
            )
        self.started.append((name, proc))
        return proc

    def wait(
        self, name: str, url: str, proc: subprocess.Popen[bytes], token: str | None = None
    ) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ApiServerError(f"{name} exited ({proc.returncode}):\n{self.tail(name)}")
            with contextlib.suppress(OSError):
                if _get(url, token) == 200:
                    return
            time.sleep(0.2)
        raise ApiServerError(f"{name} not ready after {_START_TIMEOUT:g}s:\n{self.tail(name)}")

    def tail(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        for _, proc in reversed(self.started):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@contextlib.contextmanager
def _started(binaries: Path) -> Iterator[ApiServer]:
    folder = Path(tempfile.mkdtemp(prefix="t9kjobs-kit-apiserver-"))
    procs = _Processes(folder)
    try:
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd = procs.start(
            "etcd",
            [
                str(binaries / "etcd"),
                f"--data-dir={folder / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=error",
            ],
        )
        procs.wait("etcd", f"http://127.0.0.1:{etcd_port}/health", etcd)
        token = secrets.token_hex(16)
        (folder / "tokens.csv").write_text(f"{token},kit,kit,system:masters\n")
        private, public = _service_account_keys(folder)
        apiserver = procs.start(
            "kube-apiserver",
            [
                str(binaries / "kube-apiserver"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--cert-dir={folder / 'certs'}",
                f"--token-auth-file={folder / 'tokens.csv'}",
                "--authorization-mode=AlwaysAllow",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={public}",
                f"--service-account-signing-key-file={private}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--v=0",
            ],
        )
        server = f"https://127.0.0.1:{api_port}"
        procs.wait("kube-apiserver", f"{server}/readyz", apiserver, token)
        kubeconfig = folder / "kubeconfig"
        _kubeconfig(kubeconfig, server, token, folder / "certs" / "apiserver.crt")
        yield ApiServer(kubeconfig, f"etcd and kube-apiserver started from {binaries}", True)
    finally:
        procs.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def local_api_server(
    kubeconfig: str | None = None, binaries: Path | None = None
) -> Iterator[ApiServer]:
    """The API server the admission tier uses (see the module's docstring), for a `with`;
    `binaries` names the folder of etcd and kube-apiserver instead of looking for one."""
    if kubeconfig:
        config = Path(kubeconfig)
        yield ApiServer(config, f"--t9kjobs-kubeconfig={config}")
        return
    binaries = binaries or find_binaries()
    if binaries is not None:
        with _started(binaries) as server:
            yield server
        return
    if os.environ.get("KUBECONFIG"):
        config = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
        yield ApiServer(config, f"KUBECONFIG={config}")
        return
    raise ApiServerError(
        "the admission tier needs an API server: no etcd and kube-apiserver were found"
        f" (in $T9KJOBS_BIN_DIR, in {cache_bins()}/k8s-* as `t9kjobs-kit-binaries` or t9k-jobs'"
        " `make cluster-build` leave them, or together on PATH), and KUBECONFIG is not set;"
        " build them with `t9kjobs-kit-binaries` (needs Go), or give --t9kjobs-kubeconfig=PATH"
    )
