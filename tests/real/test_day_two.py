"""Day two on the real node, where pods have logs: `t9kjobs logs` of one replica, of every
replica interleaved, followed across a restart; `t9kjobs describe` of a running job (elapsed
time, progress the operator read from the deciding replica's log) and of a failed one (exit code, last log lines).

The jobs run shell loops in the trainer image: quick, and their output known line by line.
The flaky worker learns which incarnation it is from its pod's annotation
`batch.tensorstack.dev/restart-count` (downward API) and fails only the first time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import apply, job, scripted, wait_finished, wait_for

# Progress read every 2 s, so that describe shows it within seconds of the job's start.
OPERATOR_ARGS = ("--progress-interval", "2")

T9KJOBS = str(Path(sys.executable).parent / "t9kjobs")


def t9kjobs(cluster: Cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run(
        [T9KJOBS, *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_logs_follow_a_replica_across_its_restart(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    script = (
        'for i in 1 2 3; do echo "step $i/3 incarnation $INCARNATION"; sleep 1; done;'
        ' [ "$INCARNATION" != 0 ] || { echo "boom" >&2; exit 1; }'
    )
    policy = {"policy": "OnFailure", "limit": 2}
    apply(cluster, namespace, job("GenericJob", "flaky", scripted("worker", script, policy)))
    # Started while the first pod may still be creating: -f waits for it, and for its successor.
    followed = t9kjobs(cluster, "logs", "gj/flaky", "-f", "-n", namespace)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [
        "step 1/3 incarnation 0",
        "step 2/3 incarnation 0",
        "step 3/3 incarnation 0",
        "boom",
        "--- worker-0: new pod (restart 1) ---",
        "step 1/3 incarnation 1",
        "step 2/3 incarnation 1",
        "step 3/3 incarnation 1",
    ]
    final = wait_finished(cluster, namespace, "GenericJob", "flaky")
    assert final["status"]["phase"] == "Succeeded"
    once = t9kjobs(cluster, "logs", "gj/flaky", "worker-0", "--tail", "1", "-n", namespace)
    assert once.stdout == "step 3/3 incarnation 1\n"


def test_logs_all_and_describe_of_a_running_job_with_progress(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    master = 'for i in $(seq 1 600); do echo "step $i/600 loss=0.$((1000 - i))"; sleep 1; done'
    worker = 'for i in $(seq 1 600); do echo "worker step $i"; sleep 1; done'
    steady = job(
        "GenericJob",
        "steady",
        scripted("master", master),
        scripted("worker", worker, replicas=2),
        successRules=[{"master": [0]}],
    )
    apply(cluster, namespace, steady)
    wait_for(
        cluster,
        namespace,
        "GenericJob",
        "steady",
        "3 replicas running for 4 s",
        lambda j: (j.get("status") or {}).get("ready") == "3/3",
        timeout=180,
    )
    cluster.poll(
        lambda: "step 4/600" in t9kjobs(cluster, "logs", "gj/steady", "-n", namespace).stdout,
        timeout=60,
        interval=1,
        message="the master's 4th step",
    )
    interleaved = t9kjobs(cluster, "logs", "gj/steady", "--all", "-n", namespace).stdout
    lines = interleaved.splitlines()
    prefixes = {line.split()[0] for line in lines}
    assert prefixes == {"[master-0]", "[worker-0]", "[worker-1]"}, interleaved
    # Interleaved by time: the master's first step comes before every replica's fourth.
    first = lines.index("[master-0] step 1/600 loss=0.999")
    assert first < lines.index("[worker-0] worker step 4") and first < lines.index(
        "[worker-1] worker step 4"
    )

    described = cluster.poll(
        lambda: (
            (d := t9kjobs(cluster, "describe", "gj/steady", "-n", namespace)).returncode == 0
            and "Progress:" in d.stdout
            and d
        ),
        timeout=60,
        interval=1,
        message="describe to show the progress read from master-0's log",
    )
    text = described.stdout.splitlines()
    assert all(len(line) <= 80 for line in text), described.stdout
    started = next(line for line in text if line.startswith("Started:"))
    assert re.search(r"\(running \d+s\)$", started), started
    progress = next(line for line in text if line.startswith("Progress:"))
    # `step i/600` lines, not marked ones: free-form progress, without metrics.
    assert re.fullmatch(
        r"Progress:   [\d.]+% \(step \d+/600\)(, about \S+ left)? \(master-0, \d+s ago\)",
        progress,
    ), progress
    # a `bash -c SCRIPT` wrapper shows its script (docs/observability.md)
    assert '  worker-0, worker-1: for i in $(seq 1 600); do echo "worker step $i"; sleep 1;' in (
        described.stdout
    )


def test_describe_a_failed_job_shows_exit_code_and_last_log_lines(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    script = (
        # one stream: the runtime copies stdout and stderr apart, so their order in the log
        # is not the order they were written in
        'exec 2>&1; echo "loading data"; for i in 1 2 3 4 5 6; do echo "step $i/6"; done;'
        ' echo "ValueError: loss is nan" >&2; exit 2'
    )
    apply(cluster, namespace, job("GenericJob", "crash", scripted("worker", script)))
    final = wait_finished(cluster, namespace, "GenericJob", "crash")
    assert final["status"]["phase"] == "Failed"
    described = t9kjobs(cluster, "describe", "gj/crash", "-n", namespace)
    lines = described.stdout.splitlines()
    at = lines.index("  worker-0: Failed, exit code 2, Error, container trainer")
    assert lines[at + 1 : at + 6] == [
        "    | step 3/6",
        "    | step 4/6",
        "    | step 5/6",
        "    | step 6/6",
        "    | ValueError: loss is nan",
    ], described.stdout
    assert "Cleanup:    policy None; deleted nothing; 1 pod(s) left" in lines
    tail = t9kjobs(cluster, "logs", "gj/crash", "--tail", "2", "-n", namespace)
    assert tail.stdout.splitlines() == ["step 6/6", "ValueError: loss is nan"]
