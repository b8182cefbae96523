"""Hook calls through the engine that several contracts make, each checking what it returns.

A hook returning the wrong type fails here with a message naming the hook, so that every
contract calling it reports the same cause.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta

from t9kjobs.kinds import ReplicaState, Verdict
from t9kjobs.manager import KindHooks
from t9kjobs.models import FINISHED_PHASES, Job
from t9kjobs.objects import DesiredPod
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import EPOCH, Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["EXIT_CODE", "build_pods", "describe", "plan_at", "status_setup", "verdict"]

# What the API server accepts as a condition reason.
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
# An exit code no plugin would print by accident: a Failed verdict must name it.
EXIT_CODE = 42


def build_pods(hooks: KindHooks, job: Job) -> list[DesiredPod]:
    pods = hooks.build_pods(job)
    for pod in pods:
        if not isinstance(pod, DesiredPod):
            raise ContractViolation(
                f"build_pods returned {pod!r}, not a t9kjobs.objects.DesiredPod"
            )
    return pods


def verdict(hooks: KindHooks, job: Job, states: Sequence[ReplicaState]) -> Verdict | None:
    found = hooks.compute_status(job, states)
    if found is None:
        return None
    if not isinstance(found, Verdict):
        raise ContractViolation(
            f"compute_status returned {found!r}, not a t9kjobs.kinds.Verdict or None"
        )
    if found.outcome not in FINISHED_PHASES:
        raise ContractViolation(
            f"a Verdict's outcome is Succeeded or Failed, not {found.outcome!r}"
        )
    if not isinstance(found.reason, str) or not _REASON.match(found.reason):
        raise ContractViolation(
            f"the Verdict's reason {found.reason!r} is no condition reason (CamelCase)"
        )
    if not isinstance(found.message, str) or not found.message.strip():
        raise ContractViolation("the Verdict has no message")
    return found


def describe(states: Sequence[ReplicaState]) -> str:
    return ", ".join(f"{s.name} {s.state}" for s in states) or "no replicas"


def status_setup(subject: Subject, example: Example) -> tuple[KindHooks, Job, list[DesiredPod]]:
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    return hooks, job, build_pods(hooks, job)


def plan_at(hooks: KindHooks, job: Job, observed: Observed, seconds: int) -> Plan:
    """One reconcile, `seconds` after the epoch."""
    return plan(job, observed, EPOCH + timedelta(seconds=seconds), hooks)
