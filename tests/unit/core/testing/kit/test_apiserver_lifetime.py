"""The kit's own etcd and kube-apiserver never outlive it, even when its process is killed
outright (no teardown runs): SIGKILLed pytest runs had left them running."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from t9kjobs.testing.harness.apiserver import find_binaries

# Starts the kit's server, says so, then waits to be killed.
HOLDER = """
import time
from t9kjobs.testing.harness.apiserver import local_api_server
with local_api_server() as server:
    print(server.started, flush=True)
    time.sleep(600)
"""


def data_dir(pid: int) -> Path | None:
    """The kit's folder of a server process: its etcd's --data-dir is <folder>/etcd."""
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        for arg in cmdline.read().decode().split("\0"):
            if arg.startswith("--data-dir="):
                return Path(arg.partition("=")[2]).parent
    return None


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as found:
        return [int(p) for p in found.read().split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, waiting for its reaper
        return stat.read().split(") ")[1][0] != "Z"


def test_a_kit_killed_outright_takes_its_api_server_with_it() -> None:
    assert find_binaries() is not None, "etcd and kube-apiserver: make cluster-build"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    folders: list[Path] = []
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "True\n"  # started by the kit, not a cluster's
        pids = children(holder.pid)
        folders = [f for f in map(data_dir, pids) if f is not None]
        assert len(pids) == 2 and all(alive(p) for p in pids), pids  # etcd, kube-apiserver
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in pids if alive(p)]
    for pid in left:  # not to leave them running when the test fails
        os.kill(pid, signal.SIGKILL)
    for folder in folders:  # the kit, killed, could not remove it
        shutil.rmtree(folder, ignore_errors=True)
    assert left == [], f"still running after the kit was killed: {left}"
