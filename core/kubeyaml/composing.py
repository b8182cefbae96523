"""A YAML document composed into a tree of nodes from PyYAML's events, without recursion.

PyYAML's own composer resolves scalars with its rules and recurses; this one keeps each
scalar's text, tag and style for go-yaml's resolution (`t9kjobs.kubeyaml.scalars`), keeps
aliases as nodes so that their expansion can be budgeted (`t9kjobs.kubeyaml.decoding`), and
refuses nesting deeper than `MAX_NESTING`. Problems carry the line and column in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from t9kjobs.kubeyaml.document import MAX_NESTING, YamlProblem

__all__ = ["Node", "compose"]


@dataclass(eq=False)
class Node:
    """A scalar (its text, tag and style), a sequence or mapping (its children: a mapping's
    alternate keys and values) or an alias (its anchored target), where it starts."""

    kind: str  # scalar | sequence | mapping | alias
    line: int
    column: int
    value: str = ""
    tag: str = ""
    plain: bool = False
    children: list[Node] = field(default_factory=list)
    target: Node | None = None


def _loader() -> type[Any]:
    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def compose(part: str, first_line: int) -> Node | None:
    """The node tree of the first document of `part` (a part of a file starting at its line
    `first_line`); None when it has none."""
    offset = first_line - 1
    anchors: dict[str, Node] = {}
    stack: list[Node] = []
    root: Node | None = None

    def place(node: Node) -> None:
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
                node = Node("scalar", line, column, event.value, event.tag or "", plain)
            elif isinstance(event, yaml.AliasEvent):
                target = anchors.get(str(event.anchor))
                if target is None:
                    raise YamlProblem(line, column, f"unknown anchor '{event.anchor}' referenced")
                node = Node("alias", line, column, str(event.anchor), target=target)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                kind = "sequence" if isinstance(event, yaml.SequenceStartEvent) else "mapping"
                node = Node(kind, line, column)
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
    return root
