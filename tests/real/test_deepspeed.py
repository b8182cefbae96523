"""DeepSpeedJob trains for real in each form of `config`: `run.module` and `customCommand` (the
`run.python` form is the runnable example examples/deepspeedjob/mlp-cpu.yaml, trained by
test_training.py), and in debug mode by the launch command run by hand on worker-0; one whose
ranks are SIGKILLed resumes from DeepSpeed's own checkpoint (`save_checkpoint` /
`load_checkpoint` under `spec.checkpoint`, docs/lifecycle.md "Checkpoints").

Every form goes the same way: worker-0 waits for every worker's sshd, writes the env file, and
DeepSpeed's launcher reaches the workers with pdsh over ssh (the job's own key) through the
generated hostfile; the script trains through `deepspeed.initialize` on CPU (gloo).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.cluster import Cluster
from tests.operators import OperatorProcess
from tests.real.jobs import (
    MLP,
    apply,
    assert_trained,
    claim_volume,
    container,
    done_lines,
    events_of,
    job_logs,
    pods_of,
    report,
    wait_finished,
    wait_for,
)

# Progress read every second: the checkpoint a restart resumes from is the newest one read, so
# that ds-resumes redoes fewer steps than it saves every (as tests/real/test_progress.py).
OPERATOR_ARGS = ("--progress-interval", "1")

KIND = "DeepSpeedJob"


def dsj(name: str, workers: int, config: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "config": config,
            "worker": {
                "replicas": workers,
                "restartPolicy": "Never",
                "template": {"spec": {"containers": [container("worker")]}},
            },
            **spec,
        },
    }


def test_the_module_and_custom_command_forms_train_over_pdsh(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    module = dsj(
        "ds-module",
        2,
        # `deepspeed --module mlp`: the image's working directory holds mlp.py, and the
        # launcher runs every rank from its own working directory
        {"run": {"module": ["mlp", "--deepspeed", "--steps=150"]}},
    )
    custom = dsj(
        "ds-custom",
        2,
        {
            "slotsPerWorker": 2,
            "customCommand": f"deepspeed --hostfile=/t9k/hostfile {MLP} --deepspeed --steps=150",
        },
    )
    # Beside them (CI time): ranks that SIGKILL themselves 8 s into the first incarnation; the
    # launcher fails, worker-0 is restarted and every rank resumes from the newest checkpoint.
    train = ["--steps=200", "--sleep=0.1", "--log-every=10", "--checkpoint-every=10"]
    knobs = ["--kill-after=8", "--kill-incarnation=0"]
    resumes = dsj(
        "ds-resumes",
        2,
        {"run": {"python": [MLP, "--deepspeed", *train, *knobs]}},
        checkpoint={"path": "/ckpt", "claimName": "ckpt", "gracePeriodSeconds": 30},
    )
    resumes["spec"]["worker"]["restartPolicy"] = "OnFailure"
    volume = claim_volume(cluster, namespace, "ckpt")
    try:
        apply(cluster, namespace, module, custom, resumes)
        _forms_trained(cluster, namespace)
        _resumed(cluster, namespace, "ds-resumes")
    finally:
        cluster.kubectl("delete", "pv", volume, "--wait=false", check=False)


def _resumed(cluster: Cluster, namespace: str, name: str) -> None:
    """Succeeded in its second incarnation, every rank resumed by `load_checkpoint` from the
    checkpoint recorded (the step is the one `save_checkpoint` kept in its client state),
    having redone fewer steps than it saves every."""
    final = wait_finished(cluster, namespace, KIND, name)
    logs = job_logs(cluster, namespace, name)
    assert final["status"]["phase"] == "Succeeded", f"{name}\n{report(final, logs)}"
    saved = final["status"].get("checkpoint") or {}
    launcher = logs[f"{name}-worker-0"]
    # pdsh prefixes each rank's lines with its host
    resumed = re.findall(r"resume rank=(\d+) from=(\S+) step=(\d+) redone=(\d+)$", launcher, re.M)
    done = done_lines(launcher)
    print(f"\nDeepSpeedJob resumed (rank, from, step, redone): {resumed}; {done}; {saved}")
    assert str(saved.get("path", "")).startswith("/ckpt/step-"), final["status"]
    assert sorted(r[0] for r in resumed) == ["0", "1"], launcher[-3000:]
    assert all(r[1] == f"/ckpt/step-{r[2]}" and int(r[2]) > 0 for r in resumed), resumed
    assert all(0 <= int(r[3]) < 10 for r in resumed), resumed
    # Trained on to the end from there, every rank in sync (its loss starts low: no 10x drop).
    assert sorted(d.rank for d in done) == [0, 1] and {d.world for d in done} == {2}, done
    assert all(d.in_sync for d in done), done


def _forms_trained(cluster: Cluster, namespace: str) -> None:
    for name, world, hint in (("ds-module", 2, "--module"), ("ds-custom", 4, "customCommand")):
        final = wait_finished(cluster, namespace, KIND, name)
        logs = job_logs(cluster, namespace, name)
        assert final["status"]["phase"] == "Succeeded", f"{name}\n{report(final, logs)}"
        # worker-0 ran every rank through pdsh: the other worker's ranks print there too
        launcher = logs[f"{name}-worker-0"]
        assert "cmd = pdsh " in launcher, launcher
        assert_trained({f"{name}-worker-0": launcher}, world, hint)
        completed = [c for c in final["status"]["conditions"] if c["type"] == "Completed"]
        assert completed and completed[0]["status"] == "True", final["status"]
        # Succeeded is a routine Event, not posted by default (test_training.py asks for it).
        reasons = [e["reason"] for e in events_of(cluster, namespace, name)]
        assert "Succeeded" not in reasons, reasons
        # the sshd-only workers are stopped when worker-0 finishes (deleted with the job's
        # verdict; a deleted pod is listed until its sshd has exited)
        cluster.poll(
            lambda: sorted(pods_of(cluster, namespace, name)) == [f"{name}-worker-0"],  # noqa: B023
            timeout=60,
            message=f"{name}: only worker-0 left",
        )
    module_line = pods_of(cluster, namespace, "ds-module")["ds-module-worker-0"]["spec"][
        "containers"
    ][0]["command"][-1]
    assert "exec deepspeed --hostfile=/t9k/hostfile --module mlp --deepspeed" in module_line


def test_debug_mode_workers_wait_and_the_launch_command_run_on_worker_0_trains(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    job = dsj(
        "ds-debug",
        2,
        {"run": {"python": [MLP, "--deepspeed", "--steps=100"]}},
        runMode={"debug": {"enabled": True}},
    )
    apply(cluster, namespace, job)
    wait_for(
        cluster,
        namespace,
        KIND,
        "ds-debug",
        "debug mode with every pod running",
        lambda j: (j.get("status") or {}).get("aggregate", {}).get("running") == 2,
        timeout=300,
    )
    out = cluster.kubectl(
        "-n",
        namespace,
        "exec",
        "ds-debug-worker-0",
        "--",
        "bash",
        "-c",
        'eval "$T9KJOBS_LAUNCH_COMMAND"',
        timeout=300,
    ).stdout
    assert "t9k-jobs: all 2 worker(s) answer over ssh" in out, out
    assert_trained({"exec on worker-0": out}, 2, "debug mode, launched by hand")
    job_now = json.loads(
        cluster.kubectl("-n", namespace, "get", "dsj", "ds-debug", "-o", "json").stdout
    )
    assert job_now["status"]["phase"] == "Running"  # debug mode: pod exits never finish it
    _ssh_checks_the_job_host_key(cluster, namespace, "ds-debug")


def _sh(cluster: Cluster, namespace: str, pod: str, script: str) -> tuple[int, str]:
    """Run `script` in the pod: (exit code, stdout and stderr)."""
    done = cluster.kubectl(
        "-n", namespace, "exec", pod, "--", "bash", "-c", script, check=False, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def _ssh_checks_the_job_host_key(cluster: Cluster, namespace: str, job: str) -> None:
    """A server that answers for a worker's name with another host key is refused; the job's
    own sshd is reached; a worker has no client key; sshd forwards nothing (docs/security.md).

    Worker-1 runs a second sshd on port 2222 with a host key of its own, trusting the job's
    client key like the real one: everything but the host key is right, so only the host key
    check can refuse it."""
    worker0, worker1 = f"{job}-worker-0", f"{job}-worker-1"
    host = f"{worker1}.{job}"
    code, out = _sh(
        cluster,
        namespace,
        worker1,
        "ssh-keygen -q -t ed25519 -N '' -f /tmp/impostor && /usr/sbin/sshd -f /dev/null -p 2222"
        " -h /tmp/impostor -o AuthorizedKeysFile=/root/.ssh/authorized_keys -o StrictModes=no",
    )
    assert code == 0, out
    code, out = _sh(cluster, namespace, worker0, f"ssh -o BatchMode=yes -p 2222 {host} true")
    assert code != 0 and "Host key verification failed" in out, out
    code, out = _sh(cluster, namespace, worker0, f"ssh -o BatchMode=yes {host} echo reached")
    assert code == 0 and "reached" in out, out
    forward = f"ssh -o BatchMode=yes -o LogLevel=INFO -W {worker0}:22 {host}"
    code, out = _sh(cluster, namespace, worker0, forward)
    # sshd refuses the channel ("open failed: administratively prohibited"), so ssh's stdio
    # forwarding fails; with forwarding allowed, this would reach worker-0's sshd.
    assert code != 0 and "stdio forwarding failed" in out, out
    code, out = _sh(cluster, namespace, worker1, "ls /root/.ssh")
    assert code == 0 and sorted(out.split()) == ["authorized_keys", "ssh_host_ed25519_key"], out
