"""A job's progress in its status (`t9kjobs.planner.progress_status`): written from the controller's
readings, estimated from the pace between reports, frozen when the job fails, 100 percent when
it succeeds; and read from the deciding replica while the job runs."""

from __future__ import annotations

from datetime import timedelta

from t9kjobs.loading import parse_job
from t9kjobs.models import JobStatus, TrainingProgress
from t9kjobs.planner import Observed, Plan, ProgressSource, Reading, plan
from t9kjobs.planner.progress_status import (
    MAX_REMAINING_SECONDS,
    complete_progress,
    record_progress,
)
from t9kjobs.progress import INT64_MAX, Report
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job


def _reading(step: int, total: int | None = 100, seconds: float = 0.0, **metrics: float) -> Reading:
    return Reading(Report(step, total, dict(metrics)), NOW + timedelta(seconds=seconds), "worker-0")


def test_a_reading_is_written_with_its_time_and_metrics() -> None:
    status = JobStatus()
    record_progress(status, _reading(10, loss=0.5))
    assert status.progress == TrainingProgress(
        step=10,
        total_steps=100,
        percent=10.0,
        remaining_seconds=None,  # no pace from one report
        metrics={"loss": 0.5},
        replica="worker-0",
        last_update_time="2026-01-01T12:00:00Z",
    )


def test_the_time_left_comes_from_the_pace_between_reports() -> None:
    status = JobStatus()
    record_progress(status, _reading(10))
    record_progress(status, _reading(30, seconds=40))  # 20 steps in 40 s: 70 left take 140 s
    assert status.progress is not None and status.progress.remaining_seconds == 140
    record_progress(status, _reading(30, seconds=60))  # no step made: the estimate stays
    assert status.progress.remaining_seconds == 140
    record_progress(status, _reading(5, seconds=80))  # a restarted program: no pace yet
    assert status.progress.remaining_seconds is None and status.progress.step == 5


def test_the_time_left_is_bounded_and_fits_the_api() -> None:
    """A crawl of a step a day towards a total of 2**63 - 1 would be 8e23 seconds left: more
    than the API's int64 holds. The status says at most MAX_REMAINING_SECONDS."""
    status = JobStatus()
    record_progress(status, _reading(1, INT64_MAX))
    record_progress(status, _reading(2, INT64_MAX, seconds=86400))
    progress = status.progress
    assert progress is not None and progress.remaining_seconds == MAX_REMAINING_SECONDS
    assert MAX_REMAINING_SECONDS < INT64_MAX and progress.percent == 0.0
    record_progress(status, _reading(INT64_MAX, INT64_MAX, seconds=86401))
    assert (status.progress.remaining_seconds, status.progress.percent) == (0, 100.0)


def test_an_older_reading_changes_nothing() -> None:
    status = JobStatus()
    record_progress(status, _reading(30, seconds=60))
    record_progress(status, _reading(10, seconds=0))
    assert status.progress is not None and status.progress.step == 30
    record_progress(status, None)
    assert status.progress.step == 30


def test_success_is_the_whole_run() -> None:
    status = JobStatus()
    complete_progress(status)
    assert status.progress is None  # nothing reported: nothing made up
    record_progress(status, _reading(95))
    complete_progress(status)
    assert status.progress is not None
    assert (status.progress.step, status.progress.percent, status.progress.remaining_seconds) == (
        100,
        100.0,
        0,
    )


def _running(sim: Sim) -> None:
    sim.step()
    for name in ("tiny-worker-0", "tiny-worker-1"):
        sim.set(name, "Running")
    sim.step()


def test_a_running_job_is_read_from_its_deciding_replica() -> None:
    sim = Sim(tiny_job(replicas=2))
    assert sim.step().progress_source is None  # pending: nothing to read yet
    for name in ("tiny-worker-0", "tiny-worker-1"):
        sim.set(name, "Running")
    p = sim.step()
    assert p.status.phase == "Running"
    assert p.progress_source is not None
    assert (p.progress_source.pod, p.progress_source.replica) == ("tiny-worker-0", "worker-0")
    assert p.progress_source.uid == sim.pod("tiny-worker-0")["metadata"]["uid"]


def test_the_jobs_own_pattern_goes_with_its_source() -> None:
    manifest = tiny_job(replicas=2)
    pattern = r"\[(?P<done>\d+) of (?P<total>\d+)\]"
    manifest["metadata"]["annotations"] = {"batch.tensorstack.dev/progress-pattern": pattern}
    sim = Sim(manifest)
    _running(sim)
    source = sim.plan().progress_source
    assert isinstance(source, ProgressSource) and source.pattern == pattern


def _planned(sim: Sim, reading: Reading | None) -> Plan:
    job = parse_job(sim.manifest, sim.manager)
    observed = Observed(dict(sim.objects), progress=reading)
    return plan(job, observed, sim.now, sim.manager.hooks_for(job.kind))


def test_a_plan_writes_the_reading_and_freezes_it_when_the_job_fails() -> None:
    sim = Sim(tiny_job(replicas=2, restart="Never"))
    _running(sim)
    p = _planned(sim, _reading(40))
    assert p.status_changed and p.status.progress is not None and p.status.progress.step == 40
    sim.manifest["status"] = p.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    sim.set("tiny-worker-0", "Failed", 3)
    failed = _planned(sim, _reading(40))
    assert failed.status.phase == "Failed"
    assert failed.status.progress is not None
    assert (failed.status.progress.step, failed.status.progress.percent) == (40, 40.0)
    assert failed.progress_source is None  # nothing more is read
    sim.manifest["status"] = failed.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    later = _planned(sim, _reading(60, seconds=30))  # a late reading of a finished job
    assert later.status.progress is not None and later.status.progress.step == 40


def test_a_plan_that_ends_the_job_well_makes_it_100_percent() -> None:
    sim = Sim(tiny_job(replicas=2))
    _running(sim)
    sim.set("tiny-worker-0", "Succeeded", 0)
    sim.set("tiny-worker-1", "Succeeded", 0)
    p = _planned(sim, _reading(97, seconds=5))
    assert p.status.phase == "Succeeded"
    assert p.status.progress is not None
    assert (p.status.progress.step, p.status.progress.percent) == (100, 100.0)
