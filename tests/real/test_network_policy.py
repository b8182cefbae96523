"""A job's NetworkPolicy (`t9kjobs operator --network-policy`), proven by an engine that enforces
it: kube-network-policies on the real node (docs/cluster.md, "NetworkPolicy enforcement"),
started here when the cluster does not run it, and stopped again after.

One GenericJob whose master serves a TCP port and waits, with a pod beside it in its namespace
and one in another namespace. The operator first runs without the option: both foreign pods
reach the master (the control: the network lets them, so a refusal later is the policy's).
The operator restarts with the option: the running job gets its NetworkPolicy, both foreign
pods' connections are dropped, the job's own worker still connects, and, released, the two
ranks train over gloo to Succeeded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import HACK, Cluster, fresh_namespace
from tests.operators import install_crds, operator_process
from tests.real.jobs import (
    MLP,
    apply,
    assert_trained,
    container,
    get,
    job_logs,
    pods_of,
    report,
    wait_finished,
)

JOB = "guarded"
PORT = 8000
GATE = "/tmp/go"
# Answers each connection with the peer's address, for ever (in the background of the master).
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen()
while True:
    c, peer = s.accept()
    c.sendall(("hello " + peer[0]).encode())
    c.close()
"""
# A connection attempt from inside a pod: `open <answer>` or `blocked <exception>`.
PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("open", c.recv(64).decode())
except OSError as exc:
    print("blocked", type(exc).__name__)
"""


def _rank(type_: str, script: str) -> dict[str, Any]:
    env = [
        {"name": "RANK", "value": "$(rank)"},
        {"name": "WORLD_SIZE", "value": "2"},
        {"name": "MASTER_ADDR", "value": "$(service.master[0].host)"},
        {"name": "MASTER_PORT", "value": "$(service.port[torch])"},
    ]
    trainer = container("trainer", ["bash", "-c", script], env=env)
    return {
        "type": type_,
        "replicas": 1,
        "restartPolicy": {"policy": "Never"},
        "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [trainer]}},
    }


def guarded_job() -> dict[str, Any]:
    wait = f"until [ -e {GATE} ]; do sleep 0.5; done"
    master = f"python3 -u -c '{SERVER}' & {wait}; exec python3 {MLP} --steps=300"
    worker = f"{wait}; exec python3 {MLP} --steps=300 --rank-offset=1"
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": JOB},
        "spec": {
            "successRules": [{"master": [0]}],
            "failureRules": [{"master": [0]}, {"worker": [0]}],
            "service": {"ports": [{"name": "torch", "port": 23456}]},
            "replicaSpecs": [_rank("master", master), _rank("worker", worker)],
        },
    }


def sleeper(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [container("main", ["sleep", "3600"])],
        },
    }


def probe(cluster: Cluster, namespace: str, pod: str, address: str) -> str:
    out = cluster.kubectl(
        "-n", namespace, "exec", pod, "--", "python3", "-c", PROBE, address, str(PORT)
    )
    return out.stdout.strip()


def _engine(cluster: Cluster, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "T9KJOBS_CLUSTER_DIR": str(cluster.dir)}
    return subprocess.run(
        ["bash", str(HACK / "node" / "network-policies.sh"), command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def engine(cluster: Cluster) -> Iterator[Path]:
    """kube-network-policies running on the node (built first when missing); its log."""
    running = _engine(cluster, "status").returncode == 0
    if not running:
        started = _engine(cluster, "start")
        assert started.returncode == 0, started.stderr[-4000:]
    try:
        yield cluster.dir / "logs" / "kube-network-policies.log"
    finally:
        if not running:
            stopped = _engine(cluster, "stop")
            assert stopped.returncode == 0, stopped.stderr[-4000:]


def running(cluster: Cluster, namespace: str, *names: str) -> dict[str, dict[str, Any]]:
    def check() -> dict[str, dict[str, Any]] | None:
        pods = {n: get(cluster, namespace, "pod", n) for n in names}
        ok = all(
            p["status"].get("phase") == "Running" and p["status"].get("podIP")
            for p in pods.values()
        )
        return pods if ok else None

    return cluster.poll(check, timeout=300, interval=1, message=f"pods {names} running")


def test_a_jobs_policy_admits_its_own_pods_only(
    cluster: Cluster,
    namespace: str,
    engine: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    install_crds(cluster)
    seen: list[str] = []

    def check(where: str, pod: str, address: str, expected: str) -> None:
        def attempt() -> str | None:
            ns = other if pod == "outsider" else namespace
            answer = probe(cluster, ns, pod, address)
            return answer if answer.startswith(expected) else None

        answer = cluster.poll(attempt, timeout=60, interval=1, message=f"{where}: {expected}")
        seen.append(f"{where}: {answer}")

    with fresh_namespace(cluster, request.node.name + "-other") as other:
        plain = operator_process(cluster, log=tmp_path / "operator-plain.log")
        try:
            plain.wait_ready()
            apply(cluster, namespace, guarded_job(), sleeper("neighbour"))
            apply(cluster, other, sleeper("outsider"))
            master, worker = f"{JOB}-master-0", f"{JOB}-worker-0"
            pods = running(cluster, namespace, master, worker, "neighbour")
            running(cluster, other, "outsider")
            ip = pods[master]["status"]["podIP"]
            # Without the option: no policy, and every pod reaches the master's port.
            check("same job, no policy", worker, ip, "open")
            check("same namespace, no policy", "neighbour", ip, "open")
            check("other namespace, no policy", "outsider", ip, "open")
            assert get(cluster, namespace, "networkpolicies")["items"] == []
        finally:
            plain.stop()

        guarding = operator_process(
            cluster, "--network-policy", log=tmp_path / "operator-guarding.log"
        )
        try:
            guarding.wait_ready()
            policy = cluster.poll(
                lambda: get(cluster, namespace, "networkpolicies")["items"],
                timeout=60,
                message="the job's NetworkPolicy",
            )[0]
            job = get(cluster, namespace, "genericjob", JOB)
            assert policy["metadata"]["name"] == JOB
            [owner] = policy["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "GenericJob",
                job["metadata"]["uid"],
                True,
            )
            # The running pods were left as they were: the same master, at the same address.
            assert (
                pods_of(cluster, namespace, JOB)[master]["metadata"]["uid"]
                == (pods[master]["metadata"]["uid"])
            )
            check("other namespace, policy", "outsider", ip, "blocked TimeoutError")
            check("same namespace, policy", "neighbour", ip, "blocked TimeoutError")
            check("same job, policy", worker, ip, "open")
            print("\n" + "\n".join(seen))

            for pod in (master, worker):
                cluster.kubectl("-n", namespace, "exec", pod, "--", "touch", GATE)
            finished = wait_finished(cluster, namespace, "GenericJob", JOB, timeout=600)
            logs = job_logs(cluster, namespace, JOB)
            assert finished["status"]["phase"] == "Succeeded", report(finished, logs)
            assert_trained(logs, 2, JOB)
            # The engine judged them: the foreign pods' packets, dropped by the job's policy.
            judged = [
                line
                for line in engine.read_text(errors="replace").splitlines()
                if f'dstPod="{namespace}/{master}"' in line
                or "allowed=false" in line
                or 'verdict="drop"' in line
            ]
            print("\n".join(judged[-9:]))
            for source in (f"{other}/outsider", f"{namespace}/neighbour", f"{namespace}/{worker}"):
                assert any(f'srcPod="{source}"' in line for line in judged), source
            assert any('verdict="drop"' in line for line in judged), judged[-20:]
        finally:
            guarding.stop()
