"""Generated sections of a Markdown document, rewritten from their source of truth.

A section sits between `<!-- BEGIN GENERATED: <name> -->` and `<!-- END GENERATED: <name> -->`;
a generator (hack/gen_plugin_guide.py, hack/gen_api_doc.py) maps each name to a function that
renders it. Everything outside the markers is written by hand and left alone.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["main", "update"]

Renderers = Mapping[str, Callable[[], str]]

_SECTION = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[\w-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)


def update(text: str, renderers: Renderers, doc: Path, note: str) -> str:
    """`text` with every generated section rendered anew; unknown or missing ones are errors.

    `note` (an HTML comment) heads each section, saying where it comes from.
    """
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in renderers:
            raise SystemExit(f"unknown generated section {name!r} in {doc}")
        seen.add(name)
        return f"{match.group(1)}{note}\n{renderers[name]().rstrip()}\n\n{match.group(4)}"

    result = _SECTION.sub(replace, text)
    missing = sorted(set(renderers) - seen)
    if missing:
        raise SystemExit(f"{doc} lacks the generated sections {missing}")
    return result


def main(doc: Path, renderers: Renderers, note: str, generator: str, argv: list[str] | None) -> int:
    """Rewrite `doc`, or with `--check` exit 1 when it is stale; `generator` is the script."""
    parser = argparse.ArgumentParser(description=f"Rewrite the generated sections of {doc.name}.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the document is stale")
    args = parser.parse_args(argv)
    text = doc.read_text()
    fresh = update(text, renderers, doc, note)
    if args.check:
        if fresh != text:
            print(f"{doc} is stale: run python {generator}", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        doc.write_text(fresh)
        print(f"wrote {doc}", file=sys.stderr)
    return 0
