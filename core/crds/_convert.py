"""A model's JSON schema made structural OpenAPI v3, as the API server demands of a CRD.

`$ref`s inlined, unions written as their member (null dropped), `x-kubernetes-int-or-string` or
a typeless node, dicts as `additionalProperties` or `x-kubernetes-preserve-unknown-fields`; each
node then gets
its CEL list bounds (`_rules`), its default vetted (`_defaults`) and its keys ordered
(`_keywords`), its enum and default said in its description (`_explain`). The package
docstring lists every rule.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel

from t9kjobs.crds._aliases import _json_schema
from t9kjobs.crds._common import CrdError, json_type
from t9kjobs.crds._defaults import _check_default
from t9kjobs.crds._explain import _note_values
from t9kjobs.crds._keywords import _ANNOTATIONS, _FORMATS, _SCALARS, _VALUE_KEYS, _ordered
from t9kjobs.crds._rules import _bound_rule_lists
from t9kjobs.vocabulary import Obj


class _Converter:
    """Turns one model's JSON schema into a structural schema, field path by field path."""

    def __init__(self, defs: Obj) -> None:
        self.defs = defs

    def _deref(self, node: Obj, path: str, seen: tuple[str, ...]) -> tuple[Obj, tuple[str, ...]]:
        """The node with its `$ref` (or single-member allOf) replaced by the referenced schema."""
        while True:
            if "$ref" in node:
                name = str(node["$ref"]).rsplit("/", 1)[-1]
                if name in seen:
                    raise CrdError(f"{path}: {name} refers to itself; a CRD schema cannot recurse")
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                node = {**self.defs[name], **siblings}
                seen = (*seen, name)
            elif "allOf" in node and len(node["allOf"]) == 1:
                siblings = {k: v for k, v in node.items() if k != "allOf"}
                node = {**node["allOf"][0], **siblings}
            else:
                return node, seen

    def convert(self, node: Obj, path: str = "", seen: tuple[str, ...] = ()) -> Obj:
        node, seen = self._deref(node, path, seen)
        if "allOf" in node:
            raise CrdError(f"{path}: allOf of several schemas is not supported")
        if "anyOf" in node or "oneOf" in node:
            out = self._union(node, path, seen)
        else:
            out = self._plain(node, path, seen)
        _bound_rule_lists(out)
        _check_default(out)
        _note_values(out)
        return _ordered(out)

    def _plain(self, node: Obj, path: str, seen: tuple[str, ...]) -> Obj:
        out: Obj = {}
        for key, value in node.items():
            if key in _ANNOTATIONS or key in ("properties", "additionalProperties", "items"):
                continue
            if key.startswith("x-kubernetes-"):
                out[key] = copy.deepcopy(value)
            elif key == "const":
                out["enum"] = [value]
            elif key == "format":
                if value in _FORMATS:
                    out["format"] = value
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                # JSON schema's numeric form; OpenAPI v3.0 takes a bound and a boolean.
                out[key.replace("exclusiveM", "m")] = value
                out[key] = True
            elif key == "uniqueItems":
                if value:
                    out["x-kubernetes-list-type"] = "set"
            elif key in _VALUE_KEYS:
                out[key] = copy.deepcopy(value)
            else:
                raise CrdError(f"{path or '<root>'}: unsupported JSON-schema keyword {key!r}")
        if "enum" in out and "type" not in out:
            types = {json_type(v) for v in out["enum"]}
            if len(types) == 1:
                out["type"] = types.pop()
        kind = out.get("type")
        if kind is None and "x-kubernetes-int-or-string" not in out:
            if "enum" in out:
                raise CrdError(f"{path}: an enum of mixed types has no structural encoding")
            out["x-kubernetes-preserve-unknown-fields"] = True  # Any
        elif kind == "object":
            self._object(node, out, path, seen)
        elif kind == "array":
            items = node.get("items")
            if isinstance(items, dict) and items:
                out["items"] = self.convert(items, f"{path}[]", seen)
            else:
                out["items"] = {"x-kubernetes-preserve-unknown-fields": True}
            if out.get("x-kubernetes-list-type") == "set" and out["items"].get("type") not in (
                _SCALARS
            ):
                del out["x-kubernetes-list-type"]
        elif kind == "null":
            raise CrdError(f"{path}: a field that can only be null has no structural encoding")
        elif not isinstance(kind, str):
            raise CrdError(f"{path}: a list of types ({kind}) has no structural encoding")
        return out

    def _object(self, node: Obj, out: Obj, path: str, seen: tuple[str, ...]) -> None:
        extra = node.get("additionalProperties")
        if "properties" in node:  # a model: extra="forbid" / "ignore" leave nothing to say
            if node["properties"]:
                out["properties"] = {
                    name: self.convert(sub, f"{path}.{name}" if path else name, seen)
                    for name, sub in node["properties"].items()
                }
            if extra is True or extra == {}:  # extra="allow"
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(extra, dict):
                raise CrdError(f"{path}: a model with typed extra fields has no structural schema")
        elif isinstance(extra, dict) and extra:  # dict[str, X]
            out["additionalProperties"] = self.convert(extra, f"{path}[*]", seen)
        elif extra is not False:  # dict[str, Any], dict
            out["x-kubernetes-preserve-unknown-fields"] = True

    def _union(self, node: Obj, path: str, seen: tuple[str, ...]) -> Obj:
        key = "anyOf" if "anyOf" in node else "oneOf"
        outer = {k: v for k, v in node.items() if k != key}
        members = [self._deref(m, path, seen) for m in node[key]]
        members = [(m, s) for m, s in members if m.get("type") != "null"]
        if not members:
            raise CrdError(f"{path}: a field that can only be null has no structural encoding")
        if len(members) == 1:
            member, member_seen = members[0]
            out = self._plain({**member, **outer}, path, member_seen)
        else:
            converted = [self._plain(m, path, s) for m, s in members]
            kinds = sorted(str(m.get("type")) for m in converted)
            if kinds == ["integer", "string"]:
                out = _int_or_string(converted)
            elif kinds == ["object", "string"]:
                out = _string_or_object(converted, path)
            else:
                raise CrdError(
                    f"{path}: a union of {' and '.join(kinds)} has no structural encoding;"
                    " use one type, int | str, or str | a model"
                )
            for k, v in outer.items():
                if k in ("description", "default") or k.startswith("x-kubernetes-"):
                    out[k] = copy.deepcopy(v)
            if "x-kubernetes-validations" in out and "x-kubernetes-int-or-string" not in out:
                raise CrdError(_TYPELESS_CEL.format(path=path))
        # An optional field is not `nullable`: the API server prunes an explicit null from it,
        # so null means absent, as in the models. A nullable field would keep the null, and
        # the API server then refuses it from an enum and from a scale subresource's path.
        return out


def _enum_pattern(values: list[Any]) -> str:
    return "^(" + "|".join(re.escape(str(v)) for v in values) + ")$"


def _string_part(member: Obj) -> Obj:
    """The constraints of a union's string member, written so they bind strings only."""
    out: Obj = {}
    if "enum" in member:
        out["pattern"] = _enum_pattern(member["enum"])
    elif "pattern" in member:
        out["pattern"] = member["pattern"]
    for key in ("minLength", "maxLength"):
        if key in member:
            out[key] = member[key]
    return out


_TYPELESS_CEL = (
    "{path}: CEL rules on a string-or-object field cannot run (the API server hides typeless"
    " nodes from CEL); declare them on the enclosing model"
)


def _int_or_string(members: list[Obj]) -> Obj:
    out: Obj = {"x-kubernetes-int-or-string": True}
    for member in members:
        if member["type"] == "string":
            out.update(_string_part(member))
        else:
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if key in member:
                    out[key] = member[key]
    for member in members:
        for rule in member.get("x-kubernetes-validations", []):
            out.setdefault("x-kubernetes-validations", []).append(rule)
    return out


def _string_or_object(members: list[Obj], path: str) -> Obj:
    out: Obj = {"x-kubernetes-preserve-unknown-fields": True}
    for member in members:
        if member.get("x-kubernetes-validations"):
            raise CrdError(_TYPELESS_CEL.format(path=path))
        if member["type"] == "string":
            out.update(_string_part(member))
        else:
            for key in ("properties", "required", "minProperties", "maxProperties"):
                if key in member:
                    out[key] = member[key]
            # The node keeps unknown fields (it must, being typeless); counting the keys
            # refuses them at least where they outnumber the known ones (defaults included).
            out.setdefault("maxProperties", len(member.get("properties", {})))
    return out


def openapi_schema(model: type[BaseModel]) -> Obj:
    """The structural OpenAPI v3 schema of a model (spec or status), every `$ref` inlined."""
    root = _json_schema(model)
    defs = root.pop("$defs", {})
    return _Converter(defs).convert(root)
