"""Contracts on the examples themselves: a valid one loads and its CRD keeps it as written;
an invalid one is rejected at the field path it names, by `validate` or at admission.

The first contract of each example: an example that fails it is reported once, not by every
contract that builds from it (`t9kjobs.testing.kit.conformance`).
"""

from __future__ import annotations

from t9kjobs.crds import crd_for
from t9kjobs.loading import JobError
from t9kjobs.testing.kit.admission import refusal_names
from t9kjobs.testing.kit.admitted import dry_run
from t9kjobs.testing.kit.examples import REJECTED_AT, Example
from t9kjobs.testing.kit.structural import admission_problems
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["example_is_valid", "invalid_example_is_rejected"]


def example_is_valid(subject: Subject, example: Example) -> None:
    """The example loads: its spec model and `t9kjobs_validate` accept it, its CRD keeps it.

    Warnings are allowed. The CRD's schema must neither prune a field the example writes (it
    would never reach the plugin) nor refuse one of its values' types.
    """
    if example.error is not None:
        raise ContractViolation(example.error)
    job = subject.job(example)
    info = subject.loaded().kind_info(job.kind)
    schema = crd_for(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = example.manifest.get("spec")
    problems = admission_problems(spec, schema["properties"]["spec"], "spec")
    if problems:
        raise ContractViolation(
            "the CRD would not keep the example as written:\n  " + "\n  ".join(problems)
        )


def invalid_example_is_rejected(subject: Subject, example: Example) -> None:
    """An invalid example is rejected at the field path it names: at admission or by validate.

    Submitted to the API server (`kubectl apply --dry-run=server`, the admission tier) it is
    refused with a message naming each path listed in its annotation
    `conformance.t9kjobs.dev/rejected-at`, or the spec model or `t9kjobs_validate` rejects it
    (an error, not a warning) with a problem at each such path (what `t9kjobs validate`
    prints). An example both admitted and accepted by `validate` would run.
    """
    if example.error is not None:
        raise ContractViolation(example.error)
    expected = example.expected_paths
    if not expected:
        raise ContractViolation(
            f"{example.id} names no expected field path: add the annotation {REJECTED_AT}:"
            " <path>[,<path>...] to its metadata"
        )
    try:
        job = subject.parse(example)
    except JobError as exc:
        problems = exc.problems
    else:
        found = subject.hooks(job.kind).validate(job)
        problems = [p for p in found if p.severity == "error"]
    paths = {p.path for p in problems}
    missing = [p for p in expected if p not in paths]
    if problems and not missing and all(p.path for p in problems):
        return
    if not problems:
        by_validate = f"{example.id} was accepted; it should be rejected at {', '.join(expected)}"
    else:
        listed = "\n  ".join(str(p) for p in problems)
        by_validate = (
            f"{example.id} was rejected, but not at {', '.join(missing)}; the problems:\n  {listed}"
        )
    try:
        answer = dry_run(subject, example)
    except ContractViolation as exc:
        raise ContractViolation(f"{by_validate}\nand at admission: {exc}") from None
    unnamed = refusal_names(answer, expected)
    if not unnamed:
        return
    if answer.admitted:
        by_server = (
            "the API server admits it too (`kubectl apply` would create the job): reject it in"
            " t9kjobs_validate or by a rule of the spec model (its CRD), at the path it names"
        )
    else:
        by_server = (
            f"the API server refuses it, but not at {', '.join(unnamed)}:\n  {answer.message}"
        )
    raise ContractViolation(f"{by_validate}\n{by_server}")
