"""Manifest files read the way `kubectl` reads them, so that what `t9kjobs validate` accepts is
what the API server receives.

kubectl splits a file at `---` lines, reads each part with go-yaml v2 (YAML 1.1 scalars: `yes`,
`on` and `y` are true, `0755` is octal, `1_000` is 1000, `1e1` is a number, a date stays a
string), turns it into JSON (keys become strings, NaN and infinities are errors) and sends that
JSON; a file starting with `{` is read as JSON instead. Reading with PyYAML's defaults differs on
all of these (`1e1` is a string there, `2024-01-31` a date, `y` a string, duplicate keys and
alias bombs unchecked), so this module resolves scalars itself, from PyYAML's events, with
go-yaml's rules:

* plain scalars resolve as go-yaml's `resolve()` does; quoted ones are strings; `!!int`,
  `!!float`, `!!bool`, `!!null`, `!!str`, `!!binary` and `!!timestamp` tags are honoured and
  other tags ignored;
* a later duplicate key wins, `<<` merges (later keys win over merged ones), keys become strings
  as sigs.k8s.io/yaml makes them (a null or list key is an error);
* aliases expand within go-yaml's budget (an alias bomb is "excessive aliasing"), an anchor
  that contains itself is an error;
* numbers come out as the API server decodes kubectl's JSON: integral values up to 2^63-1 are
  ints, larger or fractional ones floats;
* nesting deeper than `MAX_NESTING` is an error (go-yaml allows 10,000, libyaml 1,000; a job may
  nest far less, see `t9kjobs.loading`), and no part of the reading recurses.

Bytes are decoded as UTF-8, or UTF-16 with a byte-order mark; anything else is `Unreadable`
(kubectl would pass invalid UTF-8 on as U+FFFD, changing the text silently).
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["MAX_NESTING", "Document", "Unreadable", "YamlProblem", "decode", "documents"]

# libyaml's own limit; go-yaml's is 10,000. A job nests far less (t9kjobs.loading.MAX_DEPTH).
MAX_NESTING = 1000

_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_JSON_INTEGRAL_LIMIT = 1e21  # Go prints floats below this without an exponent: `1e1` is `10`

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


class Unreadable(Exception):
    """Bytes that are not UTF-8 or UTF-16 text."""


class YamlProblem(Exception):
    """A problem with the text itself, at a line and column (1-based)."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.message = message


@dataclass(frozen=True)
class Document:
    """One manifest of a file: its JSON value and where it starts."""

    value: Any
    line: int
    column: int = 1


def decode(data: bytes) -> tuple[str, bool]:
    """The text of a file and whether it is UTF-16 (which kubectl reads as a single part)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), True
        except UnicodeDecodeError as exc:
            raise Unreadable(f"not UTF-16 text: {exc.reason} at byte {exc.start}") from None
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"), False
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise Unreadable(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column}"
            " (save the file as UTF-8)"
        ) from None


def documents(data: bytes) -> list[Document]:
    """The non-null documents of a file, as JSON values; `Unreadable` or `YamlProblem`."""
    text, utf16 = decode(data)
    if text.lstrip()[:1] == "{":
        return _json_documents(text)
    out = []
    for part, first_line in [(text, 1)] if utf16 else _parts(text):
        doc = _first_document(part, first_line)
        if doc is not None and doc.value is not None:
            out.append(doc)
    return out


# -- kubectl's document split ------------------------------------------------------------------


def _parts(text: str) -> Iterator[tuple[str, int]]:
    """The parts between `---` lines (k8s.io/apimachinery YAMLReader), with their first line."""
    lines = text.splitlines(keepends=True)
    start = 0
    for number, line in enumerate(lines):
        if not line.startswith("---"):
            continue
        rest = line[3:].strip()
        if rest and not rest.startswith("#"):
            raise YamlProblem(number + 1, 1, f"invalid document separator: {line.rstrip()}")
        if number > start:
            yield "".join(lines[start:number]), start + 1
        start = number + 1
    if start < len(lines):
        yield "".join(lines[start:]), start + 1


# -- composing nodes from events, without recursion --------------------------------------------


@dataclass(eq=False)
class _Node:
    kind: str  # scalar | sequence | mapping | alias
    line: int
    column: int
    value: str = ""
    tag: str = ""
    plain: bool = False
    children: list[_Node] = field(default_factory=list)
    target: _Node | None = None


def _loader() -> type[Any]:
    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def _first_document(part: str, first_line: int) -> Document | None:
    offset = first_line - 1
    anchors: dict[str, _Node] = {}
    stack: list[_Node] = []
    root: _Node | None = None

    def place(node: _Node) -> None:
        nonlocal root
        if stack:
            stack[-1].children.append(node)
        elif root is None:
            root = node

    try:
        for event in yaml.parse(part, Loader=_loader()):
            mark = event.start_mark
            line, column = (mark.line + 1 + offset, mark.column + 1) if mark else (first_line, 1)
            if isinstance(event, yaml.DocumentEndEvent):
                break
            if isinstance(event, yaml.ScalarEvent):
                plain = bool(event.implicit[0])
                node = _Node("scalar", line, column, event.value, event.tag or "", plain)
            elif isinstance(event, yaml.AliasEvent):
                target = anchors.get(str(event.anchor))
                if target is None:
                    raise YamlProblem(line, column, f"unknown anchor '{event.anchor}' referenced")
                node = _Node("alias", line, column, str(event.anchor), target=target)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                kind = "sequence" if isinstance(event, yaml.SequenceStartEvent) else "mapping"
                node = _Node(kind, line, column)
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                stack.pop()
                continue
            else:
                continue
            anchor = getattr(event, "anchor", None)
            if anchor is not None and node.kind != "alias":
                anchors[str(anchor)] = node
            place(node)
            if node.kind in ("sequence", "mapping"):
                stack.append(node)
                if len(stack) > MAX_NESTING:
                    raise YamlProblem(line, column, f"nested deeper than {MAX_NESTING} levels")
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1 + offset, mark.column + 1) if mark else (first_line, 1)
        problem = " ".join(str(exc.problem or exc.context or "malformed YAML").split())
        if "nesting depth" in problem:
            problem = f"nested deeper than {MAX_NESTING} levels"
        raise YamlProblem(line, column, problem) from None
    except yaml.reader.ReaderError as exc:
        line = part.count("\n", 0, exc.position) + offset + 1
        column = exc.position - (part.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise YamlProblem(line, column, f"control character U+{code:04X} is not allowed") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(first_line, 1, " ".join(str(exc).split())) from None
    if root is None:
        return None
    return Document(_Decoder().decode(root), root.line, root.column)


# -- go-yaml's scalar resolution ---------------------------------------------------------------


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
    low, high = (0, _UINT64_MAX) if unsigned else (-(2**63), _INT64_MAX)
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


def _scalar(node: _Node) -> Any:
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


# -- go-yaml's decoding and sigs.k8s.io/yaml's JSON conversion ---------------------------------


def _allowed_alias_ratio(decodes: int) -> float:
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * ((decodes - low) / (high - low))


def _go_float32_text(value: float) -> str:
    """strconv.FormatFloat(v, 'g', -1, 32): how sigs.k8s.io/yaml turns a float key into a
    string (the shortest float32 digits; an exponent below -4 or from 6 up)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    single = _float32(value)
    sign = "-" if single < 0 else ""
    for count in range(1, 10):
        text = f"{abs(single):.{count - 1}e}"
        if _float32(float(text)) == abs(single):
            break
    mantissa, _, exponent = text.partition("e")
    digits, exp = mantissa.replace(".", ""), int(exponent)
    if exp < -4 or exp >= 6:
        point = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{point}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    whole = exp + 1
    if whole <= 0:
        return f"{sign}0.{'0' * -whole}{digits}"
    if whole >= len(digits):
        return f"{sign}{digits}{'0' * (whole - len(digits))}"
    return f"{sign}{digits[:whole]}.{digits[whole:]}"


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _json_number(value: Any, node: _Node) -> Any:
    """What the API server decodes from the JSON kubectl writes for a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return value if value <= _INT64_MAX else float(value)
    if math.isnan(value) or math.isinf(value):
        raise YamlProblem(node.line, node.column, f"{node.value}: JSON has no NaN or infinity")
    if value.is_integer() and abs(value) < _JSON_INTEGRAL_LIMIT:
        number = int(value)
        return number if -(2**63) <= number <= _INT64_MAX else value
    return value


def _key_text(value: Any, node: _Node) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        if value > _INT64_MAX:
            raise YamlProblem(node.line, node.column, f"unsupported map key {value} (uint64)")
        return str(value)
    if isinstance(value, float):
        return _go_float32_text(value)
    raise YamlProblem(node.line, node.column, f"unsupported map key {node.value or 'null'!r}")


class _Decoder:
    """Decodes a node tree without recursion, counting as go-yaml counts against alias bombs."""

    def __init__(self) -> None:
        self.decodes = 0
        self.alias_decodes = 0
        self.alias_depth = 0
        self.expanding: set[int] = set()

    def _count(self, node: _Node) -> None:
        self.decodes += 1
        if self.alias_depth:
            self.alias_decodes += 1
        if (
            self.alias_decodes > 100
            and self.decodes > 1000
            and self.alias_decodes / self.decodes > _allowed_alias_ratio(self.decodes)
        ):
            raise YamlProblem(node.line, node.column, "document contains excessive aliasing")

    def _enter_alias(self, node: _Node) -> _Node:
        if id(node) in self.expanding:
            raise YamlProblem(
                node.line, node.column, f"anchor '{node.value}' value contains itself"
            )
        self.expanding.add(id(node))
        self.alias_depth += 1
        assert node.target is not None
        return node.target

    def _leave_alias(self, node: _Node) -> None:
        self.expanding.discard(id(node))
        self.alias_depth -= 1

    def _key(self, node: _Node) -> Any:
        """A mapping key: a scalar, possibly behind aliases."""
        seen: list[_Node] = []
        self._count(node)
        while node.kind == "alias":
            seen.append(node)
            node = self._enter_alias(node)
            self._count(node)
        try:
            if node.kind != "scalar":
                raise YamlProblem(node.line, node.column, "invalid map key: a list or mapping")
            return _scalar(node)
        finally:
            for alias in reversed(seen):
                self._leave_alias(alias)

    def decode(self, root: _Node) -> Any:
        result: list[Any] = [None]
        # Work items: ("node", node, setter) | ("leave", alias) | ("pair", key, value, dict)
        # | ("merge", node, dict).
        work: list[tuple[Any, ...]] = [("node", root, lambda v: result.__setitem__(0, v))]
        while work:
            item = work.pop()
            if item[0] == "leave":
                self._leave_alias(item[1])
            elif item[0] == "pair":
                self._pair(item[1], item[2], item[3], work)
            elif item[0] == "merge":
                self._merge(item[1], item[2], work)
            else:
                self._node(item[1], item[2], work)
        return result[0]

    def _node(self, node: _Node, put: Callable[[Any], None], work: list[tuple[Any, ...]]) -> None:
        self._count(node)
        if node.kind == "alias":
            target = self._enter_alias(node)
            work.append(("leave", node))
            work.append(("node", target, put))
        elif node.kind == "scalar":
            put(_json_number(_scalar(node), node))
        elif node.kind == "sequence":
            items: list[Any] = [None] * len(node.children)
            put(items)
            for index in reversed(range(len(node.children))):
                work.append(("node", node.children[index], _setter(items, index)))
        else:
            mapping: dict[str, Any] = {}
            put(mapping)
            self._pairs(node, mapping, work)

    def _pairs(self, node: _Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]) -> None:
        pairs = list(zip(node.children[::2], node.children[1::2], strict=True))
        for key, value in reversed(pairs):
            work.append(("pair", key, value, mapping))

    def _pair(
        self, key: _Node, value: _Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]
    ) -> None:
        if key.kind == "scalar" and key.plain and not key.tag and key.value == "<<":
            work.append(("merge", value, mapping))
            return
        name = _key_text(self._key(key), key)
        work.append(("node", value, _setter(mapping, name)))

    def _merge(self, node: _Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]) -> None:
        """`<<: *x` or `<<: [*x, *y]`: their keys, earlier sources winning, into `mapping`."""
        want_map = "map merge requires map or sequence of maps as the value"
        sources = list(reversed(node.children)) if node.kind == "sequence" else [node]
        # Each source is decoded into `mapping` in turn: pushed in reverse, run in order.
        for source in reversed(sources):
            self._count(source)
            resolved = source.target if source.kind == "alias" else source
            if resolved is None or resolved.kind != "mapping":
                raise YamlProblem(source.line, source.column, want_map)
            if source.kind == "alias":
                self._enter_alias(source)
                work.append(("leave", source))
            self._pairs(resolved, mapping, work)


def _setter(container: Any, key: Any) -> Callable[[Any], None]:
    def put(value: Any) -> None:
        container[key] = value

    return put


# -- JSON files --------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_documents(text: str) -> list[Document]:
    """A stream of JSON values (kubectl reads a file starting with `{` as JSON)."""
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    out: list[Document] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return out
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        try:
            value, position = decoder.raw_decode(text, position)
        except RecursionError:
            raise YamlProblem(line, column, "JSON nested too deep") from None
        except ValueError as exc:
            where = getattr(exc, "pos", position)
            bad_line = text.count("\n", 0, where) + 1
            bad_column = where - (text.rfind("\n", 0, where) + 1) + 1
            message = getattr(exc, "msg", str(exc))
            raise YamlProblem(bad_line, bad_column, f"malformed JSON: {message}") from None
        if value is not None:
            out.append(Document(_json_numbers(value), line, column))


def _json_numbers(value: Any) -> Any:
    """Numbers as the API server decodes kubectl's re-encoding of them, without recursion."""
    root = [value]
    work: list[tuple[Any, Any]] = [(root, 0)]
    while work:
        container, key = work.pop()
        item = container[key]
        if isinstance(item, dict):
            work.extend((item, k) for k in item)
        elif isinstance(item, list):
            work.extend((item, i) for i in range(len(item)))
        elif isinstance(item, int | float) and not isinstance(item, bool):
            container[key] = _json_number(item, _Node("scalar", 0, 0, str(item)))
    return root[0]
