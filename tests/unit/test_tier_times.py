"""The tier a test belongs to, as the run's "time per tier" summary (tests/conftest.py) names it."""

from __future__ import annotations

import pytest

from tests.conftest import tier_of


@pytest.mark.parametrize(
    ("nodeid", "tier"),
    [
        ("tests/e2e/test_gangs.py::test_a[x]", "e2e"),
        ("tests/real/test_progress.py::test_b", "real"),
        ("tests/unit/core/planner/test_plan.py::test_c", "unit"),
        ("tests/test_loose.py::test_d", "tests"),
        ("examples/x/test_y.py::test_z", "tests"),
    ],
)
def test_a_test_is_counted_in_its_tier_folder(nodeid: str, tier: str) -> None:
    assert tier_of(nodeid) == tier
