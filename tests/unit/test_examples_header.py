"""Every example says at its top whether it runs as written on the local real node: the real
tier applies those that do (tests/real/test_training.py); the others say why not and what to
change."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.conftest import REPO

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
