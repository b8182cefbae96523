"""Every pod the engine creates says which of its containers trains (issue #49: the client reads
that mark instead of building the pods again), set after the spec hash so that pods an older
operator created without it are not relaunched."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from t9kjobs.hooks import hookimpl
from t9kjobs.manager import PluginManager
from t9kjobs.objects import (
    ANNOTATION_DEFAULT_CONTAINER,
    ANNOTATION_SPEC_HASH,
    ANNOTATION_TRAINING_CONTAINER,
    DesiredPod,
)
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import TinyPlugin, tiny_job

POD = "tiny-worker-0"


class _SidecarFirst(TinyPlugin):
    """The tiny kind with a sidecar before the container that trains, which it names."""

    @hookimpl
    def t9kjobs_build_pods(self, job: Any) -> list[DesiredPod]:
        pods = super().t9kjobs_build_pods(job)
        for pod in pods:
            containers = pod.manifest["spec"]["containers"]
            containers.insert(0, {"name": "sidecar", "image": "busybox"})
        return [replace(p, training_container="main", recreate_on_change=True) for p in pods]


def _sim(**template_annotations: str) -> Sim:
    manager = PluginManager()
    manager.register(_SidecarFirst(), "tiny")
    manifest = tiny_job(replicas=1)
    if template_annotations:
        template = manifest["spec"]["replicaSpecs"][0]["template"]
        template["metadata"] = {"annotations": template_annotations}
    return Sim(manifest, manager)


def test_a_created_pod_names_the_container_that_trains_not_its_first() -> None:
    sim = _sim()
    sim.step()
    annotations = sim.pod(POD)["metadata"]["annotations"]
    assert annotations[ANNOTATION_TRAINING_CONTAINER] == "main"
    assert annotations[ANNOTATION_DEFAULT_CONTAINER] == "main"


def test_kubectls_default_container_set_by_the_template_is_kept() -> None:
    sim = _sim(**{ANNOTATION_DEFAULT_CONTAINER: "sidecar"})
    sim.step()
    annotations = sim.pod(POD)["metadata"]["annotations"]
    assert annotations[ANNOTATION_DEFAULT_CONTAINER] == "sidecar"
    assert annotations[ANNOTATION_TRAINING_CONTAINER] == "main"


def test_a_pod_created_before_the_mark_is_not_relaunched_for_it() -> None:
    sim = _sim()
    sim.step()
    pod = sim.pod(POD)
    annotations = pod["metadata"]["annotations"]
    del annotations[ANNOTATION_TRAINING_CONTAINER], annotations[ANNOTATION_DEFAULT_CONTAINER]
    sim.set(POD, "Running")
    p = sim.step()
    assert not p.delete
    assert sim.pod(POD)["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
