"""The reference of the shared models for docs/plugin-reference.md, rendered from `t9kjobs.models`.

Every model the package exports gets a table of its fields: the name on the wire (and the other
spellings it accepts), the type as the source writes it, the default, and the description
(the one `kubectl explain` shows). Type aliases, constants and functions follow. A model
exported but missing from `GROUPS` is an error: a new shared model cannot go undocumented.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from t9kjobs import models, tensorboard
from t9kjobs.models._base import field_spellings

__all__ = ["GROUPS", "render_models"]

# The exported models, in the order a plugin author meets them.
GROUPS: list[tuple[str, list[type[BaseModel]]]] = [
    (
        "Spec parts",
        [
            models.JobSpec,
            models.ApiModel,
            models.ReplicaSpec,
            models.RestartPolicy,
            models.RunPolicy,
            models.RunMode,
            models.DebugMode,
            models.ReplicaDebugSet,
            models.PauseMode,
            models.ResumeSpec,
            models.GeneratedCommandRunMode,
            models.SchedulePolicy,
            models.T9kScheduler,
            models.ElasticConfig,
            models.RecoveryPolicy,
            models.RecoveryRule,
            models.CheckpointSpec,
        ],
    ),
    ("What the engine reads", [models.RestartRule]),
    (
        "Pod templates (the schema of `PodTemplate`)",
        [models.PodTemplateShape, models.PodSpecShape, models.ContainerShape],
    ),
    ("The job", [models.Job, models.ObjectMeta]),
    (
        "Status parts",
        [
            models.JobStatus,
            models.TaskStatus,
            models.ReplicaStatus,
            models.ContainerStatus,
            models.Aggregate,
            models.TrainingProgress,
            models.CheckpointStatus,
            models.JobCondition,
            models.DependentStatus,
            tensorboard.TensorBoardJobStatus,
        ],
    ),
]


def _exported() -> dict[str, Any]:
    return {name: getattr(models, name) for name in models.__all__}


def _annotation(model: type[BaseModel], name: str) -> str:
    """The field's type as its source writes it (`RestartPolicyType | RestartPolicy`)."""
    for cls in model.__mro__:
        written = inspect.get_annotations(cls).get(name)
        if written is not None:
            return str(written) if isinstance(written, str) else inspect.formatannotation(written)
    return "?"


def _default(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return f"`{type(value).__name__}()`"
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


_CONSTRAINTS = {
    "ge": "≥",
    "gt": ">",
    "le": "≤",
    "lt": "<",
    "min_length": "min length",
    "max_length": "max length",
    "pattern": "pattern",
}


def _constraints(info: Any) -> str:
    """`≥ 0, ≤ 100`: the bounds pydantic checks (and the CRD's schema holds)."""
    found = []
    for item in info.metadata:
        for key, word in _CONSTRAINTS.items():
            value = getattr(item, key, None)
            if value is not None:
                found.append(f"{word} {value}")
    return f" ({_cell(', '.join(found))})" if found else ""


def _public_base(model: type[BaseModel]) -> type[BaseModel] | None:
    """The nearest base a plugin can name (not `_OneSpelling`, `_Shape` ...)."""
    for base in model.__mro__[1:]:
        if base is BaseModel or not issubclass(base, BaseModel):
            return None
        if not base.__name__.startswith("_"):
            return base
    return None


def _model(model: type[BaseModel]) -> Iterator[str]:
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
    base = _public_base(model)
    own = inspect.get_annotations(model)
    fields = [(n, i) for n, i in model.model_fields.items() if base is None or n in own]
    yield f"#### `{model.__name__}`\n"
    derives = f", derives from `{base.__name__}`" if base is not None else ""
    yield f"*{model.__module__}*{derives}\n"
    if doc:
        yield f"{doc.split(chr(10) + chr(10))[0]}\n"
    if not fields:
        yield "No fields of its own.\n"
        return
    if base is not None and base.model_fields:
        yield f"Every field of `{base.__name__}`, and:\n"
    yield "| field | type | default | description |"
    yield "| --- | --- | --- | --- |"
    for name, info in fields:
        spellings = field_spellings(name, info)
        wire = " / ".join(f"`{s}`" for s in spellings)
        python = f" (`{name}`)" if name not in spellings else ""
        row = [
            wire + python,
            f"`{_cell(_annotation(model, name))}`{_constraints(info)}",
            _default(info),
            _cell(info.description or ""),
        ]
        yield "| " + " | ".join(row) + " |"
    yield ""


def _alias(name: str, value: Any) -> str:
    if typing.get_origin(value) is typing.Literal:
        return f"- `{name}`: one of " + ", ".join(f"`{v}`" for v in typing.get_args(value))
    base, *extras = typing.get_args(value)
    notes = []
    for extra in extras:
        for key in ("min_length", "max_length", "description"):
            for item in [extra, *getattr(extra, "metadata", [])]:
                found = getattr(item, key, None)
                if found is not None:
                    notes.append(str(found) if key == "description" else f"{key} {found}")
        func = getattr(extra, "func", None)
        if func is not None and inspect.getdoc(func):
            notes.append(" ".join((inspect.getdoc(func) or "").split()))
    text = f"- `{name}`: `{inspect.formatannotation(base).replace('typing.', '')}`"
    return text + (f" — {'; '.join(dict.fromkeys(notes))}" if notes else "")


def render_models() -> str:
    exported = _exported()
    documented = [m for _, group in GROUPS for m in group]
    missing = sorted(
        name
        for name, value in exported.items()
        if isinstance(value, type) and issubclass(value, BaseModel) and value not in documented
    )
    if missing:
        raise SystemExit(f"hack/guide_models.py: add {missing} to GROUPS")
    out: list[str] = []
    for title, group in GROUPS:
        out.append(f"### {title}\n")
        for model in group:
            out.extend(_model(model))
    out.append("### Type aliases\n")
    for name, value in exported.items():
        if typing.get_origin(value) in (typing.Literal, typing.Annotated):
            out.append(_alias(name, value))
    out.append("\n### Constants\n")
    for name, value in exported.items():
        if isinstance(value, int | str | frozenset | dict):
            shown = sorted(value) if isinstance(value, frozenset) else value
            out.append(f"- `{name}` = `{_cell(json.dumps(shown))}`")
    out.append("\n### Functions\n")
    for name, value in exported.items():
        if inspect.isfunction(value):
            doc = " ".join((inspect.getdoc(value) or "").split())
            out.append(f"- `{name}{inspect.signature(value)}` — {doc}")
    return "\n".join(out) + "\n"
