"""Fixtures of the chaos tier: the KWOK cluster with its audit log, started for this package
(or reused when running) and stopped after it. Its tests are marked ``chaos``."""

from __future__ import annotations

from pathlib import Path

from tests.cluster import kwok_tier

pytest_configure, pytest_collection_modifyitems, cluster = kwok_tier(
    "chaos",
    "operator replicas and the API server killed while jobs run (KWOK)",
    Path(__file__).parent,
)
