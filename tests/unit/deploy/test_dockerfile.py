"""The operator image's `Dockerfile`, checked without a container engine (none runs here).

hadolint (installed from PyPI by `hack/install-tools.sh`) checks the general rules; the tests
below check ours: the final stage runs `t9kjobs operator` as the non-root user the chart
expects, writes no bytecode at run time, and the build context holds exactly what
`pip install .` reads and the lock of its dependencies. tests/e2e/test_install_rbac.py runs the operator installed the way the
Dockerfile installs it, on a read-only root filesystem.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from t9kjobs.cli.main import _parser
from tests.repo import REPO
from tests.unit.deploy.chart import CLUSTER_WIDE, install_tool, render_chart
from tests.unit.deploy.dockerfile import DOCKERIGNORE, Instruction, build_context, instructions

DOCKERFILE = REPO / "Dockerfile"


def values(stage: list[Instruction], name: str) -> list[str]:
    return [i.args for i in stage if i.name == name]


def env(stage: list[Instruction]) -> dict[str, str]:
    pairs = (word.partition("=") for args in values(stage, "ENV") for word in shlex.split(args))
    return {key: value for key, _, value in pairs}


def stages() -> list[list[Instruction]]:
    """The build stages, without the global ARGs."""
    return instructions(DOCKERFILE.read_text())[1:]


def global_args() -> dict[str, str]:
    pairs = (a.partition("=") for a in values(instructions(DOCKERFILE.read_text())[0], "ARG"))
    return {key: value for key, _, value in pairs}


def test_hadolint_passes() -> None:
    hadolint = install_tool("hadolint")
    proc = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_images_are_slim_pinned_and_the_supported_python() -> None:
    """Every stage starts from the build argument BASE, whose default is the slim image of the
    supported Python pinned by digest (a tag moves: issue #47), or from an earlier stage."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    python = re.fullmatch(r">=(\d+\.\d+)", requires)
    assert python is not None, requires
    base = global_args()["BASE"]
    assert re.fullmatch(
        rf"python:{re.escape(python[1])}-slim-[a-z]+@sha256:[0-9a-f]{{64}}", base
    ), base
    names: set[str] = set()
    for stage in stages():
        image, _, name = values(stage, "FROM")[0].partition(" AS ")
        assert image.strip() == "${BASE}" or image.strip() in names, image
        names.add(name.strip())


def test_final_stage_runs_the_operator_as_the_charts_non_root_user() -> None:
    final = stages()[-1]
    user = values(final, "USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0 and int(gid) != 0, user
    objects = render_chart(install_tool("helm"), CLUSTER_WIDE)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (pod_security["runAsUser"], pod_security["runAsGroup"]) == (int(uid), int(gid))
    assert json.loads(values(final, "ENTRYPOINT")[-1]) == ["t9kjobs", "operator"]
    default_args = json.loads(values(final, "CMD")[-1])
    parsed = _parser().parse_args(["operator", *default_args])
    assert parsed.leader_elect is True
    ports = sorted(
        int(a.rpartition(":")[2])
        for a in (parsed.metrics_bind_address, parsed.health_probe_bind_address)
    )
    assert sorted(int(p) for p in " ".join(values(final, "EXPOSE")).split()) == ports


def test_nothing_is_written_at_run_time() -> None:
    """A read-only root filesystem: no bytecode written (pip compiled it at build time)."""
    final_env = env(stages()[-1])
    assert final_env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert final_env["PATH"].startswith("/opt/t9kjobs/bin:")
    assert not values(stages()[-1], "VOLUME")


def test_build_context_is_what_pip_install_reads() -> None:
    """The context is an allow-list (.dockerignore), and it holds what the build copies: what
    `pip install .` reads, and the lock of the dependencies (tests/unit/hack/test_image_pins.py)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed = {"pyproject.toml", project["project"]["readme"], "requirements.lock"}
    needed |= set(project["tool"]["setuptools"]["package-dir"].values())
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "an allow-list: everything is left out unless named"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert allowed == needed
    copied = set()
    for args in (a for stage in stages() for a in values(stage, "COPY")):
        if args.startswith("--from="):
            continue
        *sources, _ = shlex.split(args)
        copied |= {s.rstrip("/") for s in sources if not s.startswith("--")}
    assert copied == needed
    for path in needed:
        assert (REPO / path).exists(), path


def test_the_installed_package_carries_every_template(tmp_path: Path) -> None:
    """`pip install .` (the image's install) must carry the jinja2 templates and py.typed; an
    editable install reads them from the source tree and would hide a missing one."""
    context = build_context(tmp_path / "context")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp_path), str(context)], check=True)
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"t9kjobs/py.typed"}
    for folder, package in (("core", "t9kjobs"), ("plugins", "t9kjobs/plugins")):
        expected |= {
            f"{package}/{p.relative_to(REPO / folder)}" for p in (REPO / folder).rglob("*.j2")
        }
    assert len(expected) > 1
    assert sorted(expected - names) == []
