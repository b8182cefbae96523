"""Operators run as separate processes, as a user runs them: for end-to-end tests (ours and a
plugin author's) and for the benchmark.

A test that imports the operator and calls it in-process shares the test's threads, logging and
interpreter state with it; a process of its own is what a user gets, and a crash, a hang or a
SIGKILL can be tested. Everything listens on loopback ports picked free at start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

__all__ = ["OperatorProcess", "ServerProcess", "free_port", "http_get", "operator_command"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    """Status and body of a GET; an HTTP error status is an answer, not an exception."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def operator_command(kubeconfig: str | Path, metrics_port: int, health_port: int) -> list[str]:
    """`t9kjobs operator` of this interpreter, its endpoints on the given loopback ports."""
    return [
        sys.executable,
        "-m",
        "t9kjobs.cli.main",
        "operator",
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health_port}",
    ]


class ServerProcess:
    """A controller process with a metrics and a health port (`/readyz`), its output in a log
    file, stopped with SIGTERM (SIGKILL after a grace period)."""

    def __init__(self) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(os.devnull)
        self._out: IO[bytes] | None = None

    def launch(self, command: list[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            command,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={"PYTHONUNBUFFERED": "1", **(os.environ if env is None else env)},
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not launched"
        return self.proc.pid

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{port or self.health_port}{path}")

    def ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exited():
                raise RuntimeError(f"{self.log} - exited before ready:\n{self.log_tail()}")
            try:
                if self.ready():
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{self.log} - not ready after {timeout}s:\n{self.log_tail()}")

    def log_lines(self) -> list[dict[str, Any]]:
        """The log's JSON lines (`--log-format json`), decoded; other lines are skipped."""
        lines = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind, as when its node dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, grace: float = 15) -> int | None:
        """Its exit code (None if never launched)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._out is not None:
            self._out.close()
        return self.proc.returncode


class OperatorProcess(ServerProcess):
    """`t9kjobs operator` against the cluster of `kubeconfig`, with `extra` flags."""

    def __init__(
        self, kubeconfig: str | Path, *extra: str, log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        command = operator_command(kubeconfig, self.metrics_port, self.health_port)
        self.launch([*command, *extra], log, env)
