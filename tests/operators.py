"""Running `t9kjobs operator` against a test cluster, as a user would: a separate process
(`t9kjobs.testing.harness.process`), with the CRDs installed first. Every tier's one operator
fixture (`operators` and `operator`, tests/conftest.py) is built from these; a test that needs
several operators at once (leader election, discovery) starts them with `operator_process`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t9kjobs.testing.harness import crds
from t9kjobs.testing.harness.process import OperatorProcess

__all__ = ["OperatorProcess", "Operators", "install_crds", "operator_process"]


def install_crds(cluster: Any) -> None:
    crds.install_crds(cluster.kubectl_path, cluster.kubeconfig)


def operator_process(
    cluster: Any, *extra: str, log: Path, env: Mapping[str, str] | None = None
) -> OperatorProcess:
    """Our operator on the test cluster, logging JSON lines (the tests read them)."""
    return OperatorProcess(cluster.kubeconfig, "--log-format", "json", *extra, log=log, env=env)


class Operators:
    """The one operator of a test module, started with the module's flags; tests may kill it,
    or replace it after a CRD change (it discovers which child kinds the cluster serves when it
    starts)."""

    def __init__(
        self,
        cluster: Any,
        logs: Path,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.logs = logs
        self.args = args
        self.env = env
        self.started = 0
        self.current = self.start()

    def start(self) -> OperatorProcess:
        self.started += 1
        log = self.logs / f"operator-{self.started}.log"
        op = operator_process(self.cluster, *self.args, log=log, env=self.env)
        op.wait_ready()
        self.current = op
        return op

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind, as when a node dies."""
        self.current.kill()
        self.current.stop()

    def restart(self) -> None:
        self.current.stop()
        self.start()
