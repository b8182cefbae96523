"""Tenant safety on the local control plane (docs/security.md): a job's pods never use an
object the job does not control. A Secret planted under the name of a DeepSpeedJob's SSH
Secret, before the job exists, would otherwise be mounted into every worker (its
`authorized_keys` is root ssh into them); a ConfigMap planted under its hostfile's name would
choose the hosts the launcher sends its environment to. The operator creates no pod while
either exists, says which object in the job's condition and a Warning Event, and goes on by
itself once it is gone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.waiting import throughout


def _deepspeed(name: str) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "600"}},
        "spec": {"containers": [{"name": "worker", "image": "deepspeed:latest"}]},
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": name},
        "spec": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {"replicas": 2, "template": template},
        },
    }


def _planted(kind: str, name: str) -> dict[str, Any]:
    """What another user of the namespace creates beforehand, without any controller."""
    if kind == "Secret":
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "stringData": {"authorized_keys": "ssh-ed25519 AAAAC3Nza... attacker"},
        }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"hostfile": "attacker.example slots=1\n"},
    }


def _apply(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> None:
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(doc))


def _pods(cluster: Cluster, namespace: str, job: str) -> list[str]:
    out = cluster.kubectl(
        "-n", namespace, "get", "pods", "-l", f"tensorstack.dev/owner-name={job}", "-o", "name"
    ).stdout
    return out.split()


def _initialized(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", namespace, "get", "dsj", job, "-o", "json").stdout
    conditions = (json.loads(out).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Initialized"), {})


@pytest.mark.parametrize(
    ("kind", "suffix"), [("Secret", "ssh"), ("ConfigMap", "hostfile")], ids=["secret", "configmap"]
)
def test_a_planted_object_holds_every_pod_until_it_is_gone(
    cluster: Cluster, namespace: str, operator: OperatorProcess, kind: str, suffix: str
) -> None:
    name = f"victim-{kind.lower()}"
    planted = f"{name}-{suffix}"
    _apply(cluster, namespace, _planted(kind, planted))
    _apply(cluster, namespace, _deepspeed(name))

    cluster.poll(
        lambda: _initialized(cluster, namespace, name).get("reason") == "NameConflict",
        timeout=60,
        interval=0.5,
        message="the job's Initialized condition says NameConflict",
    )
    message = _initialized(cluster, namespace, name)["message"]
    assert message.startswith(
        f"{kind} {planted} exists and this job does not control it (it has no controller)"
    ), message
    assert "no pod of the job is created while it exists" in message
    events = cluster.kubectl(
        "-n", namespace, "get", "events", "--field-selector", "reason=NameConflict", "-o", "json"
    ).stdout
    assert any(
        e["involvedObject"]["name"] == name and e["type"] == "Warning"
        for e in json.loads(events)["items"]
    )

    # Looked at again every 10 s: still no pod after two more looks.
    def no_pod() -> bool:
        assert _pods(cluster, namespace, name) == []
        return True

    throughout(no_pod, 21, interval=3, what=f"no pod of {name} while {planted} exists")

    cluster.kubectl("-n", namespace, "delete", kind.lower(), planted)
    cluster.poll(
        lambda: len(_pods(cluster, namespace, name)) == 2,
        timeout=60,
        interval=0.5,
        message="both workers created once the planted object is gone",
    )
    owned = json.loads(
        cluster.kubectl("-n", namespace, "get", kind.lower(), planted, "-o", "json").stdout
    )
    assert owned["metadata"]["ownerReferences"][0]["name"] == name  # the job's own, now


def _job(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", namespace, "get", "dsj", name, "-o", "json").stdout
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_a_planted_secret_that_names_the_job_as_its_controller_is_not_the_jobs_own(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    """A paused job has made no Secret yet: whoever may create Secrets in the namespace plants
    `<job>-ssh` with the job's uid as its controller and their own `authorized_keys`. Before
    the operator's marks (docs/security.md, threat 13), the resumed job took it for its own
    and mounted it in every worker; now it is a conflict, and no pod is created."""
    name = "victim-paused"
    job = _deepspeed(name)
    job["spec"]["runMode"] = {"pause": {"enabled": True}}
    _apply(cluster, namespace, job)
    uid = _job(cluster, namespace, name)["metadata"]["uid"]
    planted = _planted("Secret", f"{name}-ssh")
    planted["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "DeepSpeedJob",
            "name": name,
            "uid": uid,
            "controller": True,
        }
    ]
    _apply(cluster, namespace, planted)
    cluster.kubectl(
        "-n",
        namespace,
        "patch",
        "dsj",
        name,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"runMode": {"pause": {"enabled": False}}}}),
    )
    cluster.poll(
        lambda: _initialized(cluster, namespace, name).get("reason") == "NameConflict",
        timeout=60,
        interval=0.5,
        message="the resumed job's Initialized condition says NameConflict",
    )
    message = _initialized(cluster, namespace, name)["message"]
    assert message.startswith(
        f"Secret {name}-ssh exists and this job does not control it (it names this job as"
        " its controller, but the operator did not make it)"
    ), message
    throughout(
        lambda: _pods(cluster, namespace, name) == [],
        9,
        interval=3,
        what=f"no pod of {name} while the planted Secret exists",
    )
    cluster.kubectl("-n", namespace, "delete", "secret", f"{name}-ssh")
    cluster.poll(
        lambda: len(_pods(cluster, namespace, name)) == 2,
        timeout=60,
        interval=0.5,
        message="both workers created once the planted Secret is gone",
    )
    made = json.loads(
        cluster.kubectl("-n", namespace, "get", "secret", f"{name}-ssh", "-o", "json").stdout
    )
    assert "batch.tensorstack.dev/made-by" in made["metadata"]["annotations"]
