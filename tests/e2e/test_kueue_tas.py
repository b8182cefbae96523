"""Topology-aware, rank-ordered placement with Kueue's Topology-Aware Scheduling, end to end on
KWOK with Kueue v0.17.0 (hack/cluster/kueue), for the engine's TAS protocol
(`t9kjobs.planner.topology`, docs/scheduling.md "Topology-aware placement").

The module's nodes: 8 KWOK nodes `tas-<i>` of 8 GPUs (tests/kwok_nodes.py, pool `tas`), in 2
blocks x 2 racks x 2 hosts (`tas-0`, `tas-1` in rack r0 of block b0, ...). An administrator's
`Topology` of levels block, rack, hostname; a ResourceFlavor naming it, whose node label and
toleration are the pool's; a ClusterQueue of 128 GPUs (more than the nodes have: where a job
waits here, topology keeps it waiting, never quota) for every namespace; a LocalQueue `team`
in each test's namespace. Jobs' pods take 8 GPUs each, a node each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from t9kjobs.client import Client
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.manager import load_plugins
from tests.e2e.jobs import Kube, job, phase, replica, template, until
from tests.kwok_nodes import POOL, NodePool
from tests.operators import Operators

GPU = "nvidia.com/gpu"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
BLOCK, RACK, HOST = "t9kjobs.dev/block", "t9kjobs.dev/rack", "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
NAME = "t9kjobs-e2e-tas"
# A pod on a deleted node is lost 10 s later (docs/lifecycle.md, "Lost nodes"), not 60.
OPERATOR_ARGS = ("--lost-node-seconds", "10")
# Node tas-<i>: block b<i // 4>, rack b<i // 4>-r<i // 2 % 2>.
DOMAINS = {f"tas-{i}": (f"b{i // 4}", f"b{i // 4}-r{i // 2 % 2}") for i in range(8)}


def _kueue(http: Any, method: str, path: str, body: Any = None) -> Any:
    try:
        return http.request(method, f"{KUEUE}/{path}", body=body)
    except ApiError as exc:
        if method == "DELETE" and exc.status == 404:
            return None
        raise


@pytest.fixture(scope="module")
def topology(cluster: Any) -> Iterator[NodePool]:
    """The module's nodes, labelled by domain, and the administrator's Topology, ResourceFlavor
    and ClusterQueue; removed after."""
    http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)
    nodes = NodePool(http, "tas", "tas", 8)
    nodes.create()
    for name, (block, rack) in DOMAINS.items():
        http.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"metadata": {"labels": {BLOCK: block, RACK: rack}}},
            content_type="application/merge-patch+json",
        )
    objects = [
        (
            "topologies",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Topology",
                "metadata": {"name": NAME},
                "spec": {
                    "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]
                },
            },
        ),
        (
            "resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": NAME},
                "spec": {
                    "nodeLabels": {POOL: "tas"},
                    "topologyName": NAME,
                    "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
        ),
        (
            "clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": NAME},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", GPU],
                            "flavors": [
                                {
                                    "name": NAME,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "1000"},
                                        {"name": "memory", "nominalQuota": "4Ti"},
                                        {"name": GPU, "nominalQuota": "128"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
    ]
    try:
        for plural, doc in objects:
            # An earlier module's or run's, maybe still being deleted (Kueue's finalizers).
            _kueue(http, "DELETE", f"{plural}/{NAME}")
            until(lambda p=plural: _absent(http, f"{p}/{NAME}"), f"{plural}/{NAME} gone", 60)
            _kueue(http, "POST", plural, doc)

        def active() -> bool:
            cq = _kueue(http, "GET", f"clusterqueues/{NAME}")
            conditions = (cq.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

        until(active, f"ClusterQueue {NAME} active (its flavor's Topology and nodes known)", 60)
        yield nodes
    finally:
        for plural, _ in reversed(objects):
            _kueue(http, "DELETE", f"{plural}/{NAME}")
        nodes.delete()


def _absent(http: Any, path: str) -> bool:
    try:
        http.request("GET", f"{KUEUE}/{path}")
    except ApiError as exc:
        if exc.status == 404:
            return True
        raise
    return False


@pytest.fixture
def queue(topology: NodePool, kube: Kube, namespace: str) -> Iterator[str]:
    """The LocalQueue `team` of the test's namespace. Afterwards the test's jobs are deleted
    and their pods and Workloads waited for: the next test has every node to itself."""
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team", "namespace": namespace},
        "spec": {"clusterQueue": NAME},
    }
    _kueue(kube.http, "POST", f"namespaces/{namespace}/localqueues", local)
    yield "team"
    for plural in ("genericjobs", "deepspeedjobs", "pytorchtrainingjobs"):
        kube.http.request(
            "DELETE", f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/{plural}"
        )

    def gone() -> bool:
        workloads = _kueue(kube.http, "GET", f"namespaces/{namespace}/workloads")["items"]
        return not kube.pods() and not workloads

    until(gone, "the test's pods and Workloads gone", 60)


def _gpus(pod_template: Any, annotations: dict[str, str]) -> Any:
    pod_template["metadata"]["annotations"].update(annotations)
    pod_template["spec"]["containers"][0]["resources"] = {"limits": {GPU: 8}}
    return pod_template


def _generic(name: str, count: int, annotations: dict[str, str]) -> Any:
    spec = replica("worker", count)
    _gpus(spec["template"], annotations)
    doc = job("GenericJob", name, spec)
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    return doc


def _placed(kube: Kube, prefix: str, count: int) -> dict[str, Any]:
    """The pods `<prefix>-...` once `count` of them run, each bound to a node."""

    def running() -> dict[str, Any] | None:
        pods = {n: p for n, p in kube.pods().items() if n.startswith(f"{prefix}-")}
        ok = len(pods) == count and all(
            phase(p) == "Running" and p["spec"].get("nodeName") for p in pods.values()
        )
        return pods if ok else None

    return until(running, f"{count} pods of {prefix} running", 90)


def _workload(kube: Kube, name: str) -> Any:
    return _kueue(kube.http, "GET", f"namespaces/{kube.ns}/workloads/{name}")


def _workloads(kube: Kube) -> dict[str, Any]:
    items = _kueue(kube.http, "GET", f"namespaces/{kube.ns}/workloads")["items"]
    return {w["metadata"]["name"]: w for w in items}


def _domains(assignment: Any) -> dict[str, int]:
    """A `topologyAssignment` (v1beta2, compressed in slices) as {lowest level value: pods}."""
    out: dict[str, int] = {}
    for piece in assignment["slices"]:
        size = piece["domainCount"]
        lowest = piece["valuesPerLevel"][-1]
        if "universal" in lowest:
            values = [lowest["universal"]] * size
        else:
            found = lowest["individual"]
            values = [
                f"{found.get('prefix', '')}{r}{found.get('suffix', '')}" for r in found["roots"]
            ]
        counts = piece["podCounts"]
        each = [counts["universal"]] * size if "universal" in counts else counts["individual"]
        for value, count in zip(values, each, strict=True):
            out[value] = out.get(value, 0) + count
    return out


def _check_ungated(pods: dict[str, Any], workload: str) -> None:
    """What the engine put on the pods for Kueue, and what Kueue's ungater made of it."""
    for pod in pods.values():
        meta = pod["metadata"]
        assert meta["annotations"]["kueue.x-k8s.io/workload"] == workload
        assert meta["labels"]["kueue.x-k8s.io/podset"] == "worker"
        assert "tensorstack.dev/rank" in meta["labels"]
        assert not pod["spec"].get("schedulingGates")  # lifted by Kueue
        assert pod["spec"]["nodeSelector"][HOST] == pod["spec"]["nodeName"]


def test_16_gpus_that_require_a_rack_land_on_one_rack(kube: Kube, queue: str) -> None:
    doc = _generic("rack16", 2, {REQUIRED: RACK})
    kube.create(doc)
    pods = _placed(kube, "rack16", 2)
    _check_ungated(pods, "genericjob-rack16")
    assert len({DOMAINS[p["spec"]["nodeName"]][1] for p in pods.values()}) == 1
    (assignment,) = _workload(kube, "genericjob-rack16")["status"]["admission"]["podSetAssignments"]
    # Kueue's word for where each pod goes (v0.17 keeps only the hostname level when it is
    # the lowest): a pod on each node the pods were bound to.
    said = assignment["topologyAssignment"]
    assert said["levels"][-1] == HOST
    assert _domains(said) == {p["spec"]["nodeName"]: 1 for p in pods.values()}, said


def _runs(values: list[str]) -> list[str]:
    """`values` with each run of equal neighbours said once: ranks are contiguous in their
    domains when no value comes back after another."""
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]


def test_32_gpus_preferring_a_rack_take_the_fewest_racks_with_ranks_contiguous(
    kube: Kube, queue: str
) -> None:
    """16 pods of 2 GPUs: 2 racks, 4 pods a host, every host and rack holding a run of
    consecutive ranks. Kueue reads the ranks from `tensorstack.dev/rank`: without them it
    would hand out slots in the pods' name order (worker-0, worker-1, worker-10, ...)."""
    doc = _generic("ranks", 16, {PREFERRED: RACK})
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {GPU: 2}
    }
    kube.create(doc)
    pods = _placed(kube, "ranks", 16)
    _check_ungated(pods, "genericjob-ranks")
    by_rank = sorted(
        pods.values(), key=lambda p: int(p["metadata"]["labels"]["tensorstack.dev/rank"])
    )
    assert [p["metadata"]["name"] for p in by_rank] == [f"ranks-worker-{i}" for i in range(16)]
    hosts = [p["spec"]["nodeName"] for p in by_rank]
    racks = [DOMAINS[h][1] for h in hosts]
    assert len(set(racks)) == 2, racks
    assert len(_runs(hosts)) == len(set(hosts)) and len(_runs(racks)) == 2, hosts


def test_a_deepspeed_job_preferring_a_rack_takes_the_fewest_racks_in_hostfile_order(
    cluster: Any, kube: Kube, queue: str
) -> None:
    """32 GPUs do not fit a rack (16): two racks, workers 0-1 in one, 2-3 in the other, so the
    hostfile (DeepSpeed's rank order) lists each rack's hosts together."""
    doc = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "ds", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "config": {"run": {"python": ["train.py"]}},
            "worker": {"replicas": 4, "template": _gpus(template(), {PREFERRED: RACK})},
        },
    }
    kube.create(doc)
    pods = _placed(kube, "ds-worker", 4)
    _check_ungated(pods, "deepspeedjob-ds")
    rack_of = {n: DOMAINS[p["spec"]["nodeName"]][1] for n, p in pods.items()}
    hostfile = kube.http.request("GET", f"/api/v1/namespaces/{kube.ns}/configmaps/ds-hostfile")
    hosts = [line.split()[0] for line in hostfile["data"]["hostfile"].splitlines() if line]
    assert hosts == [f"ds-worker-{i}.ds" for i in range(4)]
    racks = [rack_of[h.split(".")[0]] for h in hosts]
    assert racks[0] == racks[1] != racks[2] == racks[3], (racks, rack_of)
    for name, pod in pods.items():
        assert pod["metadata"]["labels"]["tensorstack.dev/rank"] == name.rsplit("-", 1)[1]
    # What the user sees: each rank's node and domain (block/rack/host).
    client = Client(kubeconfig=cluster.kubeconfig, plugins=load_plugins())
    placement = client.describe("deepspeedjob/ds", namespace=kube.ns)["placement"]
    assert [(p["rank"], p["pod"]) for p in placement] == [
        (str(i), f"ds-worker-{i}") for i in range(4)
    ]
    for p in placement:
        node = pods[p["pod"]]["spec"]["nodeName"]
        assert p["domain"] == "/".join((*DOMAINS[node], node)) and not p["gated"]
    # For whoever reads the run with -s: the pods by node, Kueue's assignment, the hostfile.
    wide = cluster.kubectl(
        "get",
        "pods",
        "-o",
        "wide",
        "-L",
        "tensorstack.dev/rank",
        "-n",
        kube.ns,
        "--sort-by=.spec.nodeName",
    )
    (assignment,) = _workload(kube, "deepspeedjob-ds")["status"]["admission"]["podSetAssignments"]
    print(
        f"\n$ kubectl get pods -o wide\n{wide.stdout}"
        f"topologyAssignment: {json.dumps(assignment['topologyAssignment'])}\n"
        f"hostfile:\n{hostfile['data']['hostfile']}"
        + "\n".join(
            f"{h}\t{pods[h.split('.')[0]]['spec']['nodeName']}\t{r}"
            for h, r in zip(hosts, racks, strict=True)
        )
    )
    assert _domains(assignment["topologyAssignment"]) == {
        p["spec"]["nodeName"]: 1 for p in pods.values()
    }


def test_a_job_that_fits_no_block_waits_with_no_pod_until_the_other_ends(
    kube: Kube, queue: str
) -> None:
    """48 GPUs on 6 hosts leave 2 hosts free, never 3 in one block: a job of 3 x 8 GPUs that
    requires a block waits (Kueue says why) until the first is gone."""
    big = _generic("big", 6, {PREFERRED: RACK})
    kube.create(big)
    _placed(kube, "big", 6)
    small = _generic("small", 3, {REQUIRED: BLOCK})
    kube.create(small)

    def said() -> str | None:
        status = kube.status(small)
        admitted = [c for c in status.get("conditions") or [] if c["type"] == "Admitted"]
        text = str(admitted[0].get("message") or "") if admitted else ""
        return text if status.get("phase") == "Queued" and "topology" in text else None

    why = until(said, "the small job Queued, for want of a block", 60)
    assert not [n for n in kube.pods() if n.startswith("small-")], why  # no pod, bound or not
    kube.http.request("DELETE", kube.path(big))
    pods = _placed(kube, "small", 3)
    _check_ungated(pods, "genericjob-small")
    assert len({DOMAINS[p["spec"]["nodeName"]][0] for p in pods.values()}) == 1


def test_an_operator_down_while_kueue_admits_places_the_job_when_it_comes_back(
    kube: Kube, queue: str, operators: Operators
) -> None:
    """Kueue admits the Workload while no operator runs: the next one creates the pods gated,
    Kueue ungates them into one rack, and the operator leaves the pods Kueue changed alone."""
    doc = _generic("back", 2, {REQUIRED: RACK})
    kube.create(doc)
    until(lambda: _workloads(kube).get("genericjob-back"), "the job's Workload made")
    operators.kill()
    try:

        def admitted() -> bool:
            workload = _workloads(kube)["genericjob-back"]
            conditions = (workload.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)

        until(admitted, "the Workload admitted with no operator running", 60)
        assert not [n for n in kube.pods() if n.startswith("back-")]
    finally:
        operators.start()
    pods = _placed(kube, "back", 2)
    _check_ungated(pods, "genericjob-back")
    assert len({DOMAINS[p["spec"]["nodeName"]][1] for p in pods.values()}) == 1
    kube.wait_phase(doc, "Running")
    # The status says Running once the operator has seen the ungated pods: the same pods.
    now = {n: p["metadata"]["uid"] for n, p in kube.pods().items() if n.startswith("back-")}
    assert now == {n: p["metadata"]["uid"] for n, p in pods.items()}


def _slots(assignment: Any) -> list[str]:
    """A podSet's `topologyAssignment` as the host of each rank within the podSet, as Kueue's
    ungater hands them out: its domains in order, each as many times as its pods."""
    return [host for host, count in _domains(assignment).items() for _ in range(count)]


def test_a_pytorch_master_and_its_workers_grouped_share_a_rack_ranked_across_both(
    kube: Kube, queue: str
) -> None:
    """A master and 3 workers of 4 GPUs in one group (`podset-group-name`) requiring a rack
    (16 GPUs): two podSets placed in one rack together, the master rank 0 and the workers
    1..3 (`PET_NODE_RANK`), which Kueue reads within the workers' podSet from the master's
    count: each worker on the slot of its rank."""
    annotations = {REQUIRED: RACK, GROUP: "trainer"}
    master, worker = replica("master", 1), replica("worker", 3)
    for spec in (master, worker):
        _gpus(spec["template"], annotations)["spec"]["containers"][0]["resources"] = {
            "limits": {GPU: 4}
        }
    doc = job("PyTorchTrainingJob", "torch", master, worker)
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    kube.create(doc)
    pods = _placed(kube, "torch", 4)
    assert len({DOMAINS[p["spec"]["nodeName"]][1] for p in pods.values()}) == 1, pods.keys()
    ranks = {n: p["metadata"]["labels"]["tensorstack.dev/rank"] for n, p in pods.items()}
    assert ranks == {"torch-master-0": "0", **{f"torch-worker-{i}": str(i + 1) for i in range(3)}}
    for name, pod in pods.items():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
        assert env["PET_NODE_RANK"] == ranks[name]  # the program's rank is Kueue's
        assert not pod["spec"].get("schedulingGates")
        # Kueue counts the workers' podSet from the master's size itself: no offset to add.
        assert "kueue.x-k8s.io/pod-index-offset" not in pod["metadata"].get("annotations", {})
    workload = _workload(kube, "pytorchtrainingjob-torch")
    said = {
        a["name"]: a["topologyAssignment"]
        for a in workload["status"]["admission"]["podSetAssignments"]
    }
    requests = {s["name"]: s["topologyRequest"] for s in workload["spec"]["podSets"]}
    assert requests["master"]["podSetGroupName"] == requests["worker"]["podSetGroupName"]
    assert _slots(said["master"]) == [pods["torch-master-0"]["spec"]["nodeName"]]
    assert _slots(said["worker"]) == [
        pods[f"torch-worker-{i}"]["spec"]["nodeName"] for i in range(3)
    ], said


def _placed_again(kube: Kube, name: str, victim: str, old: str) -> Any:
    """Pod `name` once created again (not `old`), running off the lost node `victim`, in the
    same block and in Kueue's new assignment, its rank kept and its loss charged to the
    infrastructure."""

    def replaced() -> Any:
        pod = kube.pods().get(name)
        ok = (
            pod is not None
            and pod["metadata"]["uid"] != old
            and phase(pod) == "Running"
            and pod["spec"].get("nodeName") not in (None, victim)
        )
        return pod if ok else None

    pod = until(replaced, f"{name} placed again, off {victim}", 150)
    workload = _workload(kube, f"genericjob-{name.split('-')[0]}")
    node = pod["spec"]["nodeName"]
    assert DOMAINS[node][0] == DOMAINS[victim][0], workload.get("status")
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    hosts = _domains(assignment["topologyAssignment"])
    assert victim not in hosts and node in hosts, hosts
    assert not workload["status"].get("unhealthyNodes"), workload["status"]
    assert pod["metadata"]["labels"]["tensorstack.dev/rank"] == name.rsplit("-", 1)[1]
    status = kube.status({"kind": "GenericJob", "metadata": {"name": name.split("-")[0]}})
    assert status["backoffCount"] == 0 and status["infrastructureRestartCount"] == 1, status
    print(f"\n{name}: {victim} lost -> {node}; Kueue's hosts now {hosts}")
    return pod


def test_a_pod_lost_with_its_node_is_placed_again_in_its_block(
    kube: Kube, queue: str, topology: NodePool
) -> None:
    """Kueue finds the lost node's slot another node of the required block
    (TASFailedNodeReplacement), and the pod the operator creates again, gated, lands there.
    Among the last in the module: the node stays deleted."""
    doc = _generic("lost", 2, {REQUIRED: BLOCK})
    doc["spec"]["recoveryPolicy"] = {}
    kube.create(doc)
    pods = _placed(kube, "lost", 2)
    victim = pods["lost-worker-0"]["spec"]["nodeName"]
    topology.remove(victim)
    _placed_again(kube, "lost-worker-0", victim, pods["lost-worker-0"]["metadata"]["uid"])


def test_a_pod_on_a_node_gone_not_ready_is_placed_again_in_its_block(
    kube: Kube, queue: str, topology: NodePool
) -> None:
    """The node stops answering (Ready False, the not-ready taints, KWOK no longer drives
    it): after the bound (10 s here) the operator gives the pod up as lost, charged to the
    infrastructure; once no pod of the job runs there, Kueue takes the node for failed
    (TASReplaceNodeOnPodTermination), gives its slot another host of the required block
    (TASFailedNodeReplacement), and the pod created again, gated, lands there. After the
    deletion test: the node stays broken."""
    doc = _generic("notready", 2, {REQUIRED: BLOCK})
    doc["spec"]["recoveryPolicy"] = {}
    kube.create(doc)
    pods = _placed(kube, "notready", 2)
    victim = pods["notready-worker-0"]["spec"]["nodeName"]
    topology.break_node(victim, "False")
    _placed_again(kube, "notready-worker-0", victim, pods["notready-worker-0"]["metadata"]["uid"])
