"""Which recovery rule decides a failure: `decide(policy, failure, ...) -> Decision | None`.

`spec.recoveryPolicy.rules` are read in order, the first that matches decides (as batch/v1's
`podFailurePolicy` and JobSet's `failurePolicy`); then the built-in rule (a disruption that is
not the program's fault, `Evicted`, `Preempted`, `NodeLost`: `Ignore`); none left, the
replica's `restartPolicy` decides (action `restartPolicy`), as it did before rules existed.

A rule that would charge the infrastructure budget once that budget is spent does not apply:
the failure falls through to the next rule, ending at the `restartPolicy` and the user's
budget. So `infrastructureRestartLimit: 0` charges disruptions to the user, as before, and an
`Ignore` loop ends: every restart policy is finite (DESIGN.md).

Pure and separate from the budget arithmetic (`t9kjobs.planner.replicas`) so that each matcher
can be tested on its own, table by table.
"""

from __future__ import annotations

from dataclasses import dataclass

from t9kjobs.models.recovery import RecoveryPolicy, RecoveryRule
from t9kjobs.planner.failures import Failure
from t9kjobs.vocabulary import Obj

__all__ = ["BUILTIN", "RESTART_POLICY", "Decision", "decide", "kueue_rule", "matches"]

# Failures the program did not cause: restarted by the built-in rule, charged to the
# infrastructure budget (with a recoveryPolicy; without one, the restartPolicy decides them).
BUILTIN = RecoveryRule(action="Ignore", on_reasons=["NodeLost", "Evicted", "Preempted"])
BUILTIN_LABEL = "builtin:infrastructure"
# No rule applies: the replica's restartPolicy decides, charged to the user.
RESTART_POLICY = "restartPolicy"


@dataclass(frozen=True)
class Decision:
    """What a rule decides about one failure."""

    action: str  # RestartReplica, FailJob or Ignore
    budget: str | None  # User, Infrastructure, or None (FailJob)
    rule: str  # `bad-input (spec.recoveryPolicy.rules[0])`, `builtin:infrastructure`
    # the first rule that matched but did not apply, the infrastructure budget being spent
    spent: str | None = None

    @property
    def ruled(self) -> bool:
        """Whether a rule decided (not the restartPolicy)."""
        return self.action != RESTART_POLICY


def _exit_code(pod: Obj, container: str) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        if terminated and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def matches(rule: RecoveryRule, failure: Failure, replica_type: str, pod: Obj) -> bool:
    """Whether `rule` matches: every matcher it has matches (OR inside each list), and the
    replica's type is listed when it lists types."""
    if rule.replica_types is not None and replica_type not in rule.replica_types:
        return False
    if rule.on_reasons is not None and failure.reason not in rule.on_reasons:
        return False
    codes = rule.on_exit_codes
    if codes is not None:
        if codes.container_name is None or codes.container_name == failure.container:
            code = failure.exit_code
        else:
            code = _exit_code(pod, codes.container_name)
        if code is None or (code in codes.values) != (codes.operator == "In"):
            return False
    if rule.on_pod_conditions is not None:
        condition = failure.condition
        if condition is None or not any(
            c.type == condition.get("type")
            and c.status == condition.get("status")
            and (c.reasons is None or condition.get("reason") in c.reasons)
            for c in rule.on_pod_conditions
        ):
            return False
    return True


def _label(rule: RecoveryRule, index: int) -> str:
    where = f"spec.recoveryPolicy.rules[{index}]"
    return f"{rule.name} ({where})" if rule.name else where


def decide(
    policy: RecoveryPolicy, failure: Failure, replica_type: str, pod: Obj, infra_left: bool
) -> Decision:
    """The first rule that matches and may apply (module docstring); action `restartPolicy`
    when none does: the replica's restartPolicy decides. `infra_left`: whether the
    infrastructure budget has a restart left."""
    candidates = [(_label(r, i), r) for i, r in enumerate(policy.rules)]
    candidates.append((BUILTIN_LABEL, BUILTIN))
    spent: str | None = None
    for label, rule in candidates:
        if not matches(rule, failure, replica_type, pod):
            continue
        if rule.charges == "Infrastructure" and not infra_left:
            spent = spent or label  # falls through to the next rule
            continue
        return Decision(rule.action, rule.charges, label, spent)
    return Decision(RESTART_POLICY, "User", RESTART_POLICY, spent)


def kueue_rule(policy: RecoveryPolicy | None) -> str | None:
    """The first rule that names `PreemptedByKueue` (a FailJob, validation says so), by its
    label: the job fails when Kueue evicts it, instead of waiting in its queue again."""
    for index, rule in enumerate(policy.rules if policy is not None else ()):
        if "PreemptedByKueue" in (rule.on_reasons or ()):
            return _label(rule, index)
    return None
