"""A job's progress pattern that RE2 cannot read, or that has no group `done`, is refused where
the job is checked: by `t9kjobs validate` (and `client.submit`, through `load_job`) and by the
operator's verdict, as an invalid spec (a job not started fails; a running one is Degraded, its
pods kept), never taken as given to stall the progress reader (docs/security.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from t9kjobs.loading import JobError, load_job
from t9kjobs.manager import PluginManager
from t9kjobs.progress import ANNOTATION_PROGRESS_PATTERN
from tests.unit.core.cli.running_cli import run
from tests.unit.core.controller.failing_harness import Harness, condition
from tests.unit.core.controller.reconciling import JOB, KEY, settle, status_writes
from tests.unit.core.kube.fake_transport import FakeTransport

PATH = f'metadata.annotations["{ANNOTATION_PROGRESS_PATTERN}"]'
REFUSED = [
    ("(a+)+$", "no named group `done`"),
    (r"(?=step)step (?P<done>\d+)", "not a regular expression RE2 reads (invalid perl operator"),
    (r"(?P<done>\d+) (x)\2", "not a regular expression RE2 reads (invalid escape sequence"),
    ("x" * 600 + r"(?P<done>\d+)", "a pattern of 613 characters; at most 512 are taken"),
]


def _with_pattern(pattern: str) -> Any:
    job = copy.deepcopy(JOB)
    job["metadata"]["annotations"] = {ANNOTATION_PROGRESS_PATTERN: pattern}
    return job


@pytest.mark.parametrize(("pattern", "said"), REFUSED)
def test_the_checks_refuse_a_pattern_re2_cannot_take(
    manager: PluginManager, pattern: str, said: str
) -> None:
    with pytest.raises(JobError) as refused:
        load_job(_with_pattern(pattern), manager)
    [problem] = [p for p in refused.value.problems if p.path == PATH]
    assert problem.severity == "error" and said in problem.message


@pytest.mark.parametrize("pattern", ["", r"\[(?P<done>\d+) of (?P<total>\d+)\]"])
def test_a_pattern_re2_reads_with_a_done_group_passes(manager: PluginManager, pattern: str) -> None:
    load_job(_with_pattern(pattern), manager)  # "" is no pattern, as the reader takes it


def test_validate_names_the_annotation() -> None:
    out = run("validate", "-", stdin=yaml.safe_dump(_with_pattern("(a+)+$")))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"{PATH}: no named group `done`" in out.stderr


def test_the_operator_fails_a_new_job_whose_pattern_it_refuses(manager: PluginManager) -> None:
    h = Harness(manager, FakeTransport(), _with_pattern("(a+)+$"))
    settle(h.reconciler, KEY)
    [status] = status_writes(h.fake)
    assert status["phase"] == "Failed"
    ok, reason, message = condition(status, "Failed")
    assert (ok, reason) == ("True", "InvalidSpec") and f"{PATH}: no named group" in message
    assert not [p for m, p, _ in h.fake.requests if m == "POST" and p.endswith("/pods")]
    assert [(e["type"], e["reason"]) for e in h.events()] == [("Warning", "InvalidSpec")]


def test_a_running_job_given_such_a_pattern_is_degraded_and_keeps_its_pods(
    manager: PluginManager,
) -> None:
    h = Harness(manager, FakeTransport(), JOB)
    settle(h.reconciler, KEY)
    created = [p for m, p, _ in h.fake.requests if m == "POST" and p.endswith("/pods")]
    assert created
    stored = h.jobs.get(KEY[1], KEY[2])
    assert stored is not None
    h.jobs.put(_with_pattern(r"(?<!no )step (?P<done>\d+)") | {"status": stored.get("status")})
    settle(h.reconciler, KEY)
    status = status_writes(h.fake)[-1]
    ok, reason, message = condition(status, "Degraded")
    assert (ok, reason) == ("True", "InvalidSpec") and PATH in message
    assert status.get("phase") != "Failed"
    assert not [p for m, p, _ in h.fake.requests if m == "DELETE" and "/pods/" in p]
    assert ("Warning", "InvalidSpec") in [(e["type"], e["reason"]) for e in h.events()]
