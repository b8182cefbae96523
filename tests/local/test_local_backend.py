"""The local backend's jobs without torch: replicas that meet at the job's host and port made
local, two jobs at once on their own ports, status, progress, logs and Events read as on a
cluster, processes stopped on delete and at interpreter exit, and what it refuses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.client import ClientError, JobEnded
from t9kjobs.client.local import LocalClient, LocalUnsupported
from tests.repo import REPO

# worker-0 serves at MASTER_ADDR:MASTER_PORT, the other workers say their rank to it.
MEET = textwrap.dedent(
    """
    import os, socket, time
    addr, port, rank = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), os.environ["RANK"]
    print(f"rank {rank} meets at {addr}:{port}", flush=True)
    if rank == "0":
        server = socket.create_server((addr, port))
        conn, _ = server.accept()
        print("got", conn.recv(16).decode(), flush=True)
        print("T9KJOBS_PROGRESS step=5 total=10 loss=0.25", flush=True)
    else:
        for _ in range(300):
            try:
                socket.create_connection((addr, port)).sendall(rank.encode())
                break
            except OSError:
                time.sleep(0.05)
    """
)


def generic(name: str, code: str, replicas: int = 2) -> dict[str, Any]:
    """A GenericJob whose workers run `python3 -c code` with torch's variables."""
    env = [
        {"name": "RANK", "value": "$(rank)"},
        {"name": "MASTER_ADDR", "value": "$(service.worker[0].host)"},
        {"name": "MASTER_PORT", "value": "$(service.port[meet])"},
    ]
    container = {"name": "w", "image": "python:3.11", "command": ["python3", "-c", code]}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {
            "successRules": [{"worker": [0]}],
            "failureRules": [{"worker": [i]} for i in range(replicas)],
            "service": {"ports": [{"name": "meet", "port": 29500}]},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": replicas,
                    "restartPolicy": {"policy": "Never"},
                    "template": {"spec": {"containers": [{**container, "env": env}]}},
                }
            ],
        },
    }


def test_two_jobs_meet_each_at_its_own_local_port(local: LocalClient) -> None:
    jobs = [local.create(generic(name, MEET)) for name in ("a", "b")]
    assert [j.status.phase for j in jobs] == ["Running", "Running"]
    seen = {}
    for job in jobs:
        done = local.wait(job, timeout=60, interval=0.5)
        assert done.status.phase == "Succeeded"
        assert done.status.progress is not None
        assert done.status.progress.metrics == {"loss": 0.25}
        assert done.status.progress.percent == 100.0  # Succeeded: at its end, as on a cluster
        lines = [str(line) for line in local.logs(job, all_replicas=True)]
        assert "[worker-0] got 1" in lines
        meets = [line for line in lines if "meets at" in line]
        assert len(meets) == 2 and all("127.0.0.1:" in line for line in meets)
        seen[job.name] = {line.rpartition(":")[2] for line in meets}
    assert len(seen["a"]) == len(seen["b"]) == 1  # each job: one port for its replicas
    assert seen["a"] != seen["b"] and "29500" not in seen["a"] | seen["b"]
    reasons = [e.reason for e in local.events("GenericJob", "a")]
    assert reasons[:2] == ["Started", "Started"] and reasons[-1] == "SuccessRuleMatched"


def test_a_failed_replica_fails_the_job_naming_it(local: LocalClient) -> None:
    job = local.create(generic("fails", "import sys; print('bye'); sys.exit(3)", replicas=1))
    done = local.wait(job, phase=("Succeeded", "Failed"), timeout=60, interval=0.5)
    assert done.status.phase == "Failed"
    assert "fails-worker-0 failed with exit code 3" in str(done.status.conditions[0].message)
    with pytest.raises(JobEnded, match="Failed"):
        local.wait(job, phase="Succeeded", timeout=5)
    assert [line.text for line in local.logs(job)] == ["bye"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie is gone, waiting to be reaped


def _ends(pid: int) -> bool:
    """Whether the process is gone within a few seconds (a signal is handled when its process
    runs next, after the call that sent it returned)."""
    deadline = time.monotonic() + 5
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


SPAWNS = (
    "import subprocess, time; child = subprocess.Popen(['sleep', '300']);"
    " print('child', child.pid, flush=True); time.sleep(300)"
)


def _child_pid(local: LocalClient, name: str) -> int:
    for _ in range(200):
        lines = [line.text for line in local.logs("GenericJob", name)]
        if lines:
            return int(lines[0].split()[1])
        time.sleep(0.05)
    raise AssertionError("the replica never said its child")


def test_delete_stops_the_whole_process_group(local: LocalClient) -> None:
    local.create(generic("sleeps", SPAWNS, replicas=1))
    child = _child_pid(local, "sleeps")
    assert _alive(child)
    local.delete("GenericJob", "sleeps")
    assert _ends(child)
    assert local.list() == []


def test_interpreter_exit_stops_the_jobs(tmp_path: Any) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from t9kjobs.client import Client
        from tests.local.test_local_backend import generic, SPAWNS
        client = Client(backend="local", folder={str(tmp_path)!r})
        client.create(generic("left", SPAWNS, replicas=1))
        while not list(client.logs("GenericJob", "left")):
            time.sleep(0.05)
        print(next(iter(client.logs("GenericJob", "left"))).text.split()[1])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    child = int(done.stdout.strip())
    assert _ends(child)


def test_a_function_runs_on_local_workers(local: LocalClient) -> None:
    job = local.train(say_rank, ["hi"], kind="GenericJob", nodes=2, name="fn")
    assert local.wait(job, timeout=60, interval=0.5).status.phase == "Succeeded"
    lines = sorted(str(line) for line in local.logs(job, all_replicas=True))
    assert lines == ["[worker-0] hi from 0 of 2", "[worker-1] hi from 1 of 2"]


def say_rank(greeting: str, *, rank: int, world_size: int) -> None:
    print(f"{greeting} from {rank} of {world_size}")


def test_what_cannot_run_here_is_refused_before_anything_starts(local: LocalClient) -> None:
    with pytest.raises(LocalUnsupported, match="reach each other over ssh"):
        local.create(REPO / "examples/deepspeedjob/mlp-cpu.yaml")
    with pytest.raises(LocalUnsupported, match=r"asks for \d+ nvidia.com/gpu in all and this"):
        local.create(REPO / "examples/pytorchtrainingjob/torchrun-gpu.yaml")
    assert local.list() == []
    missing = generic("missing", "")
    missing["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = [
        "t9k-none"
    ]
    with pytest.raises(ClientError, match="Pod missing-worker-0: cannot start 't9k-none' here"):
        local.create(missing)
    dispatched = generic("dispatched", "")
    dispatched["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    with pytest.raises(LocalUnsupported, match=r"spec\.managedBy is 'kueue\.x-k8s\.io/multikueue'"):
        local.create(dispatched)
    job = local.create(generic("paused", "import time; time.sleep(300)", replicas=1))
    with pytest.raises(LocalUnsupported, match="cannot pause"):
        local.pause(job)
