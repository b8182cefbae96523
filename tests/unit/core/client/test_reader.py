"""What the client's reader picks out of the API's answers: a job's Events (its pods by uid, and
by name those its status remembers that are gone, only since the job was created); a job's pods
and ConfigMaps, those it controls by uid among those with its labels."""

from __future__ import annotations

from typing import Any

from t9kjobs.client.reader import ClusterReader, JobRef, training_container
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.objects import ANNOTATION_TRAINING_CONTAINER


class Answers:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.asked: list[str] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.asked.append(f"{method} {path}")
        return {"items": self.items}


def event(kind: str, name: str, uid: str, time: str, reason: str) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": name, "uid": uid},
        "eventTime": time,
        "reason": reason,
    }


JOB = {
    "metadata": {
        "name": "ok",
        "namespace": "ns",
        "uid": "job",
        "creationTimestamp": "2026-01-01T12:00:00Z",
    },
    "status": {
        "tasks": [
            {"type": "worker", "replicas": [{"name": "ok-worker-0"}, {"name": "ok-worker-1"}]}
        ]
    },
}


def test_a_jobs_events_are_its_own_and_its_pods_even_gone(manager: PluginManager) -> None:
    items = [
        event("GenericJob", "ok", "job", "2026-01-01T12:00:09Z", "Failed"),
        event("Pod", "ok-worker-0", "pod-0", "2026-01-01T12:00:00.500000Z", "Scheduled"),
        # worker-1's pod is gone: found by its name, once the job exists
        event("Pod", "ok-worker-1", "gone", "2026-01-01T12:00:01Z", "Scheduled"),
        # a pod of that name before this job was created: another job's
        event("Pod", "ok-worker-1", "older", "2026-01-01T11:00:00Z", "Scheduled"),
        event("Pod", "other-worker-0", "x", "2026-01-01T12:00:02Z", "Scheduled"),
        event("GenericJob", "ok", "an-older-job-of-that-name", "2026-01-01T12:00:03Z", "Failed"),
    ]
    answers = Answers(items)
    reader = ClusterReader(answers, manager)  # type: ignore[arg-type]
    pods = [{"metadata": {"name": "ok-worker-0", "uid": "pod-0"}}]
    found = reader.job_events(JOB, pods)
    assert [(e["involvedObject"]["uid"], e["reason"]) for e in found] == [
        ("pod-0", "Scheduled"),
        ("gone", "Scheduled"),
        ("job", "Failed"),
    ]
    assert answers.asked == ["GET /api/v1/namespaces/ns/events"]


def _owned_by(name: str, *refs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": list(refs)}}


def _ref(uid: str, controller: bool = True) -> dict[str, Any]:
    return {"kind": "GenericJob", "name": "ok", "uid": uid, "controller": controller}


def test_a_jobs_pods_are_those_it_controls_not_those_with_its_labels(
    manager: PluginManager,
) -> None:
    # Issue #47: the client listed a job's pods by their labels alone, so a bare pod given
    # the job's owner labels was shown (described, its log followed) as one of its replicas.
    items = [
        _owned_by("ok-worker-1", _ref("job")),
        _owned_by("ok-worker-0", _ref("job")),
        _owned_by("ok-worker-2"),  # a bare pod with the labels
        _owned_by("ok-worker-3", _ref("an-older-job-of-that-name")),
        _owned_by("ok-worker-4", _ref("job", controller=False)),  # names it, not as controller
    ]
    answers = Answers(items)
    reader = ClusterReader(answers, manager)  # type: ignore[arg-type]
    ref = JobRef.parse("gj/ok", "ns", manager)
    assert [p["metadata"]["name"] for p in reader.pods(ref, "job")] == [
        "ok-worker-0",
        "ok-worker-1",
    ]
    assert answers.asked == ["GET /api/v1/namespaces/ns/pods"]
    assert [c["metadata"]["name"] for c in reader.config_maps(ref, "job")] == [
        "ok-worker-0",
        "ok-worker-1",
    ]
    assert reader.pods(ref, "") == []  # a job without a uid controls nothing


class OnePod:
    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return self.pod


def test_a_pod_by_name_is_the_jobs_only_if_the_job_controls_it(manager: PluginManager) -> None:
    own = ClusterReader(OnePod(_owned_by("ok-worker-0", _ref("job"))), manager)  # type: ignore[arg-type]
    assert own.pod("ns", "ok-worker-0", "job") is not None
    assert own.pod("ns", "ok-worker-0") is not None  # no job asked about: any pod of the name
    planted = ClusterReader(OnePod(_owned_by("ok-worker-0")), manager)  # type: ignore[arg-type]
    assert planted.pod("ns", "ok-worker-0", "job") is None


def test_the_training_container_is_the_one_the_operator_marked_else_the_first() -> None:
    containers = [{"name": "sidecar"}, {"name": "main"}]
    marked = {
        "metadata": {"annotations": {ANNOTATION_TRAINING_CONTAINER: "main"}},
        "spec": {"containers": containers},
    }
    assert training_container(marked) == "main"
    assert training_container({"metadata": {}, "spec": {"containers": containers}}) == "sidecar"
    assert training_container({"metadata": {}, "spec": {"containers": []}}) is None


class KueueAnswers:
    """The API's answers by path: an object, or a refusal."""

    def __init__(self, answers: dict[str, dict[str, Any] | Exception]) -> None:
        self.answers = answers

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        answer = self.answers.get(path, ApiError(404, {"message": "not found"}))
        if isinstance(answer, Exception):
            raise answer
        return answer


KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOAD = f"{KUEUE}/namespaces/ns/workloads/genericjob-ok"


def test_the_topology_levels_are_the_flavors_topologys_and_none_where_they_cannot_be_read(
    manager: PluginManager,
) -> None:
    levels = ["block", "rack", "kubernetes.io/hostname"]
    admitted = {
        "status": {
            "admission": {
                "podSetAssignments": [
                    # Kueue v0.17 keeps only the lowest level when it is the hostname.
                    {
                        "name": "worker",
                        "flavors": {"nvidia.com/gpu": "h100"},
                        "topologyAssignment": {"levels": ["kubernetes.io/hostname"]},
                    },
                    {"name": "launcher", "flavors": {"cpu": "default"}},  # not placed by topology
                ]
            }
        }
    }
    answers: dict[str, dict[str, Any] | Exception] = {
        WORKLOAD: admitted,
        f"{KUEUE}/resourceflavors/h100": {"spec": {"topologyName": "fabric"}},
        f"{KUEUE}/topologies/fabric": {"spec": {"levels": [{"nodeLabel": x} for x in levels]}},
    }
    reader = ClusterReader(KueueAnswers(answers), manager)  # type: ignore[arg-type]
    assert reader.topology_levels("ns", "genericjob-ok") == {"worker": levels}
    # The Topology cannot be read: the assignment's own levels.
    answers[f"{KUEUE}/topologies/fabric"] = ApiError(403, {"message": "forbidden"})
    assert reader.topology_levels("ns", "genericjob-ok") == {"worker": ["kubernetes.io/hostname"]}
    # The Workload cannot be read: none.
    answers[WORKLOAD] = ApiError(403, {"message": "workloads is forbidden"})
    assert reader.topology_levels("ns", "genericjob-ok") == {}
