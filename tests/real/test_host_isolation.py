"""The real node leaves the host as it found it.

Snapshots the host's sysctls, firewall rules, routes, interfaces, addresses, mounts, network
namespaces and cgroups before ``up.sh``, while a pod runs, and after ``down.sh``; runs up, down,
up, down in a cluster dir of its own. While the node runs the host gains only its bridge, the
pods' veths, their on-link route and the pods' cgroups; after down nothing differs and no process
of the cluster is left. Runs first in the real tier (conftest), with no other real node up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import HACK, Cluster, _read_env
from tests.real.conftest import TRAINER_IMAGE

Snapshot = dict[str, set[str]]


def _run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.stdout + (
        f"<exit {proc.returncode}: {proc.stderr.strip()}>" if proc.returncode else ""
    )


def _sysctls() -> dict[str, str]:
    """Every readable sysctl, less the per-interface ones (interfaces are compared apart)."""
    values: dict[str, str] = {}
    for path in Path("/proc/sys").rglob("*"):
        rel = str(path.relative_to("/proc/sys"))
        parts = rel.split("/")
        per_interface = len(parts) > 3 and parts[0] == "net" and parts[2] in ("conf", "neigh")
        if per_interface and parts[3] not in ("all", "default"):
            continue
        try:
            if path.is_file() and os.access(path, os.R_OK):
                values[rel] = path.read_text(errors="replace").strip()
        except OSError:
            continue
    return values


def _cgroups() -> set[str]:
    return {
        str(path)
        for hierarchy in Path("/sys/fs/cgroup").iterdir()
        if hierarchy.is_dir()
        for path in hierarchy.rglob("*t9kjobs*")
        if path.is_dir()
    }


def snapshot(volatile: set[str]) -> Snapshot:
    return {
        "sysctl": {f"{k}={v}" for k, v in _sysctls().items() if k not in volatile},
        "iptables": set(_run("iptables-save").splitlines()) - {""},
        "ip6tables": set(_run("ip6tables-save").splitlines()) - {""},
        "nftables": set(_run("nft", "list", "ruleset").splitlines()) - {""},
        "routes": set(_run("ip", "route", "show", "table", "all").splitlines()),
        "routes6": set(_run("ip", "-6", "route", "show", "table", "all").splitlines()),
        "links": {
            line.split(":")[1].strip().split("@")[0]
            for line in _run("ip", "-o", "link").splitlines()
        },
        "addresses": {
            " ".join(line.split()[1:4]) for line in _run("ip", "-o", "addr").splitlines()
        },
        "mounts": {
            " ".join(line.split()[3:5]) + " " + line.split(" - ")[1].split()[0]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
        },
        "netns": set(_run("ip", "netns", "list").splitlines()),
        "cgroups": _cgroups(),
    }


def volatile_sysctls() -> set[str]:
    """Sysctls that change by themselves (counters, random values): read twice, 1 s apart."""
    first = _sysctls()
    time.sleep(1)
    second = _sysctls()
    changing = {k for k in first.keys() | second.keys() if first.get(k) != second.get(k)}
    # counters that move with any activity on the machine
    changing |= {k for k in first if k.startswith(("fs/", "kernel/random/", "kernel/ns_last_pid"))}
    changing |= {k for k in first if "conntrack_count" in k or k.endswith("_stat")}
    return changing


def diff(before: Snapshot, after: Snapshot) -> dict[str, dict[str, list[str]]]:
    return {
        key: {"gone": sorted(before[key] - after[key]), "new": sorted(after[key] - before[key])}
        for key in before
        if before[key] != after[key]
    }


def leftover_processes(directory: Path) -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def script(name: str, directory: Path) -> None:
    env = {**os.environ, "T9KJOBS_NODES": "real", "T9KJOBS_CLUSTER_DIR": str(directory)}
    proc = subprocess.run(
        ["bash", str(HACK / name)], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stderr[-4000:]}"


def run_a_pod(directory: Path) -> None:
    """A pod of the trainer image, so containers, volumes and a pod network really exist."""
    cluster = Cluster(directory, started_here=False)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "host-check", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": TRAINER_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "600"],
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    cluster.poll(
        lambda: (
            cluster.kubectl("get", "pod", "host-check", "-o", "jsonpath={.status.phase}").stdout
            == "Running"
        ),
        timeout=180,
        interval=1,
        message="pod host-check Running",
    )


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A cluster dir short enough for kubelet's unix sockets (up.sh refuses a longer one):
    pytest's tmp_path grows with its run counter and went past the limit in CI."""
    directory = Path(tempfile.mkdtemp(prefix="t9k-iso-"))
    yield directory / "cluster"
    shutil.rmtree(directory, ignore_errors=True)


SNAPSHOT_TOOLS = ("iptables", "nftables", "iproute2")  # iptables-save, nft, ip


def install_snapshot_tools() -> None:
    """The programs `snapshot` reads the host with. On a fresh machine the node's own packages
    bring iptables and nftables (containernetworking-plugins depends on them), but only when
    up.sh runs: the first snapshot, taken before, found no iptables-save (CI, empty machine)."""
    proc = subprocess.run(
        ["bash", str(HACK.parent / "debian-packages.sh"), *SNAPSHOT_TOOLS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"installing {SNAPSHOT_TOOLS} failed:\n{proc.stderr[-4000:]}"


def test_up_down_up_down_leaves_the_host_as_it_was(short_dir: Path) -> None:
    install_snapshot_tools()  # `ip` too, which the next line runs
    bridge = subprocess.run(["ip", "link", "show", "t9kjobs0"], capture_output=True, check=False)
    if bridge.returncode == 0:
        pytest.fail("a real node is already up on this machine (bridge t9kjobs0): stop it first")
    directory = short_dir
    volatile = volatile_sysctls()
    before = snapshot(volatile)
    for round_ in (1, 2):
        try:
            script("up.sh", directory)
            run_a_pod(directory)
            during = diff(before, snapshot(volatile))
            bridge_name = _read_env(directory / "cluster.env")["NODE_BRIDGE"]
        finally:
            script("down.sh", directory)
        after = snapshot(volatile)
        assert diff(before, after) == {}, f"round {round_}: the host changed"
        assert leftover_processes(directory) == [], f"round {round_}: processes left"
        # While the node ran, the host had only gained what is ours and goes with down.sh.
        allowed = {"links", "addresses", "routes", "routes6", "cgroups"}
        assert set(during) <= allowed, during
        assert bridge_name in during["links"]["new"]
        assert all(
            link == bridge_name or link.startswith("veth") for link in during["links"]["new"]
        ), during["links"]
        assert during["links"]["gone"] == [] and during.get("routes", {}).get("gone", []) == []
        assert any("t9kjobs-node" in cg for cg in during["cgroups"]["new"])
