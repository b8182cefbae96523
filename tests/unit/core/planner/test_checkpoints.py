"""Checkpoints (`spec.checkpoint`, docs/lifecycle.md "Checkpoints"): what every pod is told,
the grace and the claim, the newest checkpoint recorded from a report, and the values set after
the spec hash, so that a new checkpoint never relaunches a pod recreated on a change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from t9kjobs.loading import load_job
from t9kjobs.objects import ANNOTATION_SPEC_HASH, Obj, find_container
from t9kjobs.planner import Reading
from t9kjobs.progress import Report
from t9kjobs.testing.fixtures import installed_plugins, pod_in_phase
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import ReadSim
from tests.unit.core.planner.tinyjob import tiny_job
from tests.unit.plugins.deepspeed.jobs import with_spec

W0 = "tiny-worker-0"
CKPT = {"path": "/ckpt", "claimName": "ckpt-claim", "gracePeriodSeconds": 120}


def _env(pod: Obj, container: str | None = None) -> dict[str, str]:
    found = find_container(pod, container)
    assert found is not None
    return {e["name"]: e.get("value", "") for e in found.get("env") or []}


def _reading(step: int, checkpoint: str | None, at: int, ckpt_step: int | None = None) -> Reading:
    report = Report(step, 100, {}, True, checkpoint, ckpt_step)
    return Reading(report, NOW + timedelta(seconds=at), "worker-0")


def _running(manifest: Obj, manager: Any = None) -> ReadSim:
    sim = ReadSim(manifest, manager)
    sim.step()
    for key in list(sim.objects):
        if key[0] == "Pod":
            sim.set(key[1], "Running")
    sim.step()
    return sim


def test_every_pod_is_told_the_folder_the_grace_and_mounts_the_claim() -> None:
    sim = ReadSim(tiny_job(replicas=1, checkpoint=CKPT))
    sim.step()
    pod = sim.pod(W0)
    env = _env(pod)
    assert env["T9KJOBS_CHECKPOINT_DIR"] == "/ckpt"
    assert env["T9KJOBS_STOP_GRACE_SECONDS"] == "120"
    assert env["T9KJOBS_RESUME_FROM"] == "" and env["T9KJOBS_RESTART_COUNT"] == "0"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 120
    assert {"name": "t9kjobs-checkpoint", "persistentVolumeClaim": {"claimName": "ckpt-claim"}} in (
        pod["spec"]["volumes"]
    )
    assert find_container(pod)["volumeMounts"][-1] == {  # type: ignore[index]
        "name": "t9kjobs-checkpoint",
        "mountPath": "/ckpt",
    }


def test_the_grace_is_the_longer_of_the_templates_and_the_checkpoints() -> None:
    doc = tiny_job(replicas=1, checkpoint={"path": "/ckpt", "gracePeriodSeconds": 10})
    sim = ReadSim(doc)
    sim.step()
    assert sim.pod(W0)["spec"]["terminationGracePeriodSeconds"] == 30  # Kubernetes' default
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 45
    sim = ReadSim(doc)
    sim.step()
    assert sim.pod(W0)["spec"]["terminationGracePeriodSeconds"] == 45
    assert "volumes" not in sim.pod(W0)["spec"]  # no claim named: the template mounts its own


def test_a_job_without_checkpoint_or_stall_gets_nothing() -> None:
    sim = ReadSim(tiny_job(replicas=1))
    sim.step()
    assert not any(n.startswith("T9KJOBS_") for n in _env(sim.pod(W0)))
    assert "terminationGracePeriodSeconds" not in sim.pod(W0)["spec"]


def test_a_reported_checkpoint_is_recorded_and_the_replacement_resumes_from_it() -> None:
    sim = _running(tiny_job(replicas=1, checkpoint=CKPT))
    first_hash = sim.pod(W0)["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    sim.reading = _reading(1205, "/ckpt/./step-1200", at=60, ckpt_step=1200)
    p = sim.step()
    assert p.status.checkpoint is not None
    assert p.status.checkpoint.model_dump(by_alias=True) == {
        "path": "/ckpt/step-1200",  # normalised
        "step": 1200,
        "time": "2026-01-01T12:01:00Z",
        "replica": "worker-0",
    }
    assert p.delete == () and p.create == ()  # a checkpoint relaunches nothing
    sim.set(W0, "Failed", 1)
    sim.step()  # the restart: status, then the failed pod deleted
    sim.step()  # the replacement
    env = _env(sim.pod(W0))
    assert env["T9KJOBS_RESUME_FROM"] == "/ckpt/step-1200"
    assert env["T9KJOBS_RESUME_STEP"] == "1200"
    assert env["T9KJOBS_RESTART_COUNT"] == "1"
    # The values come after the hash: the replacement's is the first pod's.
    assert sim.pod(W0)["metadata"]["annotations"][ANNOTATION_SPEC_HASH] == first_hash


def test_resume_never_leaves_resume_from_empty() -> None:
    sim = _running(tiny_job(replicas=1, checkpoint={**CKPT, "resume": "Never"}))
    sim.reading = _reading(1205, "/ckpt/step-1200", at=60, ckpt_step=1200)
    sim.step()
    sim.set(W0, "Failed", 1)
    sim.step()
    sim.step()
    assert _env(sim.pod(W0))["T9KJOBS_RESUME_FROM"] == ""
    assert sim.status["checkpoint"]["path"] == "/ckpt/step-1200"  # recorded all the same


def test_a_checkpoint_outside_the_folder_is_refused_once() -> None:
    sim = _running(tiny_job(replicas=1, checkpoint=CKPT))
    sim.reading = _reading(1200, "/ckpt/../etc/step-1200", at=60, ckpt_step=1200)
    p = sim.step()
    assert [e.reason for e in p.events] == ["CheckpointOutsidePath"]
    assert "not under spec.checkpoint.path /ckpt" in p.events[0].message
    assert p.status.checkpoint is None
    sim.reading = _reading(1300, "/ckpt/../etc/step-1200", at=90, ckpt_step=1200)
    assert [e.reason for e in sim.step().events] == []  # repeated by later reports: said once


def test_an_older_or_repeated_checkpoint_keeps_the_first_report_time() -> None:
    sim = _running(tiny_job(replicas=1, checkpoint=CKPT))
    sim.reading = _reading(1200, "/ckpt/step-1200", at=60, ckpt_step=1200)
    sim.step()
    sim.reading = _reading(1250, "/ckpt/step-1200", at=90, ckpt_step=1200)
    sim.step()
    assert sim.status["checkpoint"]["time"] == "2026-01-01T12:01:00Z"


def test_a_new_checkpoint_never_relaunches_a_pod_recreated_on_change() -> None:
    """DeepSpeed's worker-0 is recreated when its spec changes; the checkpoint and the
    incarnation are set after its hash, and its env file carries them to the ranks."""
    manager = installed_plugins()
    sim = _running(with_spec(checkpoint=CKPT), manager)
    launcher = "ds-worker-0"
    script = " ".join(find_container(sim.pod(launcher))["command"])  # type: ignore[index]
    assert "T9KJOBS_RESUME_FROM" in script and "T9KJOBS_RESTART_COUNT" in script
    sim.reading = Reading(
        Report(1200, 2000, {}, True, "/ckpt/step-1200", 1200),
        NOW + timedelta(seconds=60),
        "worker-0",
    )
    p = sim.step()
    assert p.status.checkpoint is not None
    assert p.delete == () and not any(e.reason == "Relaunching" for e in p.events)
    # Its replacement (it was deleted) resumes, and is not relaunched either.
    del sim.objects[("Pod", launcher)]
    sim.step()
    assert _env(sim.pod(launcher))["T9KJOBS_RESUME_FROM"] == "/ckpt/step-1200"
    sim.objects[("Pod", launcher)] = pod_in_phase(sim.pod(launcher), "Running")
    assert sim.step().delete == ()


def test_a_template_setting_the_engines_names_is_warned_and_overridden() -> None:
    doc = tiny_job(replicas=1, checkpoint=CKPT)
    template = doc["spec"]["replicaSpecs"][0]["template"]["spec"]
    template["containers"][0]["env"] = [{"name": "T9KJOBS_RESUME_FROM", "value": "/mine"}]
    _, warnings = load_job(doc, ReadSim(doc).manager)
    assert [(p.path, p.severity) for p in warnings] == [
        ("spec.replicaSpecs[0].template.spec.containers[0].env[0]", "warning")
    ]
    sim = ReadSim(doc)
    sim.step()
    assert _env(sim.pod(W0))["T9KJOBS_RESUME_FROM"] == ""
