"""kube-scheduler's own gang scheduling, end to end on KWOK (4 nodes x 8 GPUs): the deadlock it
prevents, a gang that can never fit, and a gang's PodGroup through the job's life.

The contention: two GenericJobs, each 3 pods x 8 GPUs, 48 GPUs wanted of 32. Each job's third
pod can only run on a node labelled `t9kjobs-test/rest` (a node the cluster does not have yet,
as when jobs are submitted before the nodes they need join), and the test labels the nodes once
both jobs have asked. Placed pod by pod, the first two pods of each job take the four nodes at
once and the third ones find no room when the label comes: each job holds 16 GPUs and waits
for the other's, for ever. Placed as gangs, neither is placed before the label; then one job
gets its 3 nodes, runs and ends, then the other.

The pods train as ranks do: none ends before all the job's ranks run (the rendezvous). The
test plays the training program: once all 3 pods of a job run, it makes them exit 0 a few
seconds later (`_rendezvous`); a rank whose peers never come runs on, holding its GPUs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.kube.transport import ApiError
from t9kjobs.testing.harness.simulation import SIM_EXIT_CODE, SIM_RUN_SECONDS
from tests import waiting
from tests.cluster import fresh_namespace
from tests.e2e.jobs import INCARNATION, Kube, Recorder, phase, replica, until
from tests.operators import OperatorProcess, install_crds, operator_process
from tests.waiting import throughout

GPU = "nvidia.com/gpu"
NATIVE = "/apis/scheduling.k8s.io/v1alpha2"
LABEL = "t9kjobs-test/rest"
# A request that makes a job's pods reserve something, so that they are a gang (#50).
CPU: dict[str, Any] = {"resources": {"requests": {"cpu": "10m"}}}


@pytest.fixture
def kube(cluster: Any, namespace: str) -> Kube:
    served = Kube(cluster, namespace)
    try:
        resources = served.http.request("GET", NATIVE).get("resources") or []
    except ApiError as exc:
        resources = []
        assert exc.status == 404, exc
    assert any(r["name"] == "podgroups" for r in resources), (
        "the cluster does not serve scheduling.k8s.io/v1alpha2 PodGroups (started with"
        " T9KJOBS_GANG_API=0, or before the gates were added): make cluster-down cluster-up"
    )
    install_crds(cluster)
    return served


def _operator(cluster: Any, namespace: str, log: Path, *flags: str) -> OperatorProcess:
    op = operator_process(cluster, "--namespace", namespace, *flags, log=log)
    op.wait_ready()
    return op


@pytest.fixture
def unlabelled(cluster: Any) -> Iterator[None]:
    """No node has the label the jobs' third pods need (and none has it after the test)."""
    cluster.kubectl("label", "nodes", "--all", f"{LABEL}-")
    try:
        yield
    finally:
        cluster.kubectl("label", "nodes", "--all", f"{LABEL}-", check=False)


def _gpu_pods(type_: str, count: int, *, labelled: bool = False) -> Any:
    spec = replica(type_, count)  # runs until told to exit
    pod = spec["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {GPU: 8}}
    if labelled:
        term = {"matchExpressions": [{"key": LABEL, "operator": "Exists"}]}
        selector = {"nodeSelectorTerms": [term]}
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}
        }
    return spec


def _job(name: str) -> Any:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {
            "replicaSpecs": [_gpu_pods("lead", 2), _gpu_pods("rest", 1, labelled=True)],
            "successPolicy": "AllWorkers",
        },
    }


def _owner(pod: Any) -> str:
    return str(pod["metadata"]["labels"]["tensorstack.dev/owner-name"])


def _rendezvous(kube: Kube) -> None:
    """Each job all of whose 3 pods run has met: its pods exit 0 after a few seconds."""
    pods = kube.pods()
    jobs = {_owner(p) for p in pods.values()}
    for job in jobs:
        ranks = [p for p in pods.values() if _owner(p) == job]
        met = len(ranks) == 3 and all(phase(p) == "Running" for p in ranks)
        for pod in ranks if met else []:
            if SIM_EXIT_CODE not in (pod["metadata"].get("annotations") or {}):
                notes = {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "5"}
                kube.annotate(pod["metadata"]["name"], notes)


def _partly_placed(pods: list[Any]) -> set[str]:
    """The jobs some of whose pods hold a node while others wait to be placed."""
    placed: dict[str, bool] = {}
    waiting: dict[str, bool] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        job = _owner(pod)
        if pod["spec"].get("nodeName") and phase(pod) in ("Pending", "Running"):
            placed[job] = True
        elif not pod["spec"].get("nodeName"):
            waiting[job] = True
    return {job for job in placed if waiting.get(job)}


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


def _submit_both(kube: Kube, cluster: Any) -> tuple[Any, Any]:
    """Both jobs, all their pods created, then the nodes labelled."""
    a, b = _job("job-a"), _job("job-b")
    kube.create(a)
    kube.create(b)
    until(lambda: len(kube.pods()) == 6, "the two jobs' 6 pods created")
    cluster.kubectl("label", "nodes", "--all", f"{LABEL}=yes")
    return a, b


@pytest.mark.usefixtures("unlabelled")
def test_gangs_place_one_job_whole_then_the_other(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    op = _operator(cluster, namespace, tmp_path / "operator.log")
    try:
        with kube.record_pods() as recorder:
            a, b = _submit_both(kube, cluster)
            groups = kube.http.request("GET", f"{NATIVE}/namespaces/{namespace}/podgroups")
            assert sorted(
                (g["metadata"]["name"], g["spec"]["schedulingPolicy"]["gang"]["minCount"])
                for g in groups["items"]
            ) == [("job-a", 3), ("job-b", 3)]
            for pod in kube.pods().values():
                assert pod["spec"]["schedulingGroup"] == {"podGroupName": _owner(pod)}

            # One job runs whole; the other waits whole, and says why.
            def one_runs() -> str | None:
                pods = kube.pods().values()
                running = {_owner(p) for p in pods if phase(p) == "Running"}
                return running.pop() if len(running) == 1 else None

            first = until(one_runs, "one job's pods running")
            second = b if first == "job-a" else a
            # The PodGroup says it first ("pod group is unschedulable"), its pods why.
            status = waiting.until(
                lambda: (
                    (s := kube.status(second)).get("reason") == "Unschedulable"
                    and f"Insufficient {GPU}" in str(s["conditions"])
                    and s
                ),
                120,
                what=lambda: (
                    f"{second['metadata']['name']} saying why its gang cannot be placed:"
                    f" {kube.status(second)} {[p.get('status') for p in kube.pods().values()]}"
                ),
            )
            scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
            assert scheduled["status"] == "False"
            assert scheduled["message"].startswith(
                f"PodGroup.scheduling.k8s.io {second['metadata']['name']} (3 pods at once)"
                " cannot be placed: "
            )
            row = cluster.kubectl(
                "-n", namespace, "get", "genericjob", second["metadata"]["name"], "--no-headers"
            ).stdout
            assert "Unschedulable" in row.split()

            def both_succeeded() -> bool:
                _rendezvous(kube)
                return all(kube.status(j).get("phase") == "Succeeded" for j in (a, b))

            until(both_succeeded, "both jobs Succeeded, one after the other", timeout=180)
            done = kube.status(second)
            assert done.get("reason") is None
        both = [s for s in _states(recorder) if len(_partly_placed(s)) > 1]
        assert not both, f"both jobs partly placed at once: {both[0]}"
        # Finished: no PodGroup is left behind the jobs.
        until(
            lambda: (
                not kube.http.request("GET", f"{NATIVE}/namespaces/{namespace}/podgroups")["items"]
            ),
            "the finished jobs' PodGroups deleted",
        )
    finally:
        op.stop()


@pytest.mark.usefixtures("unlabelled")
def test_without_gangs_the_same_jobs_deadlock(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """What gangs prevent: placed pod by pod, each job holds 2 nodes and waits for a third."""
    op = _operator(cluster, namespace, tmp_path / "operator.log", "--gang-scheduling", "none")
    try:
        a, b = _submit_both(kube, cluster)
        until(
            lambda: _partly_placed(list(kube.pods().values())) == {"job-a", "job-b"},
            "both jobs partly placed",
        )
        assert not kube.http.request("GET", f"{NATIVE}/namespaces/{namespace}/podgroups")["items"]

        def stuck() -> bool:
            _rendezvous(kube)
            pods = list(kube.pods().values())
            finished = {kube.status(j).get("phase") for j in (a, b)} & {"Succeeded", "Failed"}
            return _partly_placed(pods) == {"job-a", "job-b"} and not finished

        throughout(stuck, 20, interval=2, what="both jobs holding GPUs and waiting")
        for job in (a, b):
            assert "Scheduled" not in {c["type"] for c in kube.status(job).get("conditions", [])}
    finally:
        op.stop()


def test_a_gang_that_can_never_fit_says_so(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    job = copy.deepcopy(_job("too-big"))
    job["spec"]["replicaSpecs"] = [_gpu_pods("worker", 5)]  # 40 GPUs of 32
    op = _operator(cluster, namespace, tmp_path / "operator.log")
    try:
        kube.create(job)
        status = until(
            lambda: (s := kube.status(job)).get("reason") == "Unschedulable" and s,
            "too-big saying its gang cannot be placed",
        )
        assert status["phase"] == "Pending"
        message = next(c for c in status["conditions"] if c["type"] == "Scheduled")["message"]
        assert "PodGroup.scheduling.k8s.io too-big (5 pods at once) cannot be placed" in message
        # Nothing of it is placed: no GPU is held for a gang that cannot run.
        assert not [p for p in kube.pods().values() if p["spec"].get("nodeName")]
        described = cluster.kubectl("-n", namespace, "describe", "genericjob", "too-big").stdout
        assert "Unschedulable" in described
    finally:
        op.stop()


def test_a_restarted_pod_rejoins_its_gang_and_pause_and_failure_leave_no_group(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "gang"},
        "spec": {
            "replicaSpecs": [replica("worker", 3, {"policy": "OnFailure", "limit": 2}, **CPU)]
        },
    }
    groups = f"{NATIVE}/namespaces/{namespace}/podgroups"
    op = _operator(cluster, namespace, tmp_path / "operator.log")
    try:
        kube.create(job)
        names = ("gang-worker-0", "gang-worker-1", "gang-worker-2")
        kube.running(*names)
        first = kube.pods()["gang-worker-1"]["metadata"]["uid"]
        kube.fail("gang-worker-1", 1)

        def replaced() -> Any:
            pod = kube.pods().get("gang-worker-1")
            fresh = pod is not None and pod["metadata"]["uid"] != first
            return fresh and phase(pod) == "Running" and pod

        pod = waiting.until(
            replaced,
            120,
            what=lambda: (
                f"gang-worker-1 restarted and running: {kube.status(job)}"
                f" {[(p['metadata'], p.get('status')) for p in kube.pods().values()]}"
            ),
        )
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang"}

        kube.patch(job, {"spec": {"runMode": {"pause": {"enabled": True}}}})
        kube.wait_phase(job, "Paused")
        until(lambda: not kube.http.request("GET", groups)["items"], "no PodGroup while paused")
        kube.patch(job, {"spec": {"runMode": {"pause": {"enabled": False}}}})
        kube.running(*names)
        [group] = kube.http.request("GET", groups)["items"]
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3

        # A job that fails for good keeps no PodGroup either.
        fails = {**job, "metadata": {"name": "fails"}}
        fails["spec"] = {"replicaSpecs": [replica("worker", 3)]}
        kube.create(fails)
        kube.running(*names, "fails-worker-0", "fails-worker-1", "fails-worker-2")
        kube.fail("fails-worker-0", 2)
        kube.wait_phase(fails, "Failed")
        kube.patch(job, {"spec": {"runMode": {"pause": {"enabled": True}}}})
        # Deleted: the failed job's PodGroup waits only for its pods to go (kube-controller-
        # manager's podgroup-protection finalizer); the paused job's is gone.
        until(
            lambda: all(
                g["metadata"]["name"] == "fails" and g["metadata"].get("deletionTimestamp")
                for g in kube.http.request("GET", groups)["items"]
            ),
            "the PodGroups of the failed and the paused job deleted",
        )
    finally:
        op.stop()


@pytest.mark.usefixtures("unlabelled")
def test_a_replacement_stranded_in_a_gang_that_can_never_be_complete_is_placed_alone(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """The chaos case of issue #48: a replacement joins its gang of 3 beside two live members,
    cannot be placed yet (the nodes it needs lost their label), and the two end for good while
    it waits. kube-scheduler counts only live members, so it would never place it; the job
    says `GangIncomplete` and, the bound later, places it again on its own."""
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "stranded"},
        "spec": {"replicaSpecs": [replica("lead", 2), _gpu_pods("rest", 1, labelled=True)]},
    }
    job["spec"]["replicaSpecs"][1]["restartPolicy"] = {"policy": "OnFailure", "limit": 1}
    lead, rest = ("stranded-lead-0", "stranded-lead-1"), "stranded-rest-0"
    op = _operator(cluster, namespace, tmp_path / "operator.log")
    try:
        cluster.kubectl("label", "nodes", "--all", f"{LABEL}=yes")
        kube.create(job)
        first = kube.running(*lead, rest)[rest]["metadata"]["uid"]
        cluster.kubectl("label", "nodes", "--all", f"{LABEL}-")
        kube.fail(rest, 1)

        def waiting_in_gang() -> Any:
            pod = kube.pods().get(rest)
            fresh = pod is not None and pod["metadata"]["uid"] != first
            return fresh and not pod["spec"].get("nodeName") and pod

        replacement = until(waiting_in_gang, f"{rest}'s replacement waiting in its gang")
        assert replacement["spec"]["schedulingGroup"] == {"podGroupName": "stranded"}
        for name in lead:
            kube.annotate(name, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "0"})
        until(lambda: all(phase(kube.pods()[n]) == "Succeeded" for n in lead), "leads ended")
        cluster.kubectl("label", "nodes", "--all", f"{LABEL}=yes")  # room, but no gang
        status = until(
            lambda: (s := kube.status(job)).get("reason") == "GangIncomplete" and s,
            "the job saying its gang can never be complete",
        )
        message = next(c for c in status["conditions"] if c["type"] == "Scheduled")["message"]
        assert "PodGroup.scheduling.k8s.io stranded (3 pods at once) can never be placed" in (
            message
        )

        def placed_alone() -> Any:
            pod = kube.pods().get(rest)
            other = pod is not None and pod["metadata"]["uid"] != replacement["metadata"]["uid"]
            return other and phase(pod) == "Running" and pod

        alone = until(placed_alone, f"{rest} placed again out of its gang", timeout=90)
        assert "schedulingGroup" not in alone["spec"]
        assert alone["metadata"]["annotations"][INCARNATION] == "1"  # not a restart
        kube.annotate(rest, {SIM_EXIT_CODE: "0", SIM_RUN_SECONDS: "0"})
        done = kube.wait_phase(job, "Succeeded")
        assert next(c for c in done["conditions"] if c["type"] == "Scheduled")["status"] == "True"
    finally:
        op.stop()


def test_pods_that_reserve_nothing_are_no_gang_unless_their_namespace_gives_requests(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """A gang buys nothing where placed pods hold nothing scarce (#50): a job whose pods
    reserve nothing gets no PodGroup and its pods no `schedulingGroup`. In a namespace whose
    LimitRange gives containers requests by default, the same job is a gang."""
    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "10m"}}]},
    }
    free = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "free"},
        "spec": {"replicaSpecs": [replica("worker", 2)]},
    }
    with fresh_namespace(cluster, "limited") as other:
        limited = Kube(cluster, other)
        limited.http.request("POST", f"/api/v1/namespaces/{other}/limitranges", body=limits)
        op = _operator(cluster, namespace, tmp_path / "operator.log", "--namespace", other)
        try:
            kube.create(free)
            pods = kube.running("free-worker-0", "free-worker-1")
            assert [p["spec"].get("schedulingGroup") for p in pods.values()] == [None, None]
            assert not kube.http.request("GET", f"{NATIVE}/namespaces/{namespace}/podgroups")[
                "items"
            ]
            # The first job placed alone: both namespaces' LimitRanges were read (until then
            # every namespace counts as giving requests), so the second's defaults decide.
            limited.create(free)
            pods = limited.running("free-worker-0", "free-worker-1")
            assert [p["spec"].get("schedulingGroup") for p in pods.values()] == [
                {"podGroupName": "free"}
            ] * 2
            assert pods["free-worker-0"]["spec"]["containers"][0]["resources"] == {
                "requests": {"cpu": "10m"}
            }
            group = limited.http.request("GET", f"{NATIVE}/namespaces/{other}/podgroups/free")
            assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
        finally:
            op.stop()
