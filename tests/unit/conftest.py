"""Fixtures of the unit tier: plugins loaded through their entry points, jobs from YAML."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.loading import load_job
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import Job

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def manager() -> PluginManager:
    return load_plugins()


@pytest.fixture
def make_job(manager: PluginManager) -> Any:
    """Build a Job from a YAML string or a dict (fails the test on validation errors)."""

    def make(source: str | dict[str, Any]) -> Job:
        doc = yaml.safe_load(source) if isinstance(source, str) else source
        job, _ = load_job(doc, manager)
        return job

    return make
