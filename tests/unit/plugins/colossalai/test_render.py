"""What a ColossalAIJob creates at its start: golden files, and the properties that matter."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.manager import PluginManager
from t9kjobs.objects import Obj
from t9kjobs.render import render_job
from tests.unit.golden import assert_golden
from tests.unit.plugins.colossalai.jobs import EXAMPLES, example

GOLDEN = Path(__file__).parent / "golden"


def _no_launcher() -> dict[str, Any]:
    doc = example()
    doc["spec"]["replicaSpecs"] = doc["spec"]["replicaSpecs"][1:]
    worker = doc["spec"]["replicaSpecs"][0]["template"]
    worker["spec"]["imagePullSecrets"] = [{"name": "registry"}]
    worker["spec"]["containers"][0]["env"] = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    return doc


def _extra_args() -> dict[str, Any]:
    doc = example()
    doc["spec"]["torchConfig"]["extraArgs"] = ["--max_restarts=0", "--monitor_interval", "5"]
    return doc


def _proc_per_worker_4() -> dict[str, Any]:
    doc = example()
    doc["spec"]["torchConfig"]["procPerWorker"] = 4
    resources = doc["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"]["nvidia.com/gpu"] = resources["requests"]["nvidia.com/gpu"] = 4
    return doc


def _debug() -> dict[str, Any]:
    doc = example()
    doc["spec"]["runMode"] = {"debug": {"enabled": True}}
    return doc


VARIANTS = {
    "example": example,
    "no-launcher": _no_launcher,
    "extra-args": _extra_args,
    "proc-per-worker-4": _proc_per_worker_4,
    "debug": _debug,
}


def render(make_job: Any, manager: PluginManager, doc: dict[str, Any]) -> list[Obj]:
    return render_job(make_job(doc), manager)


def by_name(objects: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects}


def container(pod: Obj, name: str) -> Obj:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_golden(variant: str, make_job: Any, manager: PluginManager) -> None:
    assert_golden(GOLDEN / f"{variant}.yaml", render(make_job, manager, VARIANTS[variant]()))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_valid_without_warnings(path: Path, manager: PluginManager) -> None:
    from t9kjobs.loading import load_job

    _, warnings = load_job(yaml.safe_load(path.read_text()), manager)
    assert warnings == []


def test_children(make_job: Any, manager: PluginManager) -> None:
    objects = render(make_job, manager, example())
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "colossalai-example-ssh"),
        ("ConfigMap", "colossalai-example-hostfile"),
        ("Service", "colossalai-example"),
        ("Pod", "colossalai-example-launcher"),
        ("Pod", "colossalai-example-worker-0"),
        ("Pod", "colossalai-example-worker-1"),
    ]
    for obj in objects:
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "ColossalAIJob",
            "colossalai-example",
            True,
        )
    service = by_name(objects)["colossalai-example"]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True


def test_hostfile_configmap(make_job: Any, manager: PluginManager) -> None:
    objects = by_name(render(make_job, manager, example()))
    assert objects["colossalai-example-hostfile"]["data"] == {
        "hostfile": "colossalai-example-worker-0.colossalai-example\n"
        "colossalai-example-worker-1.colossalai-example\n"
    }


def test_pods_resolve_through_the_headless_service(make_job: Any, manager: PluginManager) -> None:
    for name, pod in by_name(render(make_job, manager, example())).items():
        if pod["kind"] == "Pod":
            assert pod["spec"]["hostname"] == name
            assert pod["spec"]["subdomain"] == "colossalai-example"
            assert pod["spec"]["restartPolicy"] == "Never"


def test_workers_run_sshd_only(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["ssh"] = {"authMountPath": "/home/ml/.ssh", "sshdPath": "/opt/ssh/sbin/sshd"}
    worker = doc["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]
    worker["command"], worker["args"] = ["python"], ["train.py"]
    pods = by_name(render(make_job, manager, doc))
    for i in range(2):
        c = container(pods[f"colossalai-example-worker-{i}"], "worker")
        assert c["command"][:2] == ["/bin/bash", "-c"]
        assert "args" not in c
        last = c["command"][2].strip().splitlines()[-1]
        assert last.startswith("exec /opt/ssh/sbin/sshd -D ")
        assert "AuthorizedKeysFile=/home/ml/.ssh/authorized_keys" in last


def test_ssh_key_mounted_in_launcher_and_workers(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    doc["spec"]["ssh"] = {"authMountPath": "/home/ml/.ssh"}
    objects = by_name(render(make_job, manager, doc))
    secret = objects["colossalai-example-ssh"]
    assert "IdentityFile /home/ml/.ssh/id_ed25519" in secret["stringData"]["config"]
    for name, cname in [
        ("colossalai-example-launcher", "launcher"),
        ("colossalai-example-worker-0", "worker"),
        ("colossalai-example-worker-1", "worker"),
    ]:
        pod = objects[name]
        [ssh_volume] = [v for v in pod["spec"]["volumes"] if "secret" in v]
        assert ssh_volume["name"] == "t9k-ssh"
        source = ssh_volume["secret"]
        assert (source["secretName"], source["defaultMode"]) == ("colossalai-example-ssh", 0o600)
        # The launcher is the client, the workers the servers: each has its own files only.
        files = {item["path"] for item in source["items"]}
        if cname == "launcher":
            assert files == {"id_ed25519", "known_hosts", "config"}
        else:
            assert files == {"authorized_keys", "ssh_host_ed25519_key"}
        mounts = container(pod, cname)["volumeMounts"]
        assert {"name": "t9k-ssh", "mountPath": "/home/ml/.ssh", "readOnly": True} in mounts


def test_launcher_mounts_hostfile_and_runs_colossalai(
    make_job: Any, manager: PluginManager
) -> None:
    pod = by_name(render(make_job, manager, example()))["colossalai-example-launcher"]
    c = container(pod, "launcher")
    assert c["workingDir"] == "/workspace"
    assert {
        "name": "t9k-hostfile",
        "mountPath": "/t9k/hostfile",
        "subPath": "hostfile",
        "readOnly": True,
    } in c["volumeMounts"]
    assert {"name": "t9k-hostfile", "configMap": {"name": "colossalai-example-hostfile"}} in pod[
        "spec"
    ]["volumes"]
    script = c["command"][2]
    assert c["command"][:2] == ["/bin/bash", "-c"]
    lines = script.strip().splitlines()
    assert lines[-1] == (
        'exec ${t9k_python:-python3} -c "${t9k_pinned_ssh}" /root/.ssh/known_hosts'
        " t9k-jobs.colossalai-example run --hostfile /t9k/hostfile --nproc_per_node 1"
        " --master_addr colossalai-example-worker-0.colossalai-example --master_port 29500"
        " --ssh-port 22 -- train.py arg1"
    )
    # The launcher first waits, bounded, for both workers' sshd.
    assert "t9k_wait_for_sshd" in script
    assert script.index("t9k_wait_for_sshd\n") < script.index("exec ${t9k_python")
    assert (
        "for host in colossalai-example-worker-0.colossalai-example"
        " colossalai-example-worker-1.colossalai-example; do" in script
    )


def test_launcher_derived_from_worker(make_job: Any, manager: PluginManager) -> None:
    doc = _no_launcher()
    worker = doc["spec"]["replicaSpecs"][0]["template"]["spec"]
    worker["securityContext"] = {"runAsUser": 1000, "fsGroup": 1000}
    doc["spec"]["ssh"] = {"authMountPath": "/home/ml/.ssh", "port": 2222}
    worker["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    worker["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    pod = by_name(render(make_job, manager, doc))["colossalai-example-launcher"]
    c = container(pod, "launcher")
    assert c["image"] == "hpcaitech/colossalai:0.3.0"
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["workingDir"] == "/workspace"
    assert c["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}]
    assert c["envFrom"] == [{"configMapRef": {"name": "settings"}}]
    # The same user as the workers (and the engine's defaults for what the template leaves).
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["spec"]["securityContext"] == {
        "runAsUser": 1000,
        "fsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "resources" not in c
    assert [m["name"] for m in c["volumeMounts"]] == ["t9k-ssh", "t9k-hostfile"]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["t9k-ssh", "t9k-hostfile"]
    assert pod["metadata"]["labels"]["tensorstack.dev/replica-type"] == "launcher"


def test_launcher_spec_without_containers_is_completed(
    make_job: Any, manager: PluginManager
) -> None:
    doc = example()
    doc["spec"]["replicaSpecs"][0]["template"] = {
        "spec": {"nodeSelector": {"pool": "cpu"}, "imagePullSecrets": [{"name": "own"}]}
    }
    pod = by_name(render(make_job, manager, doc))["colossalai-example-launcher"]
    assert pod["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert pod["spec"]["imagePullSecrets"] == [{"name": "own"}]
    assert container(pod, "launcher")["image"] == "hpcaitech/colossalai:0.3.0"


def test_derived_launcher_merges_the_workers_labels_and_annotations_under_its_own(
    make_job: Any, manager: PluginManager
) -> None:
    doc = example()
    launcher, worker = doc["spec"]["replicaSpecs"]
    launcher["template"] = {
        "metadata": {"labels": {"team": "launcher", "own": "l"}, "annotations": {"a": "launcher"}},
        "spec": {},
    }
    worker["template"]["metadata"] = {
        "labels": {"team": "worker", "pool": "gpu"},
        "annotations": {"a": "worker", "sim.t9kjobs.dev/run-seconds": "8"},
    }
    meta = by_name(render(make_job, manager, doc))["colossalai-example-launcher"]["metadata"]
    assert {k: meta["labels"][k] for k in ("team", "own", "pool")} == {
        "team": "launcher",
        "own": "l",
        "pool": "gpu",
    }
    assert {k: meta["annotations"][k] for k in ("a", "sim.t9kjobs.dev/run-seconds")} == {
        "a": "launcher",
        "sim.t9kjobs.dev/run-seconds": "8",
    }
    assert meta["labels"]["tensorstack.dev/replica-type"] == "launcher"


def test_a_launcher_with_containers_takes_nothing_from_the_worker(
    make_job: Any, manager: PluginManager
) -> None:
    doc = example()
    doc["spec"]["replicaSpecs"][1]["template"]["metadata"] = {"labels": {"pool": "gpu"}}
    meta = by_name(render(make_job, manager, doc))["colossalai-example-launcher"]["metadata"]
    assert "pool" not in meta["labels"]


def test_the_launchers_own_hostfile_volume_is_replaced(
    make_job: Any, manager: PluginManager
) -> None:
    doc = example()
    template = doc["spec"]["replicaSpecs"][0]["template"]["spec"]
    template["volumes"] = [
        {"name": "t9k-hostfile", "emptyDir": {}},
        {"name": "data", "emptyDir": {}},
    ]
    template["containers"][0]["volumeMounts"] = [
        {"name": "t9k-hostfile", "mountPath": "/t9k/old"},
        {"name": "data", "mountPath": "/data"},
    ]
    pod = by_name(render(make_job, manager, doc))["colossalai-example-launcher"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert list(volumes) == ["data", "t9k-ssh", "t9k-hostfile"]
    assert volumes["t9k-hostfile"]["configMap"] == {"name": "colossalai-example-hostfile"}
    mounts = [(m["name"], m["mountPath"]) for m in container(pod, "launcher")["volumeMounts"]]
    assert mounts == [
        ("data", "/data"),
        ("t9k-ssh", "/root/.ssh"),
        ("t9k-hostfile", "/t9k/hostfile"),
    ]


def test_debug_mode(make_job: Any, manager: PluginManager) -> None:
    pods = by_name(render(make_job, manager, _debug()))
    assert container(pods["colossalai-example-launcher"], "launcher")["command"] == [
        "sleep",
        "inf",
    ]
    # Workers keep sshd, so that colossalai run can be started by hand from the launcher.
    worker = container(pods["colossalai-example-worker-0"], "worker")
    assert worker["command"][2].strip().splitlines()[-1].startswith("exec /usr/sbin/sshd -D")


def test_debug_command_of_a_replica_type(make_job: Any, manager: PluginManager) -> None:
    doc = _debug()
    doc["spec"]["runMode"]["debug"]["replicaSpecs"] = [
        {"type": "worker", "command": ["sleep", "3600"]}
    ]
    pods = by_name(render(make_job, manager, doc))
    assert container(pods["colossalai-example-worker-1"], "worker")["command"] == [
        "sleep",
        "3600",
    ]


def test_render_is_deterministic(make_job: Any, manager: PluginManager) -> None:
    doc = example()
    assert render(make_job, manager, doc) == render(make_job, manager, copy.deepcopy(doc))
