"""The ColossalAI launcher's prelude pins the job's host key in fabric, which checks none.

A real paramiko SSH server on loopback presents a host key; the prelude runs (as the launcher
runs it) in front of a stand-in `colossalai.cli` that opens a fabric Connection to it, as
`colossalai run` does for each host. With the job's host key in `known_hosts` the connection
is made; with any other key it is refused, naming the host."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9kjobs.plugins.colossalai.pinning import PRELUDE

ALIAS = "t9k-jobs.caij"
_WITHOUT_PRELUDE = (
    "import sys; from colossalai.cli import cli; sys.argv = ['colossalai', 'run']; sys.exit(cli())"
)


def _key() -> tuple[paramiko.PKey, str]:
    """A new ed25519 key for paramiko, and its `ssh-ed25519 AAAA...` public line."""
    private = Ed25519PrivateKey.generate()
    text = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        private.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return paramiko.Ed25519Key.from_private_key(io.StringIO(text)), public


class _AnyPassword(paramiko.ServerInterface):
    def get_allowed_auths(self, username: str) -> str:
        return "password"

    def check_auth_password(self, username: str, password: str) -> int:
        return paramiko.common.AUTH_SUCCESSFUL


@pytest.fixture
def server() -> Iterator[tuple[int, str]]:
    """An SSH server on loopback: (port, its host public key line)."""
    host_key, public = _key()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(20)
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        transport = paramiko.Transport(conn)
        transports.append(transport)
        transport.add_server_key(host_key)
        try:
            transport.start_server(server=_AnyPassword())
            transport.accept(10)
        except (paramiko.SSHException, EOFError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], public
    listener.close()
    for transport in transports:
        transport.close()
    thread.join(5)


def _launch(tmp_path: Path, port: int, known: str) -> subprocess.CompletedProcess[str]:
    """Run the prelude as the launcher does: `python -c PRELUDE <known_hosts> <alias> run ...`."""
    cli = tmp_path / "stubs" / "colossalai" / "cli"
    cli.mkdir(parents=True)
    (cli.parent / "__init__.py").write_text("")
    (cli / "__init__.py").write_text(
        textwrap.dedent(
            f"""\
            import sys
            import fabric

            def cli():
                assert sys.argv[:2] == ["colossalai", "run"], sys.argv
                connection = fabric.Connection(
                    "caij-worker-0.caij",
                    port={port},
                    connect_kwargs={{"password": "x", "look_for_keys": False,
                                     "allow_agent": False}},
                )
                connection.open()
                print("connected")
                connection.close()
                return 0
            """
        )
    )
    # The worker's name reaches the server on loopback (HOME is tmp_path; fabric reads it).
    (tmp_path / ".ssh").mkdir(exist_ok=True)
    (tmp_path / ".ssh" / "config").write_text("Host caij-worker-0.caij\n  HostName 127.0.0.1\n")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"{ALIAS} {known}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "stubs"), "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", PRELUDE, str(known_hosts), ALIAS, "run", "--hostfile", "h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_job_host_key_is_accepted(tmp_path: Path, server: tuple[int, str]) -> None:
    port, public = server
    result = _launch(tmp_path, port, public)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "connected"


def test_any_other_host_key_is_refused(tmp_path: Path, server: tuple[int, str]) -> None:
    port, _ = server
    _, other = _key()
    result = _launch(tmp_path, port, other)
    assert result.returncode != 0
    assert "connected" not in result.stdout
    assert "did not present the job's host key (t9k-jobs.caij in" in result.stderr


def test_without_the_prelude_fabric_accepts_any_host_key(
    tmp_path: Path, server: tuple[int, str]
) -> None:
    """What the prelude is for: fabric on its own connects whatever the key."""
    port, _ = server
    _launch(tmp_path, port, "unused")  # writes the stand-in colossalai.cli
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "stubs"), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PRELUDE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "connected", result.stderr
