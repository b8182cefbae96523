"""Checks of a CRD schema without an API server: is it structural, and does it keep a manifest?

`structural_problems` applies the API server's rules for `apiextensions.k8s.io/v1` schemas
(every field typed, or int-or-string, or preserving unknown fields; no `$ref`; nothing typed
inside `anyOf`/`oneOf`/`allOf`/`not`; `properties` and `additionalProperties` exclusive; ...).
`admission_problems` walks a manifest through a schema the way the server does on create: the
fields it would prune (dropped silently: a field the user wrote that never reaches the plugin)
and the values whose JSON type or enum it would refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from t9kjobs.crds import json_type
from t9kjobs.vocabulary import Obj

__all__ = ["admission_problems", "structural_problems"]


# The fields of JSONSchemaProps the API server knows (x-kubernetes-* aside).
_KNOWN_KEYS = frozenset(
    {
        "description",
        "type",
        "format",
        "title",
        "default",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "additionalProperties",
        "nullable",
        "example",
        "externalDocs",
    }
)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_JUNCTORS = ("allOf", "anyOf", "oneOf")
# What a node inside a junctor may not set (the int-or-string idiom aside).
_NOT_IN_JUNCTOR = ("description", "type", "default", "additionalProperties", "nullable")
_METADATA_KEYS = frozenset({"name", "generateName"})


def _children(node: Obj, path: str) -> Iterator[tuple[str, Obj]]:
    for name, sub in (node.get("properties") or {}).items():
        yield f"{path}.{name}", sub
    if isinstance(node.get("items"), dict):
        yield f"{path}[*]", node["items"]
    if isinstance(node.get("additionalProperties"), dict):
        yield f"{path}{{*}}", node["additionalProperties"]


def _junctor_members(node: Obj) -> Iterator[Obj]:
    for key in _JUNCTORS:
        yield from (m for m in node.get(key) or [] if isinstance(m, dict))
    if isinstance(node.get("not"), dict):
        yield node["not"]


def _node_problems(node: Obj, where: str, in_junctor: bool) -> Iterator[str]:
    for key in node:
        if key not in _KNOWN_KEYS and not key.startswith("x-kubernetes-"):
            yield f"{where}: {key!r} is not a schema field the API server knows"
    if node.get("uniqueItems") is True:
        yield f"{where}: uniqueItems: true is refused by the API server"
    if "additionalProperties" in node:
        if "properties" in node:
            yield f"{where}: properties and additionalProperties are mutually exclusive"
        if not isinstance(node["additionalProperties"], dict):
            yield f"{where}: additionalProperties must be a schema"
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        yield f"{where}: x-kubernetes-preserve-unknown-fields may only be true"
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if int_or_string and "type" in node:
        yield f"{where}: an x-kubernetes-int-or-string node must not set type"
    if in_junctor:
        for key in _NOT_IN_JUNCTOR:
            if key in node and not (key == "type" and node[key] in ("integer", "string")):
                yield f"{where}: {key} inside allOf/anyOf/oneOf/not makes a schema non-structural"
        return
    kind = node.get("type")
    untyped_ok = int_or_string or node.get("x-kubernetes-preserve-unknown-fields") is True
    if kind is None and not untyped_ok:
        yield f"{where}: no type (and not int-or-string nor preserving unknown fields)"
    elif kind is not None and kind not in _TYPES:
        yield f"{where}: type {kind!r} is not one of {', '.join(sorted(_TYPES))}"
    if kind == "array" and not isinstance(node.get("items"), dict):
        yield f"{where}: an array needs an items schema"
    if node.get("x-kubernetes-validations") and kind is None and not int_or_string:
        yield f"{where}: CEL rules on a typeless node never compile"
    if None in (node.get("enum") or []) and not node.get("nullable"):
        yield f"{where}: null in the enum of a node that is not nullable"
    declared = set((node.get("properties") or {}).keys())
    for member in _junctor_members(node):
        for name in (member.get("properties") or {}).keys() - declared:
            yield f"{where}: {name!r} is specified inside a junctor but not outside it"


def _walk(node: Obj, where: str, in_junctor: bool) -> Iterator[str]:
    yield from _node_problems(node, where, in_junctor)
    for path, sub in _children(node, where):
        yield from _walk(sub, path, in_junctor)
    for member in _junctor_members(node):
        yield from _walk(member, f"{where}(junctor)", True)


def structural_problems(root: Obj) -> list[str]:
    """Why the API server would refuse `root` (a CRD version's openAPIV3Schema); [] if none."""
    problems = list(_walk(root, "<root>", False))
    metadata = (root.get("properties") or {}).get("metadata")
    if isinstance(metadata, dict):
        extra = set((metadata.get("properties") or {}).keys()) - _METADATA_KEYS
        if extra or set(metadata) - {"type", "properties", "description"}:
            problems.append("<root>.metadata: only name and generateName may be restricted")
    return problems


def _type_problem(value: Any, node: Obj, path: str) -> str | None:
    got = json_type(value)
    if got == "null":
        return None  # kept where nullable, else pruned: absent either way
    if node.get("x-kubernetes-int-or-string"):
        ok = got in ("integer", "string")
        want = "an integer or a string"
    else:
        want = str(node.get("type") or got)
        ok = got == want or (want == "number" and got == "integer")
    if not ok:
        return f"{path}: {got} is refused (the schema wants {want})"
    if "enum" in node and value not in node["enum"]:
        return f"{path}: {value!r} is refused (not one of {node['enum']})"
    return None


def admission_problems(value: Any, node: Obj, path: str) -> list[str]:
    """Fields of `value` the API server would prune, and values of a type it would refuse."""
    problem = _type_problem(value, node, path)
    if problem is not None:
        return [problem]
    out: list[str] = []
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if isinstance(value, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                out += admission_problems(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += admission_problems(sub, extra, f"{path}.{key}")
            elif not preserve:
                out.append(f"{path}.{key}: pruned (the schema has no such field)")
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            out += admission_problems(item, node["items"], f"{path}[{i}]")
    return out
