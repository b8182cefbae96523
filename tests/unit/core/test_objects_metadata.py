"""The operator's labels and annotations win over a template's (issue #40).

A template's `tensorstack.dev/owner-name` would put a pod in another job's headless Service (its
selector is the owner labels), and its `batch.tensorstack.dev/stop-when-finished` would have the
engine delete it when the job finishes. The CRDs refuse such keys in templates
(tests/unit/core/test_template_refusals.py); a job stored before they did, or a third-party kind's
template, still gets pods with the operator's values only.
"""

from __future__ import annotations

from typing import Any

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job, JobSpec, ObjectMeta
from t9kjobs.objects import (
    ANNOTATION_STOP_WHEN_FINISHED,
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    RESERVED_DOMAINS,
    headless_service,
    new_pod,
    reserved_key,
    service,
)
from t9kjobs.render import render_job

JOB = Job(kind="MPIJob", metadata=ObjectMeta(name="pi", namespace="ns", uid="u-1"), spec=JobSpec())
CONTAINER = {"name": "main", "image": "busybox"}
HOSTILE_LABELS = {
    LABEL_OWNER_KIND: "GenericJob",
    LABEL_OWNER_NAME: "victim",
    LABEL_REPLICA_TYPE: "master",
    LABEL_REPLICA_INDEX: "9",
    "scheduler.tensorstack.dev/queue": "someone-elses",
    "app": "mine",
}
HOSTILE_ANNOTATIONS = {
    ANNOTATION_STOP_WHEN_FINISHED: "true",
    "batch.tensorstack.dev/restart-count": "7",
    "tensorstack.dev/anything": "x",
    "sim.t9kjobs.dev/exit-code": "0",
    "note": "kept",
}
HOSTILE = {
    "metadata": {"labels": HOSTILE_LABELS, "annotations": HOSTILE_ANNOTATIONS},
    "spec": {"containers": [CONTAINER]},
}


def test_the_reserved_domains_are_tensorstack_dev_and_its_subdomains() -> None:
    assert RESERVED_DOMAINS == ("tensorstack.dev",)
    for key in (
        "tensorstack.dev/owner-name",
        "batch.tensorstack.dev/stop-when-finished",
        "scheduler.tensorstack.dev/group-name",
        "a.b.tensorstack.dev/x",
    ):
        assert reserved_key(key), key
    for key in (
        "sim.t9kjobs.dev/exit-code",
        "eviltensorstack.dev/x",
        "tensorstack.dev.example.com/x",
        "tensorstack.dev",
        "app",
        "example.com/tensorstack.dev/x",
    ):
        assert not reserved_key(key), key


def test_a_templates_owner_and_replica_labels_lose_to_the_operators() -> None:
    pod = new_pod(JOB, "worker", 0, HOSTILE, subdomain=JOB.name)
    assert pod["metadata"]["labels"] == {
        LABEL_OWNER_KIND: "MPIJob",
        LABEL_OWNER_NAME: "pi",
        "app": "mine",
        LABEL_REPLICA_TYPE: "worker",
        LABEL_REPLICA_INDEX: "0",
    }
    # What the job's headless Service selects: this job's pods, not the victim's.
    selector = headless_service(JOB)["spec"]["selector"]
    assert {k: pod["metadata"]["labels"][k] for k in selector} == selector


def test_a_templates_reserved_annotations_are_dropped_the_others_kept() -> None:
    pod = new_pod(JOB, "worker", 0, HOSTILE)
    assert pod["metadata"]["annotations"] == {"sim.t9kjobs.dev/exit-code": "0", "note": "kept"}
    only_reserved = {"metadata": {"annotations": {ANNOTATION_STOP_WHEN_FINISHED: "true"}}}
    assert "annotations" not in new_pod(JOB, "worker", 0, only_reserved)["metadata"]


def test_the_template_is_left_as_it_was() -> None:
    template: dict[str, Any] = {
        "metadata": {"labels": dict(HOSTILE_LABELS), "annotations": dict(HOSTILE_ANNOTATIONS)}
    }
    new_pod(JOB, "worker", 0, template)
    assert template["metadata"] == {"labels": HOSTILE_LABELS, "annotations": HOSTILE_ANNOTATIONS}


def test_a_service_selector_cannot_unselect_the_owner_labels() -> None:
    selector = {LABEL_OWNER_NAME: "victim", LABEL_REPLICA_TYPE: "master"}
    built = service(JOB, "pi-master", selector, [{"port": 80}])
    assert built["spec"]["selector"] == {
        LABEL_OWNER_KIND: "MPIJob",
        LABEL_OWNER_NAME: "pi",
        LABEL_REPLICA_TYPE: "master",
    }


def test_a_stored_job_with_reserved_keys_gets_pods_with_the_operators_values(
    manager: PluginManager, make_job: Any
) -> None:
    # As if stored before the CRD refused them: the template edited after validation.
    job = make_job(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "metadata": {"name": "mine", "namespace": "ns", "uid": "u-2"},
            "spec": {
                "replicaSpecs": [
                    {"type": "worker", "template": {"spec": {"containers": [CONTAINER]}}}
                ]
            },
        }
    )
    job.spec.replica_specs[0].template["metadata"] = HOSTILE["metadata"]
    (pod,) = [o for o in render_job(job, manager) if o["kind"] == "Pod"]
    labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    assert (labels[LABEL_OWNER_KIND], labels[LABEL_OWNER_NAME]) == ("GenericJob", "mine")
    assert (labels[LABEL_REPLICA_TYPE], labels[LABEL_REPLICA_INDEX]) == ("worker", "0")
    assert "scheduler.tensorstack.dev/queue" not in labels
    assert ANNOTATION_STOP_WHEN_FINISHED not in annotations
    assert annotations["batch.tensorstack.dev/restart-count"] == "0"
    assert annotations["sim.t9kjobs.dev/exit-code"] == "0"
