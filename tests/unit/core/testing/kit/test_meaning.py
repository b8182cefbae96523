"""The pure parts of the kit's contracts on what a job means (`t9kjobs.testing.kit.meaning`):
where a launch line's options are read, what a world size may say, and a bare name that a
Service of the job serves."""

from __future__ import annotations

import shlex

import pytest

from t9kjobs.testing.kit.meaning import _holds, _launch_words
from t9kjobs.testing.kit.runnable import unresolved


def test_an_option_is_read_in_the_script_and_in_the_line_it_hands_to_ssh() -> None:
    remote = shlex.join(["torchrun", "--node_rank=1", "--nnodes", "2", "train.py"])
    script = "set -e\nexec ssh host " + shlex.quote(remote)
    found = _launch_words(["/bin/bash", "-c", script])
    assert "--node_rank=1" in found
    assert found[found.index("--nnodes") + 1] == "2"
    assert _launch_words(["python", "train.py", "--nnodes", "2"])[-1] == "2"


@pytest.mark.parametrize(
    ("value", "world", "holds"),
    [("4", 4, True), ("3", 4, False), ("4:10", 7, True), ("4:10", 11, False), ("x", 1, False)],
)
def test_a_world_size_is_the_count_or_an_elastic_range_holding_it(
    value: str, world: int, holds: bool
) -> None:
    assert _holds(value, world) is holds


def test_a_bare_name_resolves_when_a_service_of_the_job_has_it() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "j-master-0", "labels": {"r": "m"}}, "spec": {}}
    service = {"kind": "Service", "metadata": {"name": "j-master-0"}, "spec": {"selector": {}}}
    assert unresolved("j-master-0", "j", "ns", [pod, service]) is None
    found = unresolved("j-master-0", "j", "ns", [pod])
    assert found is not None and "bare name resolves only inside that pod" in found
