"""Every field's enum values and default said in its description, for `kubectl explain`.

`kubectl explain` prints a field's type and description; what the field may hold and what it
defaults to are in the schema's `enum` and `default`, which it does not always show. A
description that does not already name every value (or say "default") gets a sentence for
each, generated here, so no model has to repeat its Literal or its default in prose.
"""

from __future__ import annotations

import json
import re
from typing import Any

from t9kjobs.vocabulary import Obj


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _names(description: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", description) is not None


def _note_values(node: Obj) -> None:
    """Append `One of: ...` and `Defaults to ...` to the node's description where missing."""
    description = str(node.get("description", "")).strip()
    notes = []
    values = [_text(v) for v in node.get("enum") or [] if v is not None]
    if values and not all(_names(description, v) for v in values):
        notes.append(f"One of: {', '.join(values)}.")
    default = node.get("default")
    if default not in (None, [], {}) and "default" not in description.lower():
        notes.append(f"Defaults to {_text(default)}.")
    if notes:
        node["description"] = " ".join([description, *notes]).strip()
