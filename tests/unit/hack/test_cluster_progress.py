"""A first `make cluster-up` build says what it builds and how far it is: `cluster_step`
(hack/cluster/common.sh) prints a line when a step starts, one every
$T9KJOBS_PROGRESS_EVERY seconds while it runs, and one when it ends, on stderr only."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

from tests.repo import REPO

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
    run = step("bash -c 'sleep 3.5; echo /the/bin/dir'")
    assert run.stdout == "[/the/bin/dir] rc=0\n"  # the command's stdout, untouched
    lines = run.stderr.splitlines()
    assert lines[0] == "[cluster] build 1/2: things ...", lines
    assert re.fullmatch(r"\[cluster\] build 1/2: things: done in [34] s", lines[-1]), lines
    # A tick a second; a busy machine may run one late (the time it shows moves with it), so
    # the count is at least two and the times go up from the first second, one at a time or
    # more, and never past the end.
    ticks = [re.fullmatch(r"\[cluster\] build 1/2: things: (\d+) s so far", x) for x in lines[1:-1]]
    assert all(ticks) and len(ticks) >= 2, lines
    seconds = [int(t.group(1)) for t in ticks if t]
    assert seconds[0] in (1, 2), lines
    assert all(a < b for a, b in itertools.pairwise(seconds)), lines
    assert seconds[-1] <= int(lines[-1].split()[-2]), lines


def test_a_failed_step_says_so_and_keeps_its_exit_code() -> None:
    run = step("bash -c 'echo oops >&2; exit 3'")
    assert run.stdout == "[] rc=3\n"
    lines = run.stderr.splitlines()
    assert lines[:2] == ["[cluster] build 1/2: things ...", "oops"]
    assert re.fullmatch(r"\[cluster\] build 1/2: things: failed \(exit 3\) after [01] s", lines[2])


def test_a_first_cluster_up_builds_the_control_plane_under_its_step(tmp_path: Path) -> None:
    """up.sh with no binaries in the cache runs build.sh as the step's command (a description
    split over two arguments once ran its second half as the command: exit 127 on every
    fresh machine). build.sh is a stand-in here that records its run and fails."""
    hack = tmp_path / "cluster"
    shutil.copytree(COMMON.parent, hack)
    # The Go module it reads its versions from stays in the repository (the wheel's copy).
    gomod = COMMON.parents[2] / "core" / "testing" / "harness" / "gomod"
    marker = tmp_path / "built"
    (hack / "build.sh").write_text(f"#!/bin/bash\ntouch {marker}\nexit 7\n")
    (hack / "build.sh").chmod(0o755)
    run = subprocess.run(
        ["bash", str(hack / "up.sh")],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "T9KJOBS_CACHE": str(tmp_path / "c"),
            "CLUSTER_GOMOD_DIR": str(gomod),
        },
        timeout=30,
        check=False,
    )
    assert marker.exists(), run.stderr
    assert run.returncode == 7, run.stderr
    what = (
        "build 1/1: control plane (etcd, kube-apiserver, kube-controller-manager,"
        " kube-scheduler, kubectl, kwok) from Go modules"
    )
    lines = run.stderr.splitlines()
    assert lines[0] == f"[cluster] {what} ..."
    assert re.fullmatch(
        rf"\[cluster\] {re.escape(what)}: failed \(exit 7\) after [01] s", lines[-1]
    )
