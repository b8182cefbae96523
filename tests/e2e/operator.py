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
SIM_EXIT = "sim.t9kjobs.dev/exit-code"
SIM_SECONDS = "sim.t9kjobs.dev/run-seconds"


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


def simulate(manifest: dict[str, Any], exit_code: int = 0, seconds: int = 2) -> dict[str, Any]:
    """Annotate every pod template of a job so KWOK runs its pods `seconds` and exits."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and "spec" in template:
                notes = template.setdefault("metadata", {}).setdefault("annotations", {})
                notes[SIM_EXIT] = str(exit_code)
                notes[SIM_SECONDS] = str(seconds)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest.get("spec"))
    return manifest


def without_claims(manifest: dict[str, Any]) -> dict[str, Any]:
    """Drop PersistentVolumeClaim volumes (and their mounts) from every pod template: the test
    cluster has no storage, and a pod waiting for a claim never starts."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                pod = template["spec"]
                claims = {
                    v["name"] for v in pod.get("volumes") or [] if "persistentVolumeClaim" in v
                }
                if claims:
                    pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in claims]
                    for c in [*pod.get("containers", []), *pod.get("initContainers", [])]:
                        mounts = [m for m in c.get("volumeMounts") or [] if m["name"] not in claims]
                        c["volumeMounts"] = mounts
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest.get("spec"))
    return manifest
