"""Every example says at its top whether it runs as written on the local real node: the real
tier applies those that do (tests/real/test_training.py); the others say why not and what to
change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.repo import REPO

EXAMPLES = sorted((REPO / "examples").glob("*/*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLES])
def test_example_says_whether_it_runs_on_the_real_node(path: Path) -> None:
    comment = path.read_text().split("\napiVersion:")[0]
    head = " ".join(line.removeprefix("#").strip() for line in comment.splitlines())
    runnable = head.startswith("Runs as written on the real node")
    explained = head.startswith("Not runnable as written on the local real node") and (
        "To run it there:" in head
    )
    assert runnable or explained, head
    if runnable:
        text = path.read_text()
        assert "image: localhost/t9kjobs-trainer:latest" in text
        assert text.count("imagePullPolicy: IfNotPresent") == text.count("image:")


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]


def test_every_example_the_readme_applies_runs_as_written_on_the_real_node() -> None:
    """The README's snippets apply only examples the real tier trains (test_training.py)."""
    applied = [
        m for line in _readme_commands() for m in re.findall(r"apply -f (examples/\S+)", line)
    ]
    assert applied
    for path in applied:
        head = (REPO / path).read_text().split("\napiVersion:")[0]
        assert "Runs as written on the real node" in " ".join(head.split()), path


def test_every_t9kjobs_command_in_the_readme_exists() -> None:
    from t9kjobs.cli.main import _parser

    parser = _parser()
    commands = [line for line in _readme_commands() if line.startswith("t9kjobs ")]
    assert len(commands) > 5
    subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for line in commands:
        word = line.split()[1]
        assert word.startswith("--") or word in subcommands, line
