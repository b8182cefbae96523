"""What every tier shares: the one operator fixture, and at the end of a run, the time each tier took (`tests/<tier>/`), so that
`make test` says where its minutes went (README, "How long") and a tier that grew is seen.

A tier's time is the sum of its tests' setup, call and teardown: its cluster's start is in
its first test's setup, its stop in its last test's teardown."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.operators import OperatorProcess, Operators, install_crds, remove_test_webhooks

_TIERS: defaultdict[str, float] = defaultdict(float)
_COUNTS: defaultdict[str, int] = defaultdict(int)


def tier_of(nodeid: str) -> str:
    """`tests/e2e/test_x.py::test_y` -> `e2e`; a test outside a tier folder -> `tests`."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "tests"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = tier_of(report.nodeid)
    _TIERS[tier] += report.duration
    if report.when == "call":
        _COUNTS[tier] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIERS:
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIERS.items(), key=lambda kv: -kv[1]):
        minutes, rest = divmod(round(seconds), 60)
        terminalreporter.write_line(
            f"{tier:>8}: {minutes:3d} min {rest:02d} s  ({_COUNTS[tier]} tests)"
        )


# -- the one operator of a test module (every tier with a `cluster` fixture) --------------------


@pytest.fixture(scope="module")
def before_operator(cluster: Any) -> Mapping[str, str] | None:
    """What a module needs done before its operator starts, overridden where it needs something
    (a CRD installed or removed): returns the operator's environment, None for this one's."""
    return None


@pytest.fixture(scope="module")
def operators(
    cluster: Any,
    before_operator: Mapping[str, str] | None,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Operators]:
    """The CRDs installed and one operator watching every namespace, for the tests of a module,
    with the module's `OPERATOR_ARGS` if it has any; restartable (`kill`, `restart`). With the
    module's `WEBHOOK` (Fail or Ignore), it serves admission too (tests/operators.py)."""
    install_crds(cluster)
    remove_test_webhooks(cluster)  # what a killed run left would refuse every job
    args = tuple(getattr(request.module, "OPERATOR_ARGS", ()))
    policy = getattr(request.module, "WEBHOOK", None)
    webhook = None if policy is None else (_webhook_name(request.module.__name__), policy)
    ops = Operators(cluster, tmp_path_factory.mktemp("operator"), args, before_operator, webhook)
    try:
        yield ops
    finally:
        ops.close()


@pytest.fixture(scope="module")
def operator(operators: Operators) -> OperatorProcess:
    """The module's operator, for modules that never restart it."""
    return operators.current


def _webhook_name(module: str) -> str:
    """`tests.e2e.test_webhook` -> `t9k-jobs-test-tests.e2e.test-webhook` (a DNS subdomain)."""
    return "t9k-jobs-test-" + module.replace("_", "-").lower()
