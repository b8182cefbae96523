"""From YAML text or a manifest dict to a typed Job, with every problem named by field path.

Errors are collected, never raised as tracebacks at users: `JobError.problems` lists
`spec.replicaSpecs[0].replicas: must be >= 0`-style lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml
from pydantic import ValidationError

from t9kjobs.kinds import Problem
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_VERSION, Job, ObjectMeta

__all__ = [
    "JobError",
    "check_job",
    "load_documents",
    "load_job",
    "parse_job",
    "problems_from_validation_error",
]


class JobError(Exception):
    """A manifest that is not a valid job; `problems` says why, field by field."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def load_documents(text: str, source: str = "<input>") -> list[dict[str, Any]]:
    """The non-empty YAML documents of `text`; malformed YAML is a JobError naming the line."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise JobError([Problem(where, f"malformed YAML: {problem}")]) from None
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise JobError([Problem(f"{source}[{i}]", "a job must be a YAML mapping")])
    return docs


# Union members show up in pydantic locations as `literal['A','B']` or a class name.
_UNION_TAG = re.compile(r"^(literal\[.*\]|[A-Z]\w*|list\[.*\]|str|int|bool|function-.*)$")


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _UNION_TAG.match(part):
            out += f".{part}" if out else part
    return out


_MESSAGE_FIXES = (
    (re.compile(r"^Input should be greater than or equal to (\S+)$"), r"must be >= \1"),
    (re.compile(r"^Input should be less than or equal to (\S+)$"), r"must be <= \1"),
    (re.compile(r"^Extra inputs are not permitted$"), "unknown field"),
    (re.compile(r"^Field required$"), "required field is missing"),
    (re.compile(r"^Value error, "), ""),
)


def _message(text: str) -> str:
    for pattern, repl in _MESSAGE_FIXES:
        text = pattern.sub(repl, text)
    return text


def problems_from_validation_error(exc: ValidationError, prefix: str) -> list[Problem]:
    """One Problem per field path; the alternatives of a union are merged into one line."""
    by_path: dict[str, list[str]] = {}
    for err in exc.errors():
        path = _path(prefix, tuple(err["loc"]))
        msg = _message(err["msg"])
        if msg not in by_path.setdefault(path, []):
            by_path[path].append(msg)
    return [Problem(path, " or ".join(msgs)) for path, msgs in by_path.items()]


def _iter_meta_problems(manifest: dict[str, Any], manager: PluginManager) -> Iterator[Problem]:
    api_version = manifest.get("apiVersion")
    if api_version != API_VERSION:
        yield Problem("apiVersion", f"must be {API_VERSION!r}, got {api_version!r}")
    kind = manifest.get("kind")
    if not kind:
        yield Problem("kind", "required field is missing")
    elif kind not in manager.kinds:
        known = ", ".join(sorted(manager.kinds)) or "none"
        yield Problem("kind", f"unknown kind {kind!r}; the installed plugins serve: {known}")
    if not isinstance(manifest.get("spec"), dict):
        yield Problem("spec", "required field is missing or not a mapping")


def parse_job(manifest: dict[str, Any], manager: PluginManager) -> Job:
    """A typed Job from a manifest, or a JobError listing every schema problem found."""
    problems = list(_iter_meta_problems(manifest, manager))
    meta: ObjectMeta | None = None
    try:
        meta = ObjectMeta.model_validate(manifest.get("metadata") or {})
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, "metadata"))
    if any(p.path in ("kind", "spec") for p in problems):
        raise JobError(problems)
    info = manager.kind_info(str(manifest["kind"]))
    spec = status = None
    try:
        # By the wire names only: a snake_case spelling would pass here, then be pruned by the
        # API server.
        spec = info.spec_model.model_validate(manifest["spec"], by_alias=True, by_name=False)
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, "spec"))
    try:
        status = info.status_model.model_validate(manifest.get("status") or {})
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, "status"))
    if problems or meta is None or spec is None or status is None:
        raise JobError(problems)
    return Job(
        api_version=str(manifest["apiVersion"]),
        kind=str(manifest["kind"]),
        metadata=meta,
        spec=spec,
        status=status,
        raw=manifest,
    )


def check_job(job: Job, manager: PluginManager) -> list[Problem]:
    """The owning plugin's semantic checks: errors and warnings, with field paths."""
    return manager.hooks_for(job.kind).validate(job)


def load_job(manifest: dict[str, Any], manager: PluginManager) -> tuple[Job, list[Problem]]:
    """parse_job then check_job: the job and its warnings, or a JobError with every error."""
    job = parse_job(manifest, manager)
    found = check_job(job, manager)
    if any(p.severity == "error" for p in found):
        raise JobError(found)
    return job, found
