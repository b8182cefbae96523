"""Fixtures of the chaos tier: the KWOK cluster with its audit log, started for this package
(or reused when running) and stopped after it. Its tests are marked ``chaos``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster, kwok_cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos: operator replicas and the API server killed while jobs run (KWOK)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)


@pytest.fixture(scope="package")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    with kwok_cluster(pytestconfig) as started:
        yield started
