"""`RestartJob` (docs/lifecycle.md "Recovery rules") on the engine's minimal test kind: every
pod stopped, none created until all of the older incarnation are gone, then all at once; the
incarnations and the two budgets; the crash windows of a replay; a replica that ended for good
kept; and the restart history it writes (bounded, closed once)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from t9kjobs.kinds import ReplicaState
from t9kjobs.loading import parse_job
from t9kjobs.models import JobStatus, dump
from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.planner import Plan
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.job_restart import restart_whole_job, waits
from t9kjobs.testing.fixtures import apply_plan
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import KIND, tiny_job, tiny_manager

NAMES = [f"tiny-worker-{i}" for i in range(4)]
W2 = "tiny-worker-2"
EXIT_3: dict[str, Any] = {"onExitCodes": {"operator": "In", "values": [3]}}


class GracefulSim(Sim):
    """A Sim whose deletions of live pods take their grace: the pod stays, Terminating,
    until `gone` removes it (a finished pod's deletion, grace 0, takes effect at once)."""

    def step(self) -> Plan:
        p = self.plan()
        self.manifest["status"] = dump(p.status)
        graceful = {d.name for d in p.delete if d.grace_period_seconds is None}
        kept = {n: copy.deepcopy(self.pod(n)) for n in graceful if ("Pod", n) in self.objects}
        self.objects = apply_plan(self.objects, p)
        for name, pod in kept.items():
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
            self.objects[("Pod", name)] = pod
        return p

    def gone(self, *names: str) -> None:
        for name in names:
            del self.objects[("Pod", name)]


def _job(budget: str | None = None, restart: Any = "OnFailure", **kw: Any) -> Obj:
    rule: dict[str, Any] = {"name": "gang", **EXIT_3, "action": "RestartJob"}
    if budget is not None:
        rule["budget"] = budget
    return tiny_job(replicas=4, restart=restart, recoveryPolicy={"rules": [rule]}, **kw)


def _running(manifest: Obj) -> GracefulSim:
    sim = GracefulSim(manifest)
    sim.step()
    for name in NAMES:
        sim.set(name, "Running")
    sim.step()
    return sim


def _pods(p: Plan) -> list[str]:
    return [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"]


def _replicas(sim: Sim) -> dict[str, Obj]:
    return {r["name"]: r for t in sim.status["tasks"] for r in t["replicas"]}


def test_every_pod_stopped_then_all_created_at_once_with_the_next_incarnation() -> None:
    sim = _running(_job())
    sim.set(W2, "Failed", 3)
    p = sim.step()
    # Stopped: the failed pod at once, the running ones with their own grace; none created.
    assert {d.name: d.grace_period_seconds for d in p.delete} == {
        "tiny-worker-0": None,
        "tiny-worker-1": None,
        W2: 0,
        "tiny-worker-3": None,
    }
    assert _pods(p) == []
    # Charged once, to the user and to the failed replica; every incarnation + 1.
    assert p.status.backoff_count == 1
    replicas = _replicas(sim)
    assert {n: r["restartCount"] for n, r in replicas.items()} == dict.fromkeys(NAMES, 1)
    assert {n: r.get("countedRestarts") for n, r in replicas.items()} == {
        "tiny-worker-0": 0,
        "tiny-worker-1": 0,
        W2: None,  # = restartCount
        "tiny-worker-3": 0,
    }
    assert [e.reason for e in p.events if e.type == "Warning"] == ["RestartingJob"]
    event = next(e for e in p.events if e.reason == "RestartingJob")
    assert event.message == (
        "tiny-worker-2 failed with exit code 3 (container main); restart the job (rule gang"
        " (spec.recoveryPolicy.rules[0]), user budget): stopping tiny-worker-0, tiny-worker-1,"
        " tiny-worker-2, tiny-worker-3; created again once all are gone"
    )
    # Nothing is created while one pod of the older incarnation is left.
    for leaving in ("tiny-worker-0", "tiny-worker-1"):
        sim.gone(leaving)
        p = sim.step()
        assert _pods(p) == [] and p.delete == ()
        assert p.status.reason == "Error"
    sim.gone("tiny-worker-3")
    p = sim.step()
    assert _pods(p) == NAMES
    for name in NAMES:
        assert sim.pod(name)["metadata"]["annotations"][ANNOTATION_INCARNATION] == "1"
    assert p.status.backoff_count == 1


def test_the_replicas_recover_and_the_entry_is_closed_once() -> None:
    sim = _running(_job())
    sim.set(W2, "Failed", 3)
    sim.step()
    sim.gone("tiny-worker-0", "tiny-worker-1", "tiny-worker-3")
    sim.step()
    for name in NAMES[:3]:
        sim.set(name, "Running")
    sim.now = NOW + timedelta(seconds=40)
    p = sim.step()
    assert p.status.restart_history[0].recovered_time is None  # one is still Pending
    sim.set("tiny-worker-3", "Running")
    sim.now = NOW + timedelta(seconds=50)
    p = sim.step()
    entry = p.status.restart_history[0]
    assert entry.recovered_time == "2026-01-01T12:00:50Z"
    assert p.status.last_recovery_seconds == 50
    assert p.status.reason is None
    sim.now = NOW + timedelta(seconds=90)
    p = sim.step()
    assert p.status.restart_history[0].recovered_time == "2026-01-01T12:00:50Z"
    assert p.status.last_recovery_seconds == 50


def test_the_history_entry() -> None:
    sim = _running(_job())
    sim.pod(W2)["spec"]["nodeName"] = "node-7"
    sim.set(W2, "Failed", 3)
    sim.pod(W2)["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = (
        "2026-01-01T11:59:58Z"
    )
    p = sim.step()
    [entry] = p.status.restart_history
    assert entry.model_dump(by_alias=True, exclude_none=True) == {
        "time": "2026-01-01T12:00:00Z",
        "failureTime": "2026-01-01T11:59:58Z",
        "replica": W2,
        "action": "RestartJob",
        "reason": "Error",
        "exitCode": 3,
        "node": "node-7",
        "rule": "gang",
        "budget": "User",
        "message": "tiny-worker-2 failed with exit code 3 (container main)",
    }


def test_infrastructure_budget_charges_it_once_and_the_user_nothing() -> None:
    sim = _running(_job("Infrastructure"))
    sim.set(W2, "Failed", 3)
    p = sim.step()
    assert p.status.backoff_count == 0 and p.status.infrastructure_restart_count == 1
    assert {r["restartCount"] for r in _replicas(sim).values()} == {1}
    assert {r.get("countedRestarts") for r in _replicas(sim).values()} == {0}
    assert p.status.restart_history[0].budget == "Infrastructure"


def test_a_replica_that_ended_for_good_stays() -> None:
    sim = _running(_job())
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    sim.set(W2, "Failed", 3)
    p = sim.step()
    assert "tiny-worker-0" not in {d.name for d in p.delete}
    assert _replicas(sim)["tiny-worker-0"]["restartCount"] == 0
    sim.gone("tiny-worker-1", "tiny-worker-3")
    p = sim.step()
    assert _pods(p) == ["tiny-worker-1", W2, "tiny-worker-3"]
    assert _replicas(sim)["tiny-worker-0"]["phase"] == "Succeeded"


def test_replay_after_the_status_write_charges_nothing_and_creates_nothing_early() -> None:
    sim = _running(_job())
    sim.set(W2, "Failed", 3)
    decided = sim.plan()
    # The operator dies after the status write: no pod is deleted.
    sim.manifest["status"] = dump(decided.status)
    replay = sim.step()
    assert sorted(d.name for d in replay.delete) == NAMES
    assert _pods(replay) == []
    assert replay.status.backoff_count == 1
    assert len(replay.status.restart_history) == 1
    assert {r["restartCount"] for r in _replicas(sim).values()} == {1}
    # ... and again after some of the deletions: the rest are deleted, still nothing created.
    replay = sim.step()
    assert _pods(replay) == [] and replay.status.backoff_count == 1
    assert "RestartingJob" not in [e.reason for e in replay.events]
    sim.gone("tiny-worker-0", "tiny-worker-1", "tiny-worker-3")
    p = sim.step()
    assert _pods(p) == NAMES and len(p.status.restart_history) == 1


def test_a_spent_user_budget_fails_the_job_instead() -> None:
    sim = _running(_job(run_policy={"backoffLimit": 0}))
    sim.set(W2, "Failed", 3)
    p = sim.step()
    assert p.status.phase == "Failed"
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    assert p.status.restart_history is None


def test_two_replicas_failing_at_once_restart_the_job_once() -> None:
    sim = _running(_job())
    sim.set("tiny-worker-1", "Failed", 3)
    sim.set(W2, "Failed", 3)
    p = sim.step()
    assert p.status.backoff_count == 1
    assert [e.replica for e in p.status.restart_history] == ["tiny-worker-1"]
    assert {r["restartCount"] for r in _replicas(sim).values()} == {1}


def test_the_history_keeps_the_newest_16_and_counts_steps_lost() -> None:
    ignore = {**EXIT_3, "action": "Ignore"}
    manifest = tiny_job(
        replicas=1, restart="Never", recoveryPolicy={"infrastructureRestartLimit": 100,
                                                     "rules": [ignore]}
    )  # fmt: skip
    sim = Sim(manifest)
    w0 = "tiny-worker-0"
    for i in range(20):
        sim.now = NOW + timedelta(minutes=i)
        sim.step()  # creates the pod (again)
        sim.set(w0, "Running")
        sim.now = NOW + timedelta(minutes=i, seconds=1)
        sim.step()
        sim.manifest["status"]["progress"] = {
            "step": 10,
            "lastUpdateTime": f"2026-01-01T12:{i:02d}:30Z",
        }
        sim.set(w0, "Failed", 3)
        sim.now = NOW + timedelta(minutes=i, seconds=40)
        sim.step()
    history = sim.status["restartHistory"]
    assert len(history) == 16
    assert history[0]["time"] == "2026-01-01T12:04:40Z"  # the 4 oldest dropped
    assert history[-1]["time"] == "2026-01-01T12:19:40Z"
    assert {e["action"] for e in history} == {"Ignore"}
    assert {e["budget"] for e in history} == {"Infrastructure"}
    assert {e["rule"] for e in history} == {"rules[0]"}
    assert sim.status["stepsLost"] == 200  # all 20, those dropped too
    assert sim.status["infrastructureRestartCount"] == 20


def test_restart_policy_restarts_get_an_entry_only_with_a_recovery_policy() -> None:
    for policy, entries in ((None, 0), ({}, 1)):
        extra = {} if policy is None else {"recoveryPolicy": policy}
        sim = Sim(tiny_job(replicas=1, **extra))
        sim.step()
        sim.set("tiny-worker-0", "Failed", 1)
        p = sim.step()
        assert len(p.status.restart_history or []) == entries
        if p.status.restart_history:
            entry = p.status.restart_history[0]
            assert (entry.action, entry.rule, entry.budget) == (
                "RestartReplica",
                "restartPolicy",
                "User",
            )


def _state(name: str, state: str, final: bool = False) -> ReplicaState:
    return ReplicaState("worker", int(name[-1]), name, state, None, final, 0)


def test_widening_a_restart_to_the_whole_job() -> None:
    job = parse_job(_job(), tiny_manager())
    pods = {d.name: d for d in desired_pods(job, tiny_manager().hooks_for(KIND), job.spec.lifecycle(), False, frozenset())}  # fmt: skip
    live = {"metadata": {"name": "x"}}
    leaving = {"metadata": {"name": "y", "deletionTimestamp": "2026-01-01T12:00:00Z"}}
    observed = {
        "tiny-worker-0": live,
        "tiny-worker-1": {"metadata": {"name": "z"}},
        W2: live,
        "tiny-worker-3": leaving,
    }
    states = [
        _state("tiny-worker-0", "Running"),
        _state("tiny-worker-1", "Succeeded", final=True),  # ended for good: stays
        _state(W2, "Restarting"),  # the failed one, restarted already
        _state("tiny-worker-3", "Deleted"),  # on its way out: nothing to delete
    ]
    restart = [(pods[W2], live)]
    counts = {W2: 1}
    members = restart_whole_job(pods.values(), observed, states, restart, counts)
    assert members == {"tiny-worker-0", W2, "tiny-worker-3"}
    assert counts == {"tiny-worker-0": 1, W2: 1, "tiny-worker-3": 1}
    assert [d.name for d, _ in restart] == [W2, "tiny-worker-0"]
    assert [(s.state, s.restarts) for s in states] == [
        ("Stopping", 1),
        ("Succeeded", 0),
        ("Restarting", 0),
        ("Deleted", 1),
    ]
    # A replica that ended and that its policy restarts (Always) is Restarting, not Stopping.
    states = [_state("tiny-worker-0", "Succeeded")]
    restart_whole_job(pods.values(), observed, states, [], {})
    assert states[0].state == "Restarting"


def _pod(name: str, incarnation: str) -> Obj:
    return {"metadata": {"name": name, "annotations": {ANNOTATION_INCARNATION: incarnation}}}


def test_creations_wait_only_while_a_job_restart_is_open_and_an_older_pod_is_left() -> None:
    def status(action: str, recovered: str | None = None) -> JobStatus:
        entry = {"time": "t", "replica": W2, "action": action, "reason": "Error",
                 "rule": "gang", "budget": "User", "recoveredTime": recovered}  # fmt: skip
        return JobStatus.model_validate({"restartHistory": [entry]})

    older = [_pod(W2, "0")]
    assert waits(status("RestartJob"), older, {W2: 1})
    assert not waits(status("RestartJob"), [_pod(W2, "1")], {W2: 1})
    assert not waits(status("RestartJob"), older, {})  # nothing recorded: not older
    assert not waits(status("RestartJob", "t2"), older, {W2: 1})  # recovered
    assert not waits(status("RestartReplica"), older, {W2: 1})  # no job restart
    assert not waits(JobStatus(), older, {W2: 1})


def test_a_restart_after_a_success_is_said_completed() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Always", recoveryPolicy={}))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Succeeded")
    p = sim.step()
    [entry] = p.status.restart_history or []
    assert (entry.reason, entry.exit_code, entry.rule) == ("Completed", 0, "restartPolicy")


def test_steps_lost_are_counted_once_per_report() -> None:
    sim = GracefulSim(tiny_job(2, run_policy={"backoffLimit": 10}, recoveryPolicy={}))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.step()
    sim.manifest["status"]["progress"] = {"step": 40, "lastUpdateTime": "2026-01-01T11:59:00Z"}
    # Two replicas fail in one reconcile: the job lost its 40 steps once.
    sim.set("tiny-worker-0", "Failed", 1)
    sim.set("tiny-worker-1", "Failed", 1)
    p = sim.step()
    assert [e.steps_lost for e in p.status.restart_history or []] == [40, 0]
    assert p.status.steps_lost == 40
    # Failed again before any new report: the same 40 steps are not lost twice.
    sim.step()
    sim.set("tiny-worker-0", "Failed", 1)
    sim.now = NOW + timedelta(seconds=30)
    p = sim.step()
    assert (p.status.restart_history or [])[-1].steps_lost is None
    assert p.status.steps_lost == 40
    # A report at the very second of the last restart is not newer than it either.
    sim.manifest["status"]["progress"]["lastUpdateTime"] = "2026-01-01T12:00:30Z"
    sim.step()
    sim.set("tiny-worker-1", "Failed", 1)
    sim.now = NOW + timedelta(seconds=60)
    p = sim.step()
    assert len(p.status.restart_history or []) == 4
    assert p.status.steps_lost == 40


def test_the_failure_time_is_the_containers_end_even_from_its_last_state() -> None:
    sim = _running(_job())
    sim.set(W2, "Failed", 3)
    cs = sim.pod(W2)["status"]["containerStatuses"][0]
    cs["lastState"] = {"terminated": {"exitCode": 3, "finishedAt": "2026-01-01T11:59:30Z"}}
    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    p = sim.step()
    assert (p.status.restart_history or [])[0].failure_time == "2026-01-01T11:59:30Z"


def test_a_replica_kept_succeeded_does_not_keep_the_recovery_open() -> None:
    sim = _running(_job())
    sim.set("tiny-worker-0", "Succeeded")
    sim.step()
    sim.set(W2, "Failed", 3)
    sim.step()
    sim.gone("tiny-worker-1", "tiny-worker-3")
    sim.step()
    for name in NAMES[1:]:
        sim.set(name, "Running")
    p = sim.step()
    assert (p.status.restart_history or [])[0].recovered_time == "2026-01-01T12:00:00Z"
    assert p.status.last_recovery_seconds == 0


def test_a_second_failure_under_never_is_restarted_with_the_job_and_shown_deleted() -> None:
    sim = _running(_job(restart={"policy": "Never", "limit": 1}))
    sim.set("tiny-worker-1", "Failed", 3)
    sim.set(W2, "Failed", 3)
    p = sim.step()
    assert p.status.phase == "Running"
    replicas = _replicas(sim)
    assert (replicas["tiny-worker-1"]["phase"], replicas[W2]["phase"]) == ("Deleted", "Deleted")
    sim.gone("tiny-worker-0", "tiny-worker-3")
    assert _pods(sim.step()) == NAMES


@pytest.mark.parametrize(("resume", "lost"), [("Latest", 15), ("Never", 40)])
def test_steps_lost_count_from_the_checkpoint_the_replacement_resumes_from(
    resume: str, lost: int
) -> None:
    job = tiny_job(2, recoveryPolicy={}, checkpoint={"path": "/ckpt", "resume": resume})
    sim = GracefulSim(job)
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.set("tiny-worker-1", "Running")
    sim.step()
    sim.manifest["status"]["progress"] = {"step": 40, "lastUpdateTime": "2026-01-01T11:59:00Z"}
    sim.manifest["status"]["checkpoint"] = {"path": "/ckpt/step-25", "step": 25}
    sim.set("tiny-worker-0", "Failed", 1)
    p = sim.step()
    assert [e.steps_lost for e in p.status.restart_history or []] == [lost]
    assert p.status.steps_lost == lost
