"""Running `t9kjobs operator` against a test cluster, as a user would: a separate process
(`t9kjobs.testing.harness.process`), with the CRDs installed first. Every tier's one operator
fixture (`operators` and `operator`, tests/conftest.py) is built from these; a test that needs
several operators at once (leader election, discovery) starts them with `operator_process`.

A module that sets `WEBHOOK = "Fail"` (or `"Ignore"`) has its operator serve the admission
webhook and the API server call it, as the chart installs it (`t9kjobs.testing.harness.webhook`),
under a configuration of the module's own name, removed with the module's operator. Other
modules run without it: the operator's verdict after admission is what they test, and a test
that stops the operator must not find every creation refused."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t9kjobs.testing.harness import crds
from t9kjobs.testing.harness.process import OperatorProcess, free_port
from t9kjobs.testing.harness.webhook import (
    PATH,
    FailurePolicy,
    register_webhook,
    remove_webhook,
    webhook_configuration,
    write_certificate,
)
from tests.repo import REPO

__all__ = [
    "TEST_WEBHOOKS",
    "OperatorProcess",
    "Operators",
    "install_crds",
    "operator_process",
    "remove_test_webhooks",
]

# The label of every webhook configuration a test registers: what a run killed before its
# teardown left is removed before the next module's operator starts (`remove_test_webhooks`).
TEST_WEBHOOKS = "app.kubernetes.io/part-of=t9k-jobs-tests"


def remove_test_webhooks(cluster: Any) -> None:
    cluster.kubectl(
        "delete", "validatingwebhookconfiguration", "-l", TEST_WEBHOOKS, "--ignore-not-found"
    )


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
        webhook: tuple[str, FailurePolicy] | None = None,
    ) -> None:
        """`webhook`: the configuration's name and failure policy, when the operator serves
        admission (on the same port across restarts, so the configuration stays right)."""
        self.cluster = cluster
        self.logs = logs
        self.args = args
        self.env = env
        self.started = 0
        self.webhook: dict[str, Any] | None = None
        if webhook is not None:
            port, certs = free_port(), logs / "webhook-certs"
            ca = write_certificate(certs)
            self.args += (
                f"--webhook-bind-address=127.0.0.1:{port}",
                f"--webhook-cert-dir={certs}",
            )
            url = f"https://127.0.0.1:{port}{PATH}"
            self.webhook = webhook_configuration(webhook[0], url, ca, webhook[1])
        self.current = self.start()
        if self.webhook is not None:
            self.set_failure_policy(self.webhook["webhooks"][0]["failurePolicy"])
            self.wait_webhook()

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

    def set_failure_policy(self, policy: FailurePolicy) -> None:
        """Register the module's webhook configuration with `policy` (Fail, Ignore). The API
        server takes a moment to use a new configuration: a test that needs it in force waits
        for its effect."""
        assert self.webhook is not None, "the module sets no WEBHOOK"
        self.webhook["webhooks"][0]["failurePolicy"] = policy
        register_webhook(self.cluster.kubectl_path, self.cluster.kubeconfig, self.webhook)

    def wait_webhook(self, timeout: float = 30) -> None:
        """Until the API server calls the webhook: a dry run of a job only the webhook
        refuses (a success rule naming a replica type the job lacks) is refused by it."""
        invalid = REPO / "examples/genericjob/invalid/rule-names-unknown-type.yaml"
        deadline = time.monotonic() + timeout
        while True:
            tried = self.cluster.kubectl(
                "create", "--dry-run=server", "-n", "default", "-f", str(invalid), check=False
            )
            if "denied the request" in tried.stderr:
                return
            assert time.monotonic() < deadline, f"the webhook is not called: {tried.stderr}"
            time.sleep(0.5)

    def close(self) -> None:
        """The operator stopped and its webhook configuration removed."""
        try:
            if self.webhook is not None:
                name = self.webhook["metadata"]["name"]
                remove_webhook(self.cluster.kubectl_path, self.cluster.kubeconfig, name)
        finally:
            self.current.stop()
