"""What the planner decides that the reconciler used to (#35): the validation warnings said as
Events when pods are created, routine Events left out unless asked for, how long a new job's
first status may wait (`Plan.status_due_in`, the fold), when a change of replicas alone may
wait, that a plan which creates leaves its status to the next (`Plan.status_after_creations`),
and `ready` and `runMode` in every status it plans."""

from __future__ import annotations

from datetime import timedelta

from t9kjobs.kinds import Problem
from t9kjobs.loading import parse_job
from t9kjobs.models import dump
from t9kjobs.planner import FOLDED_REPLICAS_SECONDS, FOLDED_STATUS_SECONDS, Observed, Plan, plan
from t9kjobs.testing.fixtures import apply_plan, pod_in_phase
from t9kjobs.vocabulary import Obj
from tests.unit.conftest import NOW
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

MANAGER = tiny_manager()
WARNING = Problem("spec.replicaSpecs[0].template.spec.containers[0].command", "ignored", "warning")
ERROR = Problem("spec.x", "not a warning", "error")


def planned(
    manifest: Obj, objects: dict[tuple[str, str], Obj], at: timedelta = timedelta(), **kw: object
) -> Plan:
    job = parse_job(manifest, MANAGER)
    return plan(job, Observed(dict(objects)), NOW + at, MANAGER.hooks_for(job.kind), **kw)  # type: ignore[arg-type]


def created(manifest: Obj) -> dict[tuple[str, str], Obj]:
    """The objects of the job's first plan, created at NOW."""
    objects = apply_plan({}, planned(manifest, {}))
    for (kind, _), obj in objects.items():
        if kind == "Pod":
            obj["metadata"]["creationTimestamp"] = "2026-01-01T12:00:00Z"
    return objects


def test_warnings_are_warning_events_first_and_only_with_new_pods() -> None:
    manifest = tiny_job()
    first = planned(manifest, {}, warnings=[WARNING, ERROR])
    said = [(e.type, e.reason, e.message) for e in first.events]
    assert said[0] == ("Warning", "SpecWarning", f"{WARNING.path}: ignored")
    assert [e.reason for e in first.events].count("SpecWarning") == 1  # the error is not said
    again = planned(manifest, created(manifest), warnings=[WARNING])  # nothing to create
    assert "SpecWarning" not in [e.reason for e in again.events]


def test_routine_events_are_left_out_unless_asked_for() -> None:
    manifest = tiny_job()
    asked = planned(manifest, {}, routine_events=True)
    assert [(e.reason, e.routine) for e in asked.events] == [("PodsCreated", True)]
    assert planned(manifest, {}, routine_events=False).events == ()
    assert planned(manifest, {}).events == asked.events  # as the kit and the fixtures see them


def test_a_new_jobs_first_status_waits_for_its_pods_to_run_three_seconds_at_most() -> None:
    manifest = tiny_job()
    objects = created(manifest)
    assert planned(manifest, objects).status_due_in == FOLDED_STATUS_SECONDS
    assert planned(manifest, objects, timedelta(seconds=2)).status_due_in == 1.0
    assert planned(manifest, objects, timedelta(seconds=2.5)).status_due_in == 0.5
    assert planned(manifest, objects, timedelta(seconds=3)).status_due_in is None
    assert planned(manifest, objects, timedelta(seconds=4)).status_due_in is None
    running = {k: pod_in_phase(o, "Running") if k[0] == "Pod" else o for k, o in objects.items()}
    assert planned(manifest, running).status_due_in is None  # Running is written at once


def test_only_a_plain_pending_of_a_job_without_status_waits() -> None:
    manifest = tiny_job()
    assert planned(manifest, {}).status_due_in is None  # no pod yet: nothing to count from
    objects = created(manifest)
    one = dict(objects)
    one.pop(("Pod", next(n for k, n in one if k == "Pod")))
    assert planned(manifest, one).status_due_in is None  # a pod to create: CreatingPods
    stored = {**manifest, "status": dump(planned(manifest, objects).status)}
    assert planned(stored, objects).status_due_in is None  # it has a status: written now
    failing = {
        k: pod_in_phase(o, "Failed", 1) if k == ("Pod", "tiny-worker-0") else o
        for k, o in objects.items()
    }
    assert planned(manifest, failing).status_due_in is None  # more to say than Pending
    deadline = tiny_job(run_policy={"activeDeadlineSeconds": 1})
    late = planned(deadline, created(deadline), timedelta(seconds=2))
    assert late.delete and late.status_due_in is None


def _ended(pod: Obj, at: str) -> Obj:
    """`pod` Succeeded, its container ended at `at` (as a kubelet, and KWOK, say)."""
    ended = pod_in_phase(pod, "Succeeded")
    for cs in ended["status"]["containerStatuses"]:
        cs["state"]["terminated"].update(startedAt="2026-01-01T11:59:50Z", finishedAt=at)
    return ended


def test_a_change_of_replicas_alone_waits_to_be_folded_into_a_later_write() -> None:
    manifest = tiny_job(replicas=3)
    running = {
        k: pod_in_phase(o, "Running") if k[0] == "Pod" else o for k, o in created(manifest).items()
    }
    stored = {**manifest, "status": dump(planned(manifest, running).status)}
    assert planned(stored, running).status_changed is False
    # One worker ended 1 s before now: its job still runs, the write waits 4 s more.
    one = dict(running)
    one[("Pod", "tiny-worker-1")] = _ended(
        running[("Pod", "tiny-worker-1")], "2026-01-01T11:59:59Z"
    )
    now = planned(stored, one)
    assert now.status.phase == "Running" and now.status.aggregate.succeeded == 1
    assert now.status_due_in == FOLDED_REPLICAS_SECONDS - 1
    assert planned(stored, one, timedelta(seconds=4)).status_due_in is None
    # A pod that says nothing of when it changed is written at once.
    silent = {
        **one,
        ("Pod", "tiny-worker-1"): pod_in_phase(running[("Pod", "tiny-worker-1")], "Succeeded"),
    }
    assert planned(stored, silent).status_due_in is None
    # So is a change of anything but the replicas: every worker ended, the job Succeeded.
    done = {
        k: _ended(o, "2026-01-01T11:59:59Z") if k[0] == "Pod" else o for k, o in running.items()
    }
    verdict = planned(stored, done)
    assert verdict.status.phase == "Succeeded" and verdict.status_due_in is None


def test_a_plan_that_creates_leaves_its_status_to_the_next_reconcile() -> None:
    manifest = tiny_job()
    first = planned(manifest, {})
    assert first.create and first.status_changed and first.status_after_creations
    assert not planned(manifest, created(manifest)).status_after_creations
    deadline = tiny_job(run_policy={"activeDeadlineSeconds": 1})
    late = planned(deadline, created(deadline), timedelta(seconds=2))
    assert late.delete and not late.status_after_creations


def test_every_planned_status_counts_ready_replicas_and_names_its_run_mode() -> None:
    manifest = tiny_job(replicas=2)
    first = planned(manifest, {})
    assert (first.status.ready, first.status.run_mode) == ("0/2", "Immediate")
    objects = {
        k: pod_in_phase(o, "Running") if k[0] == "Pod" else o for k, o in created(manifest).items()
    }
    assert planned(manifest, objects).status.ready == "2/2"
    paused = tiny_job(runMode={"pause": {"enabled": True}})
    assert planned(paused, {}).status.ready == "0/0"
    assert planned(paused, {}).status.run_mode == "Pause"
