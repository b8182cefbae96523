"""The operator's Dockerfile read as instructions, and the build context `docker build .` would
send."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.repo import REPO


def build_context(dest: Path) -> Path:
    """What `docker build .` sends: the files .dockerignore allows (no `__pycache__`)."""
    dest.mkdir(parents=True)
    for line in DOCKERIGNORE.read_text().splitlines():
        if line.startswith("!"):
            source = REPO / line[1:].rstrip("/")
            if source.is_dir():
                ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
                shutil.copytree(source, dest / source.name, ignore=ignore)
            else:
                shutil.copy(source, dest / source.name)
    return dest


def instructions(text: str) -> list[list[Instruction]]:
    """The instructions of each stage, continuation lines joined and comments dropped; ARGs
    before the first FROM (the global ones) are a stage of their own, first."""
    stages: list[list[Instruction]] = [[]]
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        logical += stripped[:-1] + " " if stripped.endswith("\\") else stripped
        if stripped.endswith("\\"):
            continue
        name, _, args = logical.partition(" ")
        logical = ""
        if name.upper() == "FROM":
            stages.append([])
        stages[-1].append(Instruction(name.upper(), args.strip()))
    return stages


DOCKERIGNORE = REPO / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    name: str  # upper case: FROM, RUN, ...
    args: str
