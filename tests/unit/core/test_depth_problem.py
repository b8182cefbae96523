"""`depth_problem`: a manifest nested deeper than the limit is refused at the first place it is,
named by its path; one within the limit, whatever its shape, is not (the quick walk that clears
it and the walk that names the place agree)."""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.loading import depth_problem


def nested(levels: int, leaf: Any = "x") -> Any:
    """`levels` levels of mappings and lists alternating (the manifest's own the first)."""
    value = leaf
    for level in range(levels - 1, 0, -1):
        value = {"k": value} if level % 2 else [value]
    return {"spec": value}


@pytest.mark.parametrize("limit", [2, 3, 4, 7])
def test_the_limit_itself_is_allowed_and_one_more_level_is_not(limit: int) -> None:
    assert depth_problem(nested(limit), limit) is None
    assert depth_problem(nested(limit, leaf=[]), limit) is not None  # an empty list is a level
    problem = depth_problem(nested(limit + 1), limit)
    assert problem is not None and problem.message == f"nested deeper than {limit} levels"


def test_the_place_is_named_by_its_path() -> None:
    manifest = {"metadata": {"name": "a"}, "spec": {"a": [{"b": [[1]]}], "c": 1}}
    problem = depth_problem(manifest, 5)
    assert problem is not None and problem.path == "spec.a[0].b[0]"
    assert depth_problem(manifest, 6) is None


def test_scalars_and_flat_manifests_have_no_problem() -> None:
    assert depth_problem("text", 1) is None
    assert depth_problem({"a": 1, "b": "x", "c": None}, 1) is None
    problem = depth_problem({"a": 1, "b": {}}, 1)
    assert problem is not None and problem.path == "b"
