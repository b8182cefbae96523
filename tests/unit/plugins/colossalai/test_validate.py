"""Semantic checks of `t9kjobs validate`: warnings for ignored fields, errors for clashes."""

from __future__ import annotations

from typing import Any

from t9kjobs.loading import check_job, parse_job
from t9kjobs.manager import PluginManager
from tests.unit.plugins.colossalai.jobs import example


def problems(manager: PluginManager, doc: dict[str, Any]) -> list[str]:
    return [str(p) for p in check_job(parse_job(doc, manager), manager)]


def containers(doc: dict[str, Any], index: int) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = doc["spec"]["replicaSpecs"][index]["template"]["spec"][
        "containers"
    ]
    return result


def test_example_is_clean(manager: PluginManager) -> None:
    assert problems(manager, example()) == []


def test_worker_command_and_args_are_ignored(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 1)[0]["command"] = ["python", "train.py"]
    containers(doc, 1)[0]["args"] = ["--lr=1"]
    base = "spec.replicaSpecs[1].template.spec.containers[0]"
    reason = "ignored: the worker runs sshd; the training script is spec.torchConfig.script"
    assert problems(manager, doc) == [
        f"warning: {base}.command: {reason}",
        f"warning: {base}.args: {reason}",
    ]


def test_launcher_command_is_ignored(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 0)[0]["command"] = ["colossalai", "run"]
    assert problems(manager, doc) == [
        "warning: spec.replicaSpecs[0].template.spec.containers[0].command: ignored: the"
        " launcher runs the launch script (colossalai run); the training script is"
        " spec.torchConfig.script"
    ]


def test_training_container_by_name(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 1).insert(0, {"name": "sidecar", "image": "busybox", "command": ["sh"]})
    # The sidecar's command is its own: only the `worker` container runs sshd.
    assert problems(manager, doc) == []
    containers(doc, 1)[1]["name"] = "trainer"
    assert problems(manager, doc) == [
        "warning: spec.replicaSpecs[1].template.spec.containers: no container is named"
        " 'worker': the first one ('sidecar') is the worker's",
        "warning: spec.replicaSpecs[1].template.spec.containers[0].command: ignored: the worker"
        " runs sshd; the training script is spec.torchConfig.script",
        "warning: spec.replicaSpecs[0].template.spec.containers[0].workingDir: differs from the"
        " worker's (the image default): colossalai run starts the script on every worker from"
        " the launcher's working directory",
    ]


def test_worker_needs_a_container(manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["replicaSpecs"][1]["template"] = {}
    assert problems(manager, doc) == [
        "spec.replicaSpecs[1].template.spec.containers: the worker template needs at least one"
        " container"
    ]


def test_launcher_without_container_is_fine(manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["replicaSpecs"][0]["template"] = {}
    assert problems(manager, doc) == []


def test_working_directories_must_agree(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 0)[0]["workingDir"] = "/home"
    assert problems(manager, doc) == [
        "warning: spec.replicaSpecs[0].template.spec.containers[0].workingDir: differs from the"
        " worker's (/workspace): colossalai run starts the script on every worker from the"
        " launcher's working directory"
    ]


def test_reserved_mount_paths(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 0)[0]["volumeMounts"] = [{"name": "x", "mountPath": "/t9k/hostfile"}]
    containers(doc, 1)[0]["volumeMounts"].append({"name": "y", "mountPath": "/root/.ssh/"})
    assert problems(manager, doc) == [
        "spec.replicaSpecs[0].template.spec.containers[0].volumeMounts[0].mountPath: reserved"
        " for the hostfile",
        "spec.replicaSpecs[1].template.spec.containers[0].volumeMounts[2].mountPath: reserved"
        " for the job's SSH key (spec.ssh.authMountPath)",
    ]


def test_run_mode_names_known_types(manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["runMode"] = {
        "debug": {"enabled": True, "replicaSpecs": [{"type": "launcher"}, {"type": "master"}]}
    }
    assert problems(manager, doc) == [
        "spec.runMode.debug.replicaSpecs[1].type: no replica type 'master' in the job (it has:"
        " launcher, worker)"
    ]
    # The launcher is a replica type even when its replica spec is left out.
    doc["spec"]["replicaSpecs"] = doc["spec"]["replicaSpecs"][1:]
    assert len(problems(manager, doc)) == 1


def test_kind_info(manager: PluginManager) -> None:
    info = manager.kind_info("ColossalAIJob")
    assert (info.plural, info.short_names) == ("colossalaijobs", ("caij",))


def test_a_single_container_of_another_name_is_the_replicas_own(manager: PluginManager) -> None:
    doc = example()
    containers(doc, 1)[0]["name"] = "main"
    assert problems(manager, doc) == []


def test_the_ssh_key_path_is_reserved_with_or_without_a_trailing_slash(
    manager: PluginManager,
) -> None:
    doc = example()
    doc["spec"]["ssh"]["authMountPath"] = "/root/.ssh/"
    containers(doc, 1)[0]["volumeMounts"] = [{"name": "keys", "mountPath": "/root/.ssh"}]
    assert problems(manager, doc) == [
        "spec.replicaSpecs[1].template.spec.containers[0].volumeMounts[0].mountPath: reserved"
        " for the job's SSH key (spec.ssh.authMountPath)"
    ]
