"""The one base class of every API model: camelCase on the wire, unknown fields refused.

Refusing unknown fields is what lets `t9kjobs validate` catch a misspelt field that the API
server would otherwise prune silently.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["ApiModel", "PodTemplate", "dump"]

# Pod templates are passed through as plain JSON objects: the API server validates them as pods,
# and the CRD schema marks them `x-kubernetes-preserve-unknown-fields`.
PodTemplate = dict[str, Any]


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
    )


def dump(model: BaseModel) -> dict[str, Any]:
    """The wire form of a model: camelCase keys, unset optional fields left out."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")
