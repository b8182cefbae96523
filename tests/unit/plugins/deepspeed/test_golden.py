"""Golden files of what the first reconcile creates, one per launch variant.

Regenerate with `T9KJOBS_UPDATE_GOLDEN=1 pytest tests/unit/plugins/deepspeed` and review the
diff: each file is a reviewed expectation.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.loading import load_documents, load_job
from t9kjobs.render import render_job
from tests.repo import REPO
from tests.unit.golden import assert_golden
from tests.unit.plugins.deepspeed.jobs import base_manifest

GOLDEN = Path(__file__).parent / "golden"


def _four_workers(doc: dict[str, Any]) -> None:
    doc["spec"]["worker"]["replicas"] = 4


def _slots_no_local_rank(doc: dict[str, Any]) -> None:
    doc["spec"]["config"].update(slotsPerWorker=4, localRank=False)


def _module(doc: dict[str, Any]) -> None:
    doc["spec"]["config"]["run"] = {"module": ["trainer.main", "--steps=100"]}


def _exec(doc: dict[str, Any]) -> None:
    doc["spec"]["config"]["run"] = {"exec": ["/opt/bin/train", "--steps=100"]}


def _custom_command(doc: dict[str, Any]) -> None:
    doc["spec"]["config"] = {
        "slotsPerWorker": 8,
        "customCommand": "cd /workspace && deepspeed --hostfile=/t9k/hostfile train.py",
    }


def _disable_custom_env(doc: dict[str, Any]) -> None:
    doc["spec"]["disableCustomEnv"] = True


def _debug(doc: dict[str, Any]) -> None:
    doc["spec"]["runMode"] = {"debug": {"enabled": True}}


def _elastic(doc: dict[str, Any]) -> None:
    doc["spec"]["elastic"] = {
        "enable": True,
        "minReplicas": 1,
        "maxReplicas": 4,
        "expectedReplicas": 3,
    }


CASES = {
    "four-workers": _four_workers,
    "slots4-no-local-rank": _slots_no_local_rank,
    "module-run": _module,
    "exec-run": _exec,
    "custom-command": _custom_command,
    "disable-custom-env": _disable_custom_env,
    "debug-mode": _debug,
    "elastic": _elastic,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_golden(make_job: Any, manager: Any, case: str) -> None:
    doc = base_manifest()
    CASES[case](doc)
    assert_golden(GOLDEN / f"{case}.yaml", render_job(make_job(doc), manager))


EXAMPLES = sorted((REPO / "examples" / "deepspeedjob").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_are_valid_and_render(manager: Any, path: Path) -> None:
    (doc,) = load_documents(path.read_text(), str(path))
    job, warnings = load_job(doc, manager)
    assert warnings == []
    pods = [o for o in render_job(job, manager) if o["kind"] == "Pod"]
    assert pods and pods[0]["metadata"]["name"] == f"{job.name}-worker-0"
    for pod in pods:
        command = pod["spec"]["containers"][0]["command"]
        result = subprocess.run(
            ["/bin/bash", "-n", "-c", command[2]], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 4
