"""Pydantic's JSON schema with a property for every spelling of an aliased field.

A field declared with `validation_alias=AliasChoices(...)` gets one property per spelling, so
that pruning never drops the one a user wrote, plus the CEL rules that stand in for its
`required` and refuse two spellings at once.
"""

from __future__ import annotations

import copy
import itertools
import re

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from t9kjobs.models._base import field_spellings
from t9kjobs.vocabulary import Obj

_ALIAS_NOTE = re.compile(r"\s*`[^`]+` is accepted as an alias\.")


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
        new_props: Obj = {}
        for key, value in props.items():
            new_props[key] = value
            for name, info in cls.model_fields.items():
                names = field_spellings(name, info)
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


def _json_schema(model: type[BaseModel]) -> Obj:
    mode: JsonSchemaMode = "validation"
    return model.model_json_schema(by_alias=True, mode=mode, schema_generator=_SchemaGenerator)
