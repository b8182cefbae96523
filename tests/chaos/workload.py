"""The chaos workload: jobs of every kind whose pods KWOK runs for a few seconds and ends with a
scripted exit code (docs/cluster.md), so that each job's verdict, reason and restarts are known
in advance whatever happens to the operator meanwhile.

| script | kinds | pods | verdict |
| --- | --- | --- | --- |
| `succeed` | all four | exit 0 | Succeeded, no restart |
| `fail` | GenericJob, PyTorchTrainingJob, DeepSpeedJob | exit 3, not retried | Failed, no restart (DeepSpeedJob: by its launcher or another worker, whichever is seen first) |
| `restart` | GenericJob (`Always`, limit 1) | exit 0, each replica run twice | Succeeded, 1 restart a replica |
| `backoff` | PyTorchTrainingJob, a master alone (`ExitCode`, backoffLimit 2) | exit 137 | Failed (BackoffLimitExceeded) after 2 restarts |
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import yaml

from t9kjobs.testing.harness.simulation import simulate, without_claims
from tests.repo import REPO

__all__ = ["PLURALS", "Scripted", "workload"]

Obj = dict[str, Any]

EXAMPLES = {
    "PyTorchTrainingJob": "examples/pytorchtrainingjob/master-worker.yaml",
    "DeepSpeedJob": "examples/deepspeedjob/custom-command.yaml",
    "ColossalAIJob": "examples/colossalaijob/minimal.yaml",
}
PLURALS = {
    "GenericJob": "genericjobs",
    "PyTorchTrainingJob": "pytorchtrainingjobs",
    "DeepSpeedJob": "deepspeedjobs",
    "ColossalAIJob": "colossalaijobs",
}
SCRIPTS = [
    ("GenericJob", "succeed"),
    ("PyTorchTrainingJob", "succeed"),
    ("DeepSpeedJob", "succeed"),
    ("ColossalAIJob", "succeed"),
    ("GenericJob", "restart"),
    ("PyTorchTrainingJob", "backoff"),
    ("GenericJob", "fail"),
    ("PyTorchTrainingJob", "fail"),
    ("DeepSpeedJob", "fail"),
]


@dataclass(frozen=True)
class Scripted:
    """A job, and what must become of it."""

    manifest: Obj
    phase: str  # Succeeded or Failed
    reasons: tuple[str, ...]  # of the Completed / Failed condition: one of these
    replica_restarts: int  # restarts of every replica charged to the job's own budget
    # Replicas restarted once more, charged to the infrastructure (a lost node: lost_nodes.py);
    # backoffCount is the sum of the others.
    infrastructure: int = 0

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


def _generic() -> Obj:
    """A master and two workers with a Service each; no rules: all succeeded, or one failed."""
    container = {"name": "main", "image": "busybox", "command": ["train"]}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "spec": {
            "service": {"ports": [{"name": "torch", "port": 2222}]},
            "replicaSpecs": [
                {"type": t, "replicas": n, "template": {"spec": {"containers": [container]}}}
                for t, n in (("master", 1), ("worker", 2))
            ],
        },
    }


def _replica_specs(doc: Obj) -> list[Obj]:
    spec = doc["spec"]
    return list(spec.get("replicaSpecs") or []) + ([spec["worker"]] if "worker" in spec else [])


def _job(kind: str, script: str, name: str, namespace: str, seconds: int) -> Scripted:
    if kind == "GenericJob":
        doc = _generic()
    else:
        doc = without_claims(yaml.safe_load((REPO / EXAMPLES[kind]).read_text()))
        doc["spec"].pop("tensorboardSpec", None)
        run_policy = doc["spec"].setdefault("runPolicy", {})
        run_policy.pop("activeDeadlineSeconds", None)
        if kind != "ColossalAIJob":  # (it keeps its pods unless cleanUpWorkers)
            run_policy["cleanUpPolicy"] = "None"  # the pods are evidence
    doc["metadata"] = {"name": name, "namespace": namespace}
    if script == "succeed":
        reason = {
            "GenericJob": "AllSucceeded",
            "PyTorchTrainingJob": "MasterSucceeded",
        }.get(kind, "LauncherSucceeded")
        return Scripted(simulate(doc, 0, seconds), "Succeeded", (reason,), 0)
    if script == "restart":
        for rs in _replica_specs(doc):
            rs["restartPolicy"] = {"policy": "Always", "limit": 1}
        return Scripted(simulate(doc, 0, seconds), "Succeeded", ("AllSucceeded",), 1)
    if script == "backoff":
        # The master alone: with several pods failing at once, how many restarts the shared
        # budget pays before it runs out would depend on timing.
        doc["spec"]["replicaSpecs"] = [r for r in _replica_specs(doc) if r["type"] == "master"]
        doc["spec"]["runPolicy"]["backoffLimit"] = 2
        doc["spec"]["replicaSpecs"][0]["restartPolicy"] = "ExitCode"
        return Scripted(simulate(doc, 137, seconds), "Failed", ("BackoffLimitExceeded",), 2)
    for rs in _replica_specs(doc):
        rs["restartPolicy"] = "ExitCode" if kind != "GenericJob" else "Never"
    # Every pod fails at once. A DeepSpeedJob fails for whichever the operator sees first:
    # its launcher (worker-0: LauncherFailed) or another worker lost for good (ReplicaFailed).
    reasons = ("LauncherFailed", "ReplicaFailed") if kind == "DeepSpeedJob" else ("ReplicaFailed",)
    return Scripted(simulate(doc, 3, seconds), "Failed", reasons, 0)


def workload(count: int, namespace: str, seed: int = 19) -> list[Scripted]:
    """`count` jobs cycling through every (kind, script), each pod running 3-12 s."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        kind, script = SCRIPTS[i % len(SCRIPTS)]
        short = "".join(c for c in kind if c.isupper()).lower()
        jobs.append(_job(kind, script, f"{short}-{script}-{i:04d}", namespace, rng.randint(3, 12)))
    return jobs
