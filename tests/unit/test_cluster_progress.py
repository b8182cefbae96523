"""A first `make cluster-up` build says what it builds and how far it is: `cluster_step`
(hack/cluster/common.sh) prints a line when a step starts, one every
$T9KJOBS_PROGRESS_EVERY seconds while it runs, and one when it ends, on stderr only."""

from __future__ import annotations

import re
import subprocess

from tests.unit.conftest import REPO

COMMON = REPO / "hack" / "cluster" / "common.sh"


def step(command: str) -> subprocess.CompletedProcess[str]:
    script = f'source "{COMMON}"; out=$(cluster_step "build 1/2: things" {command}); rc=$?; echo "[$out] rc=$rc"'
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "T9KJOBS_PROGRESS_EVERY": "1"},
        timeout=30,
        check=False,
    )


def test_a_step_says_when_it_starts_how_long_it_has_run_and_when_it_is_done() -> None:
    run = step("bash -c 'sleep 2.5; echo /the/bin/dir'")
    assert run.stdout == "[/the/bin/dir] rc=0\n"  # the command's stdout, untouched
    lines = run.stderr.splitlines()
    assert lines[0] == "[cluster] build 1/2: things ..."
    assert lines[1:3] == [
        "[cluster] build 1/2: things: 1 s so far",
        "[cluster] build 1/2: things: 2 s so far",
    ]
    assert re.fullmatch(r"\[cluster\] build 1/2: things: done in [23] s", lines[-1]), lines


def test_a_failed_step_says_so_and_keeps_its_exit_code() -> None:
    run = step("bash -c 'echo oops >&2; exit 3'")
    assert run.stdout == "[] rc=3\n"
    lines = run.stderr.splitlines()
    assert lines[:2] == ["[cluster] build 1/2: things ...", "oops"]
    assert re.fullmatch(r"\[cluster\] build 1/2: things: failed \(exit 3\) after [01] s", lines[2])
