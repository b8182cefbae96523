"""The contract on `spec.managedBy`: a job another controller manages gets nothing from the
operator.

Kueue's MultiKueue takes a job over on its manager cluster by its `spec.managedBy`
(docs/scheduling.md, "Multi-cluster"): were the operator to make its pods there too, the job
would run twice, once on the manager and once on the worker MultiKueue dispatches it to. The
engine leaves such a job alone for every kind (`t9kjobs.planner.elsewhere`), so what a plugin
can break is the field itself: a spec model that refuses it, or drops it.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from t9kjobs.models import manager_of
from t9kjobs.planner import Kueue, Observed, plan
from t9kjobs.planner.queueing import LABEL_QUEUE_NAME
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import EPOCH, Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["ANOTHER_CONTROLLER", "jobs_managed_elsewhere_are_left_alone"]

ANOTHER_CONTROLLER = "conformance.t9kjobs.dev/another-controller"


def jobs_managed_elsewhere_are_left_alone(subject: Subject, example: Example) -> None:
    """A job another controller manages (`spec.managedBy`) gets nothing from the operator.

    The kit sets `spec.managedBy` to another controller's name on each valid example (labelled
    with a Kueue queue too) and wants the kind to keep it, and the job's reconciles to create,
    update and delete nothing, write no status and say no Event: as a new job, and with the
    children the example has unmanaged already there.
    """
    doc = copy.deepcopy(example.manifest)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return  # not a valid example: test_example_is_valid says so
    spec["managedBy"] = ANOTHER_CONTROLLER
    doc.setdefault("metadata", {}).setdefault("labels", {})[LABEL_QUEUE_NAME] = "kit"
    where = example.id
    try:
        managed = subject.job(replace(example, manifest=doc))
    except ContractViolation as exc:
        raise ContractViolation(
            f"{where}: with spec.managedBy: {ANOTHER_CONTROLLER}, the kind refuses the job"
            f" ({exc}); keep JobSpec's managed_by field in the spec model, as it is"
        ) from None
    kept = manager_of(managed.spec)
    if kept != ANOTHER_CONTROLLER:
        raise ContractViolation(
            f"{where}: spec.managedBy {ANOTHER_CONTROLLER!r} reads as {kept!r} in the spec"
            " model: the operator would run a job another controller runs; keep JobSpec's"
            " managed_by field in the spec model, as it is"
        )
    hooks = subject.hooks(managed.kind)
    unmanaged = subject.first_reconcile(subject.job(example)).create
    for children in ((), unmanaged):
        done = plan(subject.fresh(managed), Observed.of(children, kueue=Kueue()), EPOCH, hooks)
        touched = [
            *(f"creates {o.get('kind')} {o['metadata'].get('name')}" for o in done.create),
            *(f"updates {o.get('kind')} {o['metadata'].get('name')}" for o in done.update),
            *(f"deletes {d.kind} {d.name}" for d in done.delete),
            *(f"writes the status of {o['metadata'].get('name')}" for o in done.patch_status),
            *(f"says {e.reason}" for e in done.events),
            *(["writes the job's status"] if done.status_changed else []),
        ]
        if touched:
            state = "a new job" if not children else "its children there"
            raise ContractViolation(
                f"{where}: managed by {ANOTHER_CONTROLLER} ({state}), the operator"
                f" {', '.join(touched)}"
            )
