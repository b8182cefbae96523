"""Fixtures for end-to-end tests against the local control plane of hack/cluster, with KWOK
nodes (simulated pods).

* ``cluster`` (package): the KWOK cluster at ``T9KJOBS_CLUSTER_DIR``, started once for this
  package (building the binaries when the cache lacks them) or reused when running
  (tests/cluster.py).
* ``namespace`` (function): a fresh namespace per test, deleted afterwards.

Every test here is marked ``e2e``; deselect them with ``-m "not e2e"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster, fresh_namespace, kwok_cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end test against the local kwok control plane (hack/cluster)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    e2e_dir = Path(__file__).parent
    for item in items:
        if e2e_dir in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="package")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    """The KWOK cluster: reused when already running, else built (if needed) and started.
    Its audit log lets tests see the requests a client made (the RBAC minimality check)."""
    with kwok_cluster(pytestconfig) as started:
        yield started


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test (its ``default`` ServiceAccount exists); deleted after."""
    with fresh_namespace(cluster, request.node.name) as name:
        yield name
