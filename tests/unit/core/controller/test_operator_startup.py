"""`t9kjobs operator` that cannot start says why in one line, with what to do, and exits 2 (#20):
no configuration, a kubeconfig missing or unusable, an address taken or malformed, an API
server out of reach. No cluster is needed: each stops before one is used."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def operator(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES"))}
    env["HOME"] = str(home)  # no ~/.kube/config
    return subprocess.run(
        [sys.executable, "-m", "t9kjobs.cli.main", "operator", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_each_start_up_error_is_one_line_and_exit_2(tmp_path: Path, taken_port: int) -> None:
    unreachable = tmp_path / "unreachable.yaml"
    unreachable.write_text(UNREACHABLE)
    (tmp_path / "broken.yaml").write_text("apiVersion: v1\nkind: Config\n")
    quiet = ("--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0")
    cases = [
        ((), "no Kubernetes configuration", "--kubeconfig"),
        (("--kubeconfig", str(tmp_path / "nope.yaml")), "does not exist", "--kubeconfig"),
        (("--kubeconfig", str(tmp_path / "broken.yaml")), "cannot use the kubeconfig", "check"),
        (
            (
                "--kubeconfig",
                str(unreachable),
                *quiet[:2],
                "--health-probe-bind-address",
                f"127.0.0.1:{taken_port}",
            ),
            "is in use",
            "--health-probe-bind-address",
        ),
        (
            ("--kubeconfig", str(unreachable), "--metrics-bind-address", "nonsense"),
            "not an address",
            "host:port",
        ),
        (("--kubeconfig", str(unreachable), *quiet), "cannot reach the API server", "check"),
    ]
    for args, what, todo in cases:
        done = operator(*args, home=tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (args, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("t9kjobs operator: "), done.stderr
        assert what in lines[0] and todo in lines[0], lines[0]
