"""Contracts on `compute_status`'s verdicts: none while no pod finished, Succeeded when every
replica did, a failure named, and a finished job's verdict standing, through the engine too.

The replicas are made up (`t9kjobs.testing.kit.subject.replica_states`) from the pods the
plugin builds for a valid example; the contracts on restarts and status fields are
`t9kjobs.testing.kit.behaviour`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from t9kjobs.kinds import ReplicaState
from t9kjobs.models import FINISHED_PHASES, Job, Lifecycle
from t9kjobs.objects import DesiredPod
from t9kjobs.testing.kit.calls import EXIT_CODE as _EXIT_CODE
from t9kjobs.testing.kit.calls import describe as _describe
from t9kjobs.testing.kit.calls import plan_at
from t9kjobs.testing.kit.calls import status_setup as _status_setup
from t9kjobs.testing.kit.calls import verdict as _verdict
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject, observed_from, replica_states
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "compute_status_all_succeeded",
    "compute_status_fails_on_lost_replicas",
    "compute_status_never_regresses",
    "compute_status_no_pods",
    "compute_status_one_failed",
    "compute_status_pairs_outcomes",
]


def compute_status_no_pods(subject: Subject, example: Example) -> None:
    """`compute_status` gives no verdict while no pod has finished.

    Not when no pod exists yet (every replica `Creating`), nor when all are `Pending` or all
    `Running`; and an empty list of replicas is handled (None or a Verdict, no exception).
    """
    hooks, job, pods = _status_setup(subject, example)
    _verdict(hooks, job, [])
    for state in ("Creating", "Pending", "Running"):
        states = replica_states(pods, state)
        verdict = _verdict(hooks, job, states)
        if verdict is not None:
            raise ContractViolation(
                f"returned {verdict.outcome} ({verdict.reason}) for {_describe(states)}"
            )


def compute_status_all_succeeded(subject: Subject, example: Example) -> None:
    """`compute_status` says Succeeded when every replica succeeded."""
    hooks, job, pods = _status_setup(subject, example)
    states = replica_states(pods, "Succeeded", exit_code=0, final=True)
    verdict = _verdict(hooks, job, states)
    if verdict is None or verdict.outcome != "Succeeded":
        got = "no verdict" if verdict is None else f"{verdict.outcome} ({verdict.message})"
        raise ContractViolation(f"returned {got} for {_describe(states)}")


def compute_status_one_failed(subject: Subject, example: Example) -> None:
    """`compute_status` handles a failed replica: never Succeeded, a Failed names the pod.

    With one replica failed for good and the others running, the verdict is None or Failed,
    and a Failed verdict's message names the pod and its exit code; a replica being restarted
    (`Restarting`) does not fail the job; when every replica failed for good, the job failed.
    """
    hooks, job, pods = _status_setup(subject, example)
    for i, pod in enumerate(pods):
        states = replica_states(pods, "Failed", exit_code=_EXIT_CODE, final=True, only=i)
        verdict = _verdict(hooks, job, states)
        if verdict is not None and verdict.outcome != "Failed":
            raise ContractViolation(f"returned {verdict.outcome} for {_describe(states)}")
        if verdict is not None and (
            pod.name not in verdict.message or str(_EXIT_CODE) not in verdict.message
        ):
            raise ContractViolation(
                f"the Failed verdict's message {verdict.message!r} should name {pod.name} and"
                f" its exit code {_EXIT_CODE}"
            )
        retried = replica_states(pods, "Restarting", exit_code=_EXIT_CODE, only=i)
        verdict = _verdict(hooks, job, retried)
        if verdict is not None and verdict.outcome == "Failed":
            raise ContractViolation(
                f"returned Failed for {_describe(retried)}: a restarting replica"
            )
    states = replica_states(pods, "Failed", exit_code=_EXIT_CODE, final=True)
    verdict = _verdict(hooks, job, states)
    if pods and (verdict is None or verdict.outcome != "Failed"):
        raise ContractViolation(f"returned {verdict and verdict.outcome} for {_describe(states)}")


def compute_status_fails_on_lost_replicas(subject: Subject, example: Example) -> None:
    """A replica lost for good fails the job, unless the job can run without it.

    For each pod: its replica failed for good (exit code 42, `final`), the others `Running`.
    A job that needs every pod (`Lifecycle.min_available` None, or not below the pod count)
    must then be Failed: its launcher or its collective may wait for the lost rank for ever
    (an ssh session to a host that is gone, a rendezvous), and the job would stay Running. An
    elastic job that can spare the pod may wait, and so may one whose kind declares it may lose
    the pod's replica type (`Lifecycle.may_lose`); a kind whose user-written rules decide
    (`Lifecycle.failure_rules`, GenericJob's `failureRules`) is judged by its rules' tests.
    """
    hooks, job, pods = _status_setup(subject, example)
    life = job.spec.lifecycle()
    if life.failure_rules or (life.min_available is not None and life.min_available < len(pods)):
        return
    for i, pod in enumerate(pods):
        if pod.replica_type in life.may_lose:
            continue  # declared: the job may lose this type's replicas
        states = replica_states(pods, "Failed", exit_code=_EXIT_CODE, final=True, only=i)
        verdict = _verdict(hooks, job, states)
        if verdict is None or verdict.outcome != "Failed":
            got = "no verdict" if verdict is None else verdict.outcome
            raise ContractViolation(
                f"{example.id}: with {pod.name} ({pod.replica_type}) failed for good and the"
                f" others Running, compute_status returned {got}: the job needs every pod"
                " (Lifecycle.min_available is not below the pod count), so it would stay"
                " Running without it; return Failed when any ReplicaState.failed_for_good, or"
                " declare the pods it can spare in JobSpec.lifecycle() (min_available, or the"
                " replica types it may lose: may_lose)"
            )


def compute_status_never_regresses(subject: Subject, example: Example) -> None:
    """A finished job never regresses: its verdict stands, through the engine too.

    `compute_status` judges from the replicas only: asked again about the same replicas, with
    the job already finished, it gives the same verdict. Through the planner: the reconcile
    that finishes the job leaves it Succeeded or Failed (no hook undoes the verdict, e.g.
    `update_status`), and later reconciles, whatever the pods do, change nothing.
    """
    hooks, job, pods = _status_setup(subject, example)
    for state, code in (("Succeeded", 0), ("Failed", _EXIT_CODE)):
        states = replica_states(pods, state, exit_code=code, final=True)
        verdict = _verdict(hooks, job, states)
        if verdict is None:
            continue
        status = job.status.model_copy(update={"phase": verdict.outcome})
        finished = job.model_copy(update={"status": status})
        for again in (finished, job, finished):
            later = _verdict(hooks, again, states)
            if later is None or (later.outcome, later.reason) != (verdict.outcome, verdict.reason):
                got = "no verdict" if later is None else f"{later.outcome} ({later.reason})"
                raise ContractViolation(
                    f"for {_describe(states)} it said {verdict.outcome} ({verdict.reason}), then"
                    f" {got} when asked again (status.phase {again.status.phase})"
                )
    life = job.spec.lifecycle()
    if not (life.run_mode.debugging or life.run_mode.paused):
        _never_regresses_in_engine(subject, job)


def _never_regresses_in_engine(subject: Subject, job: Job) -> None:
    hooks = subject.hooks(job.kind)
    start = subject.first_reconcile(job)
    running = job.model_copy(update={"status": start.status})
    for phase, code in (("Succeeded", 0), ("Failed", _EXIT_CODE)):
        ending = plan_at(hooks, running, observed_from(start.create, phase, code), 60)
        announced = [e.reason for e in ending.events if e.reason in FINISHED_PHASES]
        if not announced:
            continue  # these pods do not finish the job (restart policies): nothing to keep
        status = ending.status
        if status.phase != announced[0]:
            raise ContractViolation(
                f"the reconcile that finished the job ({announced[0]}) left status.phase"
                f" {status.phase!r}: a hook undid the verdict"
            )
        done = running.model_copy(update={"status": status})
        for later_phase in ("Running", "Failed", "Succeeded", None):
            later = plan_at(hooks, done, observed_from(start.create, later_phase, 1), 120)
            if later.status != status or later.create or later.update:
                raise ContractViolation(
                    f"a {status.phase} job changed when its pods were"
                    f" {later_phase or 'gone'}: phase {later.status.phase}, created"
                    f" {len(later.create)}, updated {len(later.update)} objects"
                )


def _pairing(pods: Sequence[DesiredPod], first: int, other: int, state: str) -> list[ReplicaState]:
    """Pod `first` succeeded, pod `other` in `state` (lost for good, running, restarting), the
    others Running."""
    out = []
    for i, pod in enumerate(pods):
        if i == first:
            out.append(ReplicaState(pod.replica_type, pod.index, pod.name, "Succeeded", 0, True))
        elif i == other:
            code = _EXIT_CODE if state in ("Failed", "Restarting") else None
            final = state == "Failed"
            out.append(ReplicaState(pod.replica_type, pod.index, pod.name, state, code, final))
        else:
            out.append(ReplicaState(pod.replica_type, pod.index, pod.name, "Running"))
    return out


_SAID = {"Failed": "failed for good", "Running": "still running", "Restarting": "restarting"}


def _expected(
    life: Lifecycle, decides: bool, other: DesiredPod, state: str, spare: bool
) -> set[str | None]:
    """The verdicts the kind's declaration allows for a pairing (None: no verdict yet).
    `spare`: an elastic job can run without the other pod (`min_available`)."""
    rules = life.finished_by == "rules"  # the user's success rules may say Succeeded any time
    if decides:  # the finisher succeeded: Succeeded, unless a replica it cannot outweigh is lost
        if state != "Failed" or other.replica_type in life.may_lose | life.finisher_outweighs:
            return {"Succeeded"}
        return {"Succeeded", "Failed"} if spare else {"Failed"}
    if state != "Failed" or other.replica_type in life.may_lose:
        return {None, "Succeeded"} if rules else {None}  # one still runs: not done, not failed
    return {None, "Failed"} if spare else {"Failed"}


def _undeclared(example: Example) -> ContractViolation:
    return ContractViolation(
        f"{example.id}: the kind declares no Lifecycle.finished_by, so no verdict can be judged"
        " against it: return from JobSpec.lifecycle() the replica whose success alone finishes"
        ' the job (finished_by=("launcher", 0), a master), "all" when the job succeeds once'
        ' every replica has, or "rules" when the user\'s own success rules decide; and the'
        " replica types it may lose (may_lose) or whose loss the finisher's success outweighs"
        " (finisher_outweighs). Kit v4 (t9k-jobs 0.3) requires the declaration"
        " (docs/conformance.md)"
    )


def compute_status_pairs_outcomes(subject: Subject, example: Example) -> None:
    """A succeeded replica beside a lost, running or restarting one: the verdict declared.

    For each replica type, its first pod `Succeeded` beside each other pod in turn failed for
    good, `Running` or `Restarting` (the rest `Running`), judged against what the kind declares
    in `JobSpec.lifecycle()`. When the succeeded pod is the one whose success finishes the job
    (`finished_by`, a launcher or a master): Succeeded, except beside a replica lost for good
    that the finisher's success does not outweigh: Failed (its type is in neither
    `finisher_outweighs` nor `may_lose`; an elastic job that can spare it, `min_available`,
    may say either). Else no verdict beside a running or restarting replica, and Failed beside
    one lost for good, unless its type may be lost (`may_lose`: no verdict) or the job is
    elastic (no verdict or Failed); with `finished_by` "rules" (the user's success rules)
    Succeeded may come any time a replica still runs. A kind that declares no `finished_by`
    fails (kit v4, t9k-jobs 0.3); a kind whose user-written failure rules decide
    (`failure_rules`) is judged by its rules' tests.
    """
    hooks, job, pods = _status_setup(subject, example)
    life = job.spec.lifecycle()
    if life.failure_rules:
        return
    if life.finished_by is None:
        raise _undeclared(example)
    spare = life.min_available is not None and life.min_available < len(pods)
    firsts: dict[str, int] = {}
    for i, pod in enumerate(pods):
        firsts.setdefault(pod.replica_type, i)
    for first in firsts.values():
        winner = pods[first]
        decides = life.finished_by == (winner.replica_type, winner.index)
        # Its own type's other pods first: worker-0 beside worker-1 is the likeliest mistake.
        others = sorted(
            (i for i in range(len(pods)) if i != first),
            key=lambda i: pods[i].replica_type != winner.replica_type,
        )
        for other in others:
            pod = pods[other]
            for state in ("Failed", "Running", "Restarting"):
                states = _pairing(pods, first, other, state)
                found = _verdict(hooks, job, states)
                allowed = _expected(life, decides, pod, state, spare)
                got = None if found is None else found.outcome
                if got in allowed:
                    continue
                said = " or ".join(
                    "no verdict" if a is None else a for a in sorted(allowed, key=str)
                )
                raise ContractViolation(
                    f"{example.id}: with {winner.name} ({winner.replica_type}) Succeeded beside"
                    f" {pod.name} ({pod.replica_type}) {_SAID[state]}, the others Running,"
                    f" compute_status returned {got or 'no verdict'}"
                    f"{f' ({found.reason})' if found else ''}, where the kind declares {said}"
                    f": {_why(life, decides, winner, pod, state, pods)}"
                )


def _why(
    life: Lifecycle,
    decides: bool,
    winner: DesiredPod,
    other: DesiredPod,
    state: str,
    pods: Sequence[DesiredPod],
) -> str:
    kind = other.replica_type
    if decides and state == "Failed" and kind not in life.may_lose | life.finisher_outweighs:
        return (
            f"{winner.name}'s success finishes the job (Lifecycle.finished_by"
            f" {life.finished_by}), but the kind declares that a {kind} lost for good fails it"
            f" even then ({kind!r} is in neither Lifecycle.finisher_outweighs nor may_lose):"
            " return Failed when a replica the job needs is ReplicaState.failed_for_good"
            " (t9kjobs.plugin.replicas_lost) before judging the finisher's success; or, if"
            f" {winner.name}'s success means the work is done whatever a {kind} did (a launcher"
            " that exits 0 only when every rank did), declare it:"
            f" finisher_outweighs=frozenset({{{kind!r}}})"
        )
    if decides:
        spared = "may_lose" if kind in life.may_lose else "finisher_outweighs"
        why = f", and a {kind}'s loss does not undo it (Lifecycle.{spared})"
        why = why if state == "Failed" else ""
        return (
            f"{winner.name} is the replica whose success finishes the job"
            f" (Lifecycle.finished_by {life.finished_by}){why}; return Succeeded when it"
            " succeeded"
        )
    names = {(p.replica_type, p.index): p.name for p in pods}
    finisher = "the job succeeds when every replica has (Lifecycle.finished_by 'all')"
    if life.finished_by == "rules":
        finisher = "the user's success rules decide (Lifecycle.finished_by 'rules')"
    elif isinstance(life.finished_by, tuple):
        who = names.get(life.finished_by, str(life.finished_by))
        finisher = f"only {who}'s success finishes the job (Lifecycle.finished_by)"
    if state != "Failed" or kind in life.may_lose:
        return (
            f"{finisher}, and {other.name} may still finish: judge Succeeded only from the"
            " replica that finishes the job, or when every replica succeeded; declare the"
            " replica whose success alone finishes it as Lifecycle.finished_by"
        )
    return (
        f"{finisher}, and {other.name} is lost for good: return Failed when a replica the job"
        " needs is ReplicaState.failed_for_good (t9kjobs.plugin.replicas_lost), or declare the"
        " replica types it may lose (Lifecycle.may_lose)"
    )
