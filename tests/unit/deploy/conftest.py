"""The chart's unit tests' shared fixtures: helm (installed once into the tool cache) and a
render of the chart with the values a test gives over the cluster-wide defaults."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from t9kjobs.vocabulary import Obj
from tests.unit.deploy.chart import CLUSTER_WIDE, install_tool, render_chart


@pytest.fixture(scope="module")
def helm() -> Path:
    return install_tool("helm")


@pytest.fixture(scope="module")
def render(helm: Path) -> Callable[..., list[Obj]]:
    return lambda values=None: render_chart(helm, {**CLUSTER_WIDE, **(values or {})})
