"""Generated child names read back one way only: a replica type has no `-` and starts with a
letter, so `<job>-<type>-<index>` (or a kind's `<job>-<type>`) names one pod of one job, and
the pods of two jobs of one namespace never share a name."""

from __future__ import annotations

import itertools

import pytest

from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.objects import pod_name

JOBS = ["a", "a-b", "a-b-c", "a-0", "a-b-0", "x1", "a-1-b"]
TYPES = ["b", "c", "bc", "b0", "worker", "master"]


def test_pod_names_of_different_jobs_or_types_never_meet() -> None:
    names: dict[str, tuple[str, str, int | None]] = {}
    for job, type_, index in itertools.product(JOBS, TYPES, [0, 1, 10, None]):
        name = f"{job}-{type_}" if index is None else pod_name(job, type_, index)
        assert names.setdefault(name, (job, type_, index)) == (job, type_, index), name


@pytest.mark.parametrize("type_", ["b-c", "0worker", "Worker", "work_er"])
def test_a_replica_type_that_would_make_names_ambiguous_is_refused(
    manager: PluginManager, type_: str
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {
            "replicaSpecs": [
                {"type": type_, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ]
        },
    }
    with pytest.raises(JobError) as caught:
        parse_job(job, manager)
    assert [str(p) for p in caught.value.problems] == [
        f"spec.replicaSpecs[0].type: {type_!r} is not a replica type: lowercase letters and"
        " digits, a letter first, no '-' (pod names <job>-<type>-<index> must name one pod of"
        " one job)"
    ]
