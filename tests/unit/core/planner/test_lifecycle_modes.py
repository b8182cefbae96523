"""Run modes (docs/lifecycle.md, "Run modes"): pause and resume with `resumeSpecs`, debug with
per-type commands, on the engine's test kind and on the bundled kinds' defaults."""

from __future__ import annotations

from t9kjobs.manager import PluginManager
from t9kjobs.objects import ANNOTATION_LAUNCH_COMMAND
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job
from tests.unit.plugins.deepspeed.jobs import base_manifest
from tests.unit.plugins.pytorch.helpers import manifest, replica


def _command(sim: Sim, name: str) -> list[str]:
    return list(sim.pod(name)["spec"]["containers"][0]["command"])


def test_a_job_paused_from_the_start_creates_nothing() -> None:
    sim = Sim(tiny_job(replicas=2, runMode={"pause": {"enabled": True}}))
    p = sim.step()
    assert p.status.phase == "Paused" and not p.create
    paused = p.status.condition("Paused")
    assert paused is not None and paused.status == "True" and paused.reason == "PauseEnabled"
    assert p.status.start_time is None


def test_pause_wins_over_debug() -> None:
    run_mode = {"pause": {"enabled": True}, "debug": {"enabled": True}}
    sim = Sim(tiny_job(replicas=1, runMode=run_mode))
    assert sim.step().status.phase == "Paused"


def test_pause_then_resume_runs_the_resume_specs_and_keeps_restart_counts() -> None:
    sim = Sim(tiny_job(replicas=2, restart="OnFailure"))
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    sim.step()
    sim.step()
    for name in ("tiny-worker-0", "tiny-worker-1"):
        sim.set(name, "Running")
    assert sim.step().status.phase == "Running"
    resume = [{"type": "worker", "command": ["python"], "args": ["train.py", "--resume"]}]
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True, "resumeSpecs": resume}}
    p = sim.step()
    assert p.status.phase == "Paused"
    assert sorted(d.name for d in p.delete) == ["tiny-worker-0", "tiny-worker-1"]
    assert p.status.aggregate.deleted == 2
    assert p.status.condition("Running").status == "False"  # type: ignore[union-attr]
    assert any(e.reason == "Paused" for e in p.events)
    p = sim.step()
    assert not p.create and not p.delete and not p.status_changed  # stays paused

    sim.manifest["spec"]["runMode"]["pause"]["enabled"] = False
    p = sim.step()
    assert p.status.phase == "Resuming"
    assert p.status.condition("Paused").status == "False"  # type: ignore[union-attr]
    assert p.status.condition("Paused").reason == "Resumed"  # type: ignore[union-attr]
    for name in ("tiny-worker-0", "tiny-worker-1"):
        assert sim.pod(name)["spec"]["containers"][0]["command"] == ["python"]
        assert sim.pod(name)["spec"]["containers"][0]["args"] == ["train.py", "--resume"]
    # A pause deletes pods; it performs no restart and forgets none.
    assert p.status.backoff_count == 1
    assert [r.restart_count for r in p.status.tasks[0].replicas] == [1, 0]
    sim.set("tiny-worker-0", "Running")
    assert sim.step().status.phase == "Resuming"  # until every pod runs
    sim.set("tiny-worker-1", "Running")
    assert sim.step().status.phase == "Running"


def test_a_restart_after_a_resume_keeps_the_resume_overrides() -> None:
    resume = [{"type": "worker", "command": ["resume"]}]
    sim = Sim(tiny_job(replicas=1, runMode={"pause": {"enabled": True, "resumeSpecs": resume}}))
    sim.step()
    sim.manifest["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    sim.step()
    sim.step()
    assert _command(sim, "tiny-worker-0") == ["resume"]


def test_debug_runs_the_default_command_where_no_type_overrides_it() -> None:
    sim = Sim(tiny_job(replicas=1, runMode={"debug": {"enabled": True}}))
    p = sim.step()
    assert _command(sim, "tiny-worker-0") == ["sleep", "inf"]
    assert "args" not in sim.pod("tiny-worker-0")["spec"]["containers"][0]
    assert sim.pod("tiny-worker-0")["spec"]["initContainers"]  # not skipped unless asked
    assert p.status.phase == "Running"  # at once, even before the pods run
    running = p.status.condition("Running")
    assert running is not None and running.reason == "DebugMode"
    assert "debug mode" in (running.message or "")


def test_debug_shows_the_command_the_pod_would_run_on_the_pod_and_in_its_env() -> None:
    doc = tiny_job(replicas=1, runMode={"debug": {"enabled": True}})
    main = doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    main["args"] = ["--data", "/my data", "$(HOME)"]
    sim = Sim(doc)
    sim.step()
    pod = sim.pod("tiny-worker-0")
    line = "train --data '/my data' '$(HOME)'"  # shell-quoted: pasted into a shell, it runs
    assert pod["metadata"]["annotations"][ANNOTATION_LAUNCH_COMMAND] == line
    env = pod["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": "T9KJOBS_LAUNCH_COMMAND", "value": line}
    assert _command(sim, "tiny-worker-0") == ["sleep", "inf"]


def test_debug_shows_no_command_for_a_container_that_runs_its_image_entrypoint() -> None:
    doc = tiny_job(replicas=1, runMode={"debug": {"enabled": True}})
    del doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    sim = Sim(doc)
    sim.step()
    pod = sim.pod("tiny-worker-0")
    assert ANNOTATION_LAUNCH_COMMAND not in pod["metadata"].get("annotations", {})
    assert "env" not in pod["spec"]["containers"][0]


def test_outside_debug_mode_no_launch_command_is_shown() -> None:
    sim = Sim(tiny_job(replicas=1))
    sim.step()
    assert ANNOTATION_LAUNCH_COMMAND not in sim.pod("tiny-worker-0")["metadata"]["annotations"]


def test_debug_overrides_per_type_and_exits_never_finish_the_job() -> None:
    debug = {
        "enabled": True,
        "replicaSpecs": [{"type": "worker", "command": ["bash", "-c", "sleep 1d"]}],
    }
    sim = Sim(tiny_job(replicas=2, restart="Never", runMode={"debug": debug}))
    sim.step()
    assert _command(sim, "tiny-worker-0") == ["bash", "-c", "sleep 1d"]
    sim.set("tiny-worker-0", "Failed", 1)
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    assert p.status.phase == "Running" and p.status.completion_time is None
    assert p.status.aggregate.failed == 1 and p.status.aggregate.succeeded == 1


def test_an_exhausted_budget_does_not_end_a_debug_job() -> None:
    sim = Sim(
        tiny_job(replicas=1, run_policy={"backoffLimit": 0}, runMode={"debug": {"enabled": True}})
    )
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert p.status.phase == "Running" and p.status.condition("Failed") is None
    assert not p.delete  # the restart is refused: the pod stays, failed, for inspection


def _debug_commands(manager: PluginManager, doc: Obj) -> dict[str, list[str]]:
    doc["spec"]["runMode"] = {"debug": {"enabled": True}}
    sim = Sim(doc, manager)
    sim.step()
    return {
        name: list(obj["spec"]["containers"][0].get("command") or [])
        for (kind, name), obj in sim.objects.items()
        if kind == "Pod"
    }


def test_each_bundled_kind_has_its_debug_default(manager: PluginManager) -> None:
    pytorch = _debug_commands(manager, manifest(replica("master"), replica("worker", 2)))
    assert pytorch == {name: ["sleep", "inf"] for name in pytorch} and len(pytorch) == 3
    # DeepSpeedJob: sshd in the foreground (worker-0 writes its env file first).
    deepspeed = _debug_commands(manager, base_manifest())
    for name in ("ds-worker-0", "ds-worker-1"):
        assert deepspeed[name][:2] == ["/bin/bash", "-c"]
        assert "exec /usr/sbin/sshd -D" in deepspeed[name][2]
    assert "/root/.deepspeed_env" in deepspeed["ds-worker-0"][2]
