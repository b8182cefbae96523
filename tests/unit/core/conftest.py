"""Fixtures of core's unit tests: the stand-in API server (standin_api.py), and a count of spec
validations (`ParsedJobs`' tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from t9kjobs import loading
from t9kjobs.manager import PluginManager

from .kube.standin_api import StandInApi


@pytest.fixture
def api(manager: PluginManager) -> Iterator[StandInApi]:
    """A stand-in API server on a loopback port, closed after the test."""
    server = StandInApi(manager)
    yield server
    server.close()


@pytest.fixture
def spec_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a spec was validated."""
    calls: list[int] = []
    real = loading._parse_spec

    def counted(manifest: dict[str, Any], info: Any) -> Any:
        calls.append(1)
        return real(manifest, info)

    monkeypatch.setattr(loading, "_parse_spec", counted)
    return calls
