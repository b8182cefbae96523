"""The scripts of hack/ as modules, for the tests that check what they generate."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.repo import REPO

__all__ = ["load_script"]

HACK = REPO / "hack"


def load_script(name: str) -> ModuleType:
    """hack/<name>.py, imported as the module `name` (its sibling modules importable, as when it
    runs as a script)."""
    if str(HACK) not in sys.path:
        sys.path.insert(0, str(HACK))
    spec = importlib.util.spec_from_file_location(name, HACK / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
