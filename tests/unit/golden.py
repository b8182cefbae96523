"""Golden files: rendered objects compared with YAML kept next to the tests.

Regenerate after an intended change with `T9KJOBS_UPDATE_GOLDEN=1 pytest tests/unit`, then
review the diff: a golden file is a reviewed expectation, never rewritten silently in CI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["assert_golden"]


def assert_golden(path: Path, objects: list[dict[str, Any]]) -> None:
    text = yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)
    if os.environ.get("T9KJOBS_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"golden file {path} is missing: run with T9KJOBS_UPDATE_GOLDEN=1"
    expected = list(yaml.safe_load_all(path.read_text()))
    assert objects == expected, f"rendered objects differ from {path}"
