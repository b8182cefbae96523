"""Write docs/plugin-api.txt: the public surface of t9k-jobs that plugins may rely on.

Every name a plugin may import (the `__all__` of the modules in `PUBLIC_MODULES`: the door
`t9kjobs.plugin` and `t9kjobs.testing.fixtures`, the promise
docs/plugin-guide.md#what-a-plugin-may-rely-on makes), with its signature: a function's
parameters and result, a class's fields (dataclasses and pydantic models, with types, defaults
and wire names) and public methods, a constant's value; then the conformance kit's contracts
and options. `tests/unit/core/test_plugin_api.py` fails when the code's surface differs from the
file, so that no change a plugin could feel goes unnoticed: regenerate it (`make plugin-api`)
and say what changed for plugins in CHANGELOG.md.

    python hack/gen_plugin_api.py           # rewrite docs/plugin-api.txt
    python hack/gen_plugin_api.py --stdout  # print it
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import inspect
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "plugin-api.txt"
# The one door (`t9kjobs.plugin`) and the test-time one; every other module is internal.
PUBLIC_MODULES = (
    "t9kjobs.plugin",
    "t9kjobs.testing.fixtures",
)


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _value(value: Any) -> str:
    """repr, with a set's items sorted (their order changes from one process to the next)."""
    if isinstance(value, set | frozenset):
        items = ", ".join(sorted(repr(v) for v in value))
        return f"{type(value).__name__}({{{items}}})"
    return repr(value)


def _type(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else repr(annotation)


def _model_fields(model: type[BaseModel]) -> Iterator[str]:
    for name, info in model.model_fields.items():
        wire = info.alias or info.serialization_alias
        default = "required" if info.is_required() else f"default {_value(info.get_default())}"
        alias = f" (wire: {wire})" if wire and wire != name else ""
        yield f"    {name}: {_type(info.annotation)}{alias}, {default}"


def _dataclass_fields(cls: type) -> Iterator[str]:
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f" = {_value(f.default)}"
        elif f.default_factory is not dataclasses.MISSING:
            default = f" = {f.default_factory.__name__}()"
        else:
            default = ""
        yield f"    {f.name}: {f.type}{default}"


def _methods(cls: type) -> Iterator[str]:
    own = {n: v for n, v in vars(cls).items() if not n.startswith("_")}
    for name, value in sorted(own.items()):
        if isinstance(value, property):
            yield f"    @property {name}{_signature(value.fget)}"
        elif isinstance(value, classmethod | staticmethod):
            yield f"    @{type(value).__name__} {name}{_signature(value.__func__)}"
        elif inspect.isfunction(value):
            yield f"    def {name}{_signature(value)}"


def _class(qualified: str, cls: type) -> Iterator[str]:
    bases = ", ".join(b.__name__ for b in cls.__bases__)
    yield f"class {qualified}({bases})"
    if issubclass(cls, enum.Enum):
        yield from (f"    {m.name} = {m.value!r}" for m in cls)
        return
    if issubclass(cls, BaseModel):
        yield from _model_fields(cls)
    elif dataclasses.is_dataclass(cls):
        yield from _dataclass_fields(cls)
    yield from _methods(cls)


def _describe(module: str, name: str, obj: Any) -> Iterator[str]:
    qualified = f"{module}.{name}"
    if inspect.isclass(obj):
        yield from _class(qualified, obj)
    elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
        yield f"def {qualified}{_signature(obj)}"
    elif callable(obj):
        yield f"{qualified}: {type(obj).__name__}"
    else:
        yield f"{qualified} = {_value(obj)}"


def _unreleased_for_plugins() -> bool:
    """CHANGELOG.md's `## Unreleased` has a `### For plugins` section with entries."""
    text = (REPO / "CHANGELOG.md").read_text()
    start = text.find("\n## Unreleased")
    if start == -1:
        return False
    section = text[start + 1 :].split("\n## ", 1)[0]
    plugins = section.split("### For plugins", 1)
    return len(plugins) == 2 and "\n- " in plugins[1].split("\n### ", 1)[0]


def surface() -> str:
    from t9kjobs.testing.kit import contracts

    # pyproject's, not the installed metadata's: a stale *.egg-info beside it may answer first
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    # This file follows the code, so between releases it holds what CHANGELOG.md calls
    # Unreleased too: its header says so rather than passing the additions off as released.
    released = f"t9k-jobs {version}"
    if _unreleased_for_plugins():
        released += " and the additions CHANGELOG.md lists under Unreleased (the next release)"
    lines = [
        f"# The plugin API of {released}: what a plugin may rely on",
        "# (docs/plugin-guide.md#what-a-plugin-may-rely-on). Generated by hack/gen_plugin_api.py",
        "# (make plugin-api): do not edit; a unit test fails when the code differs from it.",
    ]
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        lines += ["", f"## {module_name}"]
        for name in sorted(module.__all__):
            lines += list(_describe(module_name, name, getattr(module, name)))
    lines += ["", "## conformance kit contracts (pytest --t9kjobs-conformance=NAME)"]
    scopes = {
        "plugin": contracts.PLUGIN_CONTRACTS,
        "kind": contracts.KIND_CONTRACTS,
        "example": contracts.EXAMPLE_CONTRACTS,
        "invalid example": contracts.INVALID_CONTRACTS,
        # A feature plugin's: those the lists above do not hold already.
        "feature plugin": [
            c for c in contracts.FEATURE_CONTRACTS if c not in contracts.PLUGIN_CONTRACTS
        ],
    }
    for scope, listed in scopes.items():
        lines += [f"test_{c.name} ({scope}): {c.title}" for c in listed]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdout", action="store_true", help="print instead of writing")
    text = surface()
    if parser.parse_args().stdout:
        sys.stdout.write(text)
        return
    if not OUTPUT.exists() or OUTPUT.read_text() != text:
        OUTPUT.write_text(text)
        print(f"wrote {OUTPUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
