"""Which container and exit code a failed replica is reported with (`ReplicaState.failure`)."""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.kinds import ReplicaState
from t9kjobs.planner.replicas import exit_of


def _pod(**containers: Any) -> dict[str, Any]:
    """A pod whose container NAME has the state given: an exit code (terminated), or None."""
    statuses = []
    for name, code in containers.items():
        state = {"running": {}} if code is None else {"terminated": {"exitCode": code}}
        statuses.append({"name": name, "state": state})
    return {"metadata": {"name": "p"}, "status": {"containerStatuses": statuses}}


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        ({"sidecar": 0, "pytorch": 1}, ("pytorch", 1)),  # the training container's own
        ({"pytorch": 0, "sidecar": 2}, ("pytorch", 0)),  # ... even a zero
        ({"sidecar": 0, "other": 3, "pytorch": None}, ("other", 3)),  # else the first non-zero
        ({"sidecar": 0, "pytorch": None}, ("sidecar", 0)),  # else the first that ended
        ({"pytorch": None}, None),  # none has ended
    ],
)
def test_the_training_container_then_the_first_nonzero_then_the_first(
    containers: dict[str, Any], expected: tuple[str, int] | None
) -> None:
    assert exit_of(_pod(**containers), "pytorch") == expected


def test_last_state_counts_when_the_container_restarted_in_place() -> None:
    pod = {
        "metadata": {"name": "p"},
        "status": {
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 137}},
                }
            ]
        },
    }
    assert exit_of(pod, "main") == ("main", 137)


@pytest.mark.parametrize(
    ("code", "container", "message"),
    [
        (137, "pytorch", "job-worker-1 failed with exit code 137 (container pytorch)"),
        (None, None, "job-worker-1 failed"),
        (1, None, "job-worker-1 failed with exit code 1"),
    ],
)
def test_a_failure_names_the_pod_the_exit_code_and_the_container(
    code: int | None, container: str | None, message: str
) -> None:
    state = ReplicaState("worker", 1, "job-worker-1", "Failed", code, True, container=container)
    assert state.failure == message
