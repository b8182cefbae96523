"""Run modes, elastic scaling and gang scheduling on the real control plane, one scenario per
line of the table in docs/lifecycle.md: debug, pause and resume, an elastic job scaled up and
down, gang scheduling with and without the PodGroup CRD. Restarts, the deadline, cleanup and
crash safety are in test_lifecycle.py; what both share in jobs.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from t9kjobs.kube.transport import ApiError
from tests.e2e.jobs import (
    PODGROUPS,
    Kube,
    Obj,
    command,
    condition,
    job,
    replica,
    replicas,
    set_podgroup_crd,
    template,
    until,
)
from tests.operators import Operators

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
        # Its workers reserve some CPU: pods that reserve nothing are no gang (#50).
        replica("worker", 3, "OnFailure", args=["train.py"], resources={"requests": {"cpu": "1m"}}),
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3},
        torchrunConfig={"enabled": True},
        scheduler=scheduler,
    )
    names = ("gang-master-0", "gang-worker-0", "gang-worker-1", "gang-worker-2")

    # Without the CRD, on a cluster with kube-scheduler's own gangs (hack/cluster): under the
    # operator's default `--gang-scheduling auto`, a kube-scheduler PodGroup instead, no T9k
    # labels or scheduler, and nothing Degraded. (Neither served: Degraded, the unit tests.)
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
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "nogang"}
    native = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{kube.ns}/podgroups/nogang"
    policy = kube.http.request("GET", native)["spec"]["schedulingPolicy"]
    assert policy == {"gang": {"minCount": 3}}  # the elastic minimum, master included
    assert not [c for c in kube.status(absent).get("conditions", []) if c["type"] == "Degraded"]
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
