"""Running `t9kjobs operator` against the test cluster, as a user would: a separate process
(`t9kjobs.testing.process`), with the CRDs installed first."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.testing.process import OperatorProcess

__all__ = ["REPO", "OperatorProcess", "install_crds", "operator", "operator_process"]

REPO = Path(__file__).resolve().parents[2]


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


def operator_process(cluster: Any, *extra: str, log: Path) -> OperatorProcess:
    """Our operator on the test cluster, logging JSON lines (the tests read them)."""
    return OperatorProcess(cluster.kubeconfig, "--log-format", "json", *extra, log=log)


@pytest.fixture(scope="module")
def operator(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """CRDs installed and one operator watching all namespaces, for the tests of a module."""
    install_crds(cluster)
    op = operator_process(cluster, log=tmp_path_factory.mktemp("operator") / "operator.log")
    try:
        op.wait_ready()
        yield op
    finally:
        op.stop()
