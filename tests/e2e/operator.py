"""Running `t9kjobs operator` against the test cluster, as a user would: a separate process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install_crds(cluster: Any) -> None:
    crds = subprocess.run(
        [sys.executable, "-m", "t9kjobs.cli.main", "crds", "--stdout"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=crds)
    for doc in yaml.safe_load_all(crds):
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{doc['metadata']['name']}"
        )


class OperatorProcess:
    def __init__(self, cluster: Any, *extra: str, log: Path) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "t9kjobs.cli.main",
                "operator",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--metrics-bind-address",
                f"127.0.0.1:{self.metrics_port}",
                "--health-probe-bind-address",
                f"127.0.0.1:{self.health_port}",
                "--log-format",
                "json",
                *extra,
            ],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port or self.health_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"operator exited: {self.log.read_text()[-3000:]}"
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"operator not ready: {self.log.read_text()[-3000:]}")

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


@pytest.fixture(scope="module")
def operator(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """CRDs installed and one operator watching all namespaces, for the tests of a module."""
    install_crds(cluster)
    op = OperatorProcess(cluster, log=tmp_path_factory.mktemp("operator") / "operator.log")
    try:
        op.wait_ready()
        yield op
    finally:
        op.stop()
