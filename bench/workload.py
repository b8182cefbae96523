"""The workload: N PyTorch jobs of one master and R-1 workers, every pod run by KWOK for a few
seconds and exiting 0 (the `sim.t9kjobs.dev/*` annotations of docs/cluster.md), as our
PyTorchTrainingJob, as Kubeflow's PyTorchJob, and as the bare pods our operator would create.

Both operators keep finished pods (cleanUpPolicy / cleanPodPolicy None), so neither spends
requests on deletions the other does not make.
"""

from __future__ import annotations

from t9kjobs.loading import parse_job
from t9kjobs.manager import load_plugins
from t9kjobs.render import render_job
from t9kjobs.testing.harness.simulation import simulate
from t9kjobs.vocabulary import Obj

__all__ = [
    "NAMESPACE",
    "kubeflow_job",
    "ours_job",
    "post_items",
    "raw_pods",
    "requesting_cpu",
]


NAMESPACE = "bench"
# Both operators name the training container `pytorch` (Kubeflow requires that name).
_CONTAINER: Obj = {"name": "pytorch", "image": "pytorch:bench", "command": ["python", "train.py"]}


def _template() -> Obj:
    return {"spec": {"containers": [dict(_CONTAINER)]}}


def ours_job(name: str, replicas: int, seconds: int) -> Obj:
    """A PyTorchTrainingJob: one master, `replicas - 1` workers."""
    job: Obj = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runPolicy": {"cleanUpPolicy": "None"},
            "replicaSpecs": [
                {"type": "master", "replicas": 1, "template": _template()},
                {"type": "worker", "replicas": replicas - 1, "template": _template()},
            ],
        },
    }
    return simulate(job, exit_code=0, seconds=seconds)


def kubeflow_job(name: str, replicas: int, seconds: int) -> Obj:
    """The same job as Kubeflow's PyTorchJob (training operator v1)."""
    job: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": _template()},
                "Worker": {
                    "replicas": replicas - 1,
                    "restartPolicy": "Never",
                    "template": _template(),
                },
            },
        },
    }
    return simulate(job, exit_code=0, seconds=seconds)


def raw_pods(names: list[str], replicas: int, seconds: int) -> list[Obj]:
    """The pods our operator creates for these jobs, exactly as it renders them, without the
    owner reference (no job exists to own them; the garbage collector would delete them)."""
    manager = load_plugins()
    pods = []
    for name in names:
        job = parse_job(ours_job(name, replicas, seconds), manager)
        for obj in render_job(job, manager):
            if obj["kind"] == "Pod":
                obj["metadata"].pop("ownerReferences", None)
                obj["metadata"]["namespace"] = NAMESPACE
                pods.append(obj)
    return pods


def post_items(objects: list[Obj], plural: str, api_version: str) -> list[Obj]:
    """Input lines of bench-create: where to POST each object."""
    group_path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    path = f"{group_path}/namespaces/{NAMESPACE}/{plural}"
    return [{"path": path, "body": obj} for obj in objects]


def requesting_cpu(objects: list[Obj], cpu: str | None) -> list[Obj]:
    """`objects` (pods, or jobs with pod templates) whose every container requests `cpu`, in
    place; unchanged when `cpu` is None. Pods that reserve something are gangs under the
    operator's default (docs/scheduling.md, "Gangs that buy nothing"); the raw client's pods
    get the same request, so both phases place the same pods."""
    if cpu is None:
        return objects

    def visit(node: object) -> None:
        if isinstance(node, dict):
            for container in node.get("containers") or []:
                container.setdefault("resources", {}).setdefault("requests", {})["cpu"] = cpu
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(objects)
    return objects
