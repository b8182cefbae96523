"""The JSON-schema keywords the conversion drops, copies or maps, and the output key order.

Plain tables, apart from the conversion logic, so that `_convert` reads as logic only.
"""

from __future__ import annotations

from t9kjobs.vocabulary import Obj

# JSON-schema keywords that only annotate: dropped.
_ANNOTATIONS = frozenset({"title", "examples", "deprecated", "readOnly", "writeOnly", "$comment"})
# Keywords copied as they are (after conversion of their sub-schemas).
_VALUE_KEYS = frozenset(
    {
        "description",
        "type",
        "enum",
        "minimum",
        "maximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "required",
        "default",
    }
)
# The formats the API server knows; any other is dropped.
_FORMATS = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "date-time",
        "int32",
        "int64",
        "float",
        "double",
    }
)
# Output order of a node's keys, so the YAML reads top-down and diffs stay small.
_KEY_ORDER = (
    "description",
    "type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "nullable",
    "format",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "x-kubernetes-list-type",
    "minProperties",
    "maxProperties",
    "default",
    "properties",
    "additionalProperties",
    "items",
    "required",
    "x-kubernetes-validations",
)
_SCALARS = frozenset({"string", "integer", "number", "boolean"})


def _key_rank(key: str) -> tuple[int, str]:
    return (_KEY_ORDER.index(key) if key in _KEY_ORDER else len(_KEY_ORDER), key)


def _ordered(node: Obj) -> Obj:
    return {k: node[k] for k in sorted(node, key=_key_rank)}
