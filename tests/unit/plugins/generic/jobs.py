"""The GenericJob example manifest the plugin's tests start from."""

from __future__ import annotations

from typing import Any

import yaml

from tests.repo import REPO


def generic_example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


EXAMPLE = REPO / "examples" / "genericjob" / "torch-ddp.yaml"
