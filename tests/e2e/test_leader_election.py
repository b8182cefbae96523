"""Two replicas with --leader-elect: one reconciles, the other takes over when it dies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.jobs import example, watch_phases
from tests.operators import OperatorProcess, install_crds, operator_process

LEASE = "t9k-jobs-operator"


def holder(cluster: Any, namespace: str) -> str | None:
    out = cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["spec"].get("holderIdentity") or None


def leader_gauge(op: OperatorProcess) -> str:
    text = op.get("/metrics", op.metrics_port)[1]
    return next(
        line.split()[-1] for line in text.splitlines() if line.startswith("t9kjobs_leader ")
    )


def test_one_replica_leads_and_the_other_takes_over(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    install_crds(cluster)
    flags = ("--leader-elect", "--leader-election-namespace", namespace)
    ops = {
        name: operator_process(cluster, *flags, "--identity", name, log=tmp_path / f"{name}.log")
        for name in ("replica-a", "replica-b")
    }
    try:
        for op in ops.values():
            op.wait_ready()
        first = cluster.poll(lambda: holder(cluster, namespace), message="a lease holder")
        second = next(name for name in ops if name != first)
        cluster.poll(lambda: leader_gauge(ops[first]) == "1.0", message="the leader's gauge")
        assert leader_gauge(ops[second]) == "0.0"

        job = example("examples/genericjob/torch-ddp.yaml", namespace)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        watch_phases(cluster, job, "Succeeded")
        assert not [line for line in ops[second].log_lines() if line.get("job")], (
            "the standby reconciled"
        )

        ops[first].kill()  # no chance to release the lease: the standby waits for expiry
        cluster.poll(
            lambda: holder(cluster, namespace) == second,
            timeout=60,
            message=f"{second} to take over",
        )
        cluster.poll(lambda: leader_gauge(ops[second]) == "1.0", message="the new leader's gauge")
        job["metadata"]["name"] = "after-takeover"
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        watch_phases(cluster, job, "Succeeded")
    finally:
        for op in ops.values():
            op.stop()
