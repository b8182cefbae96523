"""Run policies and run modes on the real control plane, one scenario per line of the table in
docs/lifecycle.md: restarts under each policy and budget, the deadline, cleanup, debug, pause and
resume, elastic scaling, gang scheduling with and without the PodGroup CRD, and the operator
killed while it restarts pods.

Failures are injected the way docs/cluster.md describes: an exit code in a pod template (every
pod of the type exits), or patched onto one running pod. The tests talk to the API server
through the operator's own HTTP client (plain dicts; cheap enough to poll), and watch what
they must not miss (every pod created, every phase a job went through) instead of sampling.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS, without_claims
from tests.e2e.operator import REPO, OperatorProcess, install_crds, operator_process

Obj = dict[str, Any]
T = TypeVar("T")

JOBS = "/apis/batch.tensorstack.dev/v1beta1"
PLURALS = {
    "ColossalAIJob": "colossalaijobs",
    "DeepSpeedJob": "deepspeedjobs",
    "GenericJob": "genericjobs",
    "PyTorchTrainingJob": "pytorchtrainingjobs",
}
PODGROUPS = "/apis/scheduler.tensorstack.dev/v1beta1"
PODGROUP_CRD = Path(__file__).parent / "podgroup-crd.yaml"
INCARNATION = "batch.tensorstack.dev/restart-count"
ACTIVE = ("Pending", "Running")


def until(fn: Callable[[], T | None], message: str, timeout: float = 120) -> T:
    """`fn()` once it is truthy. API errors are retried; a failed assertion fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
            if value:
                return value
        except (ApiError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(0.25)


def phase(obj: Obj) -> str | None:
    return (obj.get("status") or {}).get("phase")


def condition(status: Obj, type_: str) -> Obj:
    found = [c for c in status.get("conditions") or [] if c["type"] == type_]
    assert found, f"no {type_} condition in {status.get('conditions')}"
    return found[0]


def replicas(status: Obj) -> dict[str, Obj]:
    return {r["name"]: r for t in status.get("tasks") or [] for r in t["replicas"]}


def command(pod: Obj) -> list[str]:
    return list(pod["spec"]["containers"][0].get("command") or [])


# -- jobs ------------------------------------------------------------------------------------


def template(
    exit_code: int | None = None, seconds: float = 1, *, init: bool = False, **container: Any
) -> Obj:
    """A pod template whose pods run for ever, or exit with `exit_code` after `seconds`."""
    spec: Obj = {
        "containers": [
            {"name": "python", "image": "busybox", "command": ["python", "train.py"], **container}
        ]
    }
    if init:
        spec["initContainers"] = [{"name": "init", "image": "busybox", "command": ["true"]}]
    notes = (
        {} if exit_code is None else {SIM_EXIT_CODE: str(exit_code), SIM_RUN_SECONDS: str(seconds)}
    )
    return {"metadata": {"annotations": notes}, "spec": spec}


def replica(type_: str, count: int = 1, restart: Any = "Never", **pod: Any) -> Obj:
    return {"type": type_, "replicas": count, "restartPolicy": restart, "template": template(**pod)}


def job(kind: str, name: str, *replica_specs: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicaSpecs": list(replica_specs), **spec},
    }


# -- the cluster -----------------------------------------------------------------------------


class Recorder:
    """Every change of a collection from the moment it is built, recorded by a watch thread."""

    def __init__(self, http: Transport, path: str, query: dict[str, str] | None = None) -> None:
        self.http, self.path, self.query = http, path, dict(query or {})
        listing = http.request("GET", path, query=self.query)
        self.rv = str(listing["metadata"]["resourceVersion"])
        self.events: list[tuple[str, Obj]] = [("ADDED", o) for o in listing.get("items") or []]
        self.error: Obj | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.error is None:
            query = {
                **self.query,
                "watch": "1",
                "resourceVersion": self.rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "5",
            }
            try:
                for event in self.http.stream(self.path, query, timeout=20):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        self.error = obj  # e.g. 410 Gone: history lost, the record is not whole
                        return
                    self.rv = str((obj.get("metadata") or {}).get("resourceVersion", self.rv))
                    if event.get("type") != "BOOKMARK":
                        with self._lock:
                            self.events.append((str(event["type"]), obj))
                    if self._stop.is_set():
                        return
            except (ApiError, OSError):
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        assert self.error is None, f"the watch of {self.path} broke: {self.error}"

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def snapshot(self) -> list[tuple[str, Obj]]:
        with self._lock:
            return list(self.events)

    def created(self) -> list[Obj]:
        return [o for kind, o in self.snapshot() if kind == "ADDED"]

    def phases(self) -> list[str]:
        """The phases the object went through, in order, each once per stay."""
        out: list[str] = []
        for _, obj in self.snapshot():
            now = phase(obj)
            if now and (not out or out[-1] != now):
                out.append(now)
        return out


class Kube:
    """One test's namespace on the local cluster."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)

    def path(self, doc: Obj, sub: str = "") -> str:
        base = f"{JOBS}/namespaces/{self.ns}/{PLURALS[doc['kind']]}/{doc['metadata']['name']}"
        return base + (f"/{sub}" if sub else "")

    def create(self, doc: Obj) -> Obj:
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = self.ns
        plural = PLURALS[doc["kind"]]
        return self.http.request("POST", f"{JOBS}/namespaces/{self.ns}/{plural}", body=doc)

    def get(self, doc: Obj) -> Obj:
        return self.http.request("GET", self.path(doc))

    def status(self, doc: Obj) -> Obj:
        return dict(self.get(doc).get("status") or {})

    def patch(self, doc: Obj, patch: Obj, sub: str = "") -> Obj:
        return self.http.request(
            "PATCH", self.path(doc, sub), body=patch, content_type="application/merge-patch+json"
        )

    def pods(self) -> dict[str, Obj]:
        items = self.http.request("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def annotate(self, pod: str, notes: dict[str, str]) -> None:
        self.http.request(
            "PATCH",
            f"/api/v1/namespaces/{self.ns}/pods/{pod}",
            body={"metadata": {"annotations": notes}},
            content_type="application/merge-patch+json",
        )

    def fail(self, pod: str, code: int) -> None:
        """Make one running pod exit with `code` now."""
        self.annotate(pod, {SIM_EXIT_CODE: str(code), SIM_RUN_SECONDS: "0"})

    def events(self, doc: Obj) -> list[Obj]:
        query = {"fieldSelector": f"involvedObject.name={doc['metadata']['name']}"}
        path = f"/api/v1/namespaces/{self.ns}/events"
        return list(self.http.request("GET", path, query=query)["items"])

    def wait_phase(self, doc: Obj, want: str, timeout: float = 120) -> Obj:
        """The job's status once it reaches `want`; fails at once if it ends otherwise."""

        def reached() -> Obj | None:
            status = self.status(doc)
            now = status.get("phase")
            assert now == want or now not in ("Succeeded", "Failed"), f"ended {now}: {status}"
            return status if now == want else None

        return until(reached, f"{doc['metadata']['name']} {want}", timeout)

    def running(self, *names: str) -> dict[str, Obj]:
        """The pods once each of `names` is Running, and no other pod is left (a pod being
        deleted does not count as running)."""

        def all_running() -> dict[str, Obj] | None:
            pods = self.pods()
            ok = set(pods) == set(names) and all(
                phase(p) == "Running" and not p["metadata"].get("deletionTimestamp")
                for p in pods.values()
            )
            return pods if ok else None

        return until(all_running, f"pods {sorted(names)} running")

    def record_pods(self) -> Recorder:
        return Recorder(self.http, f"/api/v1/namespaces/{self.ns}/pods")

    def record_job(self, doc: Obj) -> Recorder:
        plural = PLURALS[doc["kind"]]
        query = {"fieldSelector": f"metadata.name={doc['metadata']['name']}"}
        return Recorder(self.http, f"{JOBS}/namespaces/{self.ns}/{plural}", query)


class Operators:
    """The one operator of this module; tests may kill it, or replace it after a CRD change
    (it discovers which child kinds the cluster serves when it starts)."""

    def __init__(self, cluster: Any, logs: Path) -> None:
        self.cluster = cluster
        self.logs = logs
        self.started = 0
        self.current = self.start()

    def start(self) -> OperatorProcess:
        self.started += 1
        op = operator_process(self.cluster, log=self.logs / f"operator-{self.started}.log")
        op.wait_ready()
        self.current = op
        return op

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind, as when a node dies."""
        self.current.kill()
        self.current.stop()

    def restart(self) -> None:
        self.current.stop()
        self.start()


def _podgroups_served(http: Transport) -> bool:
    try:
        answer = http.request("GET", PODGROUPS)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return any(r["name"] == "podgroups" for r in answer.get("resources") or [])


def set_podgroup_crd(cluster: Any, installed: bool) -> None:
    """Install or remove the test PodGroup CRD, and wait until discovery says so."""
    http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)
    if installed:
        cluster.kubectl("apply", "--server-side", "-f", str(PODGROUP_CRD))
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/podgroups.scheduler.tensorstack.dev",
        )  # fmt: skip
    else:
        cluster.kubectl(
            "delete", "crd", "podgroups.scheduler.tensorstack.dev", "--ignore-not-found",
            "--wait=true",
        )  # fmt: skip
    until(lambda: _podgroups_served(http) == installed, f"PodGroups served: {installed}")


@pytest.fixture(scope="module")
def operators(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operators]:
    install_crds(cluster)
    set_podgroup_crd(cluster, installed=False)
    ops = Operators(cluster, tmp_path_factory.mktemp("lifecycle"))
    try:
        yield ops
    finally:
        ops.current.stop()


@pytest.fixture
def kube(cluster: Any, namespace: str, operators: Operators) -> Kube:
    return Kube(cluster, namespace)


def finished_lives(pods: Recorder) -> dict[str, list[str]]:
    """For each pod name, the incarnation of every pod of it that ran to its end, in order.

    A pod deleted before it finished is left out: KWOK deletes pods by name (without the uid
    precondition a kubelet uses), so its late deletion of a replaced pod may hit the
    replacement, which the operator then recreates as the same incarnation, counting nothing.
    """
    ended: dict[str, tuple[str, str]] = {}
    order: list[str] = []
    for _, pod in pods.snapshot():
        meta = pod["metadata"]
        if meta["uid"] not in order:
            order.append(meta["uid"])
        if phase(pod) in ("Succeeded", "Failed"):
            ended[meta["uid"]] = (meta["name"], meta["annotations"][INCARNATION])
    out: dict[str, list[str]] = {}
    for uid in order:
        if uid in ended:
            name, incarnation = ended[uid]
            out.setdefault(name, []).append(incarnation)
    return out


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- restart policies ------------------------------------------------------------------------


def test_exit_code_retries_137_then_fails_the_job_on_1(kube: Kube) -> None:
    doc = job("PyTorchTrainingJob", "exitcode", replica("worker", 2, "ExitCode"))
    kube.create(doc)
    kube.wait_phase(doc, "Running")
    first = kube.running("exitcode-worker-0", "exitcode-worker-1")["exitcode-worker-1"]

    kube.fail("exitcode-worker-1", 137)

    def replaced() -> Obj | None:
        pod = kube.pods().get("exitcode-worker-1")
        new = pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]
        return pod if new and pod is not None and phase(pod) == "Running" else None

    second = until(replaced, "worker-1 replaced by a new pod of the same name")
    assert second["metadata"]["annotations"][INCARNATION] == "1"
    status = kube.status(doc)
    assert status["phase"] == "Running"
    assert status["backoffCount"] == 1
    assert replicas(status)["exitcode-worker-1"]["restartCount"] == 1
    assert replicas(status)["exitcode-worker-0"]["restartCount"] == 0
    assert status["tasks"][0]["restartCount"] == 1
    restarting = until(
        lambda: [e for e in kube.events(doc) if e["reason"] == "Restarting"], "Restarting event"
    )
    assert [e["message"] for e in restarting] == [
        "exitcode-worker-1 failed with exit code 137; restart 1"
    ]

    kube.fail("exitcode-worker-1", 1)
    status = kube.wait_phase(doc, "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "ReplicaFailed"
    assert failed["message"] == "exitcode-worker-1 failed with exit code 1 (container python)"
    assert status["backoffCount"] == 1
    # cleanUpPolicy None (the default): every pod is kept as it is.
    pods = kube.pods()
    assert phase(pods["exitcode-worker-0"]) == "Running"
    assert phase(pods["exitcode-worker-1"]) == "Failed"


def test_on_failure_with_backoff_limit_2_fails_on_the_third_failure_and_cleans_up(
    kube: Kube,
) -> None:
    doc = job(
        "PyTorchTrainingJob",
        "backoff",
        replica("worker", 1, "OnFailure", exit_code=3),
        runPolicy={"backoffLimit": 2, "cleanUpPolicy": "All"},
    )
    pods = kube.record_pods()
    try:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
        until(lambda: not kube.pods(), "cleanUpPolicy All deleting every pod")
    finally:
        pods.stop()
    failed = condition(status, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == (
        "backoff-worker-0 failed with exit code 3 (container python); restarts exhausted"
        " (spec.runPolicy.backoffLimit=2)"
    )
    assert status["backoffCount"] == 2
    assert status["tasks"][0]["restartCount"] == 2
    assert replicas(status)["backoff-worker-0"] == {
        **replicas(status)["backoff-worker-0"],
        "restartCount": 2,
        "phase": "Failed",  # how it ended, though the cleanup deleted its pod
    }
    # Three pods of one name, one after the other: the first and two restarts.
    assert finished_lives(pods) == {"backoff-worker-0": ["0", "1", "2"]}
    reasons = [e["reason"] for e in kube.events(doc)]
    assert reasons.count("Restarting") == 2 and "Failed" in reasons


# -- deadline and cleanup --------------------------------------------------------------------


def test_generic_job_replicas_that_keep_failing_end_it_by_their_limits_and_rules(
    kube: Kube,
) -> None:
    """GenericJob has no backoffLimit: each replica's `limit` (default 0, the string form's
    too) is what ends a failing replica, and then `failureRules` can match."""
    doc = job(
        "GenericJob",
        "gjfail",
        replica("a", 1, "OnFailure", exit_code=1),
        replica("b", 1, {"policy": "OnFailure", "limit": 2}, exit_code=1),
        replica("c", 1, "OnFailure"),
        failureRules=[{"a": [0], "b": [0]}],
    )
    with kube.record_pods() as pods:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "FailureRuleMatched"
    assert failed["message"] == (
        "gjfail-a-0 failed with exit code 1 (container python); gjfail-b-0 failed with exit"
        " code 1 (container python) (failureRules[0] is fulfilled)"
    )
    counts = {name: r["restartCount"] for name, r in replicas(status).items()}
    assert counts == {"gjfail-a-0": 0, "gjfail-b-0": 2, "gjfail-c-0": 0}
    lives = finished_lives(pods)
    assert lives["gjfail-a-0"] == ["0"]  # `OnFailure` alone: limit 0, never restarted
    assert lives["gjfail-b-0"] == ["0", "1", "2"]
    assert phase(kube.pods()["gjfail-c-0"]) == "Running"  # cleanUpPolicy None keeps it


def test_deadline_of_5s_fails_the_job_mid_restart_and_deletes_its_running_pods(
    kube: Kube,
) -> None:
    doc = job(
        "PyTorchTrainingJob",
        "deadline",
        replica("master"),
        replica("worker", 1, "OnFailure", exit_code=137),
        runPolicy={"activeDeadlineSeconds": 5, "backoffLimit": 100},
    )
    pods = kube.record_pods()
    history = kube.record_job(doc)
    try:
        kube.create(doc)
        status = kube.wait_phase(doc, "Failed")
        until(
            lambda: not [p for p in kube.pods().values() if phase(p) in ACTIVE],
            "the running pods deleted",
        )
    finally:
        pods.stop()
        history.stop()
    failed = condition(status, "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == (
        "the job was active longer than spec.runPolicy.activeDeadlineSeconds (5s)"
    )
    assert (_time(status["completionTime"]) - _time(status["startTime"])).total_seconds() >= 5
    assert status["backoffCount"] >= 1  # the worker was being restarted all along
    assert "deadline-master-0" not in kube.pods()  # it was running: deleted despite policy None
    # No pod was created once the job had failed.
    failed_rv = min(
        int(o["metadata"]["resourceVersion"]) for _, o in history.snapshot() if phase(o) == "Failed"
    )
    assert all(int(p["metadata"]["resourceVersion"]) < failed_rv for p in pods.created())


def test_cleanup_unfinished_after_failure_keeps_the_finished_pods(kube: Kube) -> None:
    doc = job(
        "GenericJob",
        "unfinished",
        replica("a", 1, "Never", exit_code=2),
        replica("b", 2, {"policy": "OnFailure", "limit": 3}),
        cleanUpPolicy="Unfinished",
    )
    kube.create(doc)
    status = kube.wait_phase(doc, "Failed")
    assert condition(status, "Failed")["message"] == (
        "unfinished-a-0 failed with exit code 2 (container python)"
    )
    pods = until(
        lambda: (pods := kube.pods()) and set(pods) == {"unfinished-a-0"} and pods,
        "the running pods of b deleted",
    )
    assert phase(pods["unfinished-a-0"]) == "Failed"
    phases = {n: r["phase"] for n, r in replicas(status).items()}
    assert phases == {
        "unfinished-a-0": "Failed",
        "unfinished-b-0": "Deleted",
        "unfinished-b-1": "Deleted",
    }


def test_a_succeeded_worker_whose_pod_is_deleted_is_not_run_again(kube: Kube) -> None:
    """kube-controller-manager's pod GC deletes terminated pods of any owner once 12,500
    exist: a worker that finished before its master must not run its work a second time."""
    doc = job("PyTorchTrainingJob", "gone", replica("master"), replica("worker", 2, "OnFailure"))
    with kube.record_pods() as pods:
        kube.create(doc)
        first = kube.running("gone-master-0", "gone-worker-0", "gone-worker-1")
        uid = first["gone-worker-0"]["metadata"]["uid"]
        kube.fail("gone-worker-0", 0)
        until(
            lambda: replicas(kube.status(doc)).get("gone-worker-0", {}).get("phase") == "Succeeded",
            "worker-0's success in the status",
        )
        kube.http.request(
            "DELETE",
            f"/api/v1/namespaces/{kube.ns}/pods/gone-worker-0",
            body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
        until(lambda: "gone-worker-0" not in kube.pods(), "worker-0's pod deleted")
        # The watch reports the deletion before worker-1's end: the reconcile that writes
        # worker-1's end has seen worker-0 gone (before the fix, it created worker-0 again).
        kube.fail("gone-worker-1", 0)
        status = until(
            lambda: (
                (s := kube.status(doc))
                and replicas(s)["gone-worker-1"]["phase"] == "Succeeded"
                and s
            ),
            "worker-1's success in the status",
        )
        assert "gone-worker-0" not in kube.pods()
        worker = replicas(status)["gone-worker-0"]
        assert (worker["phase"], worker["uid"]) == ("Succeeded", uid)
        assert status["phase"] == "Running"
        kube.fail("gone-master-0", 0)
        kube.wait_phase(doc, "Succeeded")
    created = [
        p["metadata"]["uid"] for p in pods.created() if p["metadata"]["name"] == "gone-worker-0"
    ]
    assert created == [uid]


def test_colossalai_clean_up_workers_keeps_the_launcher(kube: Kube) -> None:
    path = REPO / "examples/colossalaijob/colossalai-example.yaml"
    doc = without_claims(yaml.safe_load(path.read_text()))
    assert doc["spec"]["runPolicy"] == {"cleanUpWorkers": True}
    doc["spec"]["replicaSpecs"][0]["restartPolicy"] = "Never"  # the launcher
    kube.create(doc)
    name = doc["metadata"]["name"]
    kube.running(f"{name}-launcher", f"{name}-worker-0", f"{name}-worker-1")
    kube.fail(f"{name}-launcher", 5)
    status = kube.wait_phase(doc, "Failed")
    assert condition(status, "Failed")["message"] == (
        f"{name}-launcher failed with exit code 5 (container launcher)"
    )
    pods = until(
        lambda: (pods := kube.pods()) and set(pods) == {f"{name}-launcher"} and pods,
        "the workers deleted",
    )
    assert phase(pods[f"{name}-launcher"]) == "Failed"


# -- run modes -------------------------------------------------------------------------------


def test_debug_mode_overrides_commands_and_pod_exits_never_finish_the_job(kube: Kube) -> None:
    debug = {
        "enabled": True,
        "replicaSpecs": [{"type": "worker", "command": ["sleep", "1d"], "skipInitContainer": True}],
    }
    doc = job(
        "PyTorchTrainingJob",
        "debug",
        replica("master", init=True),
        replica("worker", 2, init=True),
        runMode={"debug": debug},
    )
    kube.create(doc)
    pods = kube.running("debug-master-0", "debug-worker-0", "debug-worker-1")
    assert command(pods["debug-master-0"]) == ["sleep", "inf"]  # the kind's default
    assert pods["debug-master-0"]["spec"]["initContainers"]
    for name in ("debug-worker-0", "debug-worker-1"):
        assert command(pods[name]) == ["sleep", "1d"]
        assert "initContainers" not in pods[name]["spec"]
    status = kube.status(doc)
    assert status["phase"] == "Running"
    running = condition(status, "Running")
    assert running["status"] == "True" and running["reason"] == "DebugMode"

    # The master's success would finish an Immediate job, a failure would fail it.
    kube.fail("debug-master-0", 0)
    kube.fail("debug-worker-0", 1)

    def exited() -> Obj | None:
        status = kube.status(doc)
        phases = {n: r["phase"] for n, r in replicas(status).items()}
        done = phases["debug-master-0"] == "Succeeded" and phases["debug-worker-0"] == "Failed"
        return status if done else None

    status = until(exited, "the pod exits reported")
    assert status["phase"] == "Running" and "completionTime" not in status
    types = {c["type"] for c in status["conditions"]}
    assert not types & {"Completed", "Failed"}


def test_pause_then_resume_goes_through_resuming_with_the_resume_specs(kube: Kube) -> None:
    resume = [{"type": "worker", "command": ["python", "train.py", "--resume"]}]
    doc = job("PyTorchTrainingJob", "pause", replica("master"), replica("worker", 2, "OnFailure"))
    names = ("pause-master-0", "pause-worker-0", "pause-worker-1")
    history = kube.record_job(doc)
    try:
        kube.create(doc)
        kube.wait_phase(doc, "Running")
        kube.running(*names)
        kube.patch(doc, {"spec": {"runMode": {"pause": {"enabled": True, "resumeSpecs": resume}}}})
        status = kube.wait_phase(doc, "Paused")
        until(lambda: not kube.pods(), "the pods deleted by the pause")
        assert condition(status, "Paused")["status"] == "True"
        assert condition(kube.status(doc), "Running")["status"] == "False"

        other = [{"type": "worker", "command": ["other"]}]
        with pytest.raises(ApiError) as refused:
            kube.patch(doc, {"spec": {"runMode": {"pause": {"resumeSpecs": other}}}})
        assert refused.value.status == 422
        assert "resumeSpecs cannot be changed" in str(refused.value)

        kube.patch(doc, {"spec": {"runMode": {"pause": {"enabled": False}}}})
        status = kube.wait_phase(doc, "Running")
        pods = kube.running(*names)
    finally:
        history.stop()
    # A new job's first status waits up to 3 s for its pods to run: Pending only if they did not.
    phases = history.phases()
    assert phases[phases[0] == "Pending" :] == ["Running", "Paused", "Resuming", "Running"]
    paused = condition(status, "Paused")
    assert (paused["status"], paused["reason"]) == ("False", "Resumed")
    assert command(pods["pause-master-0"]) == ["python", "train.py"]
    for name in ("pause-worker-0", "pause-worker-1"):
        assert command(pods[name]) == ["python", "train.py", "--resume"]
    assert status["backoffCount"] == 0  # a pause is not a restart


# -- elastic ---------------------------------------------------------------------------------


def _elastic(kind: str) -> Obj:
    bounds = {"enabled": True, "minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4}
    if kind == "DeepSpeedJob":
        return {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": kind,
            "metadata": {"name": "ds"},
            "spec": {
                "elastic": bounds,
                "config": {"run": {"python": ["train.py"]}},
                "worker": {"replicas": 4, "template": template()},
            },
        }
    return job(
        kind,
        "pt",
        replica("master", args=["train.py"]),
        replica("worker", 4, "OnFailure", args=["train.py"]),
        elastic=bounds,
        torchrunConfig={"enabled": True},
    )


@pytest.mark.parametrize("kind", ["DeepSpeedJob", "PyTorchTrainingJob"])
def test_elastic_job_scales_4_to_6_to_2(kube: Kube, kind: str) -> None:
    doc = _elastic(kind)
    name = doc["metadata"]["name"]
    fixed = (f"{name}-master-0",) if kind == "PyTorchTrainingJob" else ()

    def workers(n: int) -> tuple[str, ...]:
        return (*fixed, *(f"{name}-worker-{i}" for i in range(n)))

    kube.create(doc)
    before = kube.running(*workers(4))
    kube.wait_phase(doc, "Running")
    scaled: dict[int, dict[str, Obj]] = {}
    for count in (6, 2):
        if count == 6:  # through the scale subresource, as `kubectl scale` and autoscalers do
            kube.patch(doc, {"spec": {"replicas": count}}, sub="scale")
        else:
            kube.patch(doc, {"spec": {"elastic": {"expectedReplicas": count}}})
        scaled[count] = kube.running(*workers(count))
        # The status follows the pods it saw (child changes are batched for up to 1 s).
        want = len(workers(count))
        status = until(
            lambda want=want: (s := kube.status(doc))["aggregate"]["running"] == want and s,
            f"status.aggregate.running == {want}",
        )
        assert status["phase"] == "Running"
        # What an autoscaler reads: the count and the pods' selector (without one it refuses).
        scale = kube.http.request("GET", kube.path(doc, "scale"))
        assert scale["spec"]["replicas"] == count
        assert (
            scale["status"]["selector"]
            == f"tensorstack.dev/owner-kind={kind},tensorstack.dev/owner-name={name}"
        )
        assert sorted(replicas(status)) == sorted(workers(count))
        if kind == "DeepSpeedJob":
            hostfile = kube.http.request(
                "GET", f"/api/v1/namespaces/{kube.ns}/configmaps/ds-hostfile"
            )["data"]["hostfile"]
            assert hostfile.split("\n")[:-1] == [f"ds-worker-{i}.ds slots=1" for i in range(count)]
            # worker-0 launches DeepSpeed on the hostfile: relaunched for the new count.
            launcher = scaled[count]["ds-worker-0"]
            assert launcher["metadata"]["uid"] != before["ds-worker-0"]["metadata"]["uid"]
            env = {e["name"]: e.get("value") for e in launcher["spec"]["containers"][0]["env"]}
            assert env["T9K_NUM_WORKERS"] == str(count)
        else:
            # torchrun's elastic range (master + [min, max] workers) is what every pod joins
            # with; the pods already running are left running.
            for pod in scaled[count].values():
                assert "--nnodes=3:7" in command(pod)
            for pod_name in workers(min(count, 4)):
                uid = scaled[count][pod_name]["metadata"]["uid"]
                assert uid == before[pod_name]["metadata"]["uid"]
    assert kube.status(doc)["backoffCount"] == 0  # scaling is not restarting


# -- gang scheduling -------------------------------------------------------------------------


def _bind(kube: Kube, pod: str, node: str) -> None:
    """What the T9k scheduler would do once the gang fits: bind the pod to a node."""
    kube.http.request(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/pods/{pod}/binding",
        body={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def test_t9k_scheduler_podgroup_without_then_with_its_crd(
    cluster: Any, kube: Kube, operators: Operators
) -> None:
    scheduler = {"t9kScheduler": {"queue": "team-a", "priority": 5}}
    doc = job(
        "PyTorchTrainingJob",
        "gang",
        replica("master", exit_code=0, seconds=3, args=["train.py"]),
        replica("worker", 3, "OnFailure", args=["train.py"]),
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3},
        torchrunConfig={"enabled": True},
        scheduler=scheduler,
    )
    names = ("gang-master-0", "gang-worker-0", "gang-worker-1", "gang-worker-2")

    # Without the CRD: no PodGroup, pods left to the default scheduler, a Degraded condition.
    absent = copy.deepcopy(doc)
    absent["metadata"]["name"] = "nogang"
    absent["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"] = {}
    kube.create(absent)
    pods = kube.running(*(n.replace("gang", "nogang") for n in names))
    for pod in pods.values():
        assert "schedulerName" not in pod["spec"] or pod["spec"]["schedulerName"] == (
            "default-scheduler"
        )
        assert not [k for k in pod["metadata"]["labels"] if k.startswith("scheduler.")]
    degraded = until(
        lambda: [c for c in kube.status(absent).get("conditions", []) if c["type"] == "Degraded"],
        "a Degraded condition",
    )[0]
    assert (degraded["status"], degraded["reason"]) == ("True", "DependencyMissing")
    assert degraded["message"] == (
        "the cluster does not serve PodGroup (its CRD is not installed): PodGroup/nogang not"
        " created; the job runs without it"
    )
    kube.http.request("DELETE", kube.path(absent), body={"propagationPolicy": "Foreground"})
    until(lambda: not kube.pods(), "the first job's pods gone")

    # With the CRD, seen by an operator started after it was installed.
    set_podgroup_crd(cluster, installed=True)
    try:
        operators.restart()
        kube.create(doc)
        group = until(
            lambda: kube.http.request("GET", f"{PODGROUPS}/namespaces/{kube.ns}/podgroups/gang"),
            "the PodGroup",
        )
        assert group["spec"] == {"minMember": 3, "queue": "team-a", "priority": 5}
        owner = group["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "PyTorchTrainingJob",
            "gang",
            True,
        )
        pods = until(lambda: (p := kube.pods()) and set(p) == set(names) and p, "the pods")
        for pod in pods.values():
            assert pod["spec"]["schedulerName"] == "t9k-scheduler"
            labels = pod["metadata"]["labels"]
            assert labels["scheduler.tensorstack.dev/group-name"] == "gang"
            assert labels["scheduler.tensorstack.dev/queue"] == "team-a"
            assert "nodeName" not in pod["spec"]  # the default scheduler leaves them alone
        # Its first status is written 3 s after the pods' creation at the latest: Pending, as
        # no scheduler binds them.
        assert kube.wait_phase(doc, "Pending", timeout=10)["phase"] == "Pending"
        for i, name in enumerate(names):
            _bind(kube, name, f"kwok-node-{i % 2}")
        status = kube.wait_phase(doc, "Succeeded")
        assert not [c for c in status["conditions"] if c["type"] == "Degraded"]
    finally:
        set_podgroup_crd(cluster, installed=False)
        operators.restart()


# -- crash safety ----------------------------------------------------------------------------


def _active(kube: Kube) -> bool:
    return any(phase(p) in ACTIVE for p in kube.pods().values())


def _finished(kube: Kube) -> set[str]:
    return {
        p["metadata"]["uid"] for p in kube.pods().values() if phase(p) in ("Succeeded", "Failed")
    }


def test_operator_killed_during_restarts_loses_and_doubles_nothing(
    kube: Kube, operators: Operators
) -> None:
    jobs = [
        # Runs out of its shared budget: exactly backoffLimit restarts, then Failed.
        job(
            "PyTorchTrainingJob",
            "budget",
            replica("worker", 1, "OnFailure", exit_code=1),
            runPolicy={"backoffLimit": 6},
        ),
        # Per-replica limits, failing only when both replicas failed for good.
        job(
            "GenericJob",
            "limits",
            replica("a", 2, {"policy": "OnFailure", "limit": 4}, exit_code=2),
            failureRules=[{"a": [0, 1]}],
        ),
        # Always: every success is restarted until the limit, then the job succeeds.
        job("GenericJob", "always", replica("a", 2, {"policy": "Always", "limit": 3}, exit_code=0)),
    ]
    expected = {
        "budget": ("Failed", {"budget-worker-0": 6}),
        "limits": ("Failed", {"limits-a-0": 4, "limits-a-1": 4}),
        "always": ("Succeeded", {"always-a-0": 3, "always-a-1": 3}),
    }
    pods = kube.record_pods()
    try:
        for doc in jobs:
            kube.create(doc)
        for restarts_seen in (3, 10):
            # Kill it in the middle of restarting, let pods finish while it is away, restart it.
            until(
                lambda n=restarts_seen: (
                    sum(kube.status(d).get("backoffCount", 0) for d in jobs) >= n
                ),
                f"{restarts_seen} restarts",
            )
            operators.kill()
            done_before = _finished(kube)
            until(
                lambda before=done_before: _finished(kube) - before or not _active(kube),
                "a pod finishing while no operator runs (unless none can)",
            )
            operators.start()
        finals = {
            d["metadata"]["name"]: kube.wait_phase(d, expected[d["metadata"]["name"]][0])
            for d in jobs
        }
    finally:
        pods.stop()

    lives = finished_lives(pods)
    for name, (_, counts) in expected.items():
        status = finals[name]
        assert {n: r["restartCount"] for n, r in replicas(status).items()} == counts, name
        assert status["backoffCount"] == sum(counts.values()), name
        for pod_name, restarts in counts.items():
            # Each incarnation ran to its end exactly once: no restart performed twice or
            # skipped, none counted twice.
            assert lives[pod_name] == [str(i) for i in range(restarts + 1)], (pod_name, lives)
    assert condition(finals["budget"], "Failed")["reason"] == "BackoffLimitExceeded"
    assert condition(finals["limits"], "Failed")["reason"] == "FailureRuleMatched"
    assert condition(finals["always"], "Completed")["reason"] == "AllSucceeded"


def test_a_restart_half_done_by_a_dead_operator_is_finished_once(
    kube: Kube, operators: Operators
) -> None:
    """The two windows a random kill rarely hits, made on purpose: the operator died after
    recording a restart in the status, before deleting the failed pod (restart 1), or after
    deleting it, before creating its replacement (restart 2)."""
    doc = job(
        "PyTorchTrainingJob",
        "half",
        replica("worker", 1, "OnFailure"),
        runPolicy={"backoffLimit": 5},
    )
    name = "half-worker-0"
    pods = kube.record_pods()
    try:
        kube.create(doc)
        kube.running(name)
        kube.wait_phase(doc, "Running")
        for restart in (1, 2):
            operators.kill()
            kube.fail(name, 1)
            failed = until(
                lambda: (p := kube.pods()[name]) and phase(p) == "Failed" and p, "the pod failed"
            )
            # What the dead operator wrote before it died: the restart, counted.
            current = kube.get(doc)
            status = current["status"]
            status["backoffCount"] = restart
            status["tasks"][0]["restartCount"] = restart
            status["tasks"][0]["replicas"][0]["restartCount"] = restart
            kube.http.request("PUT", kube.path(doc, "status"), body=current)
            if restart == 2:
                uid = failed["metadata"]["uid"]
                kube.http.request(
                    "DELETE",
                    f"/api/v1/namespaces/{kube.ns}/pods/{name}",
                    body={"preconditions": {"uid": uid}},
                )
                until(lambda: name not in kube.pods(), "the failed pod gone")
            operators.start()
            pod = kube.running(name)[name]
            assert pod["metadata"]["annotations"][INCARNATION] == str(restart)
            status = kube.status(doc)
            assert status["backoffCount"] == restart
            assert replicas(status)[name]["restartCount"] == restart
            assert status["phase"] == "Running"
    finally:
        pods.stop()
    assert finished_lives(pods) == {name: ["0", "1"]}  # and incarnation 2 runs
