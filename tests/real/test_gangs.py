"""Gangs on the real node: two training jobs that cannot both run at once, placed whole, one
after the other, and both train.

The node's CPU is the contended resource here (it has no GPU): each of the two GenericJobs of
the runnable MLP example (3 ranks) asks for a third of the CPU the node has left, so one job
fits and two do not. With kube-scheduler's gangs (the operator's default on a cluster that
serves them, as the local one does), one job's three ranks are placed together and train while
the other job waits whole, without a rank of it placed; then the other trains. At no moment are
both jobs partly placed. (The KWOK tier shows what happens without gangs: tests/e2e/test_gangs.py.)
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import yaml

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import apply, assert_trained, get, job_logs, report, wait_finished
from tests.repo import REPO

EXAMPLE = REPO / "examples" / "genericjob" / "mlp-cpu.yaml"


def _millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _free_millicores(cluster: Cluster) -> int:
    """The node's allocatable CPU less what the pods on it request."""
    [node] = get(cluster, "default", "nodes")["items"]
    free = _millicores(node["status"]["allocatable"]["cpu"])
    for pod in get(cluster, "default", "pods", "--all-namespaces")["items"]:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"]["containers"]:
            free -= _millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
    return free


def _job(name: str, cpu: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    for spec in doc["spec"]["replicaSpecs"]:
        for c in spec["template"]["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": cpu}}
    return doc


class Placements:
    """Which jobs were partly placed at once (some ranks on the node, others waiting), seen
    by polling the pods until stopped."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.both: list[dict[str, str]] = []
        self.waited: set[str] = set()
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            pods = get(self.cluster, self.namespace, "pods")["items"]
            self.looks += 1
            placed: dict[str, set[bool]] = {}
            for pod in pods:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                job = pod["metadata"]["labels"]["tensorstack.dev/owner-name"]
                placed.setdefault(job, set()).add(bool(pod["spec"].get("nodeName")))
            partly = {job for job, seen in placed.items() if seen == {True, False}}
            if any(True in seen for seen in placed.values()):
                # a job none of whose ranks is placed while another's are: it waits whole
                self.waited |= {job for job, seen in placed.items() if seen == {False}}
            if len(partly) > 1:
                self.both.append({p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods})

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_two_jobs_that_do_not_fit_together_train_one_after_the_other(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    share = _free_millicores(cluster) // 3
    assert share >= 100, f"the node has too little CPU left for 3 ranks: {3 * share}m"
    docs = [_job("gang-a", f"{share}m"), _job("gang-b", f"{share}m")]
    watch = Placements(cluster, namespace)
    try:
        apply(cluster, namespace, *docs)
        jobs = [
            wait_finished(cluster, namespace, "GenericJob", d["metadata"]["name"]) for d in docs
        ]
    finally:
        watch.stop()
    for job in jobs:
        name = job["metadata"]["name"]
        logs = job_logs(cluster, namespace, name)
        assert job["status"]["phase"] == "Succeeded", f"{name}\n{report(job, logs)}"
        assert_trained(logs, 3, name)
    assert watch.looks > 10
    assert not watch.both, f"both jobs partly placed at once: {watch.both[0]}"
    # The contention was real: one job waited whole while the other's ranks held the CPU.
    assert watch.waited, "no job ever waited for the other: the two fitted together"
    groups = get(cluster, namespace, "podgroups.scheduling.k8s.io")["items"]
    assert all(g["metadata"].get("deletionTimestamp") for g in groups), groups
