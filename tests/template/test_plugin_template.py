"""The plugin template, copied out of the repository as a third party would, passes its own CI.

`examples/plugin-template/` is copied to a temporary folder and its `ci.sh` runs there, in a
throwaway virtualenv holding t9k-jobs installed from this checkout as a regular (non-editable)
distribution, as one from the package index would be: ruff, mypy --strict, the template's
tests and the conformance kit. Nothing is downloaded: the virtualenv sees the dependencies and
dev tools of the project's own .venv (a `.pth` line, after its own site-packages), and both
installs are `--no-deps --no-build-isolation --no-index`. Part of `make test`, not of
`make unit` (about 10 s on two cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "examples" / "plugin-template"
_IGNORED = shutil.ignore_patterns(
    "build", "*.egg-info", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with t9k-jobs from this checkout, and the project venv's packages visible."""
    root = tmp_path_factory.mktemp("template-ci")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "t9kjobs-project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    source = root / "t9k-jobs"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("core", "plugins"):
        shutil.copytree(REPO / folder, source / folder, ignore=_IGNORED)
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run(
        [*install, "--no-build-isolation", "--no-index", str(source)], check=True, cwd=root
    )
    return venv


def _ci(venv: Path, project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "T9KJOBS_BLOCK_PLUGINS")}
    env.update(VENV=str(venv), CI_OFFLINE="1")
    return subprocess.run(
        ["bash", str(project / "ci.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def _copy(venv: Path, name: str) -> Path:
    project = venv.parent / name
    shutil.copytree(TEMPLATE, project, ignore=_IGNORED)
    return project


def test_the_copied_template_passes_its_ci(venv: Path) -> None:
    project = _copy(venv, "t9kjobs-mpijob")
    done = _ci(venv, project)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "== ok: mpijob passes" in done.stdout
    assert "Success: no issues found in" in done.stdout  # mypy --strict checked its files
    counts = [
        line
        for line in done.stdout.splitlines()
        if line.endswith(" passed") or " passed in " in line
    ]
    assert len(counts) == 2, report  # the template's tests, then the kit
    passed = [int(line.split(" passed")[0].split()[-1]) for line in counts]
    assert passed[0] >= 7 and passed[1] >= 20, report
    # it ran against the t9k-jobs installed in the throwaway venv, not this checkout's
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import t9kjobs; print(t9kjobs.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=project,
    ).stdout
    assert where.startswith(str(venv)), where


def test_ci_fails_at_the_first_broken_step(venv: Path) -> None:
    project = _copy(venv, "broken-mpijob")
    plugin = project / "t9kjobs_mpijob" / "plugin.py"
    plugin.write_text("import os\n" + plugin.read_text())  # an unused import: ruff refuses it
    done = _ci(venv, project)
    assert done.returncode != 0
    assert "F401" in done.stdout + done.stderr
    assert "== mypy --strict" not in done.stdout  # stopped there
