"""What the real tier's training tests share: reading jobs, their pods and logs through kubectl,
and judging from the logs of `hack/images/trainer/examples/mlp.py` whether a world trained.

mlp.py prints `start rank=R world=W ...` when its process group is up, `step S rank=R world=W
loss=X` as it goes and `done rank=R world=W first_loss=X last_loss=Y steps=S in_sync=B` at the
end; the launchers prefix lines (pdsh with `<host>: `), so the patterns are searched anywhere in
a line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from t9kjobs.objects import ANNOTATION_INCARNATION
from tests.cluster import Cluster

__all__ = [
    "IMAGE",
    "MLP",
    "Done",
    "apply",
    "assert_trained",
    "claim_volume",
    "container",
    "done_lines",
    "events_of",
    "get",
    "job",
    "job_logs",
    "mlp",
    "pods_of",
    "scripted",
    "wait_finished",
    "wait_for",
]

IMAGE = "localhost/t9kjobs-trainer:latest"
MLP = "/opt/t9kjobs/examples/mlp.py"

_DONE = re.compile(
    r"done rank=(?P<rank>\d+) world=(?P<world>\d+) first_loss=(?P<first>[\d.]+)"
    r" last_loss=(?P<last>[\d.]+) steps=\d+ in_sync=(?P<sync>True|False)"
)


def container(name: str, command: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    """A container of the trainer image (no registry: imported into the node, never pulled)."""
    spec: dict[str, Any] = {"name": name, "image": IMAGE, "imagePullPolicy": "IfNotPresent"}
    if command is not None:
        spec["command"] = command
    return {**spec, **fields}


def scripted(type_: str, script: str, policy: Any = "Never", replicas: int = 1) -> dict[str, Any]:
    """A replica that runs `script` with bash in the trainer image. `$INCARNATION` tells it which
    incarnation it is (0, then n after n restarts: its pod's annotation, through the downward
    API), so that it can fail the first time only."""
    incarnation = {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_INCARNATION}']"}}
    env = [{"name": "INCARNATION", "valueFrom": incarnation}]
    return {
        "type": type_,
        "replicas": replicas,
        "restartPolicy": policy,
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [container("trainer", ["bash", "-c", script], env=env)],
            }
        },
    }


def job(kind: str, name: str, *replicas: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A job of `kind` with these replica specs and other spec fields."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicaSpecs": list(replicas), **spec},
    }


def apply(cluster: Cluster, namespace: str, *docs: dict[str, Any]) -> None:
    """`kubectl apply` the objects in the namespace."""
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)})
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=stream)


def get(cluster: Cluster, namespace: str, *what: str) -> Any:
    return json.loads(cluster.kubectl("-n", namespace, "get", *what, "-o", "json").stdout)


def pods_of(cluster: Cluster, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    """The job's pods by name."""
    pods = get(cluster, namespace, "pods", "-l", f"tensorstack.dev/owner-name={job}")
    return {p["metadata"]["name"]: p for p in pods["items"]}


def job_logs(cluster: Cluster, namespace: str, job: str) -> dict[str, str]:
    """Every pod's log (of its current container), by pod name."""
    return {
        name: cluster.kubectl("-n", namespace, "logs", name, check=False).stdout
        for name in pods_of(cluster, namespace, job)
    }


def report(job: dict[str, Any], logs: dict[str, str], lines: int = 40) -> str:
    """A failed assertion's message: the job's status and each pod's last `lines` lines, as
    text (pytest shortens a dict or a tuple message to one line, and CI shows only that)."""
    parts = [json.dumps(job.get("status"), indent=1, sort_keys=True)]
    for pod, log in sorted(logs.items()):
        tail = "\n".join(log.splitlines()[-lines:])
        parts.append(f"----- {pod} (last {lines} lines)\n{tail}")
    return "\n".join(parts)


def events_of(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events about the object `name` (the job), oldest first."""
    events = get(cluster, namespace, "events", "--field-selector", f"involvedObject.name={name}")
    return sorted(events["items"], key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def wait_for(
    cluster: Cluster, namespace: str, kind: str, name: str, what: str, test: Any, timeout: float
) -> dict[str, Any]:
    """Poll the job until ``test(job)`` holds; the job."""

    def check() -> dict[str, Any] | None:
        job: dict[str, Any] = get(cluster, namespace, kind.lower(), name)
        return job if test(job) else None

    return cluster.poll(check, timeout=timeout, interval=2, message=f"{kind}/{name}: {what}")


def wait_finished(
    cluster: Cluster, namespace: str, kind: str, name: str, timeout: float = 600
) -> dict[str, Any]:
    """Poll until the job is Succeeded or Failed; the job."""
    return wait_for(
        cluster,
        namespace,
        kind,
        name,
        "finished",
        lambda job: (job.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        timeout,
    )


@dataclass(frozen=True)
class Done:
    rank: int
    world: int
    first_loss: float
    last_loss: float
    in_sync: bool


def done_lines(text: str) -> list[Done]:
    return [
        Done(
            int(m["rank"]),
            int(m["world"]),
            float(m["first"]),
            float(m["last"]),
            m["sync"] == "True",
        )
        for m in _DONE.finditer(text)
    ]


def assert_trained(logs: dict[str, str], world: int, what: str) -> list[Done]:
    """Every rank of a world of `world` processes finished once, in sync, its loss down by 10x.

    `logs` are the texts to search (pods' logs, or an exec's output); returns the done lines.
    """
    text = "\n".join(logs.values())
    tails = "\n".join(f"--- {name}\n{log[-2500:]}" for name, log in logs.items())
    done = done_lines(text)
    assert {d.world for d in done} == {world}, f"{what}: worlds {done}\n{tails}"
    assert sorted(d.rank for d in done) == list(range(world)), f"{what}: ranks {done}\n{tails}"
    assert all(d.in_sync for d in done), f"{what}: out of sync {done}"
    assert all(d.last_loss < d.first_loss / 10 for d in done), f"{what}: loss {done}"
    return done


def mlp(*args: str) -> list[str]:
    """The argv of the training example with ``args``."""
    return ["python3", MLP, *args]


def claim_volume(cluster: Cluster, namespace: str, claim: str) -> str:
    """The PersistentVolumeClaim `claim`, bound to a hostPath volume of its own (the real node
    has no provisioner); the volume's name, to delete after the test."""
    name = f"{claim}-{namespace}"[:63]
    folder = f"/tmp/t9kjobs-checkpoints/{namespace}/{claim}"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "",
            "hostPath": {"path": folder, "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": namespace, "name": claim},
        },
    }
    bound = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    for doc in (volume, bound):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    return name
