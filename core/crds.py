"""CustomResourceDefinitions generated from the kinds' pydantic models (`t9kjobs crds`).

One CRD (apiextensions.k8s.io/v1) per kind the loaded plugins serve, bundled or third-party. The
schema is the spec and status models' JSON schema made *structural*, as the API server demands:

* every `$ref` inlined, `title` dropped, `anyOf [X, null]` written as `nullable: true`;
* `int | str` as `x-kubernetes-int-or-string` (the string part's enum becomes a `pattern`, which
  only applies to strings, the integer part keeps its bounds);
* a string-or-object union (the restart policy: `OnFailure` or `{policy, limit}`) as a typeless
  node with `x-kubernetes-preserve-unknown-fields`, a `pattern` for the string form and the
  object form's `properties` and `maxProperties` (each applies to its own form only). CEL cannot
  check it: the API server hides typeless nodes from CEL;
* `dict[str, Any]` (pod templates) as `type: object` with `x-kubernetes-preserve-unknown-fields`,
  other dicts as `additionalProperties`, `extra="forbid"` as nothing: the server refuses unknown
  fields under kubectl's strict field validation, and prunes them for other clients;
* every spelling of a field declared with `validation_alias=AliasChoices(...)` as a property of
  its own, so that pruning never drops the spelling a user took from the other reference. Such
  fields lose their `default` (a defaulted canonical spelling would override the alias the user
  wrote) and their `required` (replaced by a CEL rule accepting either spelling); a CEL rule
  refuses both spellings at once, as pydantic does;
* `x-kubernetes-*` keys from the models' `json_schema_extra` (CEL `x-kubernetes-validations`)
  copied as they are; a list a rule iterates or compares gets `maxItems` (`RULE_LIST_MAX_ITEMS`)
  when its model sets none, so that the rule's estimated cost stays within the server's budget;
* a `default` kept only when it validates against its own node (the server refuses the CRD
  otherwise).

No I/O here: the command line writes the files.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pydantic import AliasChoices, AliasPath, BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from t9kjobs.kinds import KindInfo
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP, API_VERSION

__all__ = [
    "RULE_LIST_MAX_ITEMS",
    "CrdError",
    "crd_filename",
    "crd_for",
    "crd_yaml",
    "crds",
    "json_type",
    "openapi_schema",
]

Json = dict[str, Any]

# maxItems given to a list that a CEL rule iterates or compares when its model sets none; the
# same bound GenericJob puts on replicaSpecs.
RULE_LIST_MAX_ITEMS = 32

_VERSION = API_VERSION.split("/", 1)[1]

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
_RULE_FIELD = re.compile(r"\b(?:self|oldSelf)\.([A-Za-z_][A-Za-z0-9_]*)(\s*[.\[]\s*(\w+)?)?")
# `has(self.x)` tests presence only: it costs nothing per list item.
_HAS = re.compile(r"\bhas\(\s*(?:self|oldSelf)(?:\.\w+)+\s*\)")
_ALIAS_NOTE = re.compile(r"\s*`[^`]+` is accepted as an alias\.")


class CrdError(Exception):
    """A model that has no structural OpenAPI encoding; the message names the field path."""


# -- pydantic JSON schema with every alias spelling ------------------------------------------


def _spellings(name: str, info: Any) -> list[str]:
    """Every wire name pydantic accepts for a field (its python name aside)."""
    out: list[str] = []
    choices = info.validation_alias
    if isinstance(choices, str):
        out.append(choices)
    elif isinstance(choices, AliasChoices):
        for choice in choices.choices:
            if isinstance(choice, str):
                out.append(choice)
            elif isinstance(choice, AliasPath) and len(choice.path) == 1:
                out.append(str(choice.path[0]))
    elif isinstance(choices, AliasPath) and len(choices.path) == 1:
        out.append(str(choices.path[0]))
    if not out:
        out.append(info.alias or name)
    return list(dict.fromkeys(out))


def _quote(names: list[str]) -> str:
    return " or ".join(f"`{n}`" for n in names)


class _SchemaGenerator(GenerateJsonSchema):
    """Pydantic's generator, plus a property for every spelling of an aliased field."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        props = json_schema.get("properties")
        if not isinstance(props, dict) or not issubclass(cls, BaseModel):
            return json_schema
        rules = list(json_schema.get("x-kubernetes-validations") or [])
        required = list(json_schema.get("required") or [])
        new_props: Json = {}
        for key, value in props.items():
            new_props[key] = value
            for name, info in cls.model_fields.items():
                names = _spellings(name, info)
                if key not in names or len(names) < 2:
                    continue
                value.pop("default", None)
                for other in names:
                    if other != key:
                        alias = copy.deepcopy(value)
                        own = _ALIAS_NOTE.sub("", str(value.get("description", "")))
                        alias["description"] = f"Alias of `{key}`. {own}".strip()
                        new_props[other] = alias
                rules.append(
                    {
                        "rule": " && ".join(
                            f"!(has(self.{a}) && has(self.{b}))"
                            for a, b in itertools.combinations(names, 2)
                        ),
                        "message": f"set only one of {_quote(names)}: they are spellings of one"
                        " field",
                        "fieldPath": f".{names[-1]}",
                        "reason": "FieldValueForbidden",
                    }
                )
                if key in required:
                    required.remove(key)
                    rules.append(
                        {
                            "rule": " || ".join(f"has(self.{n})" for n in names),
                            "message": f"{_quote(names)} is required",
                            "fieldPath": f".{key}",
                            "reason": "FieldValueRequired",
                        }
                    )
        json_schema["properties"] = new_props
        if rules:
            json_schema["x-kubernetes-validations"] = rules
        if required:
            json_schema["required"] = required
        else:
            json_schema.pop("required", None)
        return json_schema


def _json_schema(model: type[BaseModel]) -> Json:
    mode: JsonSchemaMode = "validation"
    return model.model_json_schema(by_alias=True, mode=mode, schema_generator=_SchemaGenerator)


# -- JSON schema -> structural OpenAPI v3 ----------------------------------------------------


class _Converter:
    """Turns one model's JSON schema into a structural schema, field path by field path."""

    def __init__(self, defs: Json) -> None:
        self.defs = defs

    def _deref(self, node: Json, path: str, seen: tuple[str, ...]) -> tuple[Json, tuple[str, ...]]:
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

    def convert(self, node: Json, path: str = "", seen: tuple[str, ...] = ()) -> Json:
        node, seen = self._deref(node, path, seen)
        if "allOf" in node:
            raise CrdError(f"{path}: allOf of several schemas is not supported")
        if "anyOf" in node or "oneOf" in node:
            out = self._union(node, path, seen)
        else:
            out = self._plain(node, path, seen)
        _bound_rule_lists(out)
        _check_default(out)
        return _ordered(out)

    def _plain(self, node: Json, path: str, seen: tuple[str, ...]) -> Json:
        out: Json = {}
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

    def _object(self, node: Json, out: Json, path: str, seen: tuple[str, ...]) -> None:
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

    def _union(self, node: Json, path: str, seen: tuple[str, ...]) -> Json:
        key = "anyOf" if "anyOf" in node else "oneOf"
        outer = {k: v for k, v in node.items() if k != key}
        members = [self._deref(m, path, seen) for m in node[key]]
        nullable = any(m.get("type") == "null" for m, _ in members)
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
        if nullable:
            out["nullable"] = True
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]  # an explicit null must pass the enum too
        return out


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


def _enum_pattern(values: list[Any]) -> str:
    return "^(" + "|".join(re.escape(str(v)) for v in values) + ")$"


def _string_part(member: Json) -> Json:
    """The constraints of a union's string member, written so they bind strings only."""
    out: Json = {}
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


def _int_or_string(members: list[Json]) -> Json:
    out: Json = {"x-kubernetes-int-or-string": True}
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


def _string_or_object(members: list[Json], path: str) -> Json:
    out: Json = {"x-kubernetes-preserve-unknown-fields": True}
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


def _key_rank(key: str) -> tuple[int, str]:
    return (_KEY_ORDER.index(key) if key in _KEY_ORDER else len(_KEY_ORDER), key)


def _ordered(node: Json) -> Json:
    return {k: node[k] for k in sorted(node, key=_key_rank)}


def _bound_rule_lists(node: Json) -> None:
    """Give `maxItems` to the lists this node's CEL rules iterate or compare."""
    rules = node.get("x-kubernetes-validations") or []
    if not rules:
        return
    if node.get("type") == "array":
        node.setdefault("maxItems", RULE_LIST_MAX_ITEMS)
        return
    props = node.get("properties") or {}
    for rule in rules:
        for match in _RULE_FIELD.finditer(_HAS.sub("", str(rule.get("rule", "")))):
            prop = props.get(match.group(1))
            if not prop or prop.get("type") != "array" or "maxItems" in prop:
                continue
            # Indexing and size() cost the same whatever the length; iterating or `==` do not.
            after = (match.group(2) or "").strip()
            if after.startswith("[") or match.group(3) == "size":
                continue
            prop["maxItems"] = RULE_LIST_MAX_ITEMS
            props[match.group(1)] = _ordered(prop)


def _check_default(node: Json) -> None:
    """Drop a `default` the API server would refuse (it must validate against its node)."""
    if "default" not in node:
        return
    value = node["default"]
    body = {k: v for k, v in node.items() if k != "default"}
    if value is None or not _accepts(body, value):
        del node["default"]


def _accepts(node: Json, value: Any) -> bool:
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


def _string_ok(node: Json, value: str) -> bool:
    if "pattern" in node and not re.search(node["pattern"], value):
        return False
    return _length_ok(node, value, "Length")


def _number_ok(node: Json, value: float) -> bool:
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and (value < low or (node.get("exclusiveMinimum") and value == low)):
        return False
    return not (
        high is not None and (value > high or (node.get("exclusiveMaximum") and value == high))
    )


def _length_ok(node: Json, value: Any, what: str) -> bool:
    low, high = node.get(f"min{what}"), node.get(f"max{what}")
    return (low is None or len(value) >= low) and (high is None or len(value) <= high)


def _object_ok(node: Json, value: Mapping[str, Any]) -> bool:
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


def openapi_schema(model: type[BaseModel]) -> Json:
    """The structural OpenAPI v3 schema of a model (spec or status), every `$ref` inlined."""
    root = _json_schema(model)
    defs = root.pop("$defs", {})
    return _Converter(defs).convert(root)


# -- the CustomResourceDefinition ------------------------------------------------------------


def _lookup(schema: Json, dotted: str) -> Json | None:
    node: Json | None = schema
    for part in dotted.split("."):
        if node is None:
            return None
        node = (node.get("properties") or {}).get(part)
    return node


def _scale(info: KindInfo, spec: Json) -> Json:
    relative = info.scale_spec_path or ""
    relative = relative.removeprefix(".").removeprefix("spec.")
    target = _lookup(spec, relative)
    if target is None or target.get("type") != "integer":
        raise CrdError(
            f"{info.kind}: scale_spec_path {info.scale_spec_path!r} is not an integer field of"
            " the spec"
        )
    return {
        "specReplicasPath": f".spec.{relative}",
        # Pods running now: what `kubectl get --subresource=scale` and autoscalers compare with.
        "statusReplicasPath": ".status.aggregate.running",
        # The job's pods, as a label selector string: a HorizontalPodAutoscaler refuses a
        # scale subresource without one.
        "labelSelectorPath": ".status.selector",
    }


def crd_for(info: KindInfo) -> Json:
    """The CustomResourceDefinition of one kind."""
    spec = openapi_schema(info.spec_model)
    spec["description"] = (
        spec.get("description") or f"The desired state of the {info.kind}."
    ).strip()
    status = openapi_schema(info.status_model)
    status["description"] = f"The observed state of the {info.kind}, written by the operator."
    description = info.description or spec["description"]
    subresources: Json = {"status": {}}
    if info.scale_spec_path:
        subresources["scale"] = _scale(info, spec)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{info.plural}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "t9k-jobs"},
        },
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                **({"shortNames": list(info.short_names)} if info.short_names else {}),
                **({"categories": list(info.categories)} if info.categories else {}),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": _VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "description": description,
                            "type": "object",
                            "properties": {
                                "apiVersion": {
                                    "description": "The versioned schema of this"
                                    f" representation of an object: {API_VERSION}.",
                                    "type": "string",
                                },
                                "kind": {
                                    "description": "The REST resource this object represents:"
                                    f" {info.kind}.",
                                    "type": "string",
                                },
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            "required": ["spec"],
                        }
                    },
                    "subresources": subresources,
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {
                            "name": "Running",
                            "type": "integer",
                            "description": "Replicas running now.",
                            "jsonPath": ".status.aggregate.running",
                        },
                        {
                            "name": "Age",
                            "type": "date",
                            "jsonPath": ".metadata.creationTimestamp",
                        },
                    ],
                }
            ],
        },
    }


def crd_filename(info: KindInfo) -> str:
    """`batch.tensorstack.dev_<plural>.yaml`, as controller-gen names CRD files."""
    return f"{API_GROUP}_{info.plural}.yaml"


def crd_yaml(crd: Json, plugin: str) -> str:
    """One CRD as the text of its file, with a header naming its source."""
    header = (
        f"# Generated by `t9kjobs crds` (make crds) from the {plugin!r} plugin's models."
        " Do not edit.\n"
    )
    # Block style, keys in the order built, lines folded at a fixed width: stable diffs.
    body = yaml.safe_dump(crd, sort_keys=False, width=100, allow_unicode=True)
    return header + "---\n" + body


def crds(manager: PluginManager) -> Iterator[tuple[str, str]]:
    """(file name, file text) of every kind the manager's plugins serve, sorted by file name."""
    kinds = sorted(manager.kinds.values(), key=crd_filename)
    for info in kinds:
        yield crd_filename(info), crd_yaml(crd_for(info), manager.owner_of(info.kind))
