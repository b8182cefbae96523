"""`QueueSim`: a queued job and its children stepped through plans with Kueue's objects beside
them; the Kueue fixtures (a flavor, priorities) of the queueing tests."""

from __future__ import annotations

import copy
from typing import Any

from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import dump
from t9kjobs.planner import Kueue, KueuePolicy, Observed, Plan, plan
from t9kjobs.testing.fixtures import apply_plan, pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

WL = ("Workload", "tinyjob-tiny")


FLAVOR = {
    "metadata": {"name": "gpu"},
    "spec": {
        "nodeLabels": {"pool": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


KUEUE = Kueue(
    flavors={"gpu": FLAVOR},
    workload_priorities={"high": 1000},
    pod_priorities={"batch": 5},
)


def queued_job(queue: str = "team", replicas: int = 2, **labels: str) -> Obj:
    doc = tiny_job(replicas=replicas, restart={"policy": "OnFailure", "limit": 3})
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue, **labels}
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 8}
    }
    return doc


class QueueSim:
    """A job and its children stepped through plans, Kueue's objects beside them."""

    def __init__(
        self,
        manifest: Obj,
        kueue: Kueue | None = KUEUE,
        manager: PluginManager | None = None,
        policy: KueuePolicy | None = None,
    ) -> None:
        self.manifest = manifest
        self.policy = policy or KueuePolicy()  # the operator's --kueue-* options
        self.kueue = kueue
        self.manager = manager or tiny_manager()
        self.objects: dict[tuple[str, str], Obj] = {}
        self.absent: frozenset[str] = frozenset()
        self.conflicts: dict[tuple[str, str], str] = {}
        self.prebuilt: Obj | None = None  # the Workload its label names, not the job's yet

    def plan(self) -> Plan:
        job = parse_job(copy.deepcopy(self.manifest), self.manager)
        observed = Observed.of(
            self.objects.values(),
            self.absent,
            self.conflicts,
            self.kueue,
            kueue_policy=self.policy,
            prebuilt=self.prebuilt,
        )
        return plan(job, observed, NOW, self.manager.hooks_for(job.kind))

    def step(self) -> Plan:
        p = self.plan()
        self.manifest["status"] = dump(p.status)
        self.objects = apply_plan(self.objects, p)
        return p

    def pods(self) -> dict[str, Obj]:
        return {name: o for (kind, name), o in self.objects.items() if kind == "Pod"}

    def run_pods(self) -> None:
        for (kind, name), obj in list(self.objects.items()):
            if kind == "Pod":
                self.objects[(kind, name)] = pod_in_phase(obj, "Running")

    def kueue_says(self, *conditions: tuple[str, str, str, str], admitted: bool = False) -> None:
        """Kueue writes the Workload's status: these conditions (type, status, reason,
        message), and an admission to the `gpu` flavor when `admitted`."""
        workload = copy.deepcopy(self.objects[WL])
        status: Obj = {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions
            ]
        }
        if admitted:
            status["admission"] = {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "worker", "count": 2, "flavors": {"nvidia.com/gpu": "gpu"}}
                ],
            }
        workload["status"] = status
        workload["metadata"]["resourceVersion"] = "7"
        self.objects[WL] = workload

    def admit(self) -> None:
        self.kueue_says(
            ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            ("Admitted", "True", "Admitted", "The workload is admitted"),
            admitted=True,
        )

    def condition(self, type_: str) -> Any:
        return next(
            (c for c in self.manifest["status"].get("conditions", []) if c["type"] == type_), None
        )
