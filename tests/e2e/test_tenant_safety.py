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
from tests.e2e.operator import OperatorProcess, operator
from tests.waiting import throughout

__all__ = ["operator"]  # the fixture, imported for this module


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
