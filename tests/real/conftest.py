"""Fixtures for the real-node tier: tests whose pods run for real (kubelet, containerd, runc,
the CNI bridge, CoreDNS) on the local control plane of hack/cluster with ``T9KJOBS_NODES=real``.

* ``cluster`` (package): a real cluster running at ``T9KJOBS_CLUSTER_DIR`` is reused; otherwise
  one is started in ``<cache>/cluster-real`` for this package and stopped after it, so it never
  runs beside the KWOK tier's cluster (tests/cluster.py).
* ``namespace`` (function): a fresh namespace per test, deleted afterwards.

Every test here is marked ``real``; deselect them with ``-m "not real"``. The host-isolation test
starts and stops clusters of its own, so it runs first, before this package's cluster starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import (
    Cluster,
    cache_root,
    cluster_dir,
    fresh_namespace,
    local_cluster,
    running_mode,
)

TRAINER_IMAGE = "localhost/t9kjobs-trainer:latest"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real: test on the real node of the local cluster (T9KJOBS_NODES=real)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in mine:
        item.add_marker(pytest.mark.real)
    # The host-isolation test first: it needs the machine without a real node on it.
    # (Alone, it stays where it is: removing it without putting it back ran no test.)
    first = [item for item in mine if Path(str(item.fspath)).name == "test_host_isolation.py"]
    rest = [item for item in mine if item not in first]
    if not first or not rest:
        return
    for item in first:
        items.remove(item)
    at = min(items.index(item) for item in rest)
    items[at:at] = first


def real_cluster_dir() -> Path:
    """Where the real tier's cluster runs: a running real cluster at T9KJOBS_CLUSTER_DIR, else
    ``<cache>/cluster-real``."""
    if running_mode(cluster_dir()) == "real":
        return cluster_dir()
    return cache_root() / "cluster-real"


@pytest.fixture(scope="package")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    """The real-node cluster: reused when already running, else built (if needed) and started."""
    # The audit log: the install tier reads what the API server refused the operator.
    env = {**os.environ, "T9KJOBS_NODES": "real", "T9KJOBS_AUDIT": "1", "T9KJOBS_KUEUE": "1"}
    with local_cluster(pytestconfig, real_cluster_dir(), "real", env) as started:
        yield started


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test (its ``default`` ServiceAccount exists); deleted after."""
    with fresh_namespace(cluster, request.node.name) as name:
        yield name
