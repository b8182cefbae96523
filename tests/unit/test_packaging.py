"""The folder-to-package mapping: every package is listed, and no `core` or `plugins` leaks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib

from tests.unit.conftest import REPO


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top, name in (("core", "t9kjobs"), ("plugins", "t9kjobs.plugins")):
        # Code folders, and the template folders (importable as namespace packages).
        for marker in (*(REPO / top).rglob("__init__.py"), *(REPO / top).rglob("*.j2")):
            rel = marker.parent.relative_to(REPO / top).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_no_top_level_core_or_plugins_module_is_installed() -> None:
    code = "import importlib.util as u; print(u.find_spec('core'), u.find_spec('plugins'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True
    )
    assert out.stdout.strip() == "None None"
    assert importlib.util.find_spec("t9kjobs.plugins.generic") is not None
