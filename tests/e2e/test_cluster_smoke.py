"""Smoke tests of the local control plane and its simulated pods (hack/cluster, docs/cluster.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.e2e

EXIT_CODE = "sim.t9kjobs.dev/exit-code"
RUN_SECONDS = "sim.t9kjobs.dev/run-seconds"


@pytest.fixture
def core(cluster: Any) -> Iterator[client.CoreV1Api]:
    with cluster.api_client() as api:
        yield client.CoreV1Api(api)


def make_pod(
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    init: bool = False,
    gpus: int = 0,
    owner: client.V1OwnerReference | None = None,
) -> client.V1Pod:
    resources = None
    if gpus:
        resources = client.V1ResourceRequirements(
            limits={"nvidia.com/gpu": str(gpus)}, requests={"nvidia.com/gpu": str(gpus)}
        )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations=annotations,
            owner_references=[owner] if owner else None,
        ),
        spec=client.V1PodSpec(
            restart_policy="Never",
            init_containers=(
                [client.V1Container(name="init", image="busybox", command=["true"])]
                if init
                else None
            ),
            containers=[
                client.V1Container(
                    name="main", image="busybox", command=["sleep", "3600"], resources=resources
                )
            ],
        ),
    )


def wait_phase(cluster: Any, core: client.CoreV1Api, ns: str, name: str, *phases: str) -> Any:
    return cluster.poll(
        lambda: (p := core.read_namespaced_pod(name, ns)).status.phase in phases and p,
        message=f"pod {ns}/{name} phase in {phases}",
    )


def test_namespace_created(core: client.CoreV1Api, namespace: str) -> None:
    ns = core.read_namespace(namespace)
    assert ns.status.phase == "Active"
    assert core.read_namespaced_service_account("default", namespace)


def test_nodes_have_gpus(cluster: Any, core: client.CoreV1Api) -> None:
    nodes = [n for n in core.list_node().items if n.metadata.labels.get("type") == "kwok"]
    assert len(nodes) == int(cluster.env["NODES"]) >= 1
    for node in nodes:
        assert int(node.status.capacity["nvidia.com/gpu"]) >= 8
        assert int(node.status.allocatable["nvidia.com/gpu"]) >= 8
        assert not node.spec.taints
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True"
    # The built kubectl works with the admin kubeconfig.
    out = cluster.kubectl("get", "nodes", "-o", "json").stdout
    assert {n["metadata"]["name"] for n in json.loads(out)["items"]} >= {
        n.metadata.name for n in nodes
    }


def test_pod_without_annotation_keeps_running(
    cluster: Any, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, make_pod("runner", gpus=8))
    pod = wait_phase(cluster, core, namespace, "runner", "Running")
    assert pod.spec.node_name
    assert pod.status.pod_ip
    assert all(cs.ready and cs.state.running for cs in pod.status.container_statuses)
    ready = [c for c in pod.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    time.sleep(3)  # nothing terminates it
    assert core.read_namespaced_pod("runner", namespace).status.phase == "Running"


def test_pod_succeeds(cluster: Any, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, make_pod("ok", {EXIT_CODE: "0"}))
    pod = wait_phase(cluster, core, namespace, "ok", "Succeeded", "Failed")
    assert pod.status.phase == "Succeeded"
    (cs,) = pod.status.container_statuses
    assert cs.state.terminated.exit_code == 0
    assert cs.state.terminated.reason == "Completed"
    assert pod.status.pod_ip


@pytest.mark.parametrize(("code", "reason"), [(137, "OOMKilled"), (3, "Error")])
def test_pod_fails(
    cluster: Any, core: client.CoreV1Api, namespace: str, code: int, reason: str
) -> None:
    core.create_namespaced_pod(namespace, make_pod("bad", {EXIT_CODE: str(code)}))
    pod = wait_phase(cluster, core, namespace, "bad", "Succeeded", "Failed")
    assert pod.status.phase == "Failed"
    (cs,) = pod.status.container_statuses
    assert cs.state.terminated.exit_code == code
    assert cs.state.terminated.reason == reason


def test_run_seconds_delays_exit(cluster: Any, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, make_pod("slow", {EXIT_CODE: "1", RUN_SECONDS: "4"}))
    running = wait_phase(cluster, core, namespace, "slow", "Running", "Failed")
    assert running.status.phase == "Running", "pod should run before it exits"
    pod = wait_phase(cluster, core, namespace, "slow", "Succeeded", "Failed")
    assert pod.status.phase == "Failed"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 1
    # Timestamps have one-second resolution.
    assert (term.finished_at - term.started_at).total_seconds() >= 3


def test_annotating_a_running_pod_injects_failure(
    cluster: Any, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, make_pod("victim"))
    wait_phase(cluster, core, namespace, "victim", "Running")
    core.patch_namespaced_pod("victim", namespace, {"metadata": {"annotations": {EXIT_CODE: "2"}}})
    pod = wait_phase(cluster, core, namespace, "victim", "Succeeded", "Failed")
    assert pod.status.phase == "Failed"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 2


def test_pod_with_init_containers_runs(
    cluster: Any, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, make_pod("withinit", init=True))
    pod = wait_phase(cluster, core, namespace, "withinit", "Running")
    (init,) = pod.status.init_container_statuses
    assert init.state.terminated.exit_code == 0
    assert pod.status.container_statuses[0].state.running


def test_deleted_pod_goes_away(cluster: Any, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, make_pod("doomed"))
    wait_phase(cluster, core, namespace, "doomed", "Running")
    core.delete_namespaced_pod("doomed", namespace)  # default grace period: 30 s

    def gone() -> bool:
        try:
            core.read_namespaced_pod("doomed", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    # Well inside the grace period: kwok deletes it at once instead of leaving it Terminating.
    cluster.poll(gone, timeout=20, message="deleted pod removed")


def test_owner_reference_garbage_collection(
    cluster: Any, core: client.CoreV1Api, namespace: str
) -> None:
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    core.create_namespaced_pod(namespace, make_pod("owned", owner=ref))
    wait_phase(cluster, core, namespace, "owned", "Running")
    core.delete_namespaced_config_map("owner", namespace)

    def collected() -> bool:
        try:
            core.read_namespaced_pod("owned", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    cluster.poll(collected, timeout=120, message="pod garbage-collected after its owner")


def test_service_gets_cluster_ip(core: client.CoreV1Api, namespace: str) -> None:
    svc = core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="svc"),
            spec=client.V1ServiceSpec(selector={"app": "x"}, ports=[client.V1ServicePort(port=80)]),
        ),
    )
    assert svc.spec.cluster_ip and svc.spec.cluster_ip != "None"
