"""How a model's refusal reads to a user: one line per field path, in plain words.

pydantic says "Input should be a valid integer"; a user needs the field, what it must be, what
was given and, when the cause is likely, the fix: a misspelt field or value gets "did you mean",
a `yes` read as a boolean gets the YAML 1.1 rule, a quoted number the advice to unquote it.
Unknown-field hints come from the field's schema (the CRD's `properties`), so they name the
spellings the API server accepts.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from t9kjobs.kinds import Problem
from t9kjobs.vocabulary import Obj

__all__ = [
    "describe",
    "did_you_mean",
    "field_parts",
    "path_of",
    "problems_from_validation_error",
    "schema_at",
]


# Union members show up in pydantic locations as `literal['A','B']`, a class name or a type.
_UNION_TAG = re.compile(
    r"^(literal\[.*\]|[A-Z]\w*|list\[.*\]|dict\[.*\]|str|int|bool|float|function-.*|\[key\])$"
)
# Keys written plainly in a path; any other is quoted: `labels["app.kubernetes.io/name"]`.
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_$-]+$")

_WANTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}
_BOUNDS = {
    "greater_than_equal": ("ge", ">="),
    "less_than_equal": ("le", "<="),
    "greater_than": ("gt", ">"),
    "less_than": ("lt", "<"),
}
# Errors of a union member whose form (string, number) the given mapping or list did not take.
_FORM_MISMATCH = frozenset({"literal_error", "enum", *_WANTED})
# pydantic's wording of an error type no rule here knows: `Input should be ...` -> `must be ...`.
_PYDANTIC_SUBJECT = re.compile(
    r"^(Input|String|List|Dictionary|Tuple|Set|Value|Decimal|Object|Data|Number) should "
)
_YAML_BOOLEANS = (
    " (YAML reads an unquoted yes, no, on, off, y or n as a boolean, as kubectl does: quote it)"
)


def field_parts(loc: tuple[int | str, ...], data: Any, missing: bool = False) -> list[int | str]:
    """The field names and indices of a pydantic location, its union member tags dropped.

    A part is a field when the validated data has it there (so a key spelt like a class name,
    `Queue`, stays); else a tag when it looks like one; the last part of a `missing` error is
    the missing field itself."""
    out: list[int | str] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        indexed = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if indexed or (isinstance(node, dict) and part in node):
            out.append(part)
            node = node[part]
        elif (last and missing) or not (isinstance(part, str) and _UNION_TAG.match(part)):
            out.append(part)
            node = None
    return out


def path_of(prefix: str, parts: Iterable[int | str]) -> str:
    """`spec.replicaSpecs[0].replicas` from field parts."""
    out = prefix
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.match(part):
            out += f"[{json.dumps(part)}]"
        else:
            out += f".{part}" if out else part
    return out


def describe(value: Any) -> str:
    """A value as a message names it: `the string "1"`, `the number 1.5`, `a list`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value:g}" if isinstance(value, float) else f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def did_you_mean(word: Any, choices: Iterable[str]) -> str:
    """` (did you mean `x`?)` for the closest choice, else ``."""
    if not isinstance(word, str):
        return ""
    options = [c for c in choices if c != word]
    by_case = [c for c in options if c.lower() == word.lower().strip()]
    close = by_case or difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def schema_at(schema: Obj | None, parts: Iterable[int | str]) -> Obj | None:
    """The node of a structural schema at a path (list indices and map keys included)."""
    node = schema
    for part in parts:
        if node is None:
            return None
        if isinstance(part, int):
            node = node.get("items")
        else:
            props = node.get("properties") or {}
            extra = node.get("additionalProperties")
            node = props.get(part) or (extra if isinstance(extra, dict) else None)
    return node


def _one_of(expected: Any) -> list[str]:
    return re.findall(r"'([^']*)'", str(expected))


def _choices(values: list[str]) -> str:
    shown = [f"`{v}`" for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + f" or {shown[-1]}"


def _sized(kind: str, ctx: dict[str, Any], given: Any) -> str:
    things = "characters" if kind.startswith("string_") else "items"
    if kind.endswith("too_short"):
        least = ctx.get("min_length")
        unit = things[:-1] if least == 1 else things
        return f"must have at least {least} {unit}, got {_size(given)}"
    most = ctx.get("max_length")
    return f"must have at most {most} {things}, got {_size(given)}"


def _size(given: Any) -> str:
    return f"{len(given)}" if isinstance(given, str | list | dict) else describe(given)


def _wanted(wanted: str, given: Any) -> str:
    hint = ""
    if wanted == "a string" and isinstance(given, bool):
        hint = _YAML_BOOLEANS
    elif wanted == "a string" and isinstance(given, int | float):
        hint = " (quote it to make it a string)"
    elif wanted == "an integer" and isinstance(given, str) and given.strip().isdigit():
        hint = " (remove the quotes to make it a number)"
    elif wanted == "an integer" and isinstance(given, float) and given.is_integer():
        hint = " (beyond what a 64-bit integer holds)" if abs(given) >= 2**63 else ""
    return f"must be {wanted}, got {describe(given)}{hint}"


def _message(err: ErrorDetails, parts: list[int | str], schema: Obj | None) -> str:
    """pydantic's error in the project's words (never pydantic's "Input should be ...")."""
    kind, given = err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden" and parts:
        parent = schema_at(schema, parts[:-1])
        names = list((parent or {}).get("properties") or {})
        return "unknown field" + did_you_mean(parts[-1], names)
    if kind == "missing":
        return "required field is missing"
    if kind in ("literal_error", "enum"):
        expected = _one_of(ctx.get("expected", ""))
        return (
            f"must be {'one of ' if len(expected) > 2 else ''}{_choices(expected)},"
            f" got {describe(given)}" + did_you_mean(given, expected)
        )
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        return f"must be {sign} {ctx.get(key)}"
    if kind == "multiple_of":
        return f"must be a multiple of {ctx.get('multiple_of')}, got {describe(given)}"
    if kind in ("too_short", "too_long", "string_too_short", "string_too_long"):
        return _sized(kind, ctx, given)
    if kind == "int_parsing_size":
        return f"must be an integer a 64-bit integer holds, got {describe(given)}"
    if kind in _WANTED:
        return _wanted(_WANTED[kind], given)
    if kind == "string_pattern_mismatch":
        return f"must match the pattern `{ctx.get('pattern')}`, got {describe(given)}"
    text = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return _PYDANTIC_SUBJECT.sub("must ", text)


def _merged(messages: list[str]) -> str:
    """The alternatives of a union on one line: `must be A or a mapping, got the string 'x'`."""
    got = {m.rpartition(", got ")[2] for m in messages if ", got " in m}
    if len(got) != 1 or not all(", got " in m for m in messages):
        return " or ".join(messages)
    heads = [m.rpartition(", got ")[0] for m in messages]
    heads = [heads[0], *(h.removeprefix("must be ") for h in heads[1:])]
    return " or ".join(heads) + f", got {got.pop()}"


def problems_from_validation_error(
    exc: ValidationError, prefix: str, data: Any = None, schema: Obj | None = None
) -> list[Problem]:
    """One Problem per field path; the alternatives of a union are merged into one line.

    `data` is what was validated (to tell field names from union tags in pydantic's
    locations), `schema` its structural schema (the CRD's), for the names an unknown field may
    have meant."""
    by_path: dict[str, list[str]] = {}
    mismatched: set[str] = set()  # paths with errors of a union member's form not taken
    other: set[str] = set()
    for err in exc.errors():
        parts = field_parts(tuple(err["loc"]), data, missing=err["type"] == "missing")
        path = path_of(prefix, parts)
        msg = _message(err, parts, schema)
        if msg not in by_path.setdefault(path, []):
            by_path[path].append(msg)
        if err["type"] in _FORM_MISMATCH and isinstance(err.get("input"), dict | list):
            mismatched.add(path)
        else:
            other.add(path)
    # A mapping given where a string or a mapping may go took the mapping form: its own fields'
    # problems say what is wrong, not that it is no string.
    deeper = {p for p in by_path for q in by_path if q != p and q.startswith((p + ".", p + "["))}
    for path in (mismatched - other) & deeper:
        del by_path[path]
    return [Problem(path, _merged(msgs)) for path, msgs in by_path.items()]
