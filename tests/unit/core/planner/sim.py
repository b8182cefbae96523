"""`Sim`: a job and its children stepped through plans as the controller would apply them (the
planner's tests share it)."""

from __future__ import annotations

from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import dump
from t9kjobs.planner import Observed, Plan, Reading, Stacks, plan
from t9kjobs.testing.fixtures import apply_plan, pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.tinyjob import tiny_manager


class Sim:
    """A job and its children, stepped through plans as the controller would apply them."""

    def __init__(self, manifest: Obj, manager: PluginManager | None = None) -> None:
        self.manifest = manifest
        self.manager = manager or tiny_manager()
        self.objects: dict[tuple[str, str], Obj] = {}
        self.now = NOW
        self.absent: frozenset[str] = frozenset()  # child kinds the cluster does not serve

    def plan(self) -> Plan:
        job = parse_job(self.manifest, self.manager)
        observed = Observed(dict(self.objects), self.absent)
        return plan(job, observed, self.now, self.manager.hooks_for(job.kind))

    def step(self) -> Plan:
        p = self.plan()
        self.manifest["status"] = dump(p.status)
        self.objects = apply_plan(self.objects, p)
        return p

    def pod(self, name: str) -> Obj:
        return self.objects[("Pod", name)]

    def set(self, name: str, phase: str, code: int | None = None) -> None:
        self.objects[("Pod", name)] = pod_in_phase(self.pod(name), phase, code)

    @property
    def status(self) -> Obj:
        return dict(self.manifest["status"])

    def condition(self, type_: str) -> Obj | None:
        return next((c for c in self.status.get("conditions", []) if c["type"] == type_), None)


class ReadSim(Sim):
    """A Sim whose plans see a progress reading and the ranks' stacks, as the controller
    hands them over."""

    reading: Reading | None = None
    stacks: Stacks | None = None
    conflicts: dict[tuple[str, str], str] | None = None

    def plan(self) -> Plan:
        job = parse_job(self.manifest, self.manager)
        observed = Observed(
            dict(self.objects),
            conflicts=dict(self.conflicts or {}),
            progress=self.reading,
            stacks=self.stacks,
        )
        return plan(job, observed, self.now, self.manager.hooks_for(job.kind))
