"""Version skew: a status written by a newer operator (fields, condition types and phases this
version does not know) is written back with what this version does not know left as it was,
never reset (docs/lifecycle.md, "Version skew")."""

from __future__ import annotations

from t9kjobs.loading import parse_job
from t9kjobs.models import JobStatus, dump
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

NEWER_CONDITION = {
    "type": "Suspended",
    "status": "False",
    "reason": "NotSuspended",
    "lastTransitionTime": "2026-01-01T11:00:00Z",
}


def newer_status() -> Sim:
    """A running job whose status a newer version wrote last."""
    sim = Sim(tiny_job(replicas=1))
    sim.step()
    sim.set("tiny-worker-0", "Running")
    sim.step()
    status = dict(sim.manifest["status"])
    status["queuePosition"] = {"queue": "default", "position": 0}
    status["phase"] = "Warming"
    conditions = [dict(c) for c in status["conditions"]]
    conditions[0]["observedGeneration"] = 4
    status["conditions"] = [*conditions, NEWER_CONDITION]
    sim.manifest["status"] = status
    return sim


def test_what_a_newer_version_wrote_is_kept_and_the_rest_goes_on() -> None:
    sim = newer_status()
    parse_job(sim.manifest, tiny_manager())  # no validation error: the job is not "invalid"
    sim.set("tiny-worker-0", "Succeeded")
    written = dump(sim.step().status)
    assert written["phase"] == "Succeeded"  # this version's judgement goes on
    assert written["queuePosition"] == {"queue": "default", "position": 0}
    assert NEWER_CONDITION in written["conditions"]
    assert written["conditions"][0]["observedGeneration"] == 4
    completed = [c for c in written["conditions"] if c["type"] == "Completed"]
    assert completed and completed[0]["status"] == "True"


def test_an_unknown_phase_is_recomputed_and_nothing_else_is_lost() -> None:
    sim = newer_status()
    p = sim.step()
    assert p.status.phase == "Running"
    written = dump(p.status)
    assert written["queuePosition"] == {"queue": "default", "position": 0}
    assert written["conditions"][-1] == NEWER_CONDITION


def test_a_status_round_trips_unchanged() -> None:
    raw = {
        "phase": "Running",
        "backoffCount": 1,
        "newField": [1, 2],
        "conditions": [
            {"type": "Running", "status": "True", "reason": "PodsRunning", "since": "x"},
            NEWER_CONDITION,
        ],
    }
    status = JobStatus.model_validate(raw)
    again = JobStatus.model_validate(dump(status))
    assert again == status and status.model_copy(deep=True) == status
    out = dump(again)
    assert out["newField"] == [1, 2] and out["conditions"][0]["since"] == "x"
    assert out["conditions"][1] == NEWER_CONDITION
