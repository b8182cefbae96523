"""The `$(...)` variables of a GenericJob: what each resolves to, and what is left alone."""

from __future__ import annotations

import pytest

from t9kjobs.plugins.generic.substitution import Variables, substitute, unresolved

WORKER_1 = Variables(
    replica_type="worker",
    rank=1,
    replicas={"master": 1, "worker": 3},
    job_name="j",
    ports={"torch": 2222},
)
NO_SERVICE = Variables("worker", 1, {"master": 1, "worker": 3}, "j", None)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("$(type)", "worker"),
        ("$(rank)", "1"),
        ("$(replicas[worker])", "3"),
        ("$(replicas[master])", "1"),
        ("$(service.port[torch])", "2222"),
        ("$(service.master[0].host)", "j-master-0"),
        ("$(service.worker[2].host)", "j-worker-2"),
        ("--addr=$(service.master[0].host):$(service.port[torch])", "--addr=j-master-0:2222"),
    ],
)
def test_each_variable_resolves(text: str, value: str) -> None:
    assert substitute(text, WORKER_1) == value
    assert unresolved(text, WORKER_1) == []


@pytest.mark.parametrize(
    ("text", "v"),
    [
        ("$(replicas[ps])", WORKER_1),  # no such replica type
        ("$(service.port[web])", WORKER_1),  # no such port
        ("$(service.ps[0].host)", WORKER_1),  # no such replica type
        ("$(service.worker[3].host)", WORKER_1),  # past the last worker
        ("$(service.master[0].host)", NO_SERVICE),  # no spec.service
        ("$(service.port[torch])", NO_SERVICE),
    ],
)
def test_an_unresolvable_variable_is_left_untouched_and_reported(text: str, v: Variables) -> None:
    line = f"a $(rank) {text} b"
    assert substitute(line, v) == f"a 1 {text} b"
    assert unresolved(line, v) == [text]


@pytest.mark.parametrize("text", ["$(HOME)", "$(replicas)", "$(service.port)", "$(RANK", "$rank"])
def test_what_is_no_variable_of_the_job_is_left_alone(text: str) -> None:
    """Kubernetes expands `$(VAR)` from the container's env itself."""
    assert substitute(text, WORKER_1) == text
    assert unresolved(text, WORKER_1) == []
