"""A kind whose CRD is missing is reported and skipped, the others are served, and the kind is
served once its CRD is installed, without restarting the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.e2e.jobs import example, job_status, watch_phases
from tests.operators import install_crds, operator_process

MISSING = "colossalaijobs.batch.tensorstack.dev"


def test_missing_crd_is_skipped_then_served_once_installed(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    install_crds(cluster)
    crd = cluster.kubectl("get", "crd", MISSING, "-o", "yaml").stdout
    cluster.kubectl("delete", "crd", MISSING, "--wait=true")
    op = operator_process(cluster, "--discovery-interval", "1", log=tmp_path / "operator.log")
    try:
        op.wait_ready()
        skipped = [line for line in op.log_lines() if "ColossalAIJob is not served" in line["msg"]]
        assert skipped and skipped[0]["level"] == "warning"
        metrics = op.get("/metrics", op.metrics_port)[1]
        assert 't9kjobs_kind_served{kind="ColossalAIJob"} 0.0' in metrics
        assert 't9kjobs_kind_served{kind="GenericJob"} 1.0' in metrics

        generic = example("examples/genericjob/torch-ddp.yaml", namespace)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(generic))
        watch_phases(cluster, generic, "Succeeded")

        manifest = yaml.safe_load(crd)
        for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            manifest["metadata"].pop(key, None)
        manifest.pop("status", None)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{MISSING}")
        colossal = example("examples/colossalaijob/minimal.yaml", namespace)
        cluster.poll(
            lambda: (
                cluster.kubectl(
                    "apply", "-f", "-", input=yaml.safe_dump(colossal), check=False
                ).returncode
                == 0
            ),
            message="the ColossalAIJob CRD to serve",
        )
        watch_phases(cluster, colossal, "Succeeded")
        assert job_status(cluster, colossal)["phase"] == "Succeeded"
        assert (
            't9kjobs_kind_served{kind="ColossalAIJob"} 1.0'
            in op.get("/metrics", op.metrics_port)[1]
        )
    finally:
        op.stop()
        install_crds(cluster)
