"""The restart history's pure parts: steps lost, the rule's name, and what a status write
adds and closes (what the operator's metrics count)."""

from __future__ import annotations

import pytest

from t9kjobs.planner.history import new_and_recovered, rule_name, steps_lost


@pytest.mark.parametrize(
    ("step", "checkpoint", "lost"),
    [(None, None, None), (None, 100, None), (1200, None, 1200), (1234, 1200, 34), (5, 10, 0)],
)
def test_steps_lost(step: int | None, checkpoint: int | None, lost: int | None) -> None:
    assert steps_lost(step, checkpoint) == lost


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("bad-input (spec.recoveryPolicy.rules[0])", "bad-input"),
        ("spec.recoveryPolicy.rules[2]", "rules[2]"),
        ("builtin:infrastructure", "builtin:infrastructure"),
        ("restartPolicy", "restartPolicy"),
    ],
)
def test_rule_name(label: str, name: str) -> None:
    assert rule_name(label) == name


def _entry(time: str, replica: str = "j-worker-0", **kw: str) -> dict[str, str]:
    return {"time": time, "replica": replica, "action": "RestartJob", "reason": "Error", **kw}


def test_new_and_recovered_counts_each_entry_once() -> None:
    old = _entry("2026-01-01T12:00:00Z", failureTime="2026-01-01T11:59:50Z")
    before = [old]
    closed = {**old, "recoveredTime": "2026-01-01T12:01:00Z"}
    new = _entry("2026-01-01T12:02:00Z", "j-worker-1")
    added, recovered = new_and_recovered(before, [closed, new])
    assert added == [new]
    assert recovered == [(closed, 70.0)]
    # The same write seen again (a retry of what was written): nothing more.
    assert new_and_recovered([closed, new], [closed, new]) == ([], [])
    # An entry added and closed by one write is both; one dropped from the front is neither.
    at_once = {**new, "recoveredTime": "2026-01-01T12:02:05Z"}
    assert new_and_recovered([closed], [at_once]) == ([at_once], [(at_once, 5.0)])


def test_entries_differ_by_time_replica_and_action() -> None:
    old = _entry("2026-01-01T12:00:00Z")
    after = [
        old,
        _entry("2026-01-01T12:00:01Z"),
        _entry("2026-01-01T12:00:00Z", "j-worker-1"),
        {**old, "action": "Ignore"},
    ]
    added, _ = new_and_recovered([old], after)
    assert added == after[1:]


def test_a_recovery_never_takes_less_than_nothing() -> None:
    # A failure stamped after the recovery (clocks of two machines): 0 seconds, not fewer.
    skewed = _entry(
        "2026-01-01T12:00:00Z",
        failureTime="2026-01-01T12:00:09Z",
        recoveredTime="2026-01-01T12:00:05Z",
    )
    assert new_and_recovered([], [skewed]) == ([skewed], [(skewed, 0.0)])
