"""pydantic's refusals in the project's words: field path, what it must be, what was given.

A plugin author's `validate` output, `t9kjobs validate` and the conformance kit print these; none
may show pydantic's own phrasing ("Input should be a valid integer, unable to parse string as
an integer", "List should have at least 1 item after validation").
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from t9kjobs.messages import problems_from_validation_error

PYDANTIC_WORDING = re.compile(r"\bshould\b|Input|after validation|unable to parse")


class Limits(BaseModel):
    policy: Literal["Always", "Never"] = "Never"
    limit: int = Field(default=0, ge=0)


class Sample(BaseModel):
    count: int = 0
    ratio: float = 0.5
    enabled: bool = False
    name: str = Field(default="a", max_length=5, pattern=r"^[a-z]+$")
    items: list[str] = Field(default_factory=lambda: ["x"], min_length=1, max_length=2)
    positive: int = Field(default=1, gt=0, lt=10)
    even: int = Field(default=2, multiple_of=2)
    mode: Literal["tune", "run"] = "run"
    policy: Literal["Always", "Never"] | Limits = "Never"
    when: datetime.date | None = None


def problems(data: dict[str, Any], strict: bool = False) -> list[str]:
    with pytest.raises(ValidationError) as err:
        Sample.model_validate(data, strict=strict)
    return [str(p) for p in problems_from_validation_error(err.value, "spec", data)]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # lax parsing (a status, a plugin's own model): pydantic's "unable to parse string"
        (
            {"count": "abc"},
            "spec.count: must be an integer, got the string 'abc'",
        ),
        ({"ratio": "half"}, "spec.ratio: must be a number, got the string 'half'"),
        ({"enabled": "maybe"}, "spec.enabled: must be true or false, got the string 'maybe'"),
        (
            {"name": "abcdefg"},
            "spec.name: must have at most 5 characters, got 7",
        ),
        (
            {"name": "AB"},
            "spec.name: must match the pattern `^[a-z]+$`, got the string 'AB'",
        ),
        ({"items": []}, "spec.items: must have at least 1 item, got 0"),
        ({"items": ["a", "b", "c"]}, "spec.items: must have at most 2 items, got 3"),
        ({"positive": 0}, "spec.positive: must be > 0"),
        ({"positive": 10}, "spec.positive: must be < 10"),
        ({"even": 3}, "spec.even: must be a multiple of 2, got the number 3"),
        (
            {"mode": "tuen"},
            "spec.mode: must be `tune` or `run`, got the string 'tuen' (did you mean `tune`?)",
        ),
        # a string-or-mapping union: one line for the string form's alternatives...
        (
            {"policy": 5},
            "spec.policy: must be `Always` or `Never` or a mapping, got the number 5",
        ),
        # ...and, the mapping form taken, only its fields' problems.
        (
            {"policy": {"policy": "Sometimes", "limit": -1}},
            "spec.policy.policy: must be `Always` or `Never`, got the string 'Sometimes'",
        ),
        # A type no rule knows still reads `must ...`, not `Input should ...`.
        ({"when": "someday"}, "spec.when: must be a valid date or datetime"),
    ],
)
def test_errors_read_in_the_projects_words(data: dict[str, Any], expected: str) -> None:
    found = problems(data)
    assert any(p.startswith(expected) for p in found), found
    assert not [p for p in found if PYDANTIC_WORDING.search(p)], found


def test_a_quoted_number_is_told_to_lose_its_quotes() -> None:
    assert problems({"count": "3"}, strict=True) == [
        "spec.count: must be an integer, got the string '3' (remove the quotes to make it a number)"
    ]


def test_the_mapping_form_keeps_every_field_problem_and_drops_the_string_forms() -> None:
    found = problems({"policy": {"policy": "Sometimes", "limit": -1}})
    assert found == [
        "spec.policy.policy: must be `Always` or `Never`, got the string 'Sometimes'",
        "spec.policy.limit: must be >= 0",
    ]
