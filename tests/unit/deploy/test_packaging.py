"""The folder-to-package mapping: every package is listed, and no `core` or `plugins` leaks."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from tests.repo import REPO


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top, name in (("core", "t9kjobs"), ("plugins", "t9kjobs.plugins")):
        # Code folders, and the template folders (importable as namespace packages).
        for marker in (*(REPO / top).rglob("__init__.py"), *(REPO / top).rglob("*.j2")):
            rel = marker.parent.relative_to(REPO / top).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_no_top_level_core_or_plugins_module_is_installed() -> None:
    code = "import importlib.util as u; print(u.find_spec('core'), u.find_spec('plugins'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True
    )
    assert out.stdout.strip() == "None None"
    assert importlib.util.find_spec("t9kjobs.plugins.generic") is not None


def test_a_plugin_type_checks_against_an_editable_install(tmp_path: Path) -> None:
    """`mypy --strict` of a plugin (the template) finds `t9kjobs` in an editable install.

    The default editable install maps `core/` to `t9kjobs` with an import hook, which mypy does
    not run ("Cannot find implementation or library stub for module named t9kjobs.models");
    the strict mode (docs/conformance.md) exposes a `t9kjobs` folder of links, which it reads.
    The install is of a copy of the project, into a venv that borrows this one's dependencies.
    """
    project = tmp_path / "t9k-jobs"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("core", "plugins"):
        shutil.copytree(REPO / folder, project / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "borrowed.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    python = str(venv / "bin" / "python")
    install = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet"]
    install += ["--no-deps", "--no-build-isolation", "--editable", str(project)]
    subprocess.run([*install, "--config-settings", "editable_mode=strict"], check=True)
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-executable",
            python,
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "t9kjobs_mpijob",
        ],
        cwd=REPO / "examples" / "plugin-template",
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found" in checked.stdout
