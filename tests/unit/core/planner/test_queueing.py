"""Kueue's Workload protocol in the engine (`t9kjobs.planner.queueing`): a queued job has no pod
until its Workload is admitted, gets its flavors when it is, loses its pods without a failure
when evicted, gives the quota back, and declares its Workload finished."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from t9kjobs.loading import JobError, load_job, parse_job
from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.planner import Kueue, KueuePolicy, Plan
from t9kjobs.planner.workloads import pod_set_name, workload_name
from t9kjobs.testing.fixtures import installed_plugins, pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.configuring import configured
from tests.unit.core.planner.queue_sim import FLAVOR, KUEUE, WL, QueueSim, queued_job
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager
from tests.unit.plugins.scheduling.jobs import generic_ddp


def _pod_names(p: Plan) -> list[str]:
    return [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"]


def test_a_job_without_a_queue_is_not_kueues() -> None:
    sim = QueueSim(tiny_job(replicas=2))
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert WL not in sim.objects and sim.condition("Admitted") is None


def test_a_queued_job_makes_its_workload_and_no_pod() -> None:
    sim = QueueSim(queued_job())
    p = sim.step()
    assert _pod_names(p) == []
    workload = sim.objects[WL]
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert workload["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == "job-uid"
    assert workload["spec"] == {
        "queueName": "team",
        "podSets": [
            {
                "name": "worker",
                "count": 2,
                "template": {
                    "spec": {
                        "initContainers": [{"name": "init"}],
                        "containers": [
                            {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 8}}}
                        ],
                    }
                },
            }
        ],
    }
    assert p.status.phase == "Queued" and p.status.reason == "Queued"
    assert p.status.start_time is None
    admitted = sim.condition("Admitted")
    assert admitted["status"] == "False"
    assert admitted["message"] == "waiting in LocalQueue team (Workload tinyjob-tiny)"
    # Said once: the next plan, with nothing new, changes nothing.
    again = sim.step()
    assert not again.create and not again.delete and not again.status_changed


def test_kueues_word_for_why_it_waits_is_the_jobs() -> None:
    sim = QueueSim(queued_job("nowhere"))
    sim.step()
    sim.kueue_says(("QuotaReserved", "False", "Inadmissible", "LocalQueue nowhere doesn't exist"))
    p = sim.step()
    assert p.status.reason == "Inadmissible"
    assert sim.condition("Admitted")["message"] == (
        "LocalQueue nowhere: LocalQueue nowhere doesn't exist"
    )
    sim.kueue_says(("QuotaReserved", "False", "Pending", "insufficient quota, 16 more needed"))
    p = sim.step()
    assert p.status.reason == "Queued" and not _pod_names(p)
    assert sim.condition("Admitted")["message"] == (
        "waiting in LocalQueue nowhere: insufficient quota, 16 more needed"
    )


def test_admitted_its_pods_run_with_their_flavors_node_labels_and_tolerations() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    sim.admit()
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    for pod in sim.pods().values():
        assert pod["spec"]["nodeSelector"] == {"pool": "a100"}
        assert pod["spec"]["tolerations"] == FLAVOR["spec"]["tolerations"]
    assert p.status.phase == "Pending" and p.status.reason is None
    assert sim.condition("Admitted")["status"] == "True"
    assert "ClusterQueue cq" in sim.condition("Admitted")["message"]
    # Its Workload is as it wants it: left alone.
    assert not [o for o in (*p.create, *p.update) if o["kind"] == "Workload"]


def test_admitted_with_a_flavor_not_known_yet_it_waits_and_looks_again() -> None:
    sim = QueueSim(queued_job(), kueue=Kueue())
    sim.step()
    sim.admit()
    p = sim.step()
    assert not _pod_names(p) and p.requeue_after == 1.0
    assert "ResourceFlavor gpu is not known" in sim.condition("Admitted")["message"]


def test_evicted_its_pods_go_without_a_failure_and_the_quota_is_given_back() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    sim.admit()
    sim.step()
    sim.run_pods()
    # A restart before the eviction: its count must survive it.
    sim.objects[("Pod", "tiny-worker-1")] = pod_in_phase(sim.pods()["tiny-worker-1"], "Failed", 1)
    sim.step()
    sim.step()
    sim.run_pods()
    sim.step()
    restarts = {
        r["name"]: r["restartCount"] for r in sim.manifest["status"]["tasks"][0]["replicas"]
    }
    assert restarts == {"tiny-worker-0": 0, "tiny-worker-1": 1}
    preempted = "Preempted to accommodate a workload"
    sim.kueue_says(
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
        ("Admitted", "True", "Admitted", "The workload is admitted"),
        ("Evicted", "True", "Preempted", preempted),
        admitted=True,
    )
    p = sim.step()
    assert sorted(d.name for d in p.delete) == ["tiny-worker-0", "tiny-worker-1"]
    assert not p.patch_status  # the quota is held until the pods are gone
    assert p.status.phase == "Queued" and p.status.reason == "Preempted"
    assert p.status.start_time is None
    assert [e.reason for e in p.events] == ["Preempted"]
    assert "deleted 2 pod(s)" in p.events[0].message
    assert not [c for c in p.status.conditions if c.type == "Failed"]
    # Pods gone: the reservation is cleared as jobframework does.
    p = sim.step()
    assert not p.delete and not _pod_names(p)
    (patch,) = p.patch_status
    assert patch["metadata"] == {"name": "tinyjob-tiny", "resourceVersion": "7"}
    assert patch["status"]["admission"] is None
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert by_type["QuotaReserved"]["status"] == "False"
    assert by_type["QuotaReserved"]["reason"] == "Pending"
    assert by_type["Admitted"]["status"] == "False"
    assert by_type["Requeued"]["status"] == "True" and by_type["Requeued"]["reason"] == "Preempted"
    assert by_type["Evicted"]["status"] == "True"  # Kueue's, left as it is
    # Readmitted: the same replicas come back, their restarts as they were, no backoff spent.
    sim.admit()
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    incarnations = {
        o["metadata"]["name"]: o["metadata"]["annotations"][ANNOTATION_INCARNATION]
        for o in p.create
        if o["kind"] == "Pod"
    }
    assert incarnations == {"tiny-worker-0": "0", "tiny-worker-1": "1"}
    assert p.status.backoff_count == 1
    assert p.status.start_time == "2026-01-01T12:00:00Z"


def test_a_deactivated_workload_is_not_marked_requeued() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    sim.kueue_says(
        ("QuotaReserved", "True", "QuotaReserved", "reserved"),
        ("Evicted", "True", "InactiveWorkload", "The workload is deactivated"),
        admitted=True,
    )
    p = sim.step()
    (patch,) = p.patch_status
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert by_type["Requeued"]["status"] == "False"
    assert p.status.reason == "InactiveWorkload"


def test_a_finished_job_declares_its_workload_finished_once() -> None:
    sim = QueueSim(queued_job(replicas=1))
    sim.step()
    sim.kueue_says(
        ("QuotaReserved", "True", "QuotaReserved", "reserved"),
        ("Admitted", "True", "Admitted", "admitted"),
        admitted=True,
    )
    sim.step()
    sim.objects[("Pod", "tiny-worker-0")] = pod_in_phase(sim.pods()["tiny-worker-0"], "Succeeded")
    p = sim.step()
    assert p.status.phase == "Succeeded"
    (patch,) = p.patch_status
    finished = [c for c in patch["status"]["conditions"] if c["type"] == "Finished"]
    assert finished[0]["status"] == "True" and finished[0]["reason"] == "Succeeded"
    assert len(patch["status"]["conditions"]) == 3  # Kueue's two kept
    assert not sim.step().patch_status


def test_a_paused_job_gives_up_its_place_and_queues_anew_on_resume() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    sim.admit()
    sim.step()
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    p = sim.step()
    assert ("Workload", "tinyjob-tiny") in {(d.kind, d.name) for d in p.delete}
    assert p.status.phase == "Paused"
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": False}}
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["Workload"] and p.status.phase == "Queued"


def test_pods_that_changed_make_the_workload_again() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    sim.admit()
    sim.step()
    sim.manifest["spec"]["replicaSpecs"][0]["replicas"] = 3
    p = sim.step()
    deleted = sorted((d.kind, d.name) for d in p.delete)
    assert deleted == [("Pod", "tiny-worker-0"), ("Pod", "tiny-worker-1"), WL]
    assert p.status.phase == "Queued"
    p = sim.step()
    (made,) = [o for o in p.create if o["kind"] == "Workload"]
    assert made["spec"]["podSets"][0]["count"] == 3


def test_priority_from_a_workload_priority_class_or_the_pods_priority_class() -> None:
    sim = QueueSim(queued_job(**{"kueue.x-k8s.io/priority-class": "high"}))
    sim.step()
    spec = sim.objects[WL]["spec"]
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    assert spec["priority"] == 1000
    doc = queued_job()
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["priorityClassName"] = "batch"
    sim = QueueSim(doc)
    sim.step()
    spec = sim.objects[WL]["spec"]
    assert spec["priorityClassRef"]["kind"] == "PriorityClass" and spec["priority"] == 5


def test_a_missing_priority_class_is_said_and_looked_for_again() -> None:
    sim = QueueSim(queued_job(**{"kueue.x-k8s.io/priority-class": "urgent"}))
    p = sim.step()
    assert not p.create and p.requeue_after == 10.0
    assert p.status.reason == "Inadmissible"
    assert sim.condition("Admitted")["message"] == (
        "WorkloadPriorityClass urgent (label kueue.x-k8s.io/priority-class) does not exist"
    )


def test_t9k_scheduler_queue_and_priority_map_to_kueue_where_the_t9k_scheduler_is_absent() -> None:
    doc = tiny_job(replicas=1)
    doc["spec"]["scheduler"] = {"t9kScheduler": {"queue": "team-a", "priority": 7}}
    manager = installed_plugins()
    generic = generic_ddp(scheduler={"t9kScheduler": {"queue": "team-a", "priority": 7}})
    kueue = Kueue(t9k_queues=True, local_queues=frozenset({("ns", "team-a")}))
    with configured(manager, {"gang-scheduling": "auto"}):
        sim = QueueSim(copy.deepcopy(generic), kueue=kueue, manager=manager)
        sim.absent = frozenset({"PodGroup"})
        sim.step()
        spec = sim.objects[("Workload", "genericjob-generic-ddp")]["spec"]
        assert spec["queueName"] == "team-a" and spec["priority"] == 7
        # Where no LocalQueue has that name, the job is not Kueue's: it runs as without it.
        elsewhere = Kueue(t9k_queues=True, local_queues=frozenset({("other", "team-a")}))
        sim = QueueSim(copy.deepcopy(generic), kueue=elsewhere, manager=manager)
        sim.absent = frozenset({"PodGroup"})
        p = sim.step()
        assert ("Workload", "genericjob-generic-ddp") not in sim.objects
        assert any(o["kind"] == "Pod" for o in p.create)
        # Where the T9k scheduler takes the queue, Kueue does not.
        sim = QueueSim(generic_ddp(scheduler=generic["spec"]["scheduler"]), manager=manager)
        sim.step()
        assert ("Workload", "genericjob-generic-ddp") not in sim.objects


def test_an_admitted_job_is_still_placed_as_a_gang() -> None:
    doc = generic_ddp()
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    with configured(installed_plugins(), {"gang-scheduling": "native"}):
        sim = QueueSim(doc, manager=installed_plugins())
        p = sim.step()
        assert [o["kind"] for o in p.create] == ["Workload"]  # no PodGroup while it waits
        workload = sim.objects[("Workload", "genericjob-generic-ddp")]
        assert "schedulingGroup" not in str(workload["spec"])
        sets = {s["name"]: s["count"] for s in workload["spec"]["podSets"]}
        status: Obj = {
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": n, "count": c, "flavors": {"cpu": "gpu"}} for n, c in sets.items()
                ],
            },
        }
        sim.objects[("Workload", "genericjob-generic-ddp")] = {**workload, "status": status}
        p = sim.step()
        kinds = [o["kind"] for o in p.create]
        assert "PodGroup" in kinds and kinds.index("PodGroup") < kinds.index("Pod")
        for pod in (o for o in p.create if o["kind"] == "Pod"):
            assert pod["spec"]["schedulingGroup"] == {"podGroupName": "generic-ddp"}
            assert pod["spec"]["nodeSelector"]["pool"] == "a100"


def test_where_kueue_is_not_served_the_job_runs_and_says_so() -> None:
    sim = QueueSim(queued_job(), kueue=None)
    sim.absent = frozenset({"Workload"})
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    degraded = sim.condition("Degraded")
    assert degraded["reason"] == "DependencyMissing" and "Workload" in degraded["message"]


def test_with_kueue_off_the_label_is_ignored() -> None:
    sim = QueueSim(queued_job(), kueue=None)
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert WL not in sim.objects and sim.condition("Degraded") is None


def test_a_workload_name_held_by_another_is_said() -> None:
    sim = QueueSim(queued_job())
    sim.conflicts = {WL: "a Workload of nobody"}
    p = sim.step()
    assert not p.create and p.status.reason == "NameConflict"
    assert "a Workload of nobody" in sim.condition("Admitted")["message"]


def test_names() -> None:
    assert pod_set_name("Worker_Big") == "worker-big"
    assert pod_set_name("__") == "pods"
    job = parse_job(queued_job(), tiny_manager())
    assert workload_name(job) == "tinyjob-tiny"


# -- The queue cannot be skipped (docs/scheduling.md) ----------------------------------------


def _required(**policy: Any) -> KueuePolicy:
    return KueuePolicy(**policy)


def _warnings(p: Plan) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in p.events if e.type == "Warning"]


def test_a_namespace_that_requires_a_queue_queues_a_job_without_one_in_the_default_queue() -> None:
    """Kueue's manageJobsWithoutQueueName with its LocalQueue defaulting: a job that names no
    queue where one is required waits, with no pod, in the default LocalQueue of its namespace."""
    kueue = Kueue(flavors={"gpu": FLAVOR}, local_queues=frozenset({("ns", "default")}))
    policy = _required(require_namespaces=("ns",), default_queue="default")
    sim = QueueSim(tiny_job(replicas=2), kueue=kueue, policy=policy)
    p = sim.step()
    assert _pod_names(p) == []
    assert sim.objects[WL]["spec"]["queueName"] == "default"
    assert p.status.phase == "Queued" and p.status.reason == "Queued"
    sim.admit()
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert not _warnings(p)  # its Workload's queue is the one it is given: nothing ignored
    # Another namespace is left as it was: the job runs at once.
    policy = _required(require_namespaces=("other",), default_queue="default")
    sim = QueueSim(tiny_job(replicas=2), kueue=kueue, policy=policy)
    assert _pod_names(sim.step()) == ["tiny-worker-0", "tiny-worker-1"]


def test_a_job_without_a_queue_where_one_is_required_and_no_default_is_refused() -> None:
    """No pod, no Workload: `Queued`, its Admitted condition and one Warning Event name the
    label; the label added (the admission policy lets it be added), the job queues."""
    for policy in ({"require_all": True}, {"require_namespaces": ("ns",), "default_queue": "q0"}):
        sim = QueueSim(tiny_job(replicas=2), kueue=KUEUE, policy=_required(**policy))
        p = sim.step()
        assert not p.create and p.requeue_after == 10.0
        assert p.status.phase == "Queued" and p.status.reason == "QueueRequired"
        message = sim.condition("Admitted")["message"]
        assert "namespace ns requires a Kueue queue" in message
        assert "kueue.x-k8s.io/queue-name" in message
        ((reason, said),) = _warnings(p)
        assert reason == "QueueRequired" and said == message
        # Said once.
        again = sim.step()
        assert not again.create and not again.events and not again.status_changed
        sim.manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
        p = sim.step()
        assert [o["kind"] for o in p.create] == ["Workload"]
        assert sim.objects[WL]["spec"]["queueName"] == "team"


def test_a_running_job_in_a_namespace_that_now_requires_a_queue_loses_its_pods() -> None:
    """As Kueue stops a job it manages that runs unadmitted: the administrator's policy
    applies to jobs that ran before it too."""
    sim = QueueSim(tiny_job(replicas=2))
    sim.step()
    sim.run_pods()
    sim.policy = _required(require_all=True)
    p = sim.step()
    assert sorted(d.name for d in p.delete) == ["tiny-worker-0", "tiny-worker-1"]
    assert p.status.reason == "QueueRequired"
    assert [e.type for e in p.events] == ["Warning"]


def test_where_kueue_is_not_served_a_namespace_that_requires_a_queue_runs_nothing() -> None:
    """Fail closed: without Kueue's Workloads no job of the namespace is queued, so none runs,
    labelled or not (elsewhere a labelled job runs and says so, Degraded)."""
    for doc in (queued_job(), tiny_job(replicas=2)):
        sim = QueueSim(doc, kueue=None, policy=_required(require_namespaces=("ns",)))
        sim.absent = frozenset({"Workload"})
        p = sim.step()
        assert not p.create and p.status.reason == "QueueRequired"
        assert "does not serve Kueue's Workloads" in sim.condition("Admitted")["message"]


def _queued_and_admitted(doc: Obj | None = None) -> QueueSim:
    sim = QueueSim(doc or queued_job())
    sim.step()
    sim.admit()
    sim.step()
    sim.run_pods()
    return sim


def test_removing_the_queue_label_of_a_waiting_job_creates_no_pod() -> None:
    """Before: the plan took the job for one without a queue, created its pods and deleted
    its Workload. Now the Workload's queue stays the job's, with a Warning said once."""
    sim = QueueSim(queued_job())
    sim.step()
    del sim.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    p = sim.step()
    assert not _pod_names(p) and not p.delete and WL in sim.objects
    assert p.status.phase == "Queued"
    ((reason, message),) = _warnings(p)
    assert reason == "QueueLabelIgnored"
    assert message.startswith("the job names no queue (label kueue.x-k8s.io/queue-name)")
    assert "it stays in LocalQueue team" in message
    assert message in sim.condition("Admitted")["message"]
    assert not _warnings(sim.step())  # said once
    # Admitted by Kueue in the Workload's queue, it runs: Kueue's word, nobody else's.
    sim.admit()
    p = sim.step()
    assert _pod_names(p) == ["tiny-worker-0", "tiny-worker-1"]
    assert not _warnings(p)
    assert "stays in LocalQueue team" in sim.condition("Admitted")["message"]


def test_changing_the_queue_label_of_an_admitted_job_keeps_its_queue_and_its_pods() -> None:
    sim = _queued_and_admitted()
    sim.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "elsewhere"
    p = sim.step()
    assert not p.delete and not p.create and WL in sim.objects
    assert sim.objects[WL]["spec"]["queueName"] == "team"
    ((reason, message),) = _warnings(p)
    assert reason == "QueueLabelIgnored" and "names LocalQueue elsewhere" in message
    # Evicted, it waits again in the same queue: no pod of it outside Kueue.
    sim.kueue_says(
        ("QuotaReserved", "True", "QuotaReserved", "reserved"),
        ("Evicted", "True", "Preempted", "preempted"),
        admitted=True,
    )
    p = sim.step()
    assert sorted(d.name for d in p.delete) == ["tiny-worker-0", "tiny-worker-1"]
    assert not _pod_names(sim.step())


def test_a_queued_job_that_lost_its_label_and_its_workload_is_refused() -> None:
    """Paused (its Workload deleted), its label removed, resumed: it was queued, so it is
    refused rather than run outside Kueue."""
    sim = _queued_and_admitted()
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.step()
    assert WL not in sim.objects
    del sim.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    sim.manifest["spec"]["runMode"] = {"pause": {"enabled": False}}
    p = sim.step()
    assert not p.create and p.status.reason == "QueueLabelRemoved"
    ((reason, message),) = _warnings(p)
    assert reason == "QueueLabelRemoved" and "kueue.x-k8s.io/queue-name" in message
    assert not sim.step().create  # still refused once the condition is written
    sim.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team"
    assert [o["kind"] for o in sim.step().create] == ["Workload"]


# -- The quota held while a pod holds resources ----------------------------------------------


def _finished_with_workers_running() -> QueueSim:
    """A GenericJob (master succeeds -> job succeeds; cleanUpPolicy None) admitted, its master
    succeeded while its 3 workers run on."""
    doc = generic_ddp(cleanUpPolicy="None")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    sim = QueueSim(doc, manager=installed_plugins())
    sim.step()
    wl = ("Workload", "genericjob-generic-ddp")
    sim.objects[wl] = {
        **sim.objects[wl],
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                {"type": "Admitted", "status": "True", "reason": "Admitted"},
            ],
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
        },
    }
    sim.step()
    sim.run_pods()
    sim.step()
    master = ("Pod", "generic-ddp-master-0")
    sim.objects[master] = pod_in_phase(sim.objects[master], "Succeeded")
    return sim


def test_a_workload_stays_unfinished_while_a_pod_of_the_finished_job_runs() -> None:
    """Before: the plan that finished the job marked its Workload Finished while 3 workers
    still ran (the quota handed back, the GPUs held). Now only once none holds resources."""
    with configured(installed_plugins(), {"gang-scheduling": "none"}):
        sim = _finished_with_workers_running()
        p = sim.step()
        assert p.status.phase == "Succeeded"
        assert not p.delete and not p.patch_status
        workers = sorted(n for n in sim.pods() if "worker" in n)
        for name in workers[:2]:
            sim.objects[("Pod", name)] = pod_in_phase(sim.objects[("Pod", name)], "Succeeded")
        # One still terminating holds its node's resources too.
        last = ("Pod", workers[2])
        sim.objects[last] = {
            **sim.objects[last],
            "metadata": {
                **sim.objects[last]["metadata"],
                "deletionTimestamp": "2026-01-01T12:00:00Z",
            },
        }
        assert not sim.step().patch_status
        del sim.objects[last]
        (patch,) = sim.step().patch_status
        finished = [c for c in patch["status"]["conditions"] if c["type"] == "Finished"]
        assert finished[0]["status"] == "True" and finished[0]["reason"] == "Succeeded"


def test_a_finished_jobs_leftover_pods_are_deleted_when_kueue_evicts_its_workload() -> None:
    with configured(installed_plugins(), {"gang-scheduling": "none"}):
        sim = _finished_with_workers_running()
        sim.step()
        wl = ("Workload", "genericjob-generic-ddp")
        evicted = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "x"}
        sim.objects[wl]["status"]["conditions"].append(evicted)
        p = sim.step()
        deleted = sorted(d.name for d in p.delete)
        assert deleted == [f"generic-ddp-worker-{i}" for i in range(3)]
        assert not p.patch_status
        (patch,) = sim.step().patch_status  # gone: the quota goes back
        assert any(c["type"] == "Finished" for c in patch["status"]["conditions"])


# -- What Kueue is told a pod takes ------------------------------------------------------------


def test_pod_sets_count_pod_level_resources_and_sidecars() -> None:
    """Kueue v0.17 counts pod-level requests (cpu, memory, hugepages; PodRequests of
    k8s.io/component-helpers) and sums a sidecar init container with the containers. Before,
    both were dropped: Kueue was told less than the pods take."""
    doc = queued_job()
    spec = doc["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["resources"] = {"limits": {"cpu": "8", "memory": "64Gi"}, "requests": {"cpu": "4"}}
    spec["initContainers"] = [
        {
            "name": "log-shipper",
            "image": "busybox",
            "restartPolicy": "Always",
            "resources": {"requests": {"nvidia.com/gpu": 1}},
        }
    ]
    sim = QueueSim(doc)
    sim.step()
    template = sim.objects[WL]["spec"]["podSets"][0]["template"]["spec"]
    # The memory request the API server gives the pod (its limit: no container asks for it).
    assert template["resources"] == {
        "limits": {"cpu": "8", "memory": "64Gi"},
        "requests": {"cpu": "4", "memory": "64Gi"},
    }
    assert template["initContainers"] == [
        {
            "name": "log-shipper",
            "resources": {"requests": {"nvidia.com/gpu": 1}},
            "restartPolicy": "Always",
        }
    ]


def _with_claims(doc: Obj, *claims: Obj) -> Obj:
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["resourceClaims"] = list(claims)
    return doc


def test_a_resource_claim_kueue_cannot_count_is_refused_naming_the_field() -> None:
    """A named ResourceClaim Kueue never counts; a ResourceClaimTemplate only where the
    operator is told Kueue counts them. Before, claims were dropped from the podSets: the job
    was admitted on a quota that did not hold its devices."""
    named = _with_claims(queued_job(), {"name": "gpus", "resourceClaimName": "shared-gpus"})
    sim = QueueSim(named)
    p = sim.step()
    assert not p.create and p.status.reason == "ResourcesNotCounted"
    ((reason, message),) = _warnings(p)
    assert reason == "ResourcesNotCounted"
    assert "replica type worker: the pods' spec.resourceClaims[0].resourceClaimName" in message
    template = {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}
    sim = QueueSim(_with_claims(queued_job(), template))
    p = sim.step()
    assert not p.create and p.status.reason == "ResourcesNotCounted"
    message = sim.condition("Admitted")["message"]
    assert "spec.resourceClaims[0].resourceClaimTemplateName (eight-gpus)" in message
    assert "--kueue-resource-claim-templates" in message
    sim = QueueSim(
        _with_claims(queued_job(), template), policy=_required(resource_claim_templates=True)
    )
    p = sim.step()
    assert [o["kind"] for o in p.create] == ["Workload"]
    pod_set = sim.objects[WL]["spec"]["podSets"][0]
    assert pod_set["template"]["spec"]["resourceClaims"] == [template]


def test_a_job_without_a_queue_keeps_its_resource_claims() -> None:
    doc = _with_claims(tiny_job(replicas=1), {"name": "gpus", "resourceClaimName": "shared"})
    assert _pod_names(QueueSim(doc).step()) == ["tiny-worker-0"]


def test_validate_refuses_a_named_resource_claim_in_a_job_that_asks_for_a_queue() -> None:
    doc = generic_ddp()
    template = doc["spec"]["replicaSpecs"][1]["template"]["spec"]
    template["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "shared-gpus"}]
    load_job(copy.deepcopy(doc), installed_plugins())  # no queue: nothing to say
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    with pytest.raises(JobError) as caught:
        load_job(doc, installed_plugins())
    (problem,) = caught.value.problems
    assert problem.path == "spec.replicaSpecs[1].template.spec.resourceClaims[0].resourceClaimName"
    assert "Kueue does not count" in problem.message
