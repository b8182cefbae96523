"""A reconciler whose children the stand-in API server refuses or fails on demand, and the conditions its tests read."""

from __future__ import annotations

import copy

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.kube.informer import Store
from t9kjobs.kube.resources import CHILD_RESOURCES, job_resource
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj
from tests.unit.core.controller.reconciling import KEY, KIND, settle
from tests.unit.core.kube.fake_transport import FakeTransport


class Harness:
    """A reconciler over one job, its stores and the fake API server."""

    def __init__(self, manager: PluginManager, fake: FakeTransport, job: Obj) -> None:
        self.fake = fake
        self.jobs = Store()
        self.jobs.put(copy.deepcopy(job))
        resource = job_resource(manager.kind_info(KIND))
        fake.seed(resource.path(KEY[1], KEY[2]), copy.deepcopy(job))
        self.children = {kind: Store() for kind in CHILD_RESOURCES}
        self.recorder = EventRecorder(fake.as_transport())
        absent = frozenset({"PodGroup", "PodGroup.scheduling.k8s.io", "TensorBoard"})
        self.reconciler = Reconciler(
            fake.as_transport(),
            manager,
            Cache({KIND: resource}, {KIND: self.jobs}, self.children, absent),
            self.recorder,
        )

    def reconcile_stored(self) -> None:
        """Reconcile again: the store holds the job as the last status write left it."""
        settle(self.reconciler, KEY)

    def events(self) -> list[Obj]:
        self.recorder.close()
        return self.fake.posted("events")


def condition(status: Obj, type_: str) -> tuple[str, str, str]:
    found = next(c for c in status["conditions"] if c["type"] == type_)
    return found["status"], found["reason"], found["message"]
