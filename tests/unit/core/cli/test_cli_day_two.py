"""The pure parts of describe, logs, --version and completion: names, durations, the 80-column
text, the plugin table (progress lines: tests/unit/core/test_progress.py). Their cluster side is tested in tests/e2e/test_day_two.py
and tests/real/test_day_two.py."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.cli.completion import complete_job
from t9kjobs.cli.describe_text import _age, _shown_command, render
from t9kjobs.cli.logs import parse_duration
from t9kjobs.cli.version import version_text
from t9kjobs.client import ClientError, UnknownKind
from t9kjobs.client.reader import JobRef, find_kind
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.objects import deciding_replica, replica_id
from tests.repo import REPO

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return load_plugins()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("gj", "GenericJob"),
        ("GenericJob", "GenericJob"),
        ("genericjobs", "GenericJob"),
        ("ptj", "PyTorchTrainingJob"),
        ("dsj", "DeepSpeedJob"),
        ("colossalaijob", "ColossalAIJob"),
    ],
)
def test_kinds_by_any_of_their_names(manager: PluginManager, text: str, kind: str) -> None:
    assert find_kind(text, manager).kind == kind


def test_bad_job_names_say_what_is_expected(manager: PluginManager) -> None:
    with pytest.raises(ClientError, match=r"'my-job': name a job as KIND/NAME, e.g. gj/my-job"):
        JobRef.parse("my-job", "ns", manager)
    with pytest.raises(
        UnknownKind, match=r"unknown kind 'tfjob'; the loaded plugins serve .*GenericJob \(gj\)"
    ):
        JobRef.parse("tfjob/x", "ns", manager)
    assert str(JobRef.parse("ptj/x", "ns", manager)) == "PyTorchTrainingJob/x"


def test_replica_ids_and_the_deciding_replica() -> None:
    assert replica_id("job", "job-worker-1") == "worker-1"
    assert replica_id("job", "job-launcher") == "launcher"
    assert deciding_replica(["worker-0", "master-0", "worker-1"]) == "master-0"
    assert deciding_replica(["worker-0", "worker-1", "launcher"]) == "launcher"
    assert deciding_replica(["worker-1", "worker-0"]) == "worker-0"
    assert deciding_replica(["ps-0", "node-1"]) == "node-1"
    assert deciding_replica([]) is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("45", 45), ("30s", 30), ("5m", 300), ("2h", 7200), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m5", "1.5h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a duration such as 30s"):
        parse_duration(text)


def test_ages_read_as_kubectl_shows_them() -> None:
    assert [_age(s) for s in (3, 192, 900, 7500, 300000)] == ["3s", "3m12s", "15m", "2h5m", "3d11h"]


def test_a_shell_wrapper_shows_the_command_it_execs() -> None:
    script = "# wait for sshd\nset -e\nt9k_wait\nexec deepspeed --hostfile=/t9k/hostfile train.py\n"
    assert (
        _shown_command(["/bin/bash", "-c", script]) == "deepspeed --hostfile=/t9k/hostfile train.py"
    )
    assert (
        _shown_command(["python", "train.py", "--lr", "0.1 0.2"])
        == "python train.py --lr '0.1 0.2'"
    )


def _facts(**over: Any) -> dict[str, Any]:
    long_message = "broken-worker-0 failed with exit code 3 (container trainer); " * 3
    facts: dict[str, Any] = {
        "kind": "GenericJob",
        "name": "broken",
        "namespace": "default",
        "created": "2026-01-01T11:00:00Z",
        "phase": "Failed",
        "inPhaseSeconds": 125.0,
        "runMode": "Immediate",
        "startTime": "2026-01-01T11:00:01Z",
        "completionTime": "2026-01-01T11:57:55Z",
        "elapsedSeconds": 3474.0,
        "progress": None,
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "ReplicaFailed",
                "message": long_message,
                "lastTransitionTime": "2026-01-01T11:57:55Z",
            }
        ],
        "replicas": [
            {
                "type": "worker",
                "desired": 1,
                "running": 0,
                "succeeded": 0,
                "failed": 1,
                "restarts": 1,
                "failedOrRestarted": [
                    {
                        "replica": "worker-1",
                        "pod": "broken-worker-1",
                        "phase": "Failed",
                        "restarts": 2,
                        "container": "pytorch",
                        "exitCode": 137,
                        "reason": "OOMKilled",
                        "lastLogLines": ["x" * 200, "ValueError: nan"],
                    }
                ],
            }
        ],
        "launchCommands": [
            {"replicas": ["worker-0"], "command": ["python", "train.py", *(["--flag"] * 30)]}
        ],
        "hostfile": {"configMap": "broken-hostfile", "text": "broken-worker-0.broken slots=1\n"},
        "cleanup": {
            "policy": "All",
            "keeps": [],
            "applied": True,
            "deletedReplicas": ["worker-0"],
            "remainingPods": [],
        },
        "events": [
            {
                "time": "2026-01-01T11:57:55Z",
                "type": "Warning",
                "reason": "Failed",
                "object": "GenericJob/broken",
                "message": long_message,
                "count": 2,
            }
        ],
    }
    return {**facts, **over}


def test_describe_text_fits_80_columns_and_says_everything() -> None:
    text = render(_facts(), NOW)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[3] == "Phase:      Failed for 2m5s"
    assert "Started:    2026-01-01T11:00:01Z (ran 57m)" in lines
    assert "  Failed         True    ReplicaFailed           2m5s" in lines
    assert "  worker-1: Failed, exit code 137, OOMKilled, container pytorch, 2 restart(s)" in lines
    assert "    | " + "x" * 73 + "…" in lines
    assert "    | ValueError: nan" in lines
    assert lines[lines.index("Launch commands:") + 1].startswith(
        "  worker-0: python train.py --flag"
    )
    assert lines[lines.index("Launch commands:") + 2].startswith("      --flag")
    assert "Hostfile (ConfigMap broken-hostfile):" in lines
    assert "Cleanup:    policy All; deleted worker-0; 0 pod(s) left" in lines
    assert "    2m5s  Warning Failed (x2)  GenericJob/broken" in lines


def test_describe_text_of_a_running_job_with_progress() -> None:
    progress = {
        "replica": "master-0",
        "step": 30,
        "totalSteps": 120,
        "percent": 25.0,
        "remainingSeconds": 190,
        "metrics": {"loss": 0.4},
        "lastUpdateTime": "2026-01-01T11:59:40Z",
    }
    facts = _facts(
        phase="Running",
        completionTime=None,
        elapsedSeconds=64.0,
        runMode="Debug",
        progress=progress,
        conditions=[],
        cleanup={
            "policy": "None",
            "keeps": ["launcher"],
            "applied": False,
            "deletedReplicas": [],
            "remainingPods": [],
        },
        events=[],
    )
    lines = render(facts, NOW).splitlines()
    assert lines[3] == "Phase:      Running for 2m5s (Debug mode)"
    assert "Started:    2026-01-01T11:00:01Z (running 1m4s)" in lines
    assert "Progress:   25% (step 30/120), about 3m10s left; loss=0.4 (master-0, 20s ago)" in lines
    assert "  (none yet: the operator has not seen the job)" in lines
    assert "Cleanup:    policy None, keeping launcher; applies when the job finishes" in lines
    assert lines[-1] == "  (none)"


def test_describe_text_says_why_a_gang_waits() -> None:
    why = "PodGroup.scheduling.k8s.io broken (3 pods at once) cannot be placed: 0/4 nodes"
    conditions = [
        {
            "type": "Initialized",
            "status": "False",
            "reason": "CreatingPods",
            "message": "creating pods",
            "lastTransitionTime": "2026-01-01T11:57:55Z",
        },
        {
            "type": "Scheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": why,
            "lastTransitionTime": "2026-01-01T11:57:55Z",
        },
    ]
    lines = render(_facts(phase="Pending", conditions=conditions), NOW).splitlines()
    scheduled = lines.index("  Scheduled      False   Unschedulable           2m5s")
    said = " ".join(line.strip() for line in lines[scheduled + 1 : scheduled + 3])
    assert said == why  # wrapped to 80 columns
    assert "creating pods" not in "\n".join(lines)  # a False condition says nothing else


def test_describe_text_says_why_a_job_waits_in_its_queue() -> None:
    why = "LocalQueue nowhere: LocalQueue nowhere doesn't exist"
    conditions = [
        {
            "type": "Admitted",
            "status": "False",
            "reason": "Inadmissible",
            "message": why,
            "lastTransitionTime": "2026-01-01T11:57:55Z",
        }
    ]
    lines = render(_facts(phase="Queued", conditions=conditions), NOW).splitlines()
    admitted = lines.index("  Admitted       False   Inadmissible            2m5s")
    assert lines[admitted + 1].strip() == why


def test_describe_text_shows_where_kueue_placed_each_rank() -> None:
    placement = [
        {"pod": "ds-worker-0", "rank": "0", "node": "tas-2", "domain": "b0/b0-r1/tas-2",
         "gated": False},
        {"pod": "ds-worker-1", "rank": "1", "node": None, "domain": None, "gated": True},
    ]  # fmt: skip
    lines = render(_facts(placement=placement), NOW).splitlines()
    at = lines.index("Placement (Kueue topology):")
    assert lines[at + 2].split() == ["0", "ds-worker-0", "tas-2", "b0/b0-r1/tas-2"]
    assert lines[at + 3].split()[:3] == ["1", "ds-worker-1", "-"]
    assert lines[at + 3].endswith("(at Kueue's gate)")
    assert "Placement (Kueue topology):" not in render(_facts(), NOW)


def test_version_lists_bundled_and_third_party_plugins(manager: PluginManager) -> None:
    text = version_text(manager).splitlines()
    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert text[0].startswith(f"t9kjobs {ours} (python 3.")
    # Columns as wide as the longest plugin name.
    assert ["generic", "t9k-jobs", ours, "bundled", "GenericJob"] in [t.split() for t in text]
    third = PluginManager()
    third.register(
        types.SimpleNamespace(t9kjobs_kinds=lambda: []),
        "mpi",
        distribution="t9kjobs-mpi",
        version="2.1",
    )
    assert version_text(third).splitlines()[2] == "  mpi  t9kjobs-mpi 2.1  third-party  -"


def test_kinds_complete_without_a_cluster() -> None:
    parsed = argparse.Namespace(block_plugin=[], namespace=None, kubeconfig="/nonexistent")
    assert complete_job("p", parsed) == ["ptj/", "pytorchtrainingjob/", "pytorchtrainingjobs/"]
    # With a kind typed, the jobs come from the cluster; without one, nothing (and no traceback).
    assert complete_job("gj/", parsed) == []


def test_kubectl_completion_of_the_plugin_answers_in_kubectl_s_format() -> None:
    """kubectl runs `kubectl_complete-t9k ARGS... WORD` to complete `kubectl t9k ...`."""
    script = str(Path(sys.executable).parent / "kubectl_complete-t9k")

    def complete(*words: str) -> list[str]:
        run = subprocess.run([script, *words], capture_output=True, text=True, timeout=60)
        return run.stdout.splitlines()

    assert complete("describe", "c") == ["caij/", "colossalaijob/", "colossalaijobs/", ":4"]
    assert complete("lo") == ["logs", ":4"]
    assert complete("logs", "--ta") == ["--tail", ":4"]


def test_events_with_a_micro_time_are_aged_like_the_others() -> None:
    """The scheduler and the kubelet write `eventTime` as a MicroTime (a fraction of a second):
    describe read only whole seconds and failed with a traceback on a real cluster."""
    scheduled = {
        "time": "2026-01-01T11:59:58.143410Z",
        "type": "Normal",
        "reason": "Scheduled",
        "object": "Pod/broken-worker-0",
        "message": "Successfully assigned",
        "count": 1,
    }
    facts = _facts()
    text = render({**facts, "events": [*facts["events"], scheduled]}, NOW)
    assert "      1s  Normal  Scheduled  Pod/broken-worker-0" in text.splitlines()


def test_describe_text_shows_the_newest_recoveries() -> None:
    recoveries = [
        {
            "time": "2026-01-01T11:57:55Z",
            "replica": "worker-2",
            "action": "RestartJob",
            "reason": "NodeLost",
            "exitCode": None,
            "node": "node-7",
            "rule": "builtin:infrastructure",
            "budget": "Infrastructure",
            "recoverySeconds": 75.0,
            "stepsLost": 1200,
            "message": "broken-worker-2 failed: NodeLost",
        },
        {
            "time": "2026-01-01T11:59:50Z",
            "replica": "worker-0",
            "action": "RestartReplica",
            "reason": "Error",
            "exitCode": 3,
            "node": None,
            "rule": "restartPolicy",
            "budget": "User",
            "recoverySeconds": None,
            "stepsLost": None,
            "message": "broken-worker-0 failed with exit code 3",
        },
    ]
    lines = render(_facts(recoveries=recoveries), NOW).splitlines()
    assert max(len(line) for line in lines) <= 80
    at = lines.index("Recoveries:")
    assert lines[at + 1 : at + 4] == [
        "     AGE  REPLICA     ACTION         REASON    RULE          BUDGET  TOOK  LOST",
        "    2m5s  worker-2    RestartJob     NodeLost  builtin:infra Infra  1m15s  1200",
        "     10s  worker-0    RestartReplica Error     restartPolicy User       -     -",
    ]
    assert "Recoveries:" not in render(_facts(), NOW).splitlines()


def test_describe_says_another_controller_manages_the_job() -> None:
    lines = render(_facts(managedBy="example.com/other"), NOW).splitlines()
    assert lines[3] == "Managed by: example.com/other; this operator does nothing with it"
    text = render(_facts(managedBy="kueue.x-k8s.io/multikueue"), NOW)
    assert "this operator makes its Workload alone" in text
    assert "Managed by" not in render(_facts(managedBy=None), NOW)
