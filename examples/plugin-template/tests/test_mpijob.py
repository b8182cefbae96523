"""What MPIJob does, beyond the conformance kit's contracts: its pods, hostfile, mpirun command
and verdicts, through the engine as the operator runs it (t9kjobs.testing.fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from t9kjobs.plugin import Job
from t9kjobs.testing.fixtures import (
    JobError,
    first_reconcile,
    job_from_yaml,
    objects_of,
    reconcile_with,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def pi() -> Job:
    return job_from_yaml(EXAMPLES / "pi.yaml")


def test_a_launcher_and_one_pod_per_worker(pi: Job) -> None:
    pods = objects_of(first_reconcile(pi), "Pod")
    assert sorted(pods) == ["mpi-pi-launcher", "mpi-pi-worker-0", "mpi-pi-worker-1"]
    for pod in pods.values():
        assert pod["spec"]["subdomain"] == "mpi-pi"  # resolvable through the headless Service


def test_the_hostfile_lists_every_worker_with_its_slots(pi: Job) -> None:
    hostfile = objects_of(first_reconcile(pi), "ConfigMap")["mpi-pi-hostfile"]
    assert hostfile["data"]["hostfile"].splitlines() == [
        "mpi-pi-worker-0.mpi-pi slots=2",
        "mpi-pi-worker-1.mpi-pi slots=2",
    ]


def test_the_launcher_runs_mpirun_on_every_rank(pi: Job) -> None:
    launcher = objects_of(first_reconcile(pi), "Pod")["mpi-pi-launcher"]
    (container,) = launcher["spec"]["containers"]
    script = container["command"][-1]
    assert "exec mpirun --hostfile /etc/mpi/hostfile -np 4 --allow-run-as-root" in script
    assert script.index("mpi-pi-worker-1.mpi-pi") < script.index("exec mpirun")  # waits first


def test_the_launchers_success_is_the_jobs(pi: Job) -> None:
    done = reconcile_with(pi, {"mpi-pi-launcher": ("Succeeded", 0)})
    assert done.status.phase == "Succeeded"
    completed = done.status.condition("Completed")
    assert completed is not None and completed.reason == "LauncherSucceeded"


def test_a_worker_lost_for_good_fails_the_job(pi: Job) -> None:
    lost = reconcile_with(pi, {"mpi-pi-worker-1": ("Failed", 1)})  # ExitCode: 1 is final
    assert lost.status.phase == "Failed"
    failed = lost.status.condition("Failed")
    assert failed is not None
    assert failed.message == "mpi-pi-worker-1 failed with exit code 1 (container mpi)"


def test_a_killed_worker_is_restarted(pi: Job) -> None:
    killed = reconcile_with(pi, {"mpi-pi-worker-0": ("Failed", 137)})  # retryable exit code
    assert killed.status.phase == "Running"
    assert [ref.name for ref in killed.delete] == ["mpi-pi-worker-0"]


def test_a_template_without_container_is_refused_with_its_path() -> None:
    with pytest.raises(JobError) as refused:
        job_from_yaml(EXAMPLES / "invalid" / "launcher-without-container.yaml")
    assert "spec.launcher.template.spec.containers" in [p.path for p in refused.value.problems]
