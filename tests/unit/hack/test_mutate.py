"""hack/mutate.py (`make mutate`): its mutants are real changes with stable names, and the
equivalent mutants it leaves out are ones it still makes, listed in docs/testing.md."""

from __future__ import annotations

import ast
import importlib.util
import sys
from types import ModuleType

import pytest

from tests.repo import REPO


@pytest.fixture(scope="module")
def mutate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutate", REPO / "hack" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_mutant_is_a_change_that_compiles(mutate: ModuleType) -> None:
    path = "core/planner/conditions.py"
    original = ast.dump(ast.parse((REPO / path).read_text()))
    mutants = mutate.mutants_of(path)
    assert len(mutants) > 5
    for m in mutants:
        tree = mutate._Sites(path, m).visit(ast.parse((REPO / path).read_text()))
        assert ast.dump(tree) != original, m.key
        mutate.mutated_code(m)


def test_the_operators_of_a_line(mutate: ModuleType) -> None:
    keys = [m.key for m in mutate.mutants_of("core/planner/conditions.py")]
    scope = "core/planner/conditions.py::set_condition"
    assert f"{scope}: current.status != new_status -> current.status == new_status" in keys
    assert f"{scope}: current.last_transition_time = now -> pass" in keys
    assert f"{scope}: 'True' -> ''" in keys
    assert f"{scope}: current is None -> current is not None" in keys


def test_docstrings_annotations_and_names_are_not_mutated(mutate: ModuleType) -> None:
    path = "core/kinds.py"
    tree = ast.parse((REPO / path).read_text())
    docstrings = {
        n.body[0].lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(n)
    }
    mutants = mutate.mutants_of(path)
    assert not [m.key for m in mutants if m.line in docstrings]
    # `outcome: Literal["Succeeded", "Failed"]` is a type; `__all__` names the exports.
    assert not [m.key for m in mutants if m.scope == "Verdict" and "Succeeded" in m.before]
    assert not [m.key for m in mutants if "'Verdict'" in m.before]
    assert [m.key for m in mutants if m.scope == "Problem" and m.before == "'error'"] == [
        "core/kinds.py::Problem: 'error' -> ''"  # the default severity is behaviour
    ]


def test_module_names_follow_the_package_layout(mutate: ModuleType) -> None:
    assert mutate.module_name("core/planner/plan.py") == "t9kjobs.planner.plan"
    assert mutate.module_name("plugins/pytorch/torchrun.py") == "t9kjobs.plugins.pytorch.torchrun"


def test_equivalent_mutants_exist_and_are_documented(mutate: ModuleType) -> None:
    keys = {m.key for path in mutate.modules([]) for m in mutate.mutants_of(path)}
    equivalent = mutate.load_equivalent()
    assert sorted(set(equivalent) - keys) == [], "stale: remove from hack/mutate-equivalent.toml"
    assert all(why.strip() for why in equivalent.values())
    doc = mutate.DOC.read_text()
    listed = [line for line in doc.splitlines() if line.startswith("- `") and "::" in line]
    assert listed == [f"- `{key}`: {why}" for key, why in sorted(equivalent.items())], (
        "docs/testing.md is stale: run `make mutate`"
    )
