"""Fixtures for end-to-end tests against the local control plane of hack/cluster, with KWOK
nodes (simulated pods).

* ``cluster`` (package): the KWOK cluster at ``T9KJOBS_CLUSTER_DIR``, started once for this
  package (building the binaries when the cache lacks them) or reused when running
  (tests/cluster.py).
* ``namespace`` (function): a fresh namespace per test, deleted afterwards.
* ``kube`` (function): a client of that namespace, the module's operator running; the operator
  fixtures themselves (``operators``, ``operator``) are every tier's (tests/conftest.py).

Every test here is marked ``e2e``; deselect them with ``-m "not e2e"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster, fresh_namespace, kwok_tier
from tests.e2e.jobs import Kube, set_podgroup_crd
from tests.operators import Operators

pytest_configure, pytest_collection_modifyitems, cluster = kwok_tier(
    "e2e",
    "end-to-end test against the local kwok control plane (hack/cluster)",
    Path(__file__).parent,
)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test (its ``default`` ServiceAccount exists); deleted after."""
    with fresh_namespace(cluster, request.node.name) as name:
        yield name


@pytest.fixture(scope="module")
def before_operator(cluster: Cluster) -> None:
    """Every module's operator starts on a cluster without the test PodGroup CRD, whatever a
    module before it left (tests/e2e/jobs.py `set_podgroup_crd`): it discovers the child kinds
    the cluster serves when it starts."""
    set_podgroup_crd(cluster, installed=False)


@pytest.fixture
def kube(cluster: Cluster, namespace: str, operators: Operators) -> Kube:
    """A client of the test's namespace, the module's operator running."""
    return Kube(cluster, namespace)
