"""bench/pprof.py: a component that serves no profile is named with the reason, never hangs
the phase; the option reaches the cluster's environment."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from bench.cluster import Cluster
from bench.pprof import COMPONENTS, ControlPlaneProfiler
from bench.scale import parse_args


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])  # closed again when the block ends


def _pki(directory: Path) -> None:
    pki = directory / "pki"
    pki.mkdir()
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=admin", "-keyout", str(pki / "admin.key")),
            *("-out", str(pki / "admin.crt")),
        ],
        check=True,
        capture_output=True,
    )
    (pki / "ca.crt").write_bytes((pki / "admin.crt").read_bytes())


def test_an_unreachable_component_is_named_with_its_reason(tmp_path: Path) -> None:
    _pki(tmp_path)
    facts = {"CLUSTER_DIR": str(tmp_path), **{key: _closed_port() for key in COMPONENTS.values()}}
    profiler = ControlPlaneProfiler(facts, tmp_path, seconds=1)
    profiler.start()
    errors = profiler.join()
    assert sorted(errors) == sorted(COMPONENTS)
    assert all("refused" in reason.lower() for reason in errors.values()), errors
    assert not list(tmp_path.glob("pprof-*.pb.gz"))


def test_the_option_starts_the_cluster_with_profiling(tmp_path: Path) -> None:
    args = parse_args(["--phases", "ours", "--profile-control-plane", "30"])
    assert args.profile_control_plane == 30
    cluster = Cluster(tmp_path, 110, profiling=args.profile_control_plane > 0)
    assert cluster.env["T9KJOBS_PROFILING"] == "1"
    assert Cluster(tmp_path, 110).env["T9KJOBS_PROFILING"] == "0"
