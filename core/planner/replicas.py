"""Each replica's state from its pod, and the restart decision its policy makes.

A restart is recorded in the job's status (`replicas[].restartCount`, `backoffCount`) in the same
write that precedes deleting the failed pod; the replacement pod carries its incarnation in an
annotation. A failed pod whose incarnation is below the recorded count was already counted, so a
crash between the status write and the delete never counts a restart twice.

A recovery rule's `RestartJob` widens one replica's restart to every replica of the job
(`t9kjobs.planner.job_restart`); a pod of an older incarnation than recorded, running or not,
is then stopped without being counted again.

A replica the status records as ended for good keeps that end when its pod is gone since
(`remembered`): kube-controller-manager's pod garbage collector deletes terminated pods of any
owner once more than 12,500 exist, and a user may delete one; the job's other replicas may still
be running, and a pod created again would run the replica's work a second time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from t9kjobs.kinds import ReplicaState, Verdict
from t9kjobs.models import RETRYABLE_EXIT_CODES, Lifecycle, ReplicaStatus, RestartRule
from t9kjobs.models.recovery import RecoveryPolicy
from t9kjobs.objects import ANNOTATION_INCARNATION, ANNOTATION_SPEC_HASH, DesiredPod, Obj, spec_hash
from t9kjobs.planner.budgets import Budgets, counted_floor
from t9kjobs.planner.children import pod_state
from t9kjobs.planner.failures import Failure, classify, exit_code_of, exit_of
from t9kjobs.planner.job_restart import COMPLETED, STOPPING, incarnation, restart_whole_job
from t9kjobs.planner.rules import RESTART_POLICY, Decision, decide

__all__ = ["Assessment", "assess", "exit_code_of", "exit_of", "remembered"]


# Marks a pod `remembered` made from the status (no API object has this key): a replica that
# ended for good was judged by the recovery rules when it ended, and is never judged again
# from what the status kept of it (not its conditions).
REMEMBERED = "t9kjobsRemembered"


def _ended(
    desired: DesiredPod, state: str, code: int | None, done: int, container: str | None
) -> ReplicaState:
    """The replica as it ended for good: what a verdict about it names."""
    return ReplicaState(
        desired.replica_type, desired.index, desired.name, state, code, True, done, container
    )


def _own_limit(rule: RestartRule, backoff_limit: int | None) -> float:
    """The restarts a replica may have by its own limit (`RestartRule`): its `limit`; without
    one, only the job's backoffLimit bounds it; with neither, none."""
    if rule.limit is not None:
        return rule.limit
    return math.inf if backoff_limit is not None else 0


def _ends_for_good(desired: DesiredPod, phase: str) -> bool:
    """Whether the replica's restart policy leaves a pod that ended in `phase` as it ended."""
    policy = desired.restart.policy
    if phase == "Succeeded":
        return policy != "Always"
    return phase == "Failed" and policy == "Never"


def remembered(
    pods: list[DesiredPod], observed: dict[str, Obj], recorded: list[ReplicaStatus]
) -> dict[str, Obj]:
    """`observed`, plus a pod as the status recorded it for each replica that ended for good
    (Succeeded under any policy but Always, Failed under Never) and whose pod is gone since.

    Planned as if it still existed, such a replica stays as it ended: not created again, its
    phase, uid and exit codes unchanged in the status. Only what the status recorded is known:
    a pod deleted before its end was written (the 0.25 s batching of a finished pod) is created
    again, as before; Kubernetes' Job controller closes that window with a finalizer on every
    pod, which would cost a request a pod. A replica its policy restarts (Always, or OnFailure
    and ExitCode after a failure) is created again as its restart is."""
    by_name = {r.name: r for r in recorded}
    out = observed
    for desired in pods:
        replica = by_name.get(desired.name)
        if (
            desired.name in observed
            or replica is None
            or replica.uid is None
            or not _ends_for_good(desired, replica.phase)
        ):
            continue
        if out is observed:
            out = dict(observed)
        out[desired.name] = {
            "apiVersion": "v1",
            "kind": "Pod",
            REMEMBERED: True,
            "metadata": {
                "name": desired.name,
                "uid": replica.uid,
                "annotations": {
                    ANNOTATION_INCARNATION: str(replica.restart_count),
                    # Its spec is the job's: a spec changed since relaunches no finished replica.
                    ANNOTATION_SPEC_HASH: spec_hash(desired.manifest),
                },
            },
            "status": {
                "phase": replica.phase,
                "containerStatuses": [
                    {
                        "name": c.name,
                        "state": {c.state: {"exitCode": c.exit_code, "reason": c.reason}},
                    }
                    for c in replica.containers
                ],
            },
        }
    return out


@dataclass
class Assessment:
    """All replicas of a job, and the restarts this reconcile decides."""

    states: list[ReplicaState]
    restart: list[tuple[DesiredPod, Obj]]  # (replica, finished pod to delete and recreate)
    performed: dict[str, int]  # pod name -> restarts performed before this reconcile
    restarts_recorded: dict[str, int]  # pod name -> restarts after this reconcile
    backoff_performed: int  # restarts charged to backoffLimit before this reconcile
    backoff_count: int  # ... and after it
    backoff_exceeded: ReplicaState | None
    # pod name -> restarts charged to the user's budget, before and after this reconcile
    counted_performed: dict[str, int] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)
    infra_performed: int = 0  # restarts charged to the infrastructure budget, before
    infra_count: int = 0  # ... and after this reconcile
    fail: Verdict | None = None  # a recovery rule's FailJob
    # pod name -> the rule that restarts it (the Restarting Event says it)
    why: dict[str, str] = field(default_factory=dict)
    # replicas a rule restarts although their restartPolicy would leave them ended (Never):
    # their status says Deleted, so that `remembered` never keeps them as ended for good
    overridden: set[str] = field(default_factory=set)
    # pod name -> the rule that matched its failure but found the infrastructure budget spent
    spent: dict[str, str] = field(default_factory=dict)
    # With a recovery policy: pod name -> what decided each restart this reconcile performs
    # and the failure it answers (`t9kjobs.planner.history` writes an entry for each)
    decided: dict[str, tuple[Decision, Failure]] = field(default_factory=dict)
    job_restart: str | None = None  # the replica whose failure restarts the job now
    job_members: set[str] = field(default_factory=set)  # ... and every replica it restarts


# The failure a hung replica is to the rules: no exit code, no condition.
STALLED = Failure("Stalled", None, None, None, None)


def _fail_verdict(state: ReplicaState, failure: Failure, rule: str) -> Verdict:
    return Verdict(
        "Failed",
        "RecoveryPolicy",
        f"{failure.describe(state.name)}; rule {rule} fails the job",
        (state,),
    )


def assess(
    pods: list[DesiredPod],
    observed: dict[str, Obj],
    recorded: dict[str, int],
    backoff_count: int,
    life: Lifecycle,
    *,
    recovery: RecoveryPolicy | None = None,
    counted: dict[str, int] | None = None,
    infra_count: int = 0,
    stalled: str | None = None,
) -> Assessment:
    """Each replica's state under its restart policy, and which finished pods to replace.

    A replica whose restart is refused (its `limit` reached, or the job's `backoffLimit`) stays
    as it ended: Succeeded, or Failed for good. Only a refused restart of a *failed* replica
    exhausts the backoff budget (`backoff_exceeded`); a succeeded one under `Always` just stops.
    A replica being replaced is `Restarting`, whether its pod failed or (`Always`) succeeded,
    so that no framework takes it for finished.

    With a `recovery` policy, a failed replica is first matched against its rules
    (`t9kjobs.planner.rules`): `FailJob` fails the job (`Assessment.fail`), `Ignore` and
    `RestartReplica` with the infrastructure budget restart it charging `infra_count` only,
    `RestartReplica` restarts it under the user's budget whatever its restartPolicy; no rule:
    the restartPolicy, as without a policy. `counted`: the restarts charged to the user by
    replica, as recorded (absent: all of its restarts). `stalled`: the running pod the
    Stalled verdict names (`t9kjobs.planner.stall`), judged by the rules as a failure `Stalled`
    (no rule matching it: it runs on); a restart of it stops it (the pod's grace).
    """
    performed = dict(recorded)
    for desired in pods:
        pod = observed.get(desired.name)
        if pod is not None:
            # A pod of incarnation n proves n restarts, whatever the status says (a status
            # restored from a backup, say): never count fewer than were performed.
            performed[desired.name] = max(performed.get(desired.name, 0), incarnation(pod))
    charged = counted_floor(recorded, counted or {}, performed)
    budgets = Budgets(
        backoff_count=max(backoff_count, sum(charged.get(p.name, 0) for p in pods)),
        backoff_limit=life.backoff_limit,
        infra_count=infra_count,
        infra_limit=recovery.infrastructure_restart_limit if recovery is not None else 0,
        counted=dict(charged),
    )
    backoff_before = budgets.backoff_count
    states: list[ReplicaState] = []
    restart: list[tuple[DesiredPod, Obj]] = []
    counts = dict(performed)
    exceeded: ReplicaState | None = None
    fail: Verdict | None = None
    why: dict[str, str] = {}
    spent: dict[str, str] = {}
    overridden: set[str] = set()
    decided: dict[str, tuple[Decision, Failure]] = {}
    trigger: str | None = None
    for desired in pods:
        pod = observed.get(desired.name)
        state = pod_state(pod)
        done = counts.get(desired.name, 0)
        exited = exit_of(pod, desired.training_container) if pod is not None else None
        container, code = exited if exited else (None, None)
        rule = desired.restart
        finished = state in ("Succeeded", "Failed")
        wants_restart = finished and (
            rule.policy == "Always"
            or (state == "Failed" and rule.policy == "OnFailure")
            or (state == "Failed" and rule.policy == "ExitCode" and code in RETRYABLE_EXIT_CODES)
        )
        decision: Decision | None = None
        failure: Failure | None = None
        hung = desired.name == stalled and state == "Running"
        # A pod of an older incarnation than recorded: its restart was counted by an earlier
        # reconcile that did not get to delete it (a running one: a job restart's member, or a
        # stalled replica's restart).
        stale = pod is not None and state != "Deleted" and incarnation(pod) < done
        if recovery is not None and pod is not None and hung and not stale:
            failure = STALLED
            decision = decide(
                recovery, failure, desired.replica_type, pod, infra_left=budgets.infra_left
            )
            if not decision.ruled:
                decision = None
        elif (
            recovery is not None
            and pod is not None
            and state == "Failed"
            and not stale
            and not pod.get(REMEMBERED)  # judged when it ended: never judged again
        ):
            failure = classify(pod, desired.training_container)
            decision = decide(
                recovery, failure, desired.replica_type, pod, infra_left=budgets.infra_left
            )
            if decision.spent is not None:
                spent[desired.name] = decision.spent
            if not decision.ruled:
                decision = None
        final = False
        if stale:
            # Counted by an earlier reconcile that did not get to delete the pod.
            restart.append((desired, pod))  # type: ignore[arg-type]
            if _ends_for_good(desired, state):
                overridden.add(desired.name)  # restarted by a rule: keep it Deleted
            state = "Restarting" if finished else STOPPING
        elif decision is not None and decision.action == "RestartJob" and trigger is not None:
            # The job restarts already (another replica's failure): nothing more is charged.
            restart.append((desired, pod))  # type: ignore[arg-type]
            counts[desired.name] = done + 1
            if _ends_for_good(desired, "Failed"):
                overridden.add(desired.name)
            state = "Restarting"
        elif decision is not None and failure is not None and decision.action == "FailJob":
            final = True
            if fail is None:
                failed = _ended(desired, state, code, done, container)
                fail = _fail_verdict(failed, failure, decision.rule)
        elif decision is not None and failure is not None and decision.budget == "Infrastructure":
            restart.append((desired, pod))  # type: ignore[arg-type]
            counts[desired.name] = done + 1
            budgets.charge_infrastructure()
            why[desired.name] = f"rule {decision.rule}, infrastructure budget"
            trigger = trigger or _trigger(desired.name, decision)
            decided[desired.name] = (decision, failure)
            if _ends_for_good(desired, "Failed"):
                overridden.add(desired.name)
            state = "Restarting"
        elif not (wants_restart or decision is not None):
            final = finished
        elif budgets.counted.get(desired.name, 0) >= _own_limit(rule, life.backoff_limit):
            final = finished  # a hung replica its budget cannot restart runs on
        elif budgets.backoff_spent:
            final = finished
            if state == "Failed" and exceeded is None:
                exceeded = _ended(desired, state, code, done, container)
        elif pod is not None:
            restart.append((desired, pod))
            counts[desired.name] = done + 1
            budgets.charge_user(desired.name)
            if decision is not None:
                why[desired.name] = f"rule {decision.rule}"
                if _ends_for_good(desired, "Failed"):
                    overridden.add(desired.name)
                trigger = trigger or _trigger(desired.name, decision)
                decided[desired.name] = (decision, failure)  # type: ignore[assignment]
            elif recovery is not None:
                decided[desired.name] = _by_restart_policy(pod, desired.training_container)
            state = "Restarting"
        if hung and desired.name in why:
            why[desired.name] = f"stalled; {why[desired.name]}"  # the Restarting Event says so
        states.append(
            ReplicaState(
                desired.replica_type,
                desired.index,
                desired.name,
                state,
                code,
                final,
                counts.get(desired.name, 0),
                container,
            )
        )
    members: set[str] = set()
    if trigger is not None:
        members = restart_whole_job(pods, observed, states, restart, counts)
    return Assessment(
        states,
        restart,
        performed,
        counts,
        backoff_before,
        budgets.backoff_count,
        exceeded,
        counted_performed=charged,
        counted=budgets.counted,
        infra_performed=infra_count,
        infra_count=budgets.infra_count,
        fail=fail,
        why=why,
        overridden=overridden,
        spent=spent,
        decided=decided,
        job_restart=trigger,
        job_members=members,
    )


def _trigger(name: str, decision: Decision) -> str | None:
    """`name` when its decision restarts the whole job."""
    return name if decision.action == "RestartJob" else None


def _by_restart_policy(pod: Obj, training_container: str | None) -> tuple[Decision, Failure]:
    """A restart no rule decided: the replica's restartPolicy, charged to the user."""
    decision = Decision(RESTART_POLICY, "User", RESTART_POLICY)
    if pod_state(pod) == "Succeeded":  # restarted after a success: policy Always
        container, code = exit_of(pod, training_container) or (None, None)
        return decision, Failure(COMPLETED, code, container, None, None)
    return decision, classify(pod, training_container)
