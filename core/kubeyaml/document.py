"""What reading a manifest file gives: its documents, or why it cannot be read.

The values every step of `t9kjobs.kubeyaml` shares (composing, resolving scalars, decoding,
splitting files), kept apart so that each step imports them without importing another step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_NESTING", "Document", "Unreadable", "YamlProblem"]

# libyaml's own limit; go-yaml's is 10,000. A job nests far less (t9kjobs.loading.MAX_DEPTH).
MAX_NESTING = 1000


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
