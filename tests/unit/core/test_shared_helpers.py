"""The helpers several kinds share: the training container, pod host names through the job's
headless Service, and the TensorBoard (object, status, and its absence)."""

from __future__ import annotations

from t9kjobs.models import Job, JobSpec, ObjectMeta
from t9kjobs.objects import headless_service, new_pod, pod_host, training_container
from t9kjobs.tensorboard import (
    TENSORBOARD_KIND,
    TensorBoardJobStatus,
    tensorboard_objects,
    tensorboard_status,
)
from t9kjobs.vocabulary import Obj

JOB = Job(kind="MPIJob", metadata=ObjectMeta(name="pi", namespace="ns", uid="u-1"), spec=JobSpec())
TEMPLATE = {"spec": {"containers": [{"name": "sidecar"}, {"name": "train", "image": "x"}]}}


def test_training_container_is_the_named_one_else_the_first() -> None:
    assert training_container(TEMPLATE, "train") == (1, {"name": "train", "image": "x"})
    assert training_container(TEMPLATE, "missing") == (0, {"name": "sidecar"})
    assert training_container(TEMPLATE) == (0, {"name": "sidecar"})


def test_training_container_of_a_template_without_one_is_none() -> None:
    assert training_container({}) is None
    assert training_container({"spec": {"containers": []}}, "train") is None


def test_training_container_is_the_pods_own_dict() -> None:
    pod = new_pod(JOB, "worker", 0, TEMPLATE, subdomain=JOB.name)
    found = training_container(pod, "train")
    assert found is not None
    found[1]["image"] = "y"
    assert pod["spec"]["containers"][1]["image"] == "y"


def test_pod_host_resolves_through_the_jobs_headless_service() -> None:
    pod = new_pod(JOB, "worker", 3, TEMPLATE, subdomain=JOB.name)
    service = headless_service(JOB)
    host = pod_host(JOB, pod["metadata"]["name"])
    assert host == "pi-worker-3.pi"
    # <hostname>.<subdomain>, and the subdomain is the headless Service's name
    assert host == f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}"
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"


def _selects(service: Obj, pod: Obj) -> bool:
    return bool(service["spec"]["selector"].items() <= pod["metadata"]["labels"].items())


def test_a_headless_service_of_one_replica_selects_that_pod_alone() -> None:
    pods = [new_pod(JOB, t, i, TEMPLATE) for t, i in (("master", 0), ("worker", 0), ("worker", 1))]
    every = headless_service(JOB)
    master = headless_service(JOB, replica=("master", 0))
    worker = headless_service(JOB, replica=("worker", 1))
    assert [_selects(every, p) for p in pods] == [True, True, True]
    assert [_selects(master, p) for p in pods] == [True, False, False]
    assert [_selects(worker, p) for p in pods] == [False, False, True]
    assert master["spec"]["clusterIP"] == "None" and master["metadata"]["name"] == "pi"


def test_no_tensorboard_spec_no_tensorboard() -> None:
    assert tensorboard_objects(JOB, None) == []


def test_tensorboard_is_owned_and_named_after_the_job() -> None:
    spec = {"trainingLogFilesets": ["t9k://pvc/logs"]}
    (board,) = tensorboard_objects(JOB, spec)
    assert (board["kind"], board["metadata"]["name"]) == (TENSORBOARD_KIND, "pi")
    assert board["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert board["spec"] == spec and board["spec"] is not spec


def test_tensorboard_status_absent_then_not_ready_then_ready() -> None:
    absent = tensorboard_status(JOB, {})
    assert (absent.ready, absent.reason, absent.type) == (False, "NotFound", "Warning")
    assert "tensorstack.dev/v1beta1" in (absent.note or "")
    board = {"kind": TENSORBOARD_KIND, "metadata": {"name": "pi", "uid": "tb-1"}, "status": {}}
    waiting = tensorboard_status(JOB, {(TENSORBOARD_KIND, "pi"): board})
    assert (waiting.ready, waiting.reason) == (False, "NotReady")
    board["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    ready = tensorboard_status(JOB, {(TENSORBOARD_KIND, "pi"): board})
    assert (ready.ready, ready.reason) == (True, "Ready")
    assert ready.dependent is not None and ready.dependent["uid"] == "tb-1"


def test_tensorboard_status_round_trips_in_the_status_model() -> None:
    status = TensorBoardJobStatus(tensorboard=tensorboard_status(JOB, {}))
    again = TensorBoardJobStatus.model_validate(status.model_dump(by_alias=True))
    assert again.tensorboard == status.tensorboard
