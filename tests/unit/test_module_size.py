"""No module in `core/` or `plugins/` is over 450 lines (docs/architecture.md, "Folders and
import names"): a module past it is split into cohesive modules of its package, as
`t9kjobs.planner.queueing` was into `queueing`, `admission` and `workloads`. Every `.py` file
under both folders counts, none excluded."""

from __future__ import annotations

from pathlib import Path

from tests.repo import REPO

MAX_LINES = 450
FOLDERS = ("core", "plugins")


def lines_of(path: Path) -> int:
    """Lines as an editor numbers them (a last line without a newline counts too)."""
    return len(path.read_bytes().splitlines())


def offenders(root: Path) -> list[str]:
    """`path: lines` of every `.py` file under `root`'s folders over `MAX_LINES`, longest
    first, then by path."""
    found = [
        (lines_of(path), path.relative_to(root).as_posix())
        for folder in FOLDERS
        for path in (root / folder).rglob("*.py")
    ]
    return [
        f"{name}: {n} lines"
        for n, name in sorted(found, key=lambda f: (-f[0], f[1]))
        if n > MAX_LINES
    ]


def test_no_module_in_core_or_plugins_is_over_450_lines() -> None:
    modules = [p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")]
    assert REPO / "core" / "planner" / "plan.py" in modules  # the rule looks where code is
    over = offenders(REPO)
    assert not over, (
        f"over {MAX_LINES} lines (docs/architecture.md): split each into cohesive modules of "
        "its package:\n" + "\n".join(over)
    )


def test_a_module_over_450_lines_is_named_with_its_length(tmp_path: Path) -> None:
    (tmp_path / "core" / "pkg").mkdir(parents=True)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "core" / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "core" / "pkg" / "full.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "plugins" / "tail.py").write_text("x = 1\n" * MAX_LINES + "y = 2")
    assert offenders(tmp_path) == ["core/pkg/long.py: 451 lines", "plugins/tail.py: 451 lines"]
