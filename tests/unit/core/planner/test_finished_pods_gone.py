"""A replica that ended for good keeps its end when its pod is deleted while the job runs on:
kube-controller-manager's pod GC deletes terminated pods of any owner once 12,500 exist, and a
pod created again would run the replica's work twice (`t9kjobs.planner.replicas.remembered`)."""

from __future__ import annotations

import pytest
import yaml

from t9kjobs.manager import PluginManager
from t9kjobs.objects import ANNOTATION_INCARNATION
from tests.repo import REPO
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job


def _one_finished_and_deleted(restart: str, end: str, code: int) -> tuple[Sim, dict[str, object]]:
    """worker-0 ends (`end`, `code`) and its end is written; then its pod is deleted."""
    sim = Sim(tiny_job(replicas=2, restart=restart))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.step()
    sim.set("tiny-worker-0", end, code)
    sim.step()
    recorded = next(r for r in sim.status["tasks"][0]["replicas"] if r["name"] == "tiny-worker-0")
    assert recorded["phase"] == end and recorded["uid"]
    sim.objects.pop(("Pod", "tiny-worker-0"), None)  # (under Always, its restart deleted it)
    return sim, recorded


@pytest.mark.parametrize("restart", ["Never", "OnFailure", "ExitCode"])
def test_a_succeeded_replica_whose_pod_is_gone_is_not_run_again(restart: str) -> None:
    sim, recorded = _one_finished_and_deleted(restart, "Succeeded", 0)
    p = sim.step()
    assert not p.create and not p.delete and not p.status_changed
    after = next(r for r in sim.status["tasks"][0]["replicas"] if r["name"] == "tiny-worker-0")
    assert after == recorded
    assert sim.status["phase"] == "Running"
    assert sim.status["aggregate"]["succeeded"] == 1 and sim.status["aggregate"]["running"] == 1
    # The job ends as if the pod were still there: every replica succeeded.
    sim.set("tiny-worker-1", "Succeeded", 0)
    p = sim.step()
    assert p.status.phase == "Succeeded" and not p.create


def test_a_replica_that_failed_for_good_under_never_is_not_run_again(
    manager: PluginManager,
) -> None:
    # The example's failureRules fail the job only when all three workers failed: one worker
    # failed for good (policy Never) leaves it running.
    doc = yaml.safe_load((REPO / "examples/genericjob/torch-ddp.yaml").read_text())
    doc["metadata"].update(namespace="ns", uid="job-uid")
    for spec in doc["spec"]["replicaSpecs"]:
        spec["restartPolicy"] = "Never"
    sim = Sim(doc, manager)
    sim.step()
    for pod in [name for (kind, name) in sim.objects if kind == "Pod"]:
        sim.set(pod, "Running")
    sim.step()
    sim.set("generic-ddp-worker-0", "Failed", 3)
    sim.step()
    assert sim.status["phase"] == "Running"
    recorded = [r for t in sim.status["tasks"] for r in t["replicas"]]
    del sim.objects[("Pod", "generic-ddp-worker-0")]
    p = sim.step()
    assert not p.create and not p.status_changed
    assert [r for t in sim.status["tasks"] for r in t["replicas"]] == recorded


def test_a_succeeded_replica_under_always_is_run_again_as_its_restart() -> None:
    sim, _ = _one_finished_and_deleted("Always", "Succeeded", 0)
    p = sim.step()
    assert [o["metadata"]["name"] for o in p.create] == ["tiny-worker-0"]
    assert sim.pod("tiny-worker-0")["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"


def test_a_pod_deleted_before_its_end_was_written_is_created_again() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.step()
    del sim.objects[("Pod", "tiny-worker-0")]  # the status last said Running
    p = sim.step()
    assert [o["metadata"]["name"] for o in p.create] == ["tiny-worker-0"]
