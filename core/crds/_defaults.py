"""Whether a `default` validates against its own node; the API server refuses the CRD if not.

Enough of OpenAPI's structural checks (type, enum, pattern, bounds, lengths, properties) to vet
the simple defaults models declare.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from t9kjobs.crds._common import json_type
from t9kjobs.vocabulary import Obj


def _check_default(node: Obj) -> None:
    """Drop a `default` the API server would refuse (it must validate against its node)."""
    if "default" not in node:
        return
    value = node["default"]
    body = {k: v for k, v in node.items() if k != "default"}
    if value is None or not _accepts(body, value):
        del node["default"]


def _accepts(node: Obj, value: Any) -> bool:
    """Whether `value` passes the node's structural checks (enough to vet simple defaults)."""
    if value is None:
        return bool(node.get("nullable"))
    if "enum" in node and value not in node["enum"]:
        return False
    kind = json_type(value)
    if node.get("x-kubernetes-int-or-string"):
        ok_type = kind in ("integer", "string")
    elif "type" in node:
        ok_type = node["type"] == kind or (node["type"] == "number" and kind == "integer")
    else:
        ok_type = True
    if not ok_type:
        return False
    if kind == "string":
        return _string_ok(node, value)
    if kind in ("integer", "number"):
        return _number_ok(node, value)
    if kind == "array":
        items = node.get("items", {})
        return _length_ok(node, value, "Items") and all(_accepts(items, v) for v in value)
    if kind == "object":
        return _object_ok(node, value)
    return True


def _string_ok(node: Obj, value: str) -> bool:
    if "pattern" in node and not re.search(node["pattern"], value):
        return False
    return _length_ok(node, value, "Length")


def _number_ok(node: Obj, value: float) -> bool:
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and (value < low or (node.get("exclusiveMinimum") and value == low)):
        return False
    return not (
        high is not None and (value > high or (node.get("exclusiveMaximum") and value == high))
    )


def _length_ok(node: Obj, value: Any, what: str) -> bool:
    low, high = node.get(f"min{what}"), node.get(f"max{what}")
    return (low is None or len(value) >= low) and (high is None or len(value) <= high)


def _object_ok(node: Obj, value: Mapping[str, Any]) -> bool:
    props = node.get("properties")
    if any(name not in value for name in node.get("required", [])):
        return False
    if props is not None:
        unknown = set(value) - set(props)
        if unknown and not node.get("x-kubernetes-preserve-unknown-fields"):
            return False  # the server would prune them from the default
        return all(_accepts(props[k], v) for k, v in value.items() if k in props)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        return all(_accepts(extra, v) for v in value.values())
    return True
