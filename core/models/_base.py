"""The one base class of every API model: camelCase on the wire, unknown fields refused, an
explicit null read as an absent field.

Refusing unknown fields is what lets `t9kjobs validate` catch a misspelt field that the API
server would otherwise prune silently. A null is absent because the API server prunes a null
from every field its schema does not mark `nullable` (none is, `t9kjobs.crds`), then applies the
default: `cleanUpPolicy: null` means the default there, so it must here too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["ApiModel", "drop_nulls", "dump", "field_spellings", "wire_names"]


class ApiModel(BaseModel):
    """The base of every API model: camelCase on the wire, unknown fields refused, an explicit
    null read as an absent field."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(v is None for v in data.values()):
            known = wire_names(cls)
            return {k: v for k, v in data.items() if v is not None or k not in known}
        return data


def field_spellings(name: str, info: Any) -> list[str]:
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


@cache
def wire_names(model: type[BaseModel]) -> frozenset[str]:
    """Every spelling of every field of `model` on the wire."""
    return frozenset(s for n, f in model.model_fields.items() for s in field_spellings(n, f))


def drop_nulls(value: Any) -> Any:
    """A mapping without its null values (the API server prunes them); anything else as is."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


def dump(model: BaseModel) -> dict[str, Any]:
    """The wire form of a model: camelCase keys, unset optional fields left out."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")
