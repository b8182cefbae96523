"""go-yaml's decoding of a node tree, and sigs.k8s.io/yaml's conversion of it to JSON.

A later duplicate key wins, `<<` merges (later keys win over merged ones), keys become strings
as sigs.k8s.io/yaml makes them (a null or list key is an error), aliases expand within
go-yaml's budget (an alias bomb is "excessive aliasing", an anchor that contains itself an
error), and numbers come out as the API server decodes kubectl's JSON. The tree is walked with
a work list, never recursively.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from t9kjobs.kubeyaml.composing import Node
from t9kjobs.kubeyaml.document import YamlProblem
from t9kjobs.kubeyaml.scalars import INT64_MAX, scalar

__all__ = ["Decoder", "json_number"]

_JSON_INTEGRAL_LIMIT = 1e21  # Go prints floats below this without an exponent: `1e1` is `10`


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


def json_number(value: Any, node: Node) -> Any:
    """What the API server decodes from the JSON kubectl writes for a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return value if value <= INT64_MAX else float(value)
    if math.isnan(value) or math.isinf(value):
        raise YamlProblem(node.line, node.column, f"{node.value}: JSON has no NaN or infinity")
    if value.is_integer() and abs(value) < _JSON_INTEGRAL_LIMIT:
        number = int(value)
        return number if -(2**63) <= number <= INT64_MAX else value
    return value


def _key_text(value: Any, node: Node) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        if value > INT64_MAX:
            raise YamlProblem(node.line, node.column, f"unsupported map key {value} (uint64)")
        return str(value)
    if isinstance(value, float):
        return _go_float32_text(value)
    raise YamlProblem(node.line, node.column, f"unsupported map key {node.value or 'null'!r}")


class Decoder:
    """Decodes a node tree without recursion, counting as go-yaml counts against alias bombs."""

    def __init__(self) -> None:
        self.decodes = 0
        self.alias_decodes = 0
        self.alias_depth = 0
        self.expanding: set[int] = set()

    def _count(self, node: Node) -> None:
        self.decodes += 1
        if self.alias_depth:
            self.alias_decodes += 1
        if (
            self.alias_decodes > 100
            and self.decodes > 1000
            and self.alias_decodes / self.decodes > _allowed_alias_ratio(self.decodes)
        ):
            raise YamlProblem(node.line, node.column, "document contains excessive aliasing")

    def _enter_alias(self, node: Node) -> Node:
        if id(node) in self.expanding:
            raise YamlProblem(
                node.line, node.column, f"anchor '{node.value}' value contains itself"
            )
        self.expanding.add(id(node))
        self.alias_depth += 1
        assert node.target is not None
        return node.target

    def _leave_alias(self, node: Node) -> None:
        self.expanding.discard(id(node))
        self.alias_depth -= 1

    def _key(self, node: Node) -> Any:
        """A mapping key: a scalar, possibly behind aliases."""
        seen: list[Node] = []
        self._count(node)
        while node.kind == "alias":
            seen.append(node)
            node = self._enter_alias(node)
            self._count(node)
        try:
            if node.kind != "scalar":
                raise YamlProblem(node.line, node.column, "invalid map key: a list or mapping")
            return scalar(node)
        finally:
            for alias in reversed(seen):
                self._leave_alias(alias)

    def decode(self, root: Node) -> Any:
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

    def _node(self, node: Node, put: Callable[[Any], None], work: list[tuple[Any, ...]]) -> None:
        self._count(node)
        if node.kind == "alias":
            target = self._enter_alias(node)
            work.append(("leave", node))
            work.append(("node", target, put))
        elif node.kind == "scalar":
            put(json_number(scalar(node), node))
        elif node.kind == "sequence":
            items: list[Any] = [None] * len(node.children)
            put(items)
            for index in reversed(range(len(node.children))):
                work.append(("node", node.children[index], _setter(items, index)))
        else:
            mapping: dict[str, Any] = {}
            put(mapping)
            self._pairs(node, mapping, work)

    def _pairs(self, node: Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]) -> None:
        pairs = list(zip(node.children[::2], node.children[1::2], strict=True))
        for key, value in reversed(pairs):
            work.append(("pair", key, value, mapping))

    def _pair(
        self, key: Node, value: Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]
    ) -> None:
        if key.kind == "scalar" and key.plain and not key.tag and key.value == "<<":
            work.append(("merge", value, mapping))
            return
        name = _key_text(self._key(key), key)
        work.append(("node", value, _setter(mapping, name)))

    def _merge(self, node: Node, mapping: dict[str, Any], work: list[tuple[Any, ...]]) -> None:
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
