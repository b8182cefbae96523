"""Debug and resume overrides must name replica types the job has (`run_mode_problems`)."""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.models import RunMode
from t9kjobs.validation import run_mode_problems


@pytest.mark.parametrize(
    ("run_mode", "expected"),
    [
        (None, []),
        ({}, []),
        (
            {"debug": {"enabled": True, "replicaSpecs": [{"type": "worker"}, {"type": "ps"}]}},
            ["spec.runMode.debug.replicaSpecs[1].type: no replica type 'ps' in the job"],
        ),
        (
            {"pause": {"enabled": True, "resumeSpecs": [{"type": "chief"}, {"type": "master"}]}},
            ["spec.runMode.pause.resumeSpecs[0].type: no replica type 'chief' in the job"],
        ),
        (
            {
                "debug": {"enabled": False, "replicaSpecs": [{"type": "ps"}]},
                "pause": {"enabled": False, "resumeSpecs": [{"type": "worker"}, {"type": "x"}]},
            },
            [
                "spec.runMode.debug.replicaSpecs[0].type: no replica type 'ps' in the job",
                "spec.runMode.pause.resumeSpecs[1].type: no replica type 'x' in the job",
            ],
        ),
    ],
)
def test_overrides_must_name_a_replica_type_of_the_job(
    run_mode: dict[str, Any] | None, expected: list[str]
) -> None:
    mode = None if run_mode is None else RunMode.model_validate(run_mode)
    found = run_mode_problems(mode, ["worker", "master"])
    assert [str(p) for p in found] == [f"{e} (it has: master, worker)" for e in expected]
    assert {p.severity for p in found} <= {"error"}
