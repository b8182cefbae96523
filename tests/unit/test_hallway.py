"""Tests share a hallway, not each other's rooms: a helper used by more than one test module
lives in a helper module (`sim.py`, `chart.py`, `jobs.py`, ...), never in a `test_*.py` that
others import from. A test module imported by another runs its tests twice under some
collection orders and ties the two files' edits together (issue #49)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo import REPO


def imports_of_test_modules(root: Path) -> list[str]:
    """`path:line imports module` for every import, under `root`, of a module named test_*."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                if module.rsplit(".", 1)[-1].startswith("test_"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {module}")
    return found


def test_no_test_module_is_imported_by_another() -> None:
    found = imports_of_test_modules(REPO / "tests")
    assert not found, "move what they share into a helper module:\n" + "\n".join(found)


def test_the_rule_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def helper(): ...\n")
    (tmp_path / "test_b.py").write_text("from tests.unit.test_a import helper\n")
    (tmp_path / "ok.py").write_text("import json\nfrom tests.unit.sim import Sim\n")
    assert imports_of_test_modules(tmp_path) == ["test_b.py:1 imports tests.unit.test_a"]


def definitions_of(name: str, root: Path) -> list[str]:
    """`path:line` of every module-level assignment of `name` under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_repository_root_is_defined_once() -> None:
    """Every tier imports `REPO` from tests/repo.py: one computed from a module's own depth
    below the root points elsewhere once the module moves."""
    assert [d.split(":")[0] for d in definitions_of("REPO", REPO / "tests")] == ["repo.py"]


def test_the_rule_sees_a_second_definition(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pathlib import Path\nREPO = Path('.')\n")
    (tmp_path / "b.py").write_text("REPO: object = None\ndef f():\n    REPO = 1\n")
    assert definitions_of("REPO", tmp_path) == ["a.py:2", "b.py:1"]
