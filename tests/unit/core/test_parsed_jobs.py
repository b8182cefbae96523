"""`ParsedJobs`: a job's spec parsed and checked once while only its status and resourceVersion
change; anything else of the manifest (spec, labels, annotations, uid) parsed and checked
again; the status always the one just read; problems reported at every load as `parse_job`
and `check_job` report them; nothing kept of a job forgotten."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from t9kjobs import loading
from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import Problem
from t9kjobs.loading import JobError, ParsedJobs, check_job, load_documents, parse_job
from t9kjobs.manager import PluginManager
from tests.repo import REPO
from tests.unit.core.planner.tinyjob import TinyPlugin, tiny_job

KEY = ("TinyJob", "ns", "tiny")


class CountingPlugin(TinyPlugin):
    """TinyJob whose check is counted, and warns of an annotation `say` (what a check may read
    of the metadata), or raises when `crash` is set."""

    def __init__(self) -> None:
        self.checks = 0
        self.crash = False

    @hookimpl
    def t9kjobs_validate(self, job: Any) -> list[Any]:
        self.checks += 1
        if self.crash:
            raise RuntimeError("the check crashed")
        said = job.metadata.annotations.get("say")
        return [Problem("metadata.annotations.say", said, "warning")] if said else []


@pytest.fixture
def plugin() -> CountingPlugin:
    return CountingPlugin()


@pytest.fixture
def parsed(plugin: CountingPlugin) -> ParsedJobs:
    manager = PluginManager()
    manager.register(plugin, "tiny")
    return ParsedJobs(manager)


def manifest(version: str = "1", phase: str | None = None, **meta: Any) -> dict[str, Any]:
    job = tiny_job()
    job["metadata"] = {**job["metadata"], "resourceVersion": version, "generation": 1, **meta}
    if phase is not None:
        job["status"] = {"phase": phase}
    return job


def test_a_status_write_reuses_the_spec_and_reads_the_new_status(
    parsed: ParsedJobs, plugin: CountingPlugin, spec_parses: list[int]
) -> None:
    first, _ = parsed.load(KEY, manifest("1"))
    assert first.status.phase is None
    # As a status write leaves the job: a new resourceVersion and status, the same generation;
    # a manifest of its own (the store holds the API's answer), equal but for those.
    job, found = parsed.load(KEY, copy.deepcopy(manifest("2", "Running")))
    assert (len(spec_parses), plugin.checks) == (1, 1)
    assert job.status.phase == "Running"  # the status just read, never the one parsed first
    assert job.metadata.resource_version == "2"
    assert job.spec == first.spec and found == []
    again, _ = parsed.load(KEY, manifest("3", "Succeeded"))
    assert again.status.phase == "Succeeded" and len(spec_parses) == 1


def test_a_new_spec_is_parsed_and_checked_again(
    parsed: ParsedJobs, plugin: CountingPlugin, spec_parses: list[int]
) -> None:
    parsed.load(KEY, manifest("1"))
    changed = manifest("2", generation=2)
    changed["spec"]["replicaSpecs"][0]["replicas"] = 5
    job, _ = parsed.load(KEY, changed)
    assert job.spec.replica_specs[0].replicas == 5  # type: ignore[attr-defined]
    assert (len(spec_parses), plugin.checks) == (2, 2)


def test_a_spec_changed_without_a_new_generation_is_parsed_again(
    parsed: ParsedJobs, spec_parses: list[int]
) -> None:
    """The spec itself decides, not only the generation (a manifest may carry none)."""
    parsed.load(KEY, manifest("1"))
    changed = manifest("2")
    changed["spec"]["replicaSpecs"][0]["replicas"] = 3
    job, _ = parsed.load(KEY, changed)
    assert job.spec.replica_specs[0].replicas == 3  # type: ignore[attr-defined]
    assert len(spec_parses) == 2


def test_new_metadata_without_a_new_generation_is_checked_again(
    parsed: ParsedJobs, plugin: CountingPlugin
) -> None:
    """Labels and annotations change without a new generation, and the checks read them."""
    _, found = parsed.load(KEY, manifest("1"))
    assert found == []
    job, found = parsed.load(KEY, manifest("2", annotations={"say": "hello"}))
    assert [p.message for p in found] == ["hello"]
    assert job.metadata.annotations == {"say": "hello"}
    assert plugin.checks == 2
    _, found = parsed.load(KEY, manifest("3", "Running", annotations={"say": "hello"}))
    assert [p.message for p in found] == ["hello"] and plugin.checks == 2


def test_a_job_recreated_under_its_name_is_parsed_again(
    parsed: ParsedJobs, spec_parses: list[int]
) -> None:
    parsed.load(KEY, manifest("1"))
    job, _ = parsed.load(KEY, manifest("9", uid="another-uid"))
    assert job.metadata.uid == "another-uid" and len(spec_parses) == 2


EXAMPLES = sorted((REPO / "examples").glob("*job/*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLES])
def test_each_load_gives_what_parse_job_and_check_job_give(
    manager: PluginManager, path: Path
) -> None:
    """The examples, loaded as the operator reads them while their status is written."""
    [job] = load_documents(path.read_bytes(), str(path))
    job["metadata"] = {**job["metadata"], "namespace": "ns", "uid": "u", "generation": 1}
    key = (job["kind"], "ns", job["metadata"]["name"])
    parsed = ParsedJobs(manager)
    for version, phase in (("1", None), ("2", "Running"), ("3", "Succeeded")):
        job = {**job, "metadata": {**job["metadata"], "resourceVersion": version}}
        if phase is not None:
            job["status"] = {"phase": phase}
        expected = parse_job(job, manager)
        got, found = parsed.load(key, job)
        assert got == expected and got.status.phase == phase
        assert found == check_job(expected, manager)


def test_an_invalid_spec_is_a_job_error_at_every_load(
    parsed: ParsedJobs, spec_parses: list[int]
) -> None:
    bad = manifest("1")
    bad["spec"]["replicaSpecs"][0]["replicas"] = "two"
    for version in ("1", "2"):
        bad["metadata"]["resourceVersion"] = version
        with pytest.raises(JobError) as caught:
            parsed.load(KEY, bad)
        assert [p.path for p in caught.value.problems] == ["spec.replicaSpecs[0].replicas"]
    assert len(parsed) == 0


def test_an_invalid_status_is_a_job_error_even_with_the_spec_known(
    parsed: ParsedJobs, spec_parses: list[int]
) -> None:
    parsed.load(KEY, manifest("1"))
    bad = manifest("2")
    bad["status"] = {"conditions": "nope"}
    with pytest.raises(JobError) as caught:
        parsed.load(KEY, bad)
    assert [p.path for p in caught.value.problems] == ["status.conditions"]
    assert len(spec_parses) == 1  # the spec was known: only the status was wrong


def test_a_status_nested_too_deep_is_refused_with_the_spec_known(parsed: ParsedJobs) -> None:
    parsed.load(KEY, manifest("1"))
    deep: Any = "leaf"
    for _ in range(loading.MAX_DEPTH + 1):
        deep = [deep]
    bad = manifest("2")
    bad["status"] = {"conditions": deep}
    with pytest.raises(JobError, match="nested deeper than"):
        parsed.load(KEY, bad)


def test_a_check_that_raises_raises_at_every_load(
    parsed: ParsedJobs, plugin: CountingPlugin
) -> None:
    plugin.crash = True
    for version in ("1", "2"):
        with pytest.raises(RuntimeError, match="crashed"):
            parsed.load(KEY, manifest(version))
    assert plugin.checks == 2 and len(parsed) == 0
    plugin.crash = False
    parsed.load(KEY, manifest("3"))
    assert len(parsed) == 1


def test_one_entry_a_job_and_none_once_forgotten(parsed: ParsedJobs) -> None:
    other = ("TinyJob", "ns", "other")
    for version in ("1", "2", "3"):
        parsed.load(KEY, manifest(version, "Running"))
        parsed.load(other, manifest(version, name="other", uid="other-uid"))
    assert len(parsed) == 2
    parsed.forget(KEY)
    parsed.forget(other)
    assert len(parsed) == 0
