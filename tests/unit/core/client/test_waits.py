"""Every wait of the client ends (kubeflow/sdk#696 is a client that polled for ever): `wait` at
its timeout, and following a log while a replica has no log to follow (a job not started, one
queued again by Kueue, a container that never starts), each with an error that names the job
and the phase it is in. And `wait`'s default: Succeeded, JobEnded when the job Failed.
Against a cluster: tests/e2e/test_client.py, tests/e2e/test_kueue.py."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from t9kjobs.client import Client, JobEnded, WaitTimeout
from t9kjobs.client import job_logs as job_logs_module
from t9kjobs.client.job_logs import JobLogs
from t9kjobs.manager import PluginManager
from tests.unit.core.client.feedback import ScriptedReader

PREEMPTED = {"phase": "Queued", "reason": "Preempted"}
WITH_REPLICAS = {
    **PREEMPTED,
    "tasks": [{"type": "worker", "replicas": [{"name": "mlp-worker-0", "phase": "Deleted"}]}],
}
FAILED = {"phase": "Failed", "reason": "ReplicaFailed"}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_logs_module, "POLL_SECONDS", 0.01)


def client_of(manager: PluginManager, reader: ScriptedReader) -> Client:
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")  # never asked: the reader answers
    client = Client(api_client=k8s_client.ApiClient(cfg), namespace="team-a", plugins=manager)
    client.reader = reader  # type: ignore[assignment]
    return client


def test_wait_ends_at_its_timeout_naming_the_job_its_phase_and_why(
    manager: PluginManager,
) -> None:
    reader = ScriptedReader(PREEMPTED)
    with pytest.raises(WaitTimeout) as timed_out:
        client_of(manager, reader).wait("gj/mlp", timeout=0.05, interval=0.01)
    assert str(timed_out.value) == (
        "GenericJob/mlp is still Queued after 0.05s (waiting for Succeeded): Preempted"
    )
    assert timed_out.value.job.status.phase == "Queued" and reader.reads >= 2


def test_wait_with_no_phase_is_for_success_and_a_failure_raises(manager: PluginManager) -> None:
    client = client_of(manager, ScriptedReader({"phase": "Running"}, FAILED))
    with pytest.raises(
        JobEnded, match=r"^GenericJob/mlp Failed: ReplicaFailed, while waiting"
    ) as e:
        client.wait("gj/mlp", interval=0)
    assert e.value.job.status.phase == "Failed"
    # Either final phase, when asked for both.
    both = client_of(manager, ScriptedReader(FAILED)).wait("gj/mlp", phase=("Succeeded", "Failed"))
    assert both.status.phase == "Failed"


def test_wait_calls_back_when_the_reason_changes_too(manager: PluginManager) -> None:
    statuses: list[dict[str, Any]] = [
        {"phase": "Running"},
        PREEMPTED,
        PREEMPTED,
        {"phase": "Queued", "reason": "Queued"},
        {"phase": "Running"},
        {"phase": "Succeeded"},
    ]
    seen: list[tuple[str | None, str | None]] = []
    client = client_of(manager, ScriptedReader(*statuses))
    client.wait(
        "gj/mlp", interval=0, callback=lambda j: seen.append((j.status.phase, j.status.reason))
    )
    assert seen == [
        ("Running", None),
        ("Queued", "Preempted"),
        ("Queued", "Queued"),
        ("Running", None),
        ("Succeeded", None),
    ]


def test_following_a_replica_with_no_pod_ends_naming_the_job_and_its_phase(
    manager: PluginManager,
) -> None:
    client = client_of(manager, ScriptedReader(WITH_REPLICAS))
    ref = client.ref("gj/mlp")
    logs = JobLogs(client.reader, ref, timeout=0.05)
    with pytest.raises(WaitTimeout) as timed_out:
        list(logs.follow("worker-0", "mlp-worker-0"))
    assert str(timed_out.value) == (
        "GenericJob/mlp in namespace team-a: no log of worker-0 to follow for 0.05s; the job is"
        " Queued (Preempted)"
    )


def test_following_a_container_that_never_starts_says_why(manager: PluginManager) -> None:
    pod = {
        "metadata": {"name": "mlp-worker-0", "uid": "pod-uid"},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "trainer", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
            ],
        },
    }
    running = {**WITH_REPLICAS, "phase": "Running", "reason": None}
    client = client_of(manager, ScriptedReader(running, pod=pod))
    with pytest.raises(WaitTimeout) as timed_out:
        list(client.logs("gj/mlp", follow=True, timeout=0.05, progress_bar=False))
    assert str(timed_out.value) == (
        "GenericJob/mlp in namespace team-a: no log of worker-0 to follow for 0.05s; the job is"
        " Running; its pod mlp-worker-0 is waiting (ImagePullBackOff)"
    )


def test_a_job_with_no_replica_yet_is_waited_for_until_the_timeout(
    manager: PluginManager,
) -> None:
    client = client_of(manager, ScriptedReader(PREEMPTED))
    for every in (False, True):
        with pytest.raises(WaitTimeout, match=r"^GenericJob/mlp in namespace team-a: no replica"):
            list(client.logs("gj/mlp", follow=True, all_replicas=every, timeout=0.05))


def test_following_every_replica_ends_once_none_has_a_log(manager: PluginManager) -> None:
    client = client_of(manager, ScriptedReader(WITH_REPLICAS))
    lines = client.logs("gj/mlp", follow=True, all_replicas=True, timeout=0.05)
    said = []
    with pytest.raises(WaitTimeout, match=r"no log of worker-0 to follow for 0\.05s"):
        said.extend(lines)
    # Said as a note first, where the lines of the other replicas (none here) would go on.
    assert [(line.replica, line.note) for line in said] == [("worker-0", True)]
    assert said[0].text.startswith("--- GenericJob/mlp in namespace team-a: no log of worker-0")


def test_a_replica_that_ended_waits_for_the_job_without_a_limit(manager: PluginManager) -> None:
    """Its log is whole: like a silent program's open log, it is no wait for a pod."""
    pod = {"metadata": {"name": "mlp-worker-0", "uid": "pod-uid"}, "status": {"phase": "Succeeded"}}
    running = {**WITH_REPLICAS, "phase": "Running", "reason": None}
    ended = {**running, "phase": "Succeeded"}
    reader = ScriptedReader(*[running] * 12, ended, pod=pod, log=["2026-11-28T11:00:00Z done"])
    logs = JobLogs(reader, client_of(manager, reader).ref("gj/mlp"), timeout=0.02)
    said = [line.text for line in logs.follow("worker-0", "mlp-worker-0")]
    assert said == ["done"] and reader.reads == 13  # the job read until it Succeeded
