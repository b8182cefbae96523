"""Running the `t9kjobs` command in-process, its exit code and output."""

from __future__ import annotations

import subprocess
import sys


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9kjobs.cli.main", *args],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
    )
