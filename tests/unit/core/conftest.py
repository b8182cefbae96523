"""Fixtures of the controller's unit tests: the stand-in API server (standin_api.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from t9kjobs.manager import PluginManager

from .kube.standin_api import StandInApi


@pytest.fixture
def api(manager: PluginManager) -> Iterator[StandInApi]:
    """A stand-in API server on a loopback port, closed after the test."""
    server = StandInApi(manager)
    yield server
    server.close()
