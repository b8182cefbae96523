"""Checks that several kinds share, for their `t9kjobs_validate` hooks."""

from __future__ import annotations

from collections.abc import Collection

from t9kjobs.kinds import Problem
from t9kjobs.models import RunMode

__all__ = ["run_mode_problems"]


def run_mode_problems(run_mode: RunMode | None, replica_types: Collection[str]) -> list[Problem]:
    """Debug and resume overrides must name replica types the job has."""
    if run_mode is None:
        return []
    named: list[tuple[str, str]] = []
    if run_mode.debug is not None:
        named += [
            (f"debug.replicaSpecs[{i}]", s.type) for i, s in enumerate(run_mode.debug.replica_specs)
        ]
    if run_mode.pause is not None:
        named += [
            (f"pause.resumeSpecs[{i}]", s.type) for i, s in enumerate(run_mode.pause.resume_specs)
        ]
    known = ", ".join(sorted(replica_types))
    return [
        Problem(
            f"spec.runMode.{path}.type", f"no replica type {type_!r} in the job (it has: {known})"
        )
        for path, type_ in named
        if type_ not in replica_types
    ]
