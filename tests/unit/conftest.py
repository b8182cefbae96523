"""Fixtures of the unit tier: plugins loaded through their entry points, jobs from YAML."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.loading import load_job
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import Job
from t9kjobs.testing.harness.apiserver import local_api_server
from tests.repo import REPO

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def manager() -> PluginManager:
    return load_plugins()


@pytest.fixture(scope="session")
def kit_kubeconfig() -> Iterator[Path]:
    """One API server (etcd and kube-apiserver of the local control plane, started in seconds)
    for the conformance kit's admission tier in every kit run of the session. The binaries come
    from hack/cluster/build.sh: built (once, minutes) when the cache lacks them."""
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "cluster" / "build.sh")],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    with local_api_server(binaries=Path(built.stdout.strip())) as server:
        yield server.kubeconfig


@pytest.fixture
def make_job(manager: PluginManager) -> Any:
    """Build a Job from a YAML string or a dict (fails the test on validation errors)."""

    def make(source: str | dict[str, Any]) -> Job:
        doc = yaml.safe_load(source) if isinstance(source, str) else source
        job, _ = load_job(doc, manager)
        return job

    return make
