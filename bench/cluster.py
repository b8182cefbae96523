"""A fresh local control plane (hack/cluster) for each phase of the benchmark.

Each phase starts from an empty etcd, so the objects of an earlier phase (2,000 pods, their
events) cannot slow a later one, and the order of the phases does not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

__all__ = ["Cluster", "ClusterError"]

REPO = Path(__file__).resolve().parents[1]
HACK = REPO / "hack" / "cluster"


class ClusterError(RuntimeError):
    pass


class Cluster:
    """The cluster of hack/cluster/up.sh at `directory`, with nodes that hold `pods_per_node`."""

    def __init__(
        self, directory: Path, pods_per_node: int, *, kueue: bool = False, profiling: bool = False
    ) -> None:
        """`kueue`: Kueue runs beside the control plane (hack/cluster/kueue); `profiling`: its
        components serve /debug/pprof (bench/pprof.py)."""
        self.dir = directory
        self.env = {
            **os.environ,
            "T9KJOBS_CLUSTER_DIR": str(directory),
            # Room for every pod of the workload at once: the scheduler counts pods per node.
            "T9KJOBS_NODE_PODS": str(pods_per_node),
            "T9KJOBS_KUEUE": "1" if kueue else "0",
            "T9KJOBS_PROFILING": "1" if profiling else "0",
        }
        self.facts: dict[str, str] = {}

    @property
    def kubeconfig(self) -> str:
        return self.facts["KUBECONFIG"]

    @property
    def kubectl_path(self) -> str:
        return str(Path(self.facts["BIN_DIR"]) / "kubectl")

    def running(self) -> bool:
        status = HACK / "status.sh"
        return subprocess.run([status], env=self.env, capture_output=True).returncode == 0

    def up(self, timeout: float = 600) -> None:
        """Start the cluster (building the binaries first if they are missing)."""
        if self.running():
            raise ClusterError(
                f"a cluster already runs at {self.dir}: the benchmark starts its own,"
                " so pick another --cluster-dir (or stop that one with hack/cluster/down.sh)"
            )
        done = subprocess.run(
            [HACK / "up.sh"], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise ClusterError(f"up.sh failed:\n{done.stderr[-3000:]}")
        for line in (self.dir / "cluster.env").read_text().splitlines():
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                self.facts[key] = value

    def down(self) -> None:
        subprocess.run([HACK / "down.sh"], env=self.env, capture_output=True, timeout=120)

    def pids(self) -> dict[str, int]:
        """Process ids of the control plane's components, by name."""
        pids = {}
        names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
        for name in (*names, "kueue"):
            path = self.dir / "pids" / f"{name}.pid"
            if path.exists():
                pids[name] = int(path.read_text().strip())
        return pids

    def create_namespace(self, name: str, timeout: float = 60) -> None:
        """Create `name` and wait for its default ServiceAccount: a pod created before it
        exists is rejected by the ServiceAccount admission."""
        self.kubectl("create", "namespace", name)
        deadline = time.monotonic() + timeout
        while "default" not in self.kubectl("-n", name, "get", "serviceaccounts"):
            if time.monotonic() > deadline:
                raise ClusterError(f"namespace {name}: no default ServiceAccount after {timeout} s")
            time.sleep(0.5)

    def wait_for_garbage_collector(
        self, api_version: str, kind: str, timeout: float = 120
    ) -> float:
        """Wait until kube-controller-manager's garbage collector knows `kind`, of CRDs just
        installed; the seconds it took.

        The collector rediscovers the API every 30 s, and starts watching new kinds then. Until
        it does, each child of a job of the kind names an owner it has not observed: it holds a
        "virtual" node for that owner and looks it up again and again until it sees it, a cost
        of a CRD installed seconds before the burst that a cluster running jobs has long paid
        (docs/benchmarks.md, issue #50). A probe ConfigMap owned by an object of the kind that
        does not exist is deleted by the collector once it can look the kind up (up to a minute:
        its look-ups of an unknown kind back off meanwhile).
        """
        probe = f"bench-gc-probe-{kind.lower()}"
        owner = {
            "apiVersion": api_version,
            "kind": kind,
            "name": probe,
            "uid": f"00000000-0000-4000-8000-{int(time.time() * 1000) % 10**12:012d}",
        }
        manifest = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": probe, "namespace": "default", "ownerReferences": [owner]},
        }
        self.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.kubectl("-n", "default", "get", "configmap", probe, "--ignore-not-found"):
                return time.monotonic() - start
            time.sleep(1)
        raise ClusterError(
            f"kube-controller-manager's garbage collector did not collect the ConfigMap"
            f" default/{probe} (owned by a {kind} that does not exist) in {timeout} s"
        )

    def apply(self, manifests: str) -> str:
        """`kubectl apply` of YAML documents (the benchmark's queues, flavors, topologies)."""
        return self.kubectl("apply", "-f", "-", stdin=manifests)

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        done = subprocess.run(
            [self.kubectl_path, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout
