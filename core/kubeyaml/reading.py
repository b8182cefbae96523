"""A file split into its manifests as kubectl splits it: the text encoding, the `---` parts,
JSON or YAML.

The entry of `t9kjobs.kubeyaml`: it decodes the bytes, reads a file starting with `{` as a
stream of JSON values, and otherwise composes (`t9kjobs.kubeyaml.composing`) and decodes
(`t9kjobs.kubeyaml.decoding`) the first document of each part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from t9kjobs.kubeyaml.composing import Node, compose
from t9kjobs.kubeyaml.decoding import Decoder, json_number
from t9kjobs.kubeyaml.document import Document, Unreadable, YamlProblem

__all__ = ["decode", "documents"]


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


# -- a YAML part -------------------------------------------------------------------------------


def _first_document(part: str, first_line: int) -> Document | None:
    """The first document of a part, composed then decoded as go-yaml does; None if none."""
    root = compose(part, first_line)
    if root is None:
        return None
    return Document(Decoder().decode(root), root.line, root.column)


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
            container[key] = json_number(item, Node("scalar", 0, 0, str(item)))
    return root[0]
