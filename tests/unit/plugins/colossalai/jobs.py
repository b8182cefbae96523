"""The ColossalAIJob example manifest the plugin's tests start from."""

from __future__ import annotations

from typing import Any

import yaml

from tests.repo import REPO


def example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


EXAMPLES = REPO / "examples" / "colossalaijob"

EXAMPLE = EXAMPLES / "colossalai-example.yaml"
