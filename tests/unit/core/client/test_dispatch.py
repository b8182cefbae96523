"""Where the client reads a job MultiKueue dispatched (`t9kjobs.client.dispatch`): here for a
job of ours, nowhere yet while it waits for a worker, and otherwise a message that names the
worker when neither the user's kubeconfig nor MultiKueue's Secret reaches it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.cli.describe_text import _render_header as render_header
from t9kjobs.client import job_logs as job_logs_module
from t9kjobs.client.describe import _Describer
from t9kjobs.client.dispatch import (
    NotDispatchedYet,
    NotHere,
    dispatched_to,
    job_events,
    worker_reader,
)
from t9kjobs.client.errors import JobNotFound
from t9kjobs.client.job_logs import JobLogs
from t9kjobs.client.reader import ClusterReader, JobRef, find_kind
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from tests.unit.core.client.feedback import ScriptedReader

WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/genericjob-x"
JOB_PATH = "/apis/batch.tensorstack.dev/v1beta1/namespaces/team/genericjobs/x"
PODS = "/api/v1/namespaces/team/pods"
# The header's facts `describe` renders beside the worker's line.
_HEADER: dict[str, Any] = {
    "kind": "GenericJob",
    "name": "x",
    "namespace": "team",
    "managedBy": "kueue.x-k8s.io/multikueue",
    "created": "2026-01-01T11:00:00Z",
    "phase": "Queued",
    "inPhaseSeconds": None,
    "runMode": None,
    "startTime": None,
    "completionTime": None,
    "progress": None,
}


class Answers:
    """The API server's answers by path; a path it has none for is a 403."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def request(self, method: str, path: str, **_: Any) -> Any:
        self.asked.append(path)
        if path not in self.answers:
            raise ApiError(403, {"reason": "Forbidden", "message": "no"})
        return self.answers[path]


def _job(managed_by: str | None) -> dict[str, Any]:
    spec = {"managedBy": managed_by} if managed_by else {}
    return {"metadata": {"name": "x", "namespace": "team", "uid": "u"}, "spec": spec}


def _ref(manager: PluginManager) -> JobRef:
    return JobRef(find_kind("gj", manager), "x", "team")


def test_a_job_of_ours_is_read_here(manager: PluginManager) -> None:
    answers = Answers({JOB_PATH: _job(None)})
    reader = ClusterReader(answers, manager)  # type: ignore[arg-type]
    assert dispatched_to(reader, _ref(manager), _job(None)) is None
    assert worker_reader(reader, _ref(manager)) is reader
    assert answers.asked == [JOB_PATH], "nothing of Kueue's is read for a job of ours"


def test_a_job_waiting_for_a_worker_has_nothing_to_read(manager: PluginManager) -> None:
    status = {"nominatedClusterNames": ["east", "west"]}
    answers = Answers({JOB_PATH: _job("kueue.x-k8s.io/multikueue"), WORKLOAD: {"status": status}})
    reader = ClusterReader(answers, manager)  # type: ignore[arg-type]
    with pytest.raises(NotDispatchedYet, match=r"nominated: east, west.*no pod yet"):
        worker_reader(reader, _ref(manager))
    events = {"/api/v1/namespaces/team/events": {"items": []}}
    answers.answers.update(events)
    answers.answers["/api/v1/namespaces/team/pods"] = {"items": []}
    assert job_events(reader, _ref(manager)) == [], "the manager's Events alone, no error"


def test_an_unreachable_worker_is_named(
    manager: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # no context of the user's
    answers = Answers(
        {
            JOB_PATH: _job("kueue.x-k8s.io/multikueue"),
            WORKLOAD: {"status": {"clusterName": "east"}},
            "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/east": {
                "spec": {"clusterSource": {"kubeConfig": {"location": "east-secret"}}}
            },
        }
    )
    reader = ClusterReader(answers, manager)  # type: ignore[arg-type]
    with pytest.raises(NotHere) as caught:
        worker_reader(reader, _ref(manager))
    message = str(caught.value)
    assert "runs on the worker cluster 'east'" in message
    assert "cannot be read (403 Forbidden)" in message
    assert "kubeconfig context named 'east'" in message
    assert "/api/v1/namespaces/kueue-system/secrets/east-secret" in answers.asked


@pytest.mark.parametrize(
    ("managed_by", "workload", "cluster", "said"),
    [
        (None, None, None, None),
        ("kueue.x-k8s.io/multikueue", {"status": {}}, None, "not dispatched yet: "),
        ("kueue.x-k8s.io/multikueue", {"status": {"clusterName": "east"}}, "east", "east ("),
        ("kueue.x-k8s.io/multikueue", None, None, "its Workload genericjob-x cannot be read"),
    ],
)
def test_describe_names_the_worker_cluster_or_says_it_has_none_yet(
    manager: PluginManager,
    managed_by: str | None,
    workload: dict[str, Any] | None,
    cluster: str | None,
    said: str | None,
) -> None:
    answers: dict[str, Any] = {JOB_PATH: _job(managed_by), PODS: {"items": []}}
    if workload is not None:
        answers[WORKLOAD] = workload
    reader = ClusterReader(Answers(answers), manager)  # type: ignore[arg-type]
    facts = _Describer(reader, _ref(manager), datetime.now(UTC)).dispatch()
    if said is None:
        assert facts is None
        return
    assert facts is not None and facts["workerCluster"] == cluster
    assert said in facts["message"], facts
    shown = render_header({**_HEADER, "dispatch": facts}, datetime.now(UTC))
    assert any(line.startswith("Worker:     ") for line in shown), shown


class _CopyDeleted(ScriptedReader):
    """The worker: the job's copy is read `alive` times, then is gone (MultiKueue deletes it
    once the job has finished)."""

    def __init__(self, alive: int, *statuses: dict[str, Any], **kw: Any) -> None:
        super().__init__(*statuses, **kw)
        self.alive = alive

    def job(self, ref: Any) -> dict[str, Any]:
        if self.reads >= self.alive:
            raise JobNotFound(f"{ref} not found in namespace {ref.namespace}")
        return super().job(ref)


def test_following_a_dispatched_job_ends_as_the_manager_says(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its copy on the worker, deleted once it finished, is no error: the manager's job says
    when it has finished (seen on the real node: JobNotFound at the end of `logs -f`)."""
    monkeypatch.setattr(job_logs_module, "POLL_SECONDS", 0.01)
    running = {
        "phase": "Running",
        "tasks": [{"type": "worker", "replicas": [{"name": "mlp-worker-0", "phase": "Running"}]}],
    }
    pod = {"metadata": {"name": "mlp-worker-0", "uid": "pod-uid"}, "status": {"phase": "Succeeded"}}
    worker = _CopyDeleted(1, running, pod=pod, log=["2026-11-28T11:00:00Z done"])
    home = ScriptedReader(running, running, {**running, "phase": "Succeeded"})
    ref = JobRef(find_kind("gj", manager), "mlp", "team-a")
    logs = JobLogs(worker, ref, timeout=5, home=home)  # type: ignore[arg-type]
    assert [line.text for line in logs.follow_all()] == ["done"]
    assert home.reads >= 3, "the manager's job read until it Succeeded"
    with pytest.raises(JobNotFound):  # without the manager, the copy's end is an error
        list(JobLogs(_CopyDeleted(1, running, pod=pod, log=["x"]), ref, timeout=5).follow_all())  # type: ignore[arg-type]
