"""The local tier: `Client(backend="local")` with no cluster, its jobs processes of this machine.

Training needs torch: Debian's python3-torch (1.13, as the trainer image has it) is installed
when missing and its /usr/bin/python3 runs the replicas (`torch_python`). Debian's torchrun on
Python 3.11 dies at start unless `--redirects` and `--tee` name a single stream (the trainer
image patches the line instead: hack/images/trainer/Containerfile); torchrun reads both from
PET_REDIRECTS and PET_TEE, which `TORCHRUN_ENV` sets to stderr: stdout is untouched.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from t9kjobs.client.local import LocalClient
from tests.repo import REPO

DEBIAN_PYTHON = "/usr/bin/python3"
TORCHRUN_ENV = {"PET_REDIRECTS": "2", "PET_TEE": "2"}


@pytest.fixture(scope="session")
def torch_python() -> str:
    """An interpreter with torch: Debian's, python3-torch installed when missing (without its
    recommended packages: a desktop's GTK and Qt, nothing torch needs)."""
    script = str(REPO / "hack/debian-packages.sh")
    subprocess.run(["bash", script, "--no-recommends", "python3-torch"], check=True)
    return DEBIAN_PYTHON


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalClient]:
    """A local client with no cluster; every job it still runs is stopped after the test."""
    client = LocalClient(folder=tmp_path)
    yield client
    for job in client.list():
        client.delete(job)
