"""The objects of a DeepSpeedJob: pods, SSH Secret and mounts, hostfile, Service, debug mode."""

from __future__ import annotations

import shlex
from typing import Any

from t9kjobs.render import render_job
from t9kjobs.ssh import GENERATE_ANNOTATION, start_sshd_script
from tests.unit.plugins.deepspeed.jobs import base_manifest, with_spec


def _objects(make_job: Any, manager: Any, doc: dict[str, Any]) -> dict[str, Any]:
    return {o["metadata"]["name"]: o for o in render_job(make_job(doc), manager)}


def _command(pod: dict[str, Any]) -> list[str]:
    return list(pod["spec"]["containers"][0]["command"])


SSHD = ["/bin/bash", "-c", start_sshd_script()]


def test_kind_info(manager: Any) -> None:
    info = manager.kind_info("DeepSpeedJob")
    assert info.plural == "deepspeedjobs"
    assert info.short_names == ("dsj",)
    assert info.debug_command == ("/usr/sbin/sshd", "-D")
    assert info.scale_spec_path == "spec.elastic.expectedReplicas"


def test_children_and_their_owner(make_job: Any, manager: Any) -> None:
    objects = _objects(make_job, manager, base_manifest())
    assert [(o["kind"], n) for n, o in objects.items()] == [
        ("Secret", "ds-ssh"),
        ("ConfigMap", "ds-hostfile"),
        ("Service", "ds"),
        ("Pod", "ds-worker-0"),
        ("Pod", "ds-worker-1"),
    ]
    for obj in objects.values():
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "DeepSpeedJob",
            "ds",
            "uid-1",
            True,
        )
        assert obj["metadata"]["namespace"] == "team"


def test_ssh_secret_holds_placeholders_for_the_controller(make_job: Any, manager: Any) -> None:
    secret = _objects(make_job, manager, base_manifest())["ds-ssh"]
    assert secret["metadata"]["annotations"][GENERATE_ANNOTATION] == "ssh-keypair"
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert set(secret["stringData"]) == {
        "ssh-privatekey",
        "ssh_host_ed25519_key",
        "authorized_keys",
        "known_hosts",
        "config",
    }
    assert "IdentityFile /root/.ssh/id_ed25519" in secret["stringData"]["config"]


def test_every_worker_mounts_the_key_and_the_hostfile(make_job: Any, manager: Any) -> None:
    objects = _objects(make_job, manager, base_manifest())
    for name in ("ds-worker-0", "ds-worker-1"):
        spec = objects[name]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        source = volumes["t9k-ssh"]["secret"]
        assert (source["secretName"], source["defaultMode"]) == ("ds-ssh", 0o600)
        # Every worker serves ssh; worker-0 alone launches, and alone has the client key.
        files = {item["path"] for item in source["items"]}
        server = {"authorized_keys", "ssh_host_ed25519_key"}
        client = {"id_ed25519", "known_hosts", "config"}
        assert files == (server | client if name == "ds-worker-0" else server)
        assert volumes["t9k-hostfile"]["configMap"]["name"] == "ds-hostfile"
        mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["/root/.ssh"] == {
            "name": "t9k-ssh",
            "mountPath": "/root/.ssh",
            "readOnly": True,
        }
        assert mounts["/t9k/hostfile"] == {
            "name": "t9k-hostfile",
            "mountPath": "/t9k/hostfile",
            "subPath": "hostfile",
            "readOnly": True,
        }
        assert spec["restartPolicy"] == "Never"
        assert (spec["hostname"], spec["subdomain"]) == (name, "ds")


def test_workers_run_only_sshd(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    own = {"command": ["python", "own.py"], "args": ["--own"]}  # replaced by the operator
    doc["spec"]["worker"]["template"]["spec"]["containers"][0].update(own)
    doc["spec"]["worker"]["replicas"] = 3
    objects = _objects(make_job, manager, doc)
    for name in ("ds-worker-1", "ds-worker-2"):
        container = objects[name]["spec"]["containers"][0]
        assert container["command"] == SSHD
        assert "args" not in container
        assert "T9K_NUM_WORKERS" not in str(container["env"])


def test_worker0_runs_sshd_then_waits_then_launches(make_job: Any, manager: Any) -> None:
    doc = base_manifest()
    own = {"command": ["python", "own.py"], "args": ["--own"]}  # replaced by the operator
    doc["spec"]["worker"]["template"]["spec"]["containers"][0].update(own)
    doc["spec"]["worker"]["replicas"] = 3
    pod = _objects(make_job, manager, doc)["ds-worker-0"]
    container = pod["spec"]["containers"][0]
    assert "args" not in container
    script = _command(pod)[2]
    background_sshd = f"/bin/bash -c {shlex.quote(start_sshd_script())} &"
    wait = "for host in ds-worker-0.ds ds-worker-1.ds ds-worker-2.ds; do"
    steps = [background_sshd, wait, "t9k_wait_for_sshd\n", "/root/.deepspeed_env", "exec deepspeed"]
    positions = [script.find(step) for step in steps]
    assert -1 not in positions, dict(zip(steps, positions, strict=True))
    assert positions == sorted(positions)
    assert "did not answer within 600s" in script
    assert {"name": "T9K_NUM_WORKERS", "value": "3"} in container["env"]


def test_disable_custom_env_writes_no_env_file(make_job: Any, manager: Any) -> None:
    objects = _objects(make_job, manager, with_spec(disableCustomEnv=True))
    script = _command(objects["ds-worker-0"])[2]
    assert ".deepspeed_env" not in script
    assert "exec deepspeed" in script
    # The env still reaches the container's entrypoint.
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in objects["ds-worker-0"]["spec"]["containers"][
        0
    ]["env"]


def test_debug_mode_runs_sshd_everywhere_and_no_launcher(make_job: Any, manager: Any) -> None:
    objects = _objects(make_job, manager, with_spec(runMode={"debug": {"enabled": True}}))
    assert _command(objects["ds-worker-1"]) == SSHD
    worker0 = _command(objects["ds-worker-0"])
    assert worker0[:2] == ["/bin/bash", "-c"]
    script = worker0[2]
    assert "exec deepspeed" not in script
    assert "t9k_wait_for_sshd" not in script
    assert script.index("/root/.deepspeed_env") < script.index("exec /usr/sbin/sshd -D")
    # The objects the launch needs exist, so `deepspeed` can be run by hand.
    assert {"ds-ssh", "ds-hostfile", "ds"} <= set(objects)


def test_debug_mode_user_command_wins(make_job: Any, manager: Any) -> None:
    doc = with_spec(
        runMode={
            "debug": {
                "enable": True,
                "replicaSpecs": [{"type": "worker", "command": ["sleep", "inf"]}],
            }
        }
    )
    objects = _objects(make_job, manager, doc)
    assert _command(objects["ds-worker-0"]) == ["sleep", "inf"]
    assert _command(objects["ds-worker-1"]) == ["sleep", "inf"]


def test_pause_creates_nothing(make_job: Any, manager: Any) -> None:
    doc = with_spec(runMode={"pause": {"enable": True}})
    assert render_job(make_job(doc), manager) == []
