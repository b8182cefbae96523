"""go-yaml v2's scalar resolution: the value kubectl reads from a scalar's text and tag.

YAML 1.1 as go-yaml reads it, not as PyYAML does: `yes`, `on` and `y` are true, `0755` is octal,
`1_000` is 1000, `1e1` a number, a date stays a string; `!!int`, `!!float`, `!!bool`, `!!null`,
`!!str`, `!!binary` and `!!timestamp` tags are honoured and other tags ignored. One scalar at a
time: mappings, aliases and JSON numbers are `t9kjobs.kubeyaml.decoding`'s.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Any

from t9kjobs.kubeyaml.composing import Node
from t9kjobs.kubeyaml.document import YamlProblem

__all__ = ["INT64_MAX", "scalar"]

INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP, _BINARY, _MERGE = (
    _TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary", "merge")
)
_RESOLVABLE = frozenset({"", _STR, _BOOL, _INT, _FLOAT, _NULL, _TIMESTAMP})

_WORDS: dict[str, tuple[str, Any]] = {}
for _value, _tag, _spellings in (
    (True, _BOOL, "y Y yes Yes YES true True TRUE on On ON"),
    (False, _BOOL, "n N no No NO false False FALSE off Off OFF"),
    (None, _NULL, "~ null Null NULL"),
    (math.nan, _FLOAT, ".nan .NaN .NAN"),
    (math.inf, _FLOAT, ".inf .Inf .INF +.inf +.Inf +.INF"),
    (-math.inf, _FLOAT, "-.inf -.Inf -.INF"),
    ("<<", _MERGE, "<<"),
):
    for _word in _spellings.split():
        _WORDS[_word] = (_tag, _value)
_WORDS[""] = (_NULL, None)

_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_TIMESTAMP_FORM = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}"
    r"([Tt ]\d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?(Z|[-+]\d{2}:\d{2})?)?$"
)
_BASES = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
_BASE_DIGITS = {
    2: frozenset("01"),
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _go_int(text: str, unsigned: bool) -> int | None:
    """strconv.ParseInt (or ParseUint) with base 0; underscores are already removed."""
    sign, body = 1, text
    if not unsigned and body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    base = _BASES.get(body[:2], 0)
    if base:
        body = body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, body = 8, body[1:]
    else:
        base = 10
    if not body or not set(body) <= _BASE_DIGITS[base]:
        return None
    value = sign * int(body, base)
    low, high = (0, _UINT64_MAX) if unsigned else (-(2**63), INT64_MAX)
    return value if low <= value <= high else None


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    """go-yaml v2's resolve(): the resolved tag and value of a scalar."""
    if tag not in _RESOLVABLE:
        return tag, text
    first = text[:1]
    hinted = first == "" or first in "+-0123456789.yYnNtTfFoO~<"
    if hinted and tag not in (_STR, _BINARY):
        if text in _WORDS:
            return _WORDS[text]
        if first == ".":
            number = _go_float(text)
            if number is not None:
                return _FLOAT, number
        elif first in "+-0123456789":
            if tag in ("", _TIMESTAMP) and _TIMESTAMP_FORM.match(text):
                return _TIMESTAMP, text
            plain = text.replace("_", "")
            for unsigned in (False, True):
                number_ = _go_int(plain, unsigned)
                if number_ is not None:
                    return _INT, number_
            if _YAML_FLOAT.match(plain):
                number = _go_float(plain)
                if number is not None:
                    return _FLOAT, number
    return _STR, text


def _go_float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return None if math.isinf(number) and "inf" not in text.lower() else number


def scalar(node: Node) -> Any:
    """The value go-yaml decodes a scalar to (into an interface{})."""
    if not node.tag and not node.plain:
        return node.value  # quoted: a string
    tag = node.tag
    if tag == _BINARY:
        try:
            raw = base64.b64decode("".join(node.value.split()), validate=True)
        except ValueError:
            raise YamlProblem(
                node.line, node.column, "!!binary value contains invalid base64 data"
            ) from None
        return raw.decode("utf-8", errors="replace")
    resolved_tag, value = _resolve(tag, node.value)
    if tag not in _RESOLVABLE or tag in ("", resolved_tag, _STR):
        return value
    if tag == _FLOAT and resolved_tag == _INT:
        return float(value)
    raise YamlProblem(
        node.line,
        node.column,
        f"cannot decode {_short(resolved_tag)} `{node.value}` as a {_short(tag)}",
    )
