"""Kueue's Topology-Aware Scheduling for every kind (`t9kjobs.planner.topology`): a replica's
topology annotations become its podSet's `topologyRequest` ranked by `tensorstack.dev/rank`,
and once Kueue places the Workload by topology its pods carry what Kueue's ungater reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from t9kjobs.loading import judge
from t9kjobs.objects import ANNOTATION_SPEC_HASH, spec_hash
from t9kjobs.planner.topology import domain_of
from t9kjobs.testing.fixtures import installed_plugins
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.queue_sim import WL, QueueSim, queued_job
from tests.unit.core.planner.tinyjob import tiny_manager
from tests.unit.plugins.pytorch.helpers import manifest, replica

RACK = "cloud.provider.com/rack"
BLOCK = "cloud.provider.com/block"
HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"


def _annotated(doc: Obj, annotations: dict[str, str], index: int = 0) -> Obj:
    template = doc["spec"]["replicaSpecs"][index]["template"]
    template.setdefault("metadata", {})["annotations"] = annotations
    return doc


def _topology_assignment(count: int) -> Obj:
    """Kueue's assignment of `count` pods, 2 a host, all in rack r1 of block b1."""
    hosts = [f"h{i}" for i in range((count + 1) // 2)]
    return {
        "levels": [BLOCK, RACK, HOST],
        "slices": [
            {
                "domainCount": len(hosts),
                "podCounts": {"individual": [min(2, count - 2 * i) for i in range(len(hosts))]},
                "valuesPerLevel": [
                    {"universal": "b1"},
                    {"universal": "r1"},
                    {"individual": {"roots": hosts}},
                ],
            }
        ],
    }


def _admit_by_topology(sim: QueueSim, name: str) -> None:
    """Kueue admits the Workload `name`, every podSet placed by topology."""
    key = ("Workload", name)
    workload = copy.deepcopy(sim.objects[key])
    workload["status"] = {
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": s["name"],
                    "count": s["count"],
                    "flavors": {"nvidia.com/gpu": "gpu"},
                    "topologyAssignment": _topology_assignment(s["count"]),
                }
                for s in workload["spec"]["podSets"]
            ],
        },
    }
    sim.objects[key] = workload


def test_the_topology_annotations_become_the_podsets_request_ranked_by_the_rank_label() -> None:
    sim = QueueSim(_annotated(queued_job(replicas=4), {REQUIRED: RACK}))
    sim.step()
    (pod_set,) = sim.objects[WL]["spec"]["podSets"]
    assert pod_set["topologyRequest"] == {"required": RACK, "podIndexLabel": "tensorstack.dev/rank"}


def test_a_job_that_asks_for_no_topology_has_no_request_and_no_gate() -> None:
    sim = QueueSim(queued_job())
    sim.step()
    assert "topologyRequest" not in sim.objects[WL]["spec"]["podSets"][0]
    sim.admit()
    sim.step()
    for pod in sim.pods().values():
        assert "schedulingGates" not in pod["spec"]
        assert "kueue.x-k8s.io/podset" not in pod["metadata"]["labels"]


def test_placed_by_topology_its_pods_carry_the_gate_the_podset_the_workload_and_their_rank() -> (
    None
):
    sim = QueueSim(_annotated(queued_job(replicas=4), {PREFERRED: RACK}))
    sim.step()
    _admit_by_topology(sim, WL[1])
    sim.step()
    pods = sim.pods()
    assert sorted(pods) == [f"tiny-worker-{i}" for i in range(4)]
    for name, pod in pods.items():
        meta = pod["metadata"]
        assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
        assert meta["labels"]["kueue.x-k8s.io/podset"] == "worker"
        assert meta["labels"]["tensorstack.dev/rank"] == name.rsplit("-", 1)[1]
        assert meta["annotations"]["kueue.x-k8s.io/workload"] == WL[1]
        assert "kueue.x-k8s.io/pod-index-offset" not in meta["annotations"]  # ranks from 0
        assert pod["spec"]["nodeSelector"] == {"pool": "a100"}  # the flavor's, as before


def test_the_ungaters_node_selector_and_lifted_gate_never_relaunch_a_pod() -> None:
    sim = QueueSim(_annotated(queued_job(replicas=2), {REQUIRED: RACK}))
    sim.step()
    _admit_by_topology(sim, WL[1])
    sim.step()
    sim.run_pods()
    for key, pod in list(sim.objects.items()):
        if key[0] == "Pod":
            ungated = copy.deepcopy(pod)
            ungated["spec"].pop("schedulingGates")
            ungated["spec"]["nodeSelector"].update({BLOCK: "b1", RACK: "r1", HOST: "h0"})
            sim.objects[key] = ungated
            # The engine knows the pod by the digest of the spec it created it with.
            assert pod["metadata"]["annotations"][ANNOTATION_SPEC_HASH] != spec_hash(ungated)
    p = sim.step()
    assert not p.delete and not [o for o in p.create if o["kind"] == "Pod"]
    assert domain_of(sim.pods()["tiny-worker-0"], [BLOCK, RACK]) == "b1/r1"


def test_a_pytorch_master_and_its_workers_are_ranked_as_torchrun_numbers_nodes() -> None:
    """Master rank 0, workers 1..3 (their PET_NODE_RANK); one group: Kueue counts the larger
    podSet from the smaller's size itself, so no offset. Apart: the workers' podSet starts at 1."""
    for grouped in (True, False):
        group = {GROUP: "trainer"} if grouped else {}
        doc = manifest(replica("master"), replica("worker", 3))
        doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
        _annotated(doc, {REQUIRED: RACK, **group}, 0)
        _annotated(doc, {REQUIRED: RACK, **group}, 1)
        sim = QueueSim(doc, manager=installed_plugins())
        sim.step()
        name = "pytorchtrainingjob-job"
        sets = {s["name"]: s for s in sim.objects[("Workload", name)]["spec"]["podSets"]}
        assert list(sets) == ["master", "worker"]
        assert ("podSetGroupName" in sets["worker"]["topologyRequest"]) is grouped
        _admit_by_topology(sim, name)
        sim.step()
        pods = sim.pods()
        assert len(pods) == 4
        for pod in pods.values():
            meta = pod["metadata"]
            rank = meta["labels"]["tensorstack.dev/rank"]
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            assert rank == env["PET_NODE_RANK"]
            offset = meta["annotations"].get("kueue.x-k8s.io/pod-index-offset")
            is_worker = meta["labels"]["kueue.x-k8s.io/podset"] == "worker"
            assert offset == ("1" if is_worker and not grouped else None)


def _refused(annotations: dict[str, str]) -> Any:
    sim = QueueSim(_annotated(queued_job(), annotations))
    p = sim.step()
    assert ("Workload", WL[1]) not in sim.objects and not sim.pods()
    assert p.status.reason == "TopologyRequestInvalid"
    return sim.condition("Admitted")["message"]


@pytest.mark.parametrize(
    ("annotations", "said"),
    [
        ({REQUIRED: RACK, PREFERRED: RACK}, "at most one of"),
        ({REQUIRED: "not a key!"}, "must be a node label key"),
        ({"kueue.x-k8s.io/podset-unconstrained-topology": "yes"}, "must be true or false"),
        ({"kueue.x-k8s.io/podset-slice-size": "2"}, "go together"),
        (
            {
                "kueue.x-k8s.io/podset-slice-required-topology": RACK,
                "kueue.x-k8s.io/podset-slice-size": "0",
            },
            "a whole number from 1",
        ),
        ({GROUP: "trainer"}, f"needs {REQUIRED} or"),
    ],
)
def test_what_kueue_would_refuse_is_refused_naming_the_replica_and_annotation(
    annotations: dict[str, str], said: str
) -> None:
    message = _refused(annotations)
    assert message.startswith("replica type worker") and said in message
    # The same verdict from `t9kjobs validate` and the admission webhook (#52).
    judged = judge(_annotated(queued_job(), annotations), tiny_manager())
    assert judged.job is None and any(said in p.message for p in judged.errors), judged.errors


def test_a_valid_topology_request_passes_validate() -> None:
    doc = _annotated(queued_job(), {REQUIRED: RACK})
    judged = judge(doc, tiny_manager())
    assert judged.job is not None and not judged.errors, judged.errors


@pytest.mark.parametrize(
    ("master", "worker", "said"),
    [
        ({REQUIRED: RACK, GROUP: "g"}, {REQUIRED: BLOCK, GROUP: "g"}, "the same level"),
        ({REQUIRED: RACK, GROUP: "g"}, {REQUIRED: RACK}, "exactly 2 replica types"),
    ],
)
def test_a_group_is_two_replica_types_asking_alike(
    master: dict[str, str], worker: dict[str, str], said: str
) -> None:
    doc = manifest(replica("master"), replica("worker", 3))
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    _annotated(doc, master, 0)
    _annotated(doc, worker, 1)
    sim = QueueSim(doc, manager=installed_plugins())
    p = sim.step()
    assert p.status.reason == "TopologyRequestInvalid" and not sim.pods()
    message = sim.condition("Admitted")["message"]
    assert message.startswith(f"{GROUP} g (replica types master") and said in message


def test_a_pod_for_a_failed_nodes_slot_waits_until_kueue_has_replaced_the_node() -> None:
    """Kueue's TAS node controller lists a failed node in the Workload's `unhealthyNodes`
    until its scheduler writes the new assignment: a pod created meanwhile would be given the
    failed node's slot. The lost pod's replacement waits, with nothing else held or counted,
    and is created, gated, once the list is empty."""
    sim = QueueSim(_annotated(queued_job(replicas=2), {REQUIRED: RACK}))
    sim.step()
    _admit_by_topology(sim, WL[1])
    sim.step()
    sim.run_pods()
    sim.step()
    del sim.objects[("Pod", "tiny-worker-0")]  # deleted, lost with its node
    sim.objects[WL]["status"]["unhealthyNodes"] = [{"name": "h0"}]
    counts = ("backoffCount", "infrastructureRestartCount")
    before = [sim.manifest["status"].get(k) for k in counts]
    held = sim.step()
    assert not [o for o in held.create if o["kind"] == "Pod"]
    assert held.requeue_after is not None and held.requeue_after <= 1.0
    assert sim.manifest["status"]["phase"] == "Running"
    del sim.objects[WL]["status"]["unhealthyNodes"]  # Kueue's scheduler replaced h0
    created = [o for o in sim.step().create if o["kind"] == "Pod"]
    assert [sim.manifest["status"].get(k) for k in counts] == before
    assert [p["metadata"]["name"] for p in created] == ["tiny-worker-0"]
    assert created[0]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert created[0]["metadata"]["labels"]["tensorstack.dev/rank"] == "0"
