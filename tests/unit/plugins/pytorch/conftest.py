"""Fixtures of the PyTorchTrainingJob tests."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.render import render_job
from tests.unit.plugins.pytorch.helpers import Obj


@pytest.fixture
def render(manager: PluginManager, make_job: Callable[[Obj], Job]) -> Callable[[Obj], list[Obj]]:
    """Render a manifest; its pods in the order the plugin built them (rank order)."""

    def run(doc: Obj) -> list[Obj]:
        job = make_job(copy.deepcopy(doc))
        order = [p.name for p in manager.hooks_for(job.kind).build_pods(job)]
        pods = {o["metadata"]["name"]: o for o in render_job(job, manager) if o["kind"] == "Pod"}
        assert sorted(pods) == sorted(order)
        return [pods[n] for n in order]

    return run
