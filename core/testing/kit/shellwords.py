"""The words bash sees in a script, and which of their characters it takes literally.

The conformance kit asks whether a value the user wrote (a program's arguments) survives a
plugin's launch script unchanged: it must be one or more whole characters of one word, every
one of them literal, so that neither word splitting nor an expansion (`$`, a backquote)
touches it. `bash -n` only says that a script parses; this says what it means.

A small reading of POSIX shell quoting, enough for generated launch scripts: blanks and
operators (`;&|<>()`) end a word, `#` at a word's start begins a comment, `\\` escapes one
character (and joins lines before a newline), `'...'` is literal, and inside `"..."` only `$`
and a backquote are not (`\\` escapes `$`, a backquote, `"`, `\\` and a newline there). Here-
documents are read as words, which is what an unquoted one does to `$` anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Word", "words"]

_BLANKS = " \t\n"
_OPERATORS = ";&|<>()"
_IN_DOUBLE_ESCAPES = '$`"\\\n'


@dataclass(frozen=True)
class Word:
    """A word's characters after quote removal; `literal[i]`: character i is taken as it is
    (False: it starts or belongs to an expansion)."""

    text: str
    literal: tuple[bool, ...]

    def holds(self, value: str) -> bool:
        """`value` is in this word as it was written, every character literal."""
        start = self.text.find(value)
        while start != -1:
            if all(self.literal[start : start + len(value)]):
                return True
            start = self.text.find(value, start + 1)
        return False


class _Reader:
    def __init__(self) -> None:
        self.found: list[Word] = []
        self.chars: list[str] = []
        self.literal: list[bool] = []
        self.open = False  # a word has begun (an empty '' is a word too)

    def add(self, char: str, literal: bool) -> None:
        self.chars.append(char)
        self.literal.append(literal)
        self.open = True

    def end(self) -> None:
        if self.open:
            self.found.append(Word("".join(self.chars), tuple(self.literal)))
        self.chars, self.literal, self.open = [], [], False


def words(script: str) -> list[Word]:
    """The words of `script` in order, operators and comments left out."""
    reader = _Reader()
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                reader.add(script[i + 1], True)
            i += 2
        elif c == "'":
            end = script.find("'", i + 1)
            end = n if end == -1 else end
            reader.open = True
            for char in script[i + 1 : end]:
                reader.add(char, True)
            i = end + 1
        elif c == '"':
            i = _double(script, i + 1, reader)
        elif c in _BLANKS or c in _OPERATORS:
            reader.end()
            i += 1
        elif c == "#" and not reader.open:
            end = script.find("\n", i)
            i = n if end == -1 else end
        else:
            reader.add(c, c not in "$`")
            i += 1
    reader.end()
    return reader.found


def _double(script: str, i: int, reader: _Reader) -> int:
    """Read a double-quoted part from `i` (after its quote); where reading goes on."""
    n = len(script)
    reader.open = True
    while i < n and script[i] != '"':
        c = script[i]
        if c == "\\" and i + 1 < n and script[i + 1] in _IN_DOUBLE_ESCAPES:
            if script[i + 1] != "\n":
                reader.add(script[i + 1], True)
            i += 2
            continue
        reader.add(c, c not in "$`")
        i += 1
    return i + 1
