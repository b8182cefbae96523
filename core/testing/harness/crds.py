"""Installing the CRDs on a test cluster, as the README tells a user to: the stream that
`t9kjobs crds --stdout` prints, applied server-side, then waited for until the API server serves
every kind. The end-to-end tests, the demo and the benchmark all start this way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from t9kjobs.crds import crds
from t9kjobs.manager import load_plugins

__all__ = ["install_crds"]


def install_crds(kubectl: str | Path, kubeconfig: str | Path, timeout: float = 60) -> str:
    """Apply the CRDs of every kind the installed plugins serve (`T9KJOBS_BLOCK_PLUGINS`
    applies) and wait until each is Established; kubectl's report of the apply."""
    stream = "".join(text for _, text in crds(load_plugins()))

    def run(*args: str, stdin: str | None = None) -> str:
        argv = [str(kubectl), "--kubeconfig", str(kubeconfig), *args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    applied = run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=stream)
    for doc in yaml.safe_load_all(stream):
        name = doc["metadata"]["name"]
        run("wait", "--for=condition=Established", f"--timeout={timeout:g}s", f"crd/{name}")
    return applied
