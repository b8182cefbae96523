"""Queues, quotas and preemption with Kueue, end to end on KWOK (4 nodes x 8 GPUs) with Kueue
v0.17.0 beside the control plane (hack/cluster/kueue, started with the KWOK cluster).

Each test has a ClusterQueue of its own, 16 GPUs, that admits only from its namespace, a
LocalQueue `team` there, and a ResourceFlavor whose node label every KWOK node has and whose
toleration the pods must get. Jobs are GenericJobs of 2 pods x 8 GPUs (16 GPUs: the whole
quota), labelled `kueue.x-k8s.io/queue-name: team`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.client import Client
from t9kjobs.kube.transport import ApiError
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests import waiting
from tests.e2e.jobs import Kube, Recorder, phase, replica, until
from tests.operators import OperatorProcess, install_crds, operator_process

GPU = "nvidia.com/gpu"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOLERATION = {"key": "t9kjobs-test/kueue", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def kube(cluster: Any, namespace: str) -> Kube:
    served = Kube(cluster, namespace)
    try:
        resources = served.http.request("GET", KUEUE).get("resources") or []
    except ApiError as exc:
        resources = []
        assert exc.status == 404, exc
    assert any(r["name"] == "workloads" for r in resources), (
        "the cluster does not serve Kueue's kueue.x-k8s.io/v1beta2 (a KWOK cluster started"
        " without T9KJOBS_KUEUE=1): make cluster-down, and let the tests start it"
    )
    install_crds(cluster)
    return served


def _create(kube: Kube, path: str, doc: Any) -> None:
    kube.http.request("POST", path, body=doc)


def _delete(kube: Kube, path: str) -> None:
    try:
        kube.http.request("DELETE", path)
    except ApiError as exc:
        assert exc.status == 404, exc


@pytest.fixture
def queue(kube: Kube, namespace: str) -> Iterator[str]:
    """A ClusterQueue of 16 GPUs for this namespace alone (preempting lower priorities), its
    ResourceFlavor and a LocalQueue `team`; the WorkloadPriorityClasses `<ns>-low` and
    `<ns>-high`. The cluster-wide ones are deleted afterwards."""
    flavor, cq = f"{namespace}-gpu", namespace
    cluster_wide = [
        (
            "resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": {"nodeLabels": {"type": "kwok"}, "tolerations": [TOLERATION]},
            },
        ),
        (
            "clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", GPU],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "64"},
                                        {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": GPU, "nominalQuota": "16"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        *(
            (
                "workloadpriorityclasses",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": f"{namespace}-{name}"},
                    "value": value,
                },
            )
            for name, value in (("low", 10), ("high", 1000))
        ),
    ]
    try:
        for plural, doc in cluster_wide:
            _create(kube, f"{KUEUE}/{plural}", doc)
        local = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        }
        _create(kube, f"{KUEUE}/namespaces/{namespace}/localqueues", local)
        yield "team"
    finally:
        for plural, doc in reversed(cluster_wide):
            _delete(kube, f"{KUEUE}/{plural}/{doc['metadata']['name']}")


@pytest.fixture
def namespaced_operator(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator of the test's namespace alone, not the module's (tests/conftest.py): other
    tests here start operators of their own, with other flags, in their namespaces, and a
    module-wide one would reconcile their jobs too."""
    op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "operator.log")
    op.wait_ready()
    try:
        yield op
    finally:
        op.stop()


def _job(name: str, queue: str | None, seconds: float | None = 3, **labels: str) -> Any:
    spec = replica("worker", 2, exit_code=None if seconds is None else 0, seconds=seconds or 1)
    spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: 8}}
    meta: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if queue is not None:
        meta["labels"][QUEUE_LABEL] = queue
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": meta,
        "spec": {"replicaSpecs": [spec]},
    }


def _owner(obj: Any) -> str:
    return str(obj["metadata"]["labels"]["tensorstack.dev/owner-name"])


def _workloads(kube: Kube) -> dict[str, Any]:
    items = kube.http.request("GET", f"{KUEUE}/namespaces/{kube.ns}/workloads")["items"]
    return {w["metadata"]["name"]: w for w in items}


def _condition(obj: Any, type_: str) -> Any:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return None


def _live_pods(pods: list[Any]) -> dict[str, set[str]]:
    """The jobs that have pods holding their GPUs (not ended, not being deleted), and those."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        if not pod["metadata"].get("deletionTimestamp") and phase(pod) in (
            "",
            "Pending",
            "Running",
        ):
            out.setdefault(_owner(pod), set()).add(pod["metadata"]["name"])
    return out


def _running(kube: Kube, job: str) -> dict[str, Any]:
    """The job's 2 pods once both run (those of other jobs may be there, ended)."""

    def both() -> dict[str, Any] | None:
        pods = {n: p for n, p in kube.pods().items() if _owner(p) == job}
        ok = len(pods) == 2 and all(
            phase(p) == "Running" and not p["metadata"].get("deletionTimestamp")
            for p in pods.values()
        )
        return pods if ok else None

    def said() -> str:
        workload = _workloads(kube).get(f"genericjob-{job}", {})
        pods = {
            n: (phase(p), p["metadata"].get("deletionTimestamp")) for n, p in kube.pods().items()
        }
        return (
            f"the pods of {job} running; pods {pods}; job"
            f" {kube.status({**_job(job, None), 'kind': 'GenericJob'})};"
            f" Workload {workload.get('status')}"
        )

    return waiting.until(both, 120, interval=0.25, what=said, retry=(ApiError, OSError))


def _states(recorder: Recorder) -> list[list[Any]]:
    """The namespace's pods after each change the watch saw, in order."""
    pods: dict[str, Any] = {}
    out: list[list[Any]] = []
    for kind, pod in recorder.snapshot():
        if kind == "DELETED":
            pods.pop(pod["metadata"]["name"], None)
        else:
            pods[pod["metadata"]["name"]] = pod
        out.append(list(pods.values()))
    return out


@pytest.mark.usefixtures("namespaced_operator")
def test_three_jobs_of_the_whole_quota_run_one_at_a_time(
    cluster: Any, kube: Kube, queue: str, namespace: str
) -> None:
    jobs = [_job(f"job-{i}", queue) for i in range(3)]
    with kube.record_pods() as recorder:
        for job in jobs:
            kube.create(job)
        # One is admitted and runs; the other two wait with no pod, and say where and why.
        until(lambda: len(_live_pods(list(kube.pods().values()))) == 1, "one job's pods")

        # A job that waits for quota: not the one Kueue reserved it for, which may still be
        # Queued for a moment ("quota reserved ...; waiting for admission checks").
        def reserved() -> set[str]:
            return {
                name.removeprefix("genericjob-")
                for name, w in _workloads(kube).items()
                if (_condition(w, "QuotaReserved") or {}).get("status") == "True"
            }

        waiting = until(
            lambda: (
                [
                    j
                    for j in jobs
                    if (s := kube.status(j)).get("phase") == "Queued"
                    and s["reason"]
                    and j["metadata"]["name"] not in reserved()
                ]
                or None
            ),
            "a job Queued",
        )
        status = kube.status(waiting[0])
        admitted = next(c for c in status["conditions"] if c["type"] == "Admitted")
        assert admitted["status"] == "False" and admitted["reason"] == "Queued"
        assert admitted["message"].startswith(f"waiting in LocalQueue {queue}"), admitted
        row = cluster.kubectl(
            "-n", namespace, "get", "genericjob", waiting[0]["metadata"]["name"], "--no-headers"
        ).stdout.split()
        assert row[1] == "Queued" and "Queued" in row[2:], row
        described = cluster.kubectl(
            "-n", namespace, "get", "genericjob", waiting[0]["metadata"]["name"], "-o", "yaml"
        ).stdout
        assert f"waiting in LocalQueue {queue}" in described
        for job in jobs:
            kube.wait_phase(job, "Succeeded", timeout=180)
    # At no moment did pods of two jobs exist: the quota is the whole 16 GPUs.
    for pods in _states(recorder):
        assert len(_live_pods(pods)) <= 1, sorted(_live_pods(pods))
    created = recorder.created()
    assert len(created) == 6, [p["metadata"]["name"] for p in created]
    # Admitted pods carry the flavor's node labels and toleration, and join their gang.
    for pod in created:
        assert pod["spec"]["nodeSelector"]["type"] == "kwok"
        assert TOLERATION in pod["spec"]["tolerations"]
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": _owner(pod)}
    # Each Workload is declared Finished (the reconcile after the job's last status write).
    workloads = until(
        lambda: (
            (w := _workloads(kube))
            and all((_condition(o, "Finished") or {}).get("status") == "True" for o in w.values())
            and w
        ),
        "every Workload Finished",
    )
    assert sorted(workloads) == [f"genericjob-job-{i}" for i in range(3)]
    for workload in workloads.values():
        assert _condition(workload, "Finished")["reason"] == "Succeeded"
        assert workload["spec"]["queueName"] == queue
        assert workload["spec"]["podSets"][0]["count"] == 2
        assert workload["metadata"]["ownerReferences"][0]["controller"] is True


@pytest.mark.usefixtures("namespaced_operator")
def test_a_high_priority_job_preempts_a_low_one_which_resumes_and_succeeds(
    kube: Kube, queue: str, namespace: str
) -> None:
    low = _job("low", queue, seconds=None, **{PRIORITY_LABEL: f"{namespace}-low"})
    high = _job("high", queue, seconds=3, **{PRIORITY_LABEL: f"{namespace}-high"})
    kube.create(low)
    first = _running(kube, "low")
    with kube.record_job(low) as phases, kube.record_pods() as recorder:
        kube.create(high)
        # The low job loses its pods and waits again, saying why; the high one runs.
        status = until(
            lambda: ((s := kube.status(low)).get("reason") == "Preempted" and s) or None,
            "low preempted",
        )
        assert status["phase"] == "Queued"
        kube.wait_phase(high, "Succeeded", timeout=120)
        # Readmitted, it runs again, and ends.
        pods = _running(kube, "low")
        assert {p["metadata"]["uid"] for p in pods.values()}.isdisjoint(
            p["metadata"]["uid"] for p in first.values()
        )
        for name in pods:
            kube.annotate(name, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "1"})
        status = kube.wait_phase(low, "Succeeded", timeout=120)
        # The watch may lag the read that saw the end: the test waits for it to see it too.
        until(lambda: phases.phases()[-1] == "Succeeded", "the watch seeing low Succeeded")
    seen = phases.phases()
    assert "Queued" in seen[1:] and seen[-1] == "Succeeded", seen
    # An eviction is no failure: no restart counted, no backoff spent.
    assert [t["restartCount"] for t in status["tasks"]] == [0]
    assert all(r["restartCount"] == 0 for t in status["tasks"] for r in t["replicas"])
    assert status.get("backoffCount", 0) == 0
    assert not [c for c in status["conditions"] if c["type"] == "Failed"]
    reasons = [e["reason"] for e in kube.events(low)]
    assert "Preempted" in reasons and "Restarting" not in reasons, reasons
    # The high job's pods never ran beside the low job's.
    for pods_now in _states(recorder):
        assert len(_live_pods(pods_now)) <= 1, sorted(_live_pods(pods_now))
    workload = until(
        lambda: (
            (w := _workloads(kube)["genericjob-low"])
            and (_condition(w, "Finished") or {}).get("status") == "True"
            and w
        ),
        "the low job's Workload Finished",
    )
    assert workload["spec"]["priority"] == 10
    assert workload["spec"]["priorityClassRef"]["name"] == f"{namespace}-low"


def _folded(phases: list[str | None]) -> list[str | None]:
    """The phases in the order seen, each run of one phase once."""
    return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]


@pytest.mark.usefixtures("namespaced_operator")
def test_the_client_says_queued_while_a_preempted_job_waits_and_running_once_readmitted(
    cluster: Any,
    kube: Kube,
    queue: str,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What `t9kjobs.client` reports of a job Kueue preempts and admits again (kubeflow/sdk#803
    is a client that said the wrong phase for the whole of a resumed run): one `wait` for the
    end spans it all without raising, its callback and its bar seeing Running, Queued
    (Preempted), Running, Succeeded; `get` and the summary say Queued (Preempted) while it
    waits, and nothing of the preemption once it runs again."""
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    low = _job("steady", queue, seconds=None, **{PRIORITY_LABEL: f"{namespace}-low"})
    high = _job("urgent", queue, seconds=3, **{PRIORITY_LABEL: f"{namespace}-high"})
    client.create(low)
    client.wait("gj/steady", phase="Running", timeout=120, interval=0.25)
    seen: list[tuple[str | None, str | None]] = []
    ended: dict[str, Any] = {}

    def wait_for_the_end() -> None:
        try:
            ended["job"] = client.wait(
                "gj/steady",
                timeout=300,
                interval=0.25,
                callback=lambda j: seen.append((j.status.phase, j.status.reason)),
                progress_bar=True,
            )
        except Exception as exc:  # the test's thread says it
            ended["error"] = exc

    waiter = threading.Thread(target=wait_for_the_end, daemon=True)
    waiter.start()
    client.create(high)
    queued = client.wait("gj/steady", phase="Queued", timeout=120, interval=0.25)
    assert queued.status.reason == "Preempted", queued.status
    admitted = queued.status.condition("Admitted")
    assert admitted is not None and (admitted.status, admitted.reason) == ("False", "Preempted")
    assert client.get("gj/steady").status.phase == "Queued"
    assert "Queued (Preempted)" in client.summary("gj/steady")._repr_html_()

    def said_preempted() -> list[str] | None:
        # The Event is posted after the status is written: it may come a moment later.
        reasons = [e.reason for e in client.summary("gj/steady").events]
        return reasons if "Preempted" in reasons else None

    until(said_preempted, "the summary's Events saying Preempted")
    assert client.wait("gj/urgent", timeout=120, interval=0.25).status.phase == "Succeeded"
    # Readmitted: Running, and nothing left of the preemption in what the client says.
    running = client.wait("gj/steady", phase="Running", timeout=120, interval=0.25)
    assert running.status.reason is None, running.status
    readmitted, runs = running.status.condition("Admitted"), running.status.condition("Running")
    assert readmitted is not None and readmitted.status == "True", running.status.conditions
    assert runs is not None and runs.status == "True", running.status.conditions
    assert "Queued" not in client.summary("gj/steady")._repr_html_().split("Conditions")[0]
    for name in _running(kube, "steady"):
        kube.annotate(name, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "1"})
    waiter.join(300)
    assert not waiter.is_alive() and "error" not in ended, ended
    assert ended["job"].status.phase == "Succeeded"
    phases = _folded([phase for phase, _ in seen if phase != "Pending"])
    assert phases == ["Running", "Queued", "Running", "Succeeded"], seen
    assert ("Queued", "Preempted") in seen, seen
    # The bar said the same, frame after frame, on standard error.
    frames = [f.strip() for f in capsys.readouterr().err.split("\r") if f.strip()]
    print("\n".join(frames))  # the bar as a terminal showed it, for the log
    said = _folded([f.split(":")[0] for f in frames if f.startswith("GenericJob/steady ")])
    said = [s.removeprefix("GenericJob/steady ") for s in said if not s.endswith("Pending")]
    # Queued (Preempted), then Queued alone once Kueue took the Workload back in its queue.
    assert said[:2] == ["Running", "Queued (Preempted)"], frames
    assert said[-2:] == ["Running", "Succeeded"], frames
    assert all(s.startswith("Queued") for s in said[2:-2]), frames


@pytest.mark.usefixtures("namespaced_operator")
def test_a_job_whose_rule_gives_up_on_preemption_fails_and_gives_its_quota_back(
    kube: Kube, queue: str, namespace: str
) -> None:
    """`onReasons: [PreemptedByKueue], action: FailJob` (docs/lifecycle.md): preempted, the job
    fails instead of waiting in its queue again; its Workload is finished, the quota free."""
    low = _job("quitter", queue, seconds=None, **{PRIORITY_LABEL: f"{namespace}-low"})
    low["spec"]["recoveryPolicy"] = {
        "rules": [{"name": "give-up", "onReasons": ["PreemptedByKueue"], "action": "FailJob"}]
    }
    high = _job("high", queue, seconds=3, **{PRIORITY_LABEL: f"{namespace}-high"})
    kube.create(low)
    _running(kube, "quitter")
    kube.create(high)
    status = kube.wait_phase(low, "Failed")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "RecoveryPolicy", failed
    assert failed["message"].startswith("evicted by Kueue (Preempted"), failed
    assert failed["message"].endswith("rule give-up (spec.recoveryPolicy.rules[0]) fails the job")
    kube.wait_phase(high, "Succeeded", timeout=120)
    until(
        lambda: (
            (_condition(_workloads(kube)["genericjob-quitter"], "Finished") or {}).get("status")
            == "True"
        ),
        "the quitter's Workload Finished",
    )


@pytest.mark.usefixtures("namespaced_operator", "queue")
def test_a_job_in_a_queue_that_does_not_exist_says_so_and_leaves_nothing_when_deleted(
    cluster: Any, kube: Kube, namespace: str
) -> None:
    job = _job("lost", "nowhere")
    kube.create(job)
    status = until(
        lambda: ((s := kube.status(job)).get("reason") == "Inadmissible" and s) or None,
        "the job saying its queue does not exist",
    )
    assert status["phase"] == "Queued"
    admitted = next(c for c in status["conditions"] if c["type"] == "Admitted")
    assert admitted["message"] == "LocalQueue nowhere: LocalQueue nowhere doesn't exist"
    assert not kube.pods()
    assert list(_workloads(kube)) == ["genericjob-lost"]
    cluster.kubectl("-n", namespace, "delete", "genericjob", "lost", "--wait=true")
    until(lambda: not _workloads(kube), "the Workload gone with its job")


@pytest.mark.usefixtures("namespaced_operator")
def test_deleting_an_admitted_job_leaves_no_workload(
    cluster: Any, kube: Kube, queue: str, namespace: str
) -> None:
    job = _job("running", queue, seconds=None)
    kube.create(job)
    _running(kube, "running")
    assert _condition(_workloads(kube)["genericjob-running"], "Admitted")["status"] == "True"
    cluster.kubectl("-n", namespace, "delete", "genericjob", "running", "--wait=true")
    until(lambda: not _workloads(kube) and not kube.pods(), "the Workload and pods gone")


@pytest.mark.usefixtures("namespaced_operator", "queue")
def test_t9k_scheduler_queue_and_priority_name_a_kueue_queue_where_the_t9k_scheduler_is_absent(
    kube: Kube,
) -> None:
    job = _job("t9k", None)
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "team", "priority": 50}}
    kube.create(job)
    kube.wait_phase(job, "Succeeded", timeout=120)
    workload = _workloads(kube)["genericjob-t9k"]
    assert workload["spec"]["queueName"] == "team"
    assert workload["spec"]["priority"] == 50
    assert "priorityClassRef" not in workload["spec"]


def test_sigkilled_operator_while_admitting_and_evicting_never_runs_a_pod_unadmitted(
    cluster: Any, kube: Kube, queue: str, namespace: str, tmp_path: Path
) -> None:
    """The operator is SIGKILLed while jobs are admitted and while one is evicted, and started
    again each time: no job ever has two Workloads, and no pod is created while its job's
    Workload is not admitted (pods and Workloads are ordered by the resourceVersions of one
    etcd)."""
    wl_path = f"{KUEUE}/namespaces/{namespace}/workloads"
    low = _job("low", queue, seconds=None, **{PRIORITY_LABEL: f"{namespace}-low"})
    high = _job("high", queue, seconds=4, **{PRIORITY_LABEL: f"{namespace}-high"})
    others = [_job(f"next-{i}", queue, seconds=2) for i in range(2)]
    op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "op-0.log")
    op.wait_ready()
    with kube.record_pods() as pods, Recorder(kube.http, wl_path) as workloads:
        try:
            kube.create(low)
            op.kill()  # while it admits the low job (the Workload just made, or not yet)
            op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "op-1.log")
            op.wait_ready()
            _running(kube, "low")
            kube.create(high)
            until(
                lambda: (
                    _condition(_workloads(kube).get("genericjob-low", {}), "Evicted")
                    and _condition(_workloads(kube)["genericjob-low"], "Evicted")["status"]
                    == "True"
                ),
                "the low job's Workload evicted",
            )
            op.kill()  # while it evicts the low job: its pods deleted or not, quota held
            for job in others:
                kube.create(job)
            op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "op-2.log")
            op.wait_ready()
            kube.wait_phase(high, "Succeeded", timeout=120)
            _running(kube, "low")
            op.kill()  # while the low job runs again, the others queued behind it
            for name in ("low-worker-0", "low-worker-1"):
                kube.annotate(name, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "1"})
            op = operator_process(cluster, "--namespace", namespace, log=tmp_path / "op-3.log")
            op.wait_ready()
            for job in [low, *others]:
                kube.wait_phase(job, "Succeeded", timeout=180)
        finally:
            op.stop()
    # One Workload per job, ever.
    made = [w for kind, w in workloads.snapshot() if kind == "ADDED"]
    assert sorted(w["metadata"]["name"] for w in made) == sorted(
        f"genericjob-{j['metadata']['name']}" for j in [low, high, *others]
    )
    # No pod created while its job's Workload was not admitted, or evicted.
    timeline = sorted(
        [(int(o["metadata"]["resourceVersion"]), "workload", k, o) for k, o in workloads.snapshot()]
        + [(int(o["metadata"]["resourceVersion"]), "pod", k, o) for k, o in pods.snapshot()]
    )
    state: dict[str, Any] = {}
    for _, what, kind, obj in timeline:
        if what == "workload":
            state[obj["metadata"]["name"]] = None if kind == "DELETED" else obj
            continue
        if kind != "ADDED":
            continue
        owner = f"genericjob-{_owner(obj)}"
        workload = state.get(owner)
        assert workload is not None, f"pod {obj['metadata']['name']} created with no Workload"
        admitted = _condition(workload, "Admitted")
        evicted = _condition(workload, "Evicted")
        assert admitted is not None and admitted["status"] == "True", (
            f"pod {obj['metadata']['name']} created while {owner} was not admitted:"
            f" {workload.get('status')}"
        )
        assert evicted is None or evicted["status"] != "True", (
            f"pod {obj['metadata']['name']} created while {owner} was evicted"
        )
    assert len([p for k, p in pods.snapshot() if k == "ADDED"]) == 2 * (3 + len(others))


# -- The queue cannot be skipped (docs/scheduling.md) ----------------------------------------


def _queue_operator(cluster: Any, namespace: str, log: Path, *extra: str) -> OperatorProcess:
    op = operator_process(cluster, "--namespace", namespace, *extra, log=log)
    op.wait_ready()
    return op


def _reason(kube: Kube, job: Any, reason: str) -> Any:
    return until(
        lambda: ((s := kube.status(job)).get("reason") == reason and s) or None,
        f"{job['metadata']['name']} {reason}",
    )


def _warned(kube: Kube, job: Any, reason: str) -> Any:
    return until(
        lambda: next(
            (e for e in kube.events(job) if e["reason"] == reason and e["type"] == "Warning"),
            None,
        ),
        f"a Warning Event {reason} on {job['metadata']['name']}",
    )


def test_a_namespace_that_requires_a_queue_queues_a_job_without_one_or_refuses_it(
    cluster: Any, kube: Kube, queue: str, namespace: str, tmp_path: Path
) -> None:
    """--kueue-require-queue NS --kueue-default-queue team: a job without the label waits in
    LocalQueue team and runs once admitted. With a default LocalQueue that does not exist, such
    a job is refused (no pod, QueueRequired, a Warning naming the label) until it is labelled."""
    op = _queue_operator(
        cluster,
        namespace,
        tmp_path / "op-default.log",
        f"--kueue-require-queue={namespace}",
        f"--kueue-default-queue={queue}",
    )
    try:
        defaulted = _job("defaulted", None)
        kube.create(defaulted)
        kube.wait_phase(defaulted, "Succeeded", timeout=120)
        assert _workloads(kube)["genericjob-defaulted"]["spec"]["queueName"] == queue
    finally:
        op.stop()
    op = _queue_operator(
        cluster,
        namespace,
        tmp_path / "op-refused.log",
        f"--kueue-require-queue={namespace}",
        "--kueue-default-queue=missing",
    )
    try:
        refused = _job("refused", None)
        kube.create(refused)
        status = _reason(kube, refused, "QueueRequired")
        assert status["phase"] == "Queued"
        event = _warned(kube, refused, "QueueRequired")
        assert "kueue.x-k8s.io/queue-name" in event["message"]
        assert not [p for p in kube.pods() if p.startswith("refused-")]
        assert "genericjob-refused" not in _workloads(kube)
        kube.patch(refused, {"metadata": {"labels": {QUEUE_LABEL: queue}}})
        kube.wait_phase(refused, "Succeeded", timeout=120)
    finally:
        op.stop()


@pytest.mark.usefixtures("namespaced_operator", "queue")
def test_removing_the_queue_label_of_a_waiting_job_runs_no_pod(kube: Kube) -> None:
    """Without the admission policy (a bare operator): the label removed from a job that waits
    in a LocalQueue that does not exist leaves it waiting there, with its Workload and no pod,
    and a Warning QueueLabelIgnored."""
    job = _job("stuck", "nowhere")
    kube.create(job)
    _reason(kube, job, "Inadmissible")
    kube.patch(job, {"metadata": {"labels": {QUEUE_LABEL: None}}})
    _warned(kube, job, "QueueLabelIgnored")
    waiting.throughout(lambda: not kube.pods(), 5, interval=0.5, what="no pod of the job")
    workload = _workloads(kube)["genericjob-stuck"]
    assert workload["spec"]["queueName"] == "nowhere"
    assert not workload["metadata"].get("deletionTimestamp")
    assert kube.status(job)["phase"] == "Queued"


@pytest.mark.usefixtures("namespaced_operator")
def test_a_finished_job_holds_its_quota_while_a_worker_runs_on(kube: Kube, queue: str) -> None:
    """successRules on the master, cleanUpPolicy None (the default): the job succeeds while
    its worker runs on, holding 8 GPUs. Its Workload is not Finished until the worker ends."""
    master = replica("master", 1, exit_code=0, seconds=2)
    worker = replica("worker", 1)  # runs until told otherwise
    for spec in (master, worker):
        spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: 8}}
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "leftover", "labels": {QUEUE_LABEL: queue}},
        "spec": {"successRules": [{"master": [0]}], "replicaSpecs": [master, worker]},
    }
    kube.create(job)
    kube.wait_phase(job, "Succeeded", timeout=120)

    def unfinished() -> bool:
        workload = _workloads(kube)["genericjob-leftover"]
        return (_condition(workload, "Finished") or {}).get("status") != "True"

    # A few reconciles after the verdict: the quota is held while the worker runs.
    waiting.throughout(unfinished, 3, interval=0.5, what="the Workload not Finished")
    assert phase(kube.pods()["leftover-worker-0"]) == "Running"
    kube.annotate("leftover-worker-0", {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "0"})
    until(
        lambda: (
            (_condition(_workloads(kube)["genericjob-leftover"], "Finished") or {}).get("status")
            == "True"
        ),
        "the Workload Finished once the worker ended",
    )


def test_the_charts_admission_policy_locks_the_queue_label_until_the_job_finishes(
    cluster: Any, kube: Kube, queue: str, namespace: str, tmp_path: Path
) -> None:
    """The chart's ValidatingAdmissionPolicy (kueue.enabled), applied alone: the label of an
    unfinished job can be added but neither changed nor removed; once the job has finished,
    it can."""
    from tests.unit.deploy.chart import install_tool, render_chart

    values = {"watchNamespaces": [namespace], "kueue": {"enabled": True}}
    objects = [
        o
        for o in render_chart(install_tool("helm"), values, namespace=namespace)
        if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert len(objects) == 2
    # `first` waits in the queue from its creation; `probe` is created without a label. No
    # operator yet: the label is added before any pod of `probe` could run outside the queue.
    first, probe = _job("first", queue, seconds=None), _job("probe", None, seconds=None)
    kube.create(first)
    kube.create(probe)
    op = None
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))

        def refused(job: Any, labels: dict[str, Any]) -> ApiError | None:
            try:
                kube.http.request(
                    "PATCH",
                    kube.path(job),
                    query={"dryRun": "All"},
                    body={"metadata": {"labels": labels}},
                    content_type="application/merge-patch+json",
                )
            except ApiError as exc:
                return exc
            return None

        # The policy takes effect within a moment of its creation.
        error = until(lambda: refused(first, {QUEUE_LABEL: "elsewhere"}), "the change refused")
        assert error.status in (400, 403, 422), error
        assert "kueue.x-k8s.io/queue-name" in str(error.body) and "changed" in str(error.body)
        error = refused(first, {QUEUE_LABEL: None})
        assert error is not None and "removed" in str(error.body), error
        # Adding the label is free, under the policy.
        kube.patch(probe, {"metadata": {"labels": {QUEUE_LABEL: queue}}})
        assert refused(probe, {QUEUE_LABEL: None}) is not None
        kube.http.request("DELETE", kube.path(first))
        # Once finished, the label is the user's again.
        op = _queue_operator(cluster, namespace, tmp_path / "op.log")
        _running(kube, "probe")
        for name in ("probe-worker-0", "probe-worker-1"):
            kube.annotate(name, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "0"})
        kube.wait_phase(probe, "Succeeded", timeout=120)
        assert refused(probe, {QUEUE_LABEL: None}) is None
    finally:
        if op is not None:
            op.stop()
        for o in objects:
            cluster.kubectl("delete", o["kind"], o["metadata"]["name"], check=False)


# -- spec.managedBy and prebuilt Workloads (docs/scheduling.md, "Multi-cluster") --------------

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"


def _managed(name: str, by: str, queue: str | None) -> Any:
    job = _job(name, queue)
    job["spec"]["managedBy"] = by
    return job


def _refused_patch(kube: Kube, job: Any, patch: Any) -> ApiError:
    try:
        kube.patch(job, patch)
    except ApiError as exc:
        return exc
    raise AssertionError(f"{job['metadata']['name']}: {patch} was admitted")


def test_managed_by_is_validated_and_immutable_at_admission(kube: Kube) -> None:
    """As a Kubernetes Job's: a domain-prefixed path, and neither set, changed nor removed
    once the job exists (the CRD's transition rule)."""
    with pytest.raises(ApiError) as bad:
        kube.create(_managed("bad", "multikueue", None))
    assert bad.value.status == 422 and "spec.managedBy" in str(bad.value.body), bad.value
    plain, managed = _job("plain", None), _managed("managed", "example.com/other", None)
    kube.create(plain)
    kube.create(managed)
    for job, patch in (
        (plain, {"spec": {"managedBy": MULTIKUEUE}}),
        (managed, {"spec": {"managedBy": MULTIKUEUE}}),
        (managed, {"spec": {"managedBy": None}}),
    ):
        error = _refused_patch(kube, job, patch)
        assert error.status == 422, error
        assert "spec.managedBy is immutable" in str(error.body), error.body
    assert kube.get(managed)["spec"]["managedBy"] == "example.com/other"


@pytest.mark.usefixtures("namespaced_operator")
def test_a_job_another_controller_manages_gets_nothing_but_multikueues_workload(
    kube: Kube, queue: str
) -> None:
    """managedBy another controller: no Workload, no pod, no status. MultiKueue's: the
    Workload (what MultiKueue dispatches to a worker cluster) and, while no worker holds it,
    its `Queued` status (`t9kjobs.planner.elsewhere`); admitted here (this ClusterQueue has no
    MultiKueue check, so no worker ever will), it still gets no pod."""
    other = _managed("other", "example.com/other", queue)
    dispatched = _managed("dispatched", MULTIKUEUE, queue)
    kube.create(other)
    kube.create(dispatched)
    workload = until(
        lambda: (
            (w := _workloads(kube).get("genericjob-dispatched"))
            and (_condition(w, "Admitted") or {}).get("status") == "True"
            and w
        ),
        "the MultiKueue job's Workload admitted",
    )
    assert workload["metadata"]["ownerReferences"][0]["name"] == "dispatched"
    assert workload["spec"]["podSets"][0]["count"] == 2
    until(lambda: kube.status(dispatched).get("phase") == "Queued", "the MultiKueue job Queued")

    def untouched() -> bool:
        return (
            not kube.pods()
            and "genericjob-other" not in _workloads(kube)
            and kube.status(other) == {}
            and kube.status(dispatched).get("phase") == "Queued"
            and not kube.events(other)
            and not kube.events(dispatched)
        )

    waiting.throughout(untouched, 4, interval=0.5, what="nothing made for either job")
    services = kube.http.request("GET", f"/api/v1/namespaces/{kube.ns}/services")["items"]
    assert services == []


def _prebuilt(kube: Kube, name: str, queue: str, count: int) -> None:
    """A Workload as MultiKueue copies it to a worker cluster: no owner, 8 GPUs a pod."""
    container = {"name": "c", "image": "x", "resources": {"requests": {GPU: "8"}}}
    _create(
        kube,
        f"{KUEUE}/namespaces/{kube.ns}/workloads",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": kube.ns},
            "spec": {
                "queueName": queue,
                "podSets": [
                    {
                        "name": "worker",
                        "count": count,
                        "template": {"spec": {"containers": [container]}},
                    }
                ],
            },
        },
    )


@pytest.mark.usefixtures("namespaced_operator")
def test_a_job_adopts_its_prebuilt_workload_and_says_when_it_does_not_match(
    kube: Kube, queue: str
) -> None:
    """Labelled kueue.x-k8s.io/prebuilt-workload-name: it waits for that Workload, adopts it
    when its podSets match (its controller ownerReference), runs once Kueue admits it, on the
    flavor, and finishes it; a Workload of another count is said, and left alone."""
    wrong = _job("wrong", queue, **{PREBUILT_LABEL: "made-wrong"})
    _prebuilt(kube, "made-wrong", queue, count=3)
    kube.create(wrong)
    status = _reason(kube, wrong, "PrebuiltWorkloadMismatch")
    admitted = next(c for c in status["conditions"] if c["type"] == "Admitted")
    assert "podSet worker counts 3 pod(s), the job has 2" in admitted["message"], admitted
    event = _warned(kube, wrong, "PrebuiltWorkloadMismatch")
    assert "made-wrong" in event["message"]
    assert not _workloads(kube)["made-wrong"]["metadata"].get("ownerReferences")

    job = _job("adopter", queue, **{PREBUILT_LABEL: "made-for-it"})
    kube.create(job)
    _reason(kube, job, "PrebuiltWorkloadMissing")
    _prebuilt(kube, "made-for-it", queue, count=2)
    pods = _running(kube, "adopter")
    for pod in pods.values():
        assert pod["spec"]["nodeSelector"]["type"] == "kwok"
        assert TOLERATION in pod["spec"]["tolerations"]
    kube.wait_phase(job, "Succeeded", timeout=120)
    workloads = _workloads(kube)
    assert sorted(workloads) == ["made-for-it", "made-wrong"]  # none made of its own
    adopted = until(
        lambda: (
            (w := _workloads(kube)["made-for-it"])
            and (_condition(w, "Finished") or {}).get("status") == "True"
            and w
        ),
        "the adopted Workload Finished",
    )
    (owner,) = adopted["metadata"]["ownerReferences"]
    assert owner["controller"] is True and owner["uid"] == kube.get(job)["metadata"]["uid"]
    assert adopted["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == owner["uid"]
