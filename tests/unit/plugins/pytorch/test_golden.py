"""Rendered objects of the examples, compared with reviewed golden files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.render import render_job
from tests.unit.golden import assert_golden
from tests.unit.plugins.pytorch.helpers import example

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(
    "name",
    [
        "ddp",  # plain DDP, 4 workers, no master type
        "master-worker",  # master + 3 workers, with a TensorBoard
        "torchrun-gpu",  # torchrun, procPerNode: gpu
        "elastic",  # elastic torchrun, 7 of [4, 10]
        "debug",  # debug mode over torchrun
        "ps",  # ps + worker: ps-0 is the master
    ],
)
def test_render_matches_golden(
    name: str, manager: PluginManager, make_job: Callable[[Any], Job]
) -> None:
    job = make_job(example(name))
    assert_golden(GOLDEN / f"{name}.yaml", render_job(job, manager))
