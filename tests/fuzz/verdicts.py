"""`t9kjobs validate`'s verdict on a case, by where the refusal comes from, and whether it agrees
with the API server's.

The API server refuses what its CRD schema and CEL rules refuse, and, with the operator's
admission webhook (#52), everything else `validate` refuses: the plugins' checks, nesting, the
size. The two verdicts must agree on every case, both ways, except those of `EXCEPTIONS`, which
docs/api.md lists with the reason for each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from t9kjobs.loading import JobError, Unreadable, check_job, load_documents, parse_job, submitted
from t9kjobs.manager import PluginManager
from tests.fuzz.generator import Case

__all__ = [
    "ADMISSION_ONLY",
    "EXCEPTIONS",
    "VALIDATE_ONLY",
    "CliVerdict",
    "agreement",
    "cli_verdict",
]


@dataclass(frozen=True)
class CliVerdict:
    # accept | unreadable | yaml (the text) | schema (types, bounds, CEL's rules, nesting,
    # size) | semantic (the plugins' checks: the webhook's and the operator's too)
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


# What only one side can judge: (name, why, whether a case validate refuses and admission
# admits is this one). docs/api.md lists them with the same reasons; everything else, the
# admission webhook judges with validate's own call (t9kjobs.loading.judge).
EXCEPTIONS: list[tuple[str, str, Callable[[CliVerdict], bool]]] = [
    (
        "not UTF-8",
        "kubectl replaces each invalid byte with U+FFFD and sends the job changed: the API"
        " server and the webhook judge text the user did not write; validate names the byte",
        lambda v: v.outcome == "unreadable" and any("not UTF-8" in p for p in v.problems),
    ),
]

VALIDATE_ONLY = "validate refuses, admission admits"
ADMISSION_ONLY = "validate accepts, admission refuses"


def agreement(verdict: CliVerdict, admitted: bool) -> str:
    """agree | a documented exception's name | VALIDATE_ONLY | ADMISSION_ONLY (the two
    disagreements)."""
    refused = verdict.outcome != "accept"
    if refused != admitted:
        return "agree"
    if not refused:
        return ADMISSION_ONLY
    for name, _, matches in EXCEPTIONS:
        if matches(verdict):
            return name
    return VALIDATE_ONLY
