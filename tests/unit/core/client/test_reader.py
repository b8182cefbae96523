"""What the client's reader picks out of the API's answers: a job's Events (its pods by uid, and
by name those its status remembers that are gone, only since the job was created)."""

from __future__ import annotations

from typing import Any

from t9kjobs.client.reader import ClusterReader
from t9kjobs.manager import PluginManager


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
