"""The real node does what the training tier relies on: the trainer image runs, pods find each
other by name through a headless Service and talk TCP, exit codes reach the pod status, and
``kubectl logs``/``exec`` reach the kubelet (API server -> kubelet -> containerd)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.cluster import Cluster
from tests.real.conftest import TRAINER_IMAGE
from tests.real.jobs import apply


def pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    """A pod of the trainer image that runs ``script`` with python3 and is not restarted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "smoke"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": TRAINER_IMAGE,
                    # There is no registry: the image is imported into the node (docs/cluster.md).
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-u", "-c", textwrap.dedent(script)],
                }
            ],
            **spec,
        },
    }


def pod_json(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout
    result: dict[str, Any] = json.loads(out)
    return result


def wait_phase(cluster: Cluster, namespace: str, name: str, *phases: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        obj = pod_json(cluster, namespace, name)
        return obj if obj["status"].get("phase") in phases else None

    return cluster.poll(reached, timeout=180, interval=1, message=f"pod {name} in {phases}")


def test_trainer_image_imports_torch_deepspeed_colossalai(cluster: Cluster, namespace: str) -> None:
    apply(
        cluster,
        namespace,
        pod(
            "imports",
            """
            import torch, deepspeed, colossalai
            print("versions", torch.__version__, deepspeed.__version__, colossalai.__version__)
            """,
        ),
    )
    obj = wait_phase(cluster, namespace, "imports", "Succeeded", "Failed")
    logs = cluster.kubectl("-n", namespace, "logs", "imports").stdout
    assert obj["status"]["phase"] == "Succeeded", logs
    (line,) = [line for line in logs.splitlines() if line.startswith("versions ")]
    assert line == "versions 1.13.0a0 0.15.4 0.3.3", logs  # Debian's torch 1.13, pinned PyPI


def test_plain_torchrun_trains_in_the_trainer_image(cluster: Cluster, namespace: str) -> None:
    """torchrun with its default options: Debian's torch 1.13 on Python 3.11 crashes at start
    without the image's patch (hack/images/trainer/Containerfile)."""
    spec = pod("torchrun", "")
    spec["spec"]["containers"][0]["command"] = [
        "torchrun",
        "--standalone",
        "--nproc_per_node=2",
        "/opt/t9kjobs/examples/mlp.py",
        "--steps=30",
        "--log-every=10",
    ]
    apply(cluster, namespace, spec)
    obj = wait_phase(cluster, namespace, "torchrun", "Succeeded", "Failed")
    logs = cluster.kubectl("-n", namespace, "logs", "torchrun").stdout
    assert obj["status"]["phase"] == "Succeeded", logs
    for rank in (0, 1):
        assert f"done rank={rank} world=2 " in logs, logs


def test_pods_reach_each_other_by_name_over_tcp(cluster: Cluster, namespace: str) -> None:
    """A headless Service gives each pod (hostname + subdomain) a name in the cluster DNS; a
    client resolves the server's name and they exchange data both ways."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "peers"},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": "smoke"},
            "ports": [{"name": "echo", "port": 7000}],
        },
    }
    server = pod(
        "server",
        """
        import socket
        srv = socket.create_server(("", 7000))
        conn, peer = srv.accept()
        data = conn.recv(1024)
        conn.sendall(b"pong:" + data)
        print("served", data.decode(), "to", peer[0])
        """,
        hostname="server",
        subdomain="peers",
    )
    client = pod(
        "client",
        f"""
        import socket, time
        name = "server.peers.{namespace}.svc.cluster.local"
        for attempt in range(120):  # until DNS has the server and it listens
            try:
                addr = socket.gethostbyname(name)
                conn = socket.create_connection((addr, 7000), timeout=5)
                break
            except OSError as exc:
                time.sleep(1)
        else:
            raise SystemExit(f"cannot reach {{name}}: {{exc}}")
        conn.sendall(b"ping")
        print("resolved", name, "to", addr, "got", conn.recv(1024).decode())
        # The cluster DNS answers nothing outside cluster.local, and at once: no upstream.
        try:
            socket.gethostbyname("example.com")
        except socket.gaierror as exc:
            print("outside name:", "NXDOMAIN" if exc.errno == socket.EAI_NONAME else exc)
        else:
            print("outside name: resolved")
        """,
        hostname="client",
        subdomain="peers",
    )
    apply(cluster, namespace, service, server, client)
    server_obj = wait_phase(cluster, namespace, "server", "Succeeded", "Failed")
    client_obj = wait_phase(cluster, namespace, "client", "Succeeded", "Failed")
    server_log = cluster.kubectl("-n", namespace, "logs", "server").stdout
    client_log = cluster.kubectl("-n", namespace, "logs", "client").stdout
    assert client_obj["status"]["phase"] == "Succeeded", client_log
    assert server_obj["status"]["phase"] == "Succeeded", server_log
    server_ip = server_obj["status"]["podIP"]
    client_ip = client_obj["status"]["podIP"]
    assert f"to {server_ip} got pong:ping" in client_log
    assert "outside name: NXDOMAIN" in client_log
    assert f"served ping to {client_ip}" in server_log
    assert server_ip != client_ip


def test_exit_code_reaches_the_pod_status(cluster: Cluster, namespace: str) -> None:
    apply(cluster, namespace, pod("exits", "raise SystemExit(3)"))
    obj = wait_phase(cluster, namespace, "exits", "Succeeded", "Failed")
    assert obj["status"]["phase"] == "Failed"
    terminated = obj["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert terminated["reason"] == "Error"


def test_kubectl_logs_and_exec_reach_the_kubelet(cluster: Cluster, namespace: str) -> None:
    apply(
        cluster,
        namespace,
        pod("sleeper", 'import time\nprint("ready", flush=True)\ntime.sleep(600)'),
    )
    wait_phase(cluster, namespace, "sleeper", "Running")
    cluster.poll(
        lambda: "ready" in cluster.kubectl("-n", namespace, "logs", "sleeper").stdout,
        timeout=60,
        message="the sleeper's log line",
    )
    out = cluster.kubectl(
        "-n", namespace, "exec", "sleeper", "--", "sh", "-c", "echo $((6 * 7)); hostname"
    ).stdout.split()
    assert out == ["42", "sleeper"]
    # exec passes the exit code of the command through
    failed = cluster.kubectl(
        "-n", namespace, "exec", "sleeper", "--", "sh", "-c", "exit 5", check=False
    )
    assert failed.returncode == 5


def test_the_bridge_keeps_its_mac_address_while_pods_come_and_go(
    cluster: Cluster, namespace: str
) -> None:
    """A bridge whose MAC the kernel picks takes the lowest MAC of its ports: each pod's veth
    could change it, and pods that had learnt the old one lost every packet to the gateway
    (CoreDNS) until their ARP entry expired. Its address is set (addr_assign_type 3), once."""
    bridge = Path("/sys/class/net") / cluster.env["NODE_BRIDGE"]
    assert (bridge / "addr_assign_type").read_text().strip() == "3"  # NET_ADDR_SET
    before = (bridge / "address").read_text().strip()
    apply(cluster, namespace, *(pod(f"short-{i}", "print('hi')") for i in range(3)))
    for i in range(3):
        wait_phase(cluster, namespace, f"short-{i}", "Succeeded", "Failed")
    cluster.kubectl("-n", namespace, "delete", "pods", "--all", "--wait=true")
    assert (bridge / "address").read_text().strip() == before
