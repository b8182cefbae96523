"""Fields that the user references and the API references spell differently.

The API spelling is canonical and the other is accepted as an alias (`enable` for `enabled`,
`Queue` for `queue`), so that no field a user writes from either document is silently dropped;
a model with such fields derives from `_OneSpelling`, which refuses both spellings at once.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, model_validator

from t9kjobs.models._base import ApiModel

__all__ = ["_OneSpelling", "enabled_field"]


def enabled_field(description: str, default: bool = False) -> bool:
    """A boolean `enabled` field, off unless `default`, that also reads the spelling `enable`."""
    return Field(
        default=default,
        validation_alias=AliasChoices("enabled", "enable"),
        serialization_alias="enabled",
        description=description + " `enable` is accepted as an alias.",
    )


class _OneSpelling(ApiModel):
    """A model with aliased fields: two spellings of one field are an error, as in the CRD.

    Without this, pydantic reports the second spelling as an unknown field, which hides why.
    """

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for info in cls.model_fields.values():
                if isinstance(info.validation_alias, AliasChoices):
                    # A null spelling is absent (the API server prunes it).
                    given = [c for c in info.validation_alias.choices if data.get(c) is not None]
                    if len(given) > 1:
                        names = " or ".join(f"`{c}`" for c in given)
                        raise ValueError(
                            f"set only one of {names}: they are spellings of one field"
                        )
        return data
