"""Fixtures of the fuzz tier: the corpus, `validate`'s outcome on all of it, and (for the tests
marked `e2e`: admission agreement, the live sample) the local KWOK cluster of hack/cluster.

The pure part (`pytest tests/fuzz -m "not e2e"`) needs no cluster and runs in about three
minutes on two cores.
"""

from __future__ import annotations

import pytest

from t9kjobs.manager import PluginManager, load_plugins
from tests.e2e.conftest import cluster, namespace
from tests.fuzz.generator import Case, cases
from tests.fuzz.runner import Outcome, run_cases

__all__ = ["cluster", "namespace"]  # the fixtures of the e2e tier, for this one's cluster tests

CLUSTER_TESTS = ("test_admission.py", "test_live.py")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end test against the local kwok control plane (hack/cluster)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in CLUSTER_TESTS and item.path.parent.name == "fuzz":
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def manager() -> PluginManager:
    return load_plugins()


@pytest.fixture(scope="session")
def corpus() -> list[Case]:
    return cases()


@pytest.fixture(scope="session")
def validated(corpus: list[Case]) -> dict[str, Outcome]:
    """`t9kjobs validate` on every case, two at a time: case id -> outcome."""
    return {o.case_id: o for o in run_cases(corpus, "validate")}
