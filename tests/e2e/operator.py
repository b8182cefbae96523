"""Running `t9kjobs operator` against the test cluster, as a user would: a separate process
(`t9kjobs.testing.harness.process`), with the CRDs installed first (`t9kjobs.testing.harness.crds`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.testing.harness import crds
from t9kjobs.testing.harness.process import OperatorProcess

__all__ = ["REPO", "OperatorProcess", "install_crds", "operator", "operator_process"]

REPO = Path(__file__).resolve().parents[2]


def install_crds(cluster: Any) -> None:
    crds.install_crds(cluster.kubectl_path, cluster.kubeconfig)


def operator_process(cluster: Any, *extra: str, log: Path) -> OperatorProcess:
    """Our operator on the test cluster, logging JSON lines (the tests read them)."""
    return OperatorProcess(cluster.kubeconfig, "--log-format", "json", *extra, log=log)


@pytest.fixture(scope="module")
def operator(
    cluster: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    """CRDs installed and one operator watching all namespaces, for the tests of a module;
    with the module's `OPERATOR_ARGS` if it has any."""
    install_crds(cluster)
    extra = tuple(getattr(request.module, "OPERATOR_ARGS", ()))
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    op = operator_process(cluster, *extra, log=log)
    try:
        op.wait_ready()
        yield op
    finally:
        op.stop()
