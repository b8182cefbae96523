"""`t9kjobs validate`'s verdict on a case, by where the refusal comes from, and whether it agrees
with the API server's.

`validate` refuses what the API server refuses at admission (YAML, schema and CEL) plus what only
the operator refuses (the plugins' checks, `InvalidSpec`). The two verdicts must agree on every
case except those of `EXCEPTIONS`, which docs/api.md lists with the reason for each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from t9kjobs.loading import JobError, Unreadable, check_job, load_documents, parse_job, submitted
from t9kjobs.manager import PluginManager
from tests.fuzz.generator import Case

__all__ = ["EXCEPTIONS", "CliVerdict", "agreement", "cli_verdict"]


@dataclass(frozen=True)
class CliVerdict:
    # accept | unreadable | yaml (the text) | schema (types, bounds, CEL's rules) | semantic
    # (only the plugins' checks, which the operator applies too)
    outcome: str
    problems: tuple[str, ...] = ()


def cli_verdict(case: Case, manager: PluginManager) -> CliVerdict:
    """What `validate` says about the case, computed in process."""
    if case.special is not None:
        return CliVerdict("unreadable", (case.special,))
    try:
        docs = load_documents(case.text, "case")
    except Unreadable as exc:
        return CliVerdict("unreadable", (str(exc),))
    except JobError as exc:
        return CliVerdict("yaml", tuple(str(p) for p in exc.problems))
    schema: list[str] = []
    semantic: list[str] = []
    for doc in docs:
        try:
            job_doc, _ = submitted(doc)
            job = parse_job(job_doc, manager)
        except JobError as exc:
            schema += [str(p) for p in exc.problems]
            continue
        semantic += [str(p) for p in check_job(job, manager) if p.severity == "error"]
    if schema:
        return CliVerdict("schema", tuple(schema))
    if semantic:
        return CliVerdict("semantic", tuple(semantic))
    return CliVerdict("accept")


# (name, whether a case validate refuses and the API server admits is this exception).
EXCEPTIONS: list[tuple[str, Callable[[CliVerdict], bool]]] = [
    (
        "nested deeper than 100 levels inside a pod template",
        lambda v: all("nested deeper than" in p for p in v.problems),
    ),
    (
        "the restart policy a number, a boolean or a list: no structural keyword refuses them",
        lambda v: all("restartPolicy: must be one of `Always`" in p for p in v.problems),
    ),
    (
        "larger than etcd stores: a dry run stores nothing",
        lambda v: all("the API server stores at most" in p for p in v.problems),
    ),
    (
        "not UTF-8: kubectl sends U+FFFD for each invalid byte",
        lambda v: v.outcome == "unreadable" and any("not UTF-8" in p for p in v.problems),
    ),
]


def agreement(verdict: CliVerdict, admitted: bool) -> str:
    """agree | operator (validate and the operator refuse, admission does not: the plugins'
    checks) | an exception's name | disagree."""
    refused = verdict.outcome != "accept"
    if refused != admitted:
        return "agree"
    if not refused:
        return "disagree"  # validate accepts what the API server refuses
    if verdict.outcome == "semantic":
        return "operator"
    for name, matches in EXCEPTIONS:
        if matches(verdict):
            return name
    return "disagree"
