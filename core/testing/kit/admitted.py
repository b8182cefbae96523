"""The contracts of the admission tier: what a user's `kubectl apply` meets, on a real server.

The CRD each kind generates must be accepted (its CEL rules compile, their cost is within the
server's budget); every valid example must be admitted by `kubectl apply --dry-run=server` with
every field it writes kept. The invalid examples' contract (`invalid_example_is_rejected`, in
`t9kjobs.testing.kit.contracts`) asks the same server. See `t9kjobs.testing.kit.admission`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from t9kjobs.crds import CrdError, crd_for
from t9kjobs.testing.kit.admission import DryRun, pruned_fields
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["crd_is_accepted_by_the_api_server", "crds_of", "dry_run", "example_is_admitted"]


def crds_of(subject: Subject) -> dict[str, dict[str, Any]]:
    """The CRD of each kind of the plugin that generates (`crd_is_structural` says why not)."""
    crds = {}
    for name in subject.kinds:
        with contextlib.suppress(CrdError):
            crds[name] = crd_for(subject.loaded().kind_info(name))
    return crds


def _install(subject: Subject, kind: str) -> None:
    """The CRDs of every kind of the plugin on the session's server; a violation for `kind`'s."""
    crds = crds_of(subject)
    if kind not in crds:
        try:
            crd_for(subject.loaded().kind_info(kind))
        except CrdError as exc:
            raise ContractViolation(f"the CRD of {kind} cannot be generated: {exc}") from None
    tier = subject.tier()
    tier.install(list(crds.values()))
    problem = tier.problem(crds[kind])
    if problem is not None:
        raise ContractViolation(problem)


def crd_is_accepted_by_the_api_server(subject: Subject, kind: str) -> None:
    """A real API server accepts the kind's CRD: every CEL rule compiles, within its budget.

    The CRD is created on the kit session's API server (`t9kjobs.testing.harness.apiserver`), which
    compiles each `x-kubernetes-validations` rule and estimates its cost; a refusal names the
    rule, the field it sits on and the compiler's message, and the CRD must then be served.
    """
    _install(subject, kind)


def dry_run(subject: Subject, example: Example) -> DryRun:
    """The example submitted to the API server (`kubectl apply --dry-run=server`), its kind's
    CRD installed first."""
    kind = example.kind
    if kind is None or kind not in subject.kinds:
        raise ContractViolation(f"{example.id} names no kind of {subject.name!r}: {kind!r}")
    _install(subject, kind)
    return subject.tier().dry_run(example.manifest)


def example_is_admitted(subject: Subject, example: Example) -> None:
    """The API server admits the example as written and keeps every field it writes.

    `kubectl apply --dry-run=server` of the example must succeed (the schema, its formats and
    CEL rules accept it: a rule that refuses a valid job fails here), and the object the
    server would store must still hold every field of the example (none pruned).
    """
    if example.error is not None:
        raise ContractViolation(example.error)
    answer = dry_run(subject, example)
    if not answer.admitted:
        raise ContractViolation(
            f"the API server refuses {example.id}, which `t9kjobs validate` accepts:\n"
            f"{answer.message}\n(a CEL rule or a schema bound of the model is stricter than"
            " the model itself)"
        )
    stored = (answer.stored or {}).get("spec")
    pruned = pruned_fields(example.manifest.get("spec"), stored, "spec")
    if pruned:
        raise ContractViolation(
            "the API server dropped fields the example writes (they would never reach the"
            " plugin): " + ", ".join(pruned)
        )
