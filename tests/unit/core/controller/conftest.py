"""Fixtures of the controller's tests."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.fixture
def creator() -> Iterator[ThreadPoolExecutor]:
    """The pool a reconciler's Applier creates children on."""
    with ThreadPoolExecutor(8) as pool:
        yield pool
