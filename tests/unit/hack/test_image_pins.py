"""What the images install from PyPI is pinned by hash, and pip is told to insist on it.

The trainer image (hack/images/trainer) installs its `requirements.txt`, the operator image
(the repository's Dockerfile) its `requirements.lock`: every requirement is `name==version` with
at least one `--hash=sha256:`, and the install runs with `--require-hashes`, so pip refuses a
file whose hash is not listed and a requirement that is not pinned. The operator's lock must
still satisfy pyproject.toml (its dependencies and its build backend), and the project itself is
installed with nothing more from the index. Hashes are written by hack/images/pin_hashes.py.
The trainer image also has the non-root user `trainer` for an sshd of its own, and keeps root
as its user. Checked without building: hack/images/check.sh checks the built image.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.repo import REPO
from tests.unit.deploy.dockerfile import instructions

TRAINER = REPO / "hack" / "images" / "trainer"
LOCK = REPO / "requirements.lock"
_COMMENT = re.compile(r"(^|\s+)#.*$")  # as pip strips comments
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def requirements(path: Path) -> dict[str, tuple[Requirement, list[str]]]:
    """Canonical name -> (requirement, its hash options), read as pip reads the file: lines
    joined at a backslash, then comments dropped."""
    joined = re.sub(r"\\\n", " ", path.read_text())
    found: dict[str, tuple[Requirement, list[str]]] = {}
    for line in joined.splitlines():
        words = _COMMENT.sub("", line).split()
        if not words:
            continue
        requirement = Requirement(words[0])
        name = canonicalize_name(requirement.name)
        assert name not in found, f"{path.name}: {name} twice"
        found[name] = (requirement, words[1:])
    return found


def run_lines(text: str) -> list[str]:
    """The RUN instructions of every stage, continuation lines joined, comments dropped."""
    return [i.args for stage in instructions(text) for i in stage if i.name == "RUN"]


def pip_installs(run: str) -> list[list[str]]:
    """The words of each `pip install` command of a RUN line (split at &&)."""
    commands = [shlex.split(part) for part in run.split("&&")]
    pip = [w for w in commands if any(x == "pip" or x.endswith("/pip") for x in w)]
    return [words for words in pip if "install" in words]


@pytest.mark.parametrize("path", [TRAINER / "requirements.txt", LOCK], ids=["trainer", "operator"])
def test_every_requirement_is_pinned_with_a_hash(path: Path) -> None:
    found = requirements(path)
    assert len(found) > 10
    for name, (requirement, options) in found.items():
        (spec,) = requirement.specifier
        assert spec.operator == "==" and "*" not in spec.version, f"{name}: {requirement}"
        assert requirement.marker is None and not requirement.url, f"{name}: {requirement}"
        hashes = [o for o in options if _HASH.fullmatch(o)]
        assert hashes and len(hashes) == len(options), f"{name}: {options}"


def test_the_trainers_registry_base_is_pinned_by_digest() -> None:
    # Issue #47: a base named by a tag is whatever the tag points to when it is pulled. Built
    # here, BASE is the local root filesystem (hack/images/build.sh passes it); with a
    # registry, the default is Debian's slim image at one digest.
    defaults = [
        line.partition("=")[2]
        for line in (TRAINER / "Containerfile").read_text().splitlines()
        if line.startswith("ARG BASE=")
    ]
    assert len(defaults) == 1, defaults
    assert re.fullmatch(r"debian:bookworm-slim@sha256:[0-9a-f]{64}", defaults[0]), defaults[0]


def test_the_trainer_installs_its_requirements_with_require_hashes() -> None:
    text = (TRAINER / "Containerfile").read_text()
    assert "COPY requirements.txt /tmp/requirements.txt" in text
    installs = [w for run in run_lines(text) for w in pip_installs(run)]
    assert installs, "no pip install in the Containerfile"
    for words in installs:
        assert "--require-hashes" in words, words
        assert words[words.index("-r") + 1] == "/tmp/requirements.txt", words


def test_the_operator_installs_its_lock_with_require_hashes_then_itself_offline() -> None:
    text = (REPO / "Dockerfile").read_text()
    installs = [w for run in run_lines(text) for w in pip_installs(run)]
    from_lock = [w for w in installs if "-r" in w]
    assert [w[w.index("-r") + 1] for w in from_lock] == ["requirements.lock"]
    assert "--require-hashes" in from_lock[0]
    others = [w for w in installs if "-r" not in w]
    assert others and all(w[-1] == "." for w in others), others
    for words in others:  # the project: nothing from the index, no build requirement fetched
        assert {"--no-index", "--no-deps", "--no-build-isolation"} <= set(words), words


def test_the_lock_satisfies_pyproject() -> None:
    """Every dependency and build requirement of pyproject.toml is locked at a version it
    allows (the image's `pip check` checks the whole closure)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    locked = requirements(LOCK)
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    for spec in wanted:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{spec} is not in requirements.lock: run hack/images/pin_hashes.py"
        (pin,) = locked[name][0].specifier
        assert requirement.specifier.contains(pin.version, prereleases=True), (spec, pin.version)


def test_the_trainer_has_a_non_root_user_for_sshd_and_runs_as_root() -> None:
    stages = instructions((TRAINER / "Containerfile").read_text())
    assert not [i for stage in stages for i in stage if i.name == "USER"], "root is the user"
    runs = " ".join(run_lines((TRAINER / "Containerfile").read_text()))
    assert "groupadd --gid 1000 trainer" in runs
    assert re.search(r"useradd --uid 1000 --gid 1000 --home-dir /home/trainer --create-home", runs)
    assert "install -d -m 0700 -o trainer -g trainer /home/trainer/.ssh" in runs
