"""The ssh-based kinds as a normal user (docs/security.md, "Non-root"): keys under that user's
`~/.ssh`, sshd on a port above 1023, the env file in that user's home; and the settings such a
job needs (fsGroup, the port) refused by `validate` when missing, with the field path."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from t9kjobs.loading import JobError, check_job, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.render import render_job

NON_ROOT = {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000}
SSH = {"authMountPath": "/home/trainer/.ssh", "port": 2222}


def _deepspeed(context: dict[str, Any], ssh: dict[str, Any] | None = SSH) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "ds", "namespace": "team", "uid": "u"},
        "spec": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "securityContext": context,
                        "containers": [
                            {
                                "name": "worker",
                                "image": "trainer",
                                "env": [{"name": "A", "value": "1"}],
                            }
                        ],
                    }
                },
            },
            **({"ssh": ssh} if ssh is not None else {}),
        },
    }


def _colossalai(context: dict[str, Any], ssh: dict[str, Any] | None = SSH) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "ColossalAIJob",
        "metadata": {"name": "caij", "namespace": "team", "uid": "u"},
        "spec": {
            "torchConfig": {"procPerWorker": 1, "script": ["train.py"]},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "securityContext": context,
                            "containers": [{"name": "worker", "image": "trainer"}],
                        }
                    },
                }
            ],
            **({"ssh": ssh} if ssh is not None else {}),
        },
    }


def _render(manager: PluginManager, doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    job = parse_job(doc, manager)
    return {o["metadata"]["name"]: o for o in render_job(job, manager)}


def _problems(manager: PluginManager, doc: dict[str, Any]) -> dict[str, str]:
    try:
        job = parse_job(doc, manager)
    except JobError as exc:
        return {p.path: p.message for p in exc.problems}
    return {p.path: p.message for p in check_job(job, manager) if p.severity == "error"}


def _exec_words(script: str) -> list[str]:
    line = next(line for line in script.splitlines() if line.startswith("exec "))
    return shlex.split(line)


def test_a_deepspeed_job_of_a_normal_user(manager: PluginManager) -> None:
    objects = _render(manager, _deepspeed(NON_ROOT))
    config = objects["ds-ssh"]["stringData"]["config"]
    assert "    Port 2222\n" in config
    assert "    IdentityFile /home/trainer/.ssh/id_ed25519\n" in config
    assert "    UserKnownHostsFile /home/trainer/.ssh/known_hosts\n" in config
    worker1 = objects["ds-worker-1"]["spec"]["containers"][0]
    words = _exec_words(worker1["command"][2])
    assert words[words.index("-p") + 1] == "2222"
    assert words[words.index("-h") + 1] == "/home/trainer/.ssh/ssh_host_ed25519_key"
    assert {"name": "t9k-ssh", "mountPath": "/home/trainer/.ssh", "readOnly": True} in worker1[
        "volumeMounts"
    ]
    assert worker1["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    launcher = objects["ds-worker-0"]["spec"]["containers"][0]["command"][2]
    assert ": > /home/trainer/.deepspeed_env" in launcher
    assert "/root" not in launcher
    assert "ssh -F /home/trainer/.ssh/config" in launcher


def test_a_colossalai_job_of_a_normal_user(manager: PluginManager) -> None:
    objects = _render(manager, _colossalai(NON_ROOT))
    worker = objects["caij-worker-0"]["spec"]["containers"][0]
    words = _exec_words(worker["command"][2])
    assert words[words.index("-p") + 1] == "2222"
    launcher = objects["caij-launcher"]["spec"]["containers"][0]["command"][2]
    assert "--ssh-port 2222" in launcher
    assert "/home/trainer/.ssh/known_hosts t9k-jobs.caij run" in launcher
    assert "    Port 2222\n" in objects["caij-ssh"]["stringData"]["config"]


@pytest.mark.parametrize("make", [_deepspeed, _colossalai], ids=["deepspeed", "colossalai"])
def test_a_normal_user_without_fs_group_or_with_a_low_port_is_told(
    manager: PluginManager, make: Any
) -> None:
    where = "spec.worker.template" if make is _deepspeed else "spec.replicaSpecs[0].template"
    no_group = {"runAsNonRoot": True, "runAsUser": 1000}
    problems = _problems(manager, make(no_group, {"authMountPath": "/home/trainer/.ssh"}))
    assert "fsGroup" in problems[f"{where}.spec.securityContext.fsGroup"]
    assert "cannot listen on port 22" in problems["spec.ssh.port"]
    assert _problems(manager, make(NON_ROOT)) == {}
    assert _problems(manager, make({}, None)) == {}  # root: the seeds' defaults


def test_the_port_is_a_port(manager: PluginManager) -> None:
    problems = _problems(manager, _deepspeed(NON_ROOT, {"port": 70000}))
    assert any(path.startswith("spec.ssh.port") for path in problems), problems
