"""What every part of the CRD generator shares: the JSON node type, the error, `json_type`.

Kept apart so that the conversion, the default checks and the assembly can each import it
without importing one another.
"""

from __future__ import annotations

from typing import Any


class CrdError(Exception):
    """A model that has no structural OpenAPI encoding; the message names the field path."""


def json_type(value: Any) -> str:
    """The OpenAPI type name of a JSON value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"
