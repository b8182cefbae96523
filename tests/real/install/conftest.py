"""The install tier: the operator image built here, installed with the Helm chart on the real
node as docs/install.md tells a platform team, and tried there.

Part of the real tier's package, so it shares its cluster (tests/real/conftest.py). The image is
built by `hack/images/build.sh operator` (from the repository's Dockerfile, once per content of
its build context) and imported into the node's containerd, as a registry pull would put it
there; `helm install` then runs the chart with `image.repository=localhost/t9k-jobs`, and
`apiServer.host/port` pointing the operator at the node's way to the API server (there is no
kube-proxy: docs/install.md, "Clusters without kube-proxy").
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.repo import REPO
from tests.unit.deploy.chart import CHART, install_tool

NAMESPACE = "t9k-system"
RELEASE = "t9k-jobs"
LEASE = "t9k-jobs-operator"  # the chart's leaderElection.leaseName


@dataclass
class Release:
    """The chart installed in NAMESPACE, and how to drive helm and read the operator's pods."""

    cluster: Cluster
    helm_path: Path
    image: str
    values: list[str]

    def helm(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(
            [str(self.helm_path), "--kubeconfig", str(self.cluster.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}{proc.stdout}"
        return proc.stdout

    def pods(self) -> list[dict[str, Any]]:
        out = self.cluster.kubectl(
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-l",
            f"app.kubernetes.io/instance={RELEASE}",
            "-o",
            "json",
        ).stdout
        return [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[dict[str, Any]]:
        def ready(pod: dict[str, Any]) -> bool:
            conditions = (pod.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        return [p for p in self.pods() if ready(p)]

    def holder(self) -> str:
        """The identity the Lease names (`<pod name>_<pid>`), "" when nobody holds it."""
        lease = json.loads(
            self.cluster.kubectl("-n", NAMESPACE, "get", "lease", LEASE, "-o", "json").stdout
        )
        return str(lease["spec"].get("holderIdentity") or "")

    def leader(self) -> str:
        """The pod that holds the Lease (its identity starts with the pod's name)."""
        holder = self.holder()
        (pod,) = [
            p["metadata"]["name"]
            for p in self.pods()
            if holder.startswith(p["metadata"]["name"] + "_")
        ]
        return pod


def signal_pod(cluster: Cluster, pod: dict[str, Any], signal: str) -> None:
    """Send `signal` (SIGSTOP, SIGCONT, SIGKILL...) to the first process of the pod's (only)
    container, through the node's containerd (an operator pod's: the operator itself, its
    image's entrypoint)."""
    (status,) = pod["status"]["containerStatuses"]
    ctr(cluster, "tasks", "kill", "--signal", signal,
        status["containerID"].removeprefix("containerd://"))  # fmt: skip


def ctr(cluster: Cluster, *args: str) -> None:
    """The node's `ctr`, in the kubelet's containerd namespace."""
    subprocess.run(
        [f"{cluster.env['NODE_BIN_DIR']}/ctr", "--address", cluster.env["CONTAINERD_ADDRESS"],
         "--namespace", "k8s.io", *args],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip


def build_and_import_image(cluster: Cluster) -> str:
    """`hack/images/build.sh operator`, then its archive imported into the node; the image."""
    out = subprocess.run(
        ["bash", str(REPO / "hack/images/build.sh"), "operator"],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        timeout=1800,
    ).stdout
    ref, archive = out.split()
    ctr(cluster, "images", "import", "--snapshotter", "overlayfs", archive)
    return ref


@pytest.fixture(scope="module")
def release(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Release]:
    """The chart installed, its two operator pods Ready; uninstalled afterwards. With the
    module's `CHART_VALUES` if it has any."""
    image = build_and_import_image(cluster)
    repository, _, tag = image.rpartition(":")
    values = [
        f"--set=image.repository={repository}",
        "--set=clusterWide=true",  # the test's jobs are in namespaces of their own
        f"--set=image.tag={tag}",
        f"--set=apiServer.host={cluster.env['NODE_APISERVER_HOST']}",
        f"--set=apiServer.port={cluster.env['NODE_APISERVER_PORT']}",
        # No kube-proxy here: the API server calls a webhook at its Service's ClusterIP, which
        # nothing routes. The webhook is tested against this API server by
        # tests/e2e/test_webhook.py, the chart's configuration by test_chart_webhook.py.
        "--set=webhook.enabled=false",
        *getattr(request.module, "CHART_VALUES", []),
    ]
    installed = Release(cluster, install_tool("helm"), image, values)
    try:
        installed.helm(
            "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
            *values, "--wait", "--timeout=5m",
        )  # fmt: skip
        yield installed
    finally:
        subprocess.run(
            [str(installed.helm_path), "--kubeconfig", str(cluster.kubeconfig), "uninstall",
             RELEASE, "--namespace", NAMESPACE, "--wait"],
            capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        # Gone before the next module installs the chart again (and its Lease with it).
        cluster.kubectl(
            "delete", "namespace", NAMESPACE, "--timeout=120s", check=False, timeout=180
        )
