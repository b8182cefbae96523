"""The plugin template, copied out of the repository as a third party would, passes its own CI,
against the wheel of t9k-jobs, offline, in a plain Python 3.11 virtualenv; and the kit fails
copies of it broken as plugins written from the docs broke.

The wheel is built as `make dist` builds it (`hack/dist.py`) and installed into a virtualenv
made by `python -m venv` with its own pip and setuptools (the ones Python bundles: setuptools
65.5 on 3.11), as an author's would be. `examples/plugin-template/` is copied to a temporary
folder and its `ci.sh` runs there in offline mode: ruff, mypy --strict, the template's tests
and the conformance kit. Nothing is downloaded: the virtualenv sees the dependencies and dev
tools of the project's own .venv (a `.pth` line, after its own site-packages, so that its own
pip and setuptools are the ones used), and every install is `--no-deps --no-index`. Part of
`make test`, not of `make unit`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.repo import REPO

TEMPLATE = REPO / "examples" / "plugin-template"
_IGNORED = shutil.ignore_patterns(
    "build", "*.egg-info", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of t9k-jobs, built as `make dist` builds it."""
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, str(REPO / "hack" / "dist.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    [found] = [p for p in built if p.endswith(".whl")]
    return Path(found)


@pytest.fixture
def venv(wheel: Path, tmp_path: Path) -> Path:
    """A plain virtualenv of its own with the wheel of t9k-jobs, the project venv's packages
    visible (one per test: a plugin installed in one must not be seen by the next)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "t9kjobs-project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run([*install, str(wheel)], check=True, cwd=tmp_path)
    return venv


def test_the_virtualenv_is_plain_and_holds_the_wheel(venv: Path) -> None:
    """What the template's build meets there: Python's bundled setuptools, older than 77 (the
    first with SPDX `license` strings) and than 70.1 (the first that builds wheels without the
    `wheel` package, which is missing), and t9k-jobs as a wheel, not this checkout."""
    python = str(venv / "bin" / "python")
    probe = "import setuptools, t9kjobs; print(setuptools.__version__, t9kjobs.__file__)"
    version, where = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True, cwd=venv
    ).stdout.split()
    assert tuple(int(p) for p in version.split(".")[:2]) < (70, 1), version
    assert subprocess.run([python, "-c", "import wheel"], check=False).returncode != 0
    assert where.startswith(str(venv)), where


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


# How a plugin written from the docs broke, as edits of the template: (file, text, replacement),
# the contract the kit must fail, and what its report must say (what to fix).
MUTATIONS = {
    "unresolvable-host": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                'return [pod_host(job, pod_name(job.name, "worker", i)) for i in range(workers)]',
                "return [f\"{pod_name(job.name, 'worker', i)}.{job.name}-workers\""
                " for i in range(workers)]",
            )
        ],
        "test_host_names_resolve[pi.yaml]",
        [
            "names host 'mpi-pi-worker-0.mpi-pi-workers', which never resolves: pod"
            " mpi-pi-worker-0 has subdomain 'mpi-pi'",
            "name a pod as t9kjobs.objects.pod_host(job, pod)",
        ],
    ),
    "missing-subdomain": (
        [("t9kjobs_mpijob/plugin.py", "subdomain=job.name, ", "")],
        "test_host_names_resolve[pi.yaml]",
        [
            "pod mpi-pi-worker-0 has no spec.subdomain",
            "build its pods with new_pod(..., subdomain=job.name)",
        ],
    ),
    "space-joined-launch-line": (
        [("t9kjobs_mpijob/plugin.py", "command=shlex.join(argv)", 'command=" ".join(argv)')],
        "test_arguments_survive_the_shell[pi.yaml]",
        [
            "pi.yaml: with spec.mpirunArgs[0] = ",
            "the script of pod mpi-pi-launcher container mpi (/bin/bash -c) does not parse",
            "build command lines with shlex.join(argv)",
        ],
    ),
    "worker-failure-ignored": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                "failed = [r for r in replicas if r.failed_for_good]",
                'failed = [r for r in replicas if r.failed_for_good and r.replica_type == "launcher"]',
            )
        ],
        "test_compute_status_fails_on_lost_replicas[pi.yaml]",
        [
            "with mpi-pi-worker-0 (worker) failed for good and the others Running,"
            " compute_status returned no verdict",
            "return Failed when any ReplicaState.failed_for_good",
        ],
    ),
    "world-size-short": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                '"-np", str(ranks)',
                '"-np", str(ranks - 1)',
            )
        ],
        "test_ranks_cover_the_world[pi.yaml]",
        [
            "pi.yaml: pod mpi-pi-launcher is told the world size '3' (launch option -np), but"
            " the 4 slots of the hostfile's 2 ranked pods make 4",
            "count the world from the replicas",
        ],
    ),
    "hostfile-from-worker-1": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                "hosts=_hosts(job), slots=slots",
                "hosts=_hosts(job)[1:], slots=slots",
            )
        ],
        "test_ranks_cover_the_world[pi.yaml]",
        [
            "pi.yaml: the hostfile (ConfigMap mpi-pi-hostfile key hostfile) misses"
            " ['mpi-pi-worker-0']: their ranks never start",
        ],
    ),
    "coordinator-without-service": (
        [
            (
                "t9kjobs_mpijob/spec.py",
                'ranked_types=("worker",),',
                'ranked_types=("worker",), addresses=(Address(EnvVar("COORDINATOR")),),',
            ),
            (
                "t9kjobs_mpijob/spec.py",
                "    Distribution,\n",
                "    Address, Distribution, EnvVar,\n",
            ),
            (
                "t9kjobs_mpijob/plugin.py",
                '    launcher = role == "launcher"\n',
                '    launcher = role == "launcher"\n'
                '    for c in manifest["spec"]["containers"]:\n'
                '        c.setdefault("env", []).append('
                '{"name": "COORDINATOR", "value": f"{job.name}-coordinator:6666"})\n',
            ),
        ],
        "test_addresses_name_the_job[pi.yaml]",
        [
            "pi.yaml: pod mpi-pi-launcher is told env COORDINATOR = 'mpi-pi-coordinator:6666', but"
            " mpi-pi-coordinator never resolves: mpi-pi-coordinator is no pod and no Service of"
            " the job",
            "name a pod as t9kjobs.objects.pod_host(job, pod)",
        ],
    ),
    "bare-worker-address": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                '    launcher = role == "launcher"\n',
                '    launcher = role == "launcher"\n'
                '    for c in manifest["spec"]["containers"]:\n'
                '        c.setdefault("env", []).append('
                '{"name": "FIRST_WORKER", "value": f"{job.name}-worker-0:6666"})\n',
            ),
        ],
        "test_host_names_resolve[pi.yaml]",
        [
            "names host 'mpi-pi-worker-0', which never resolves: a pod's bare name resolves only"
            " inside that pod",
        ],
    ),
    "worker-zero-decides": (
        [
            (
                "t9kjobs_mpijob/plugin.py",
                'if r.replica_type == "launcher" and r.succeeded and r.final:',
                "if r.index == 0 and r.succeeded and r.final:",
            )
        ],
        "test_compute_status_pairs_outcomes[pi.yaml]",
        [
            "pi.yaml: with mpi-pi-worker-0 (worker) Succeeded beside mpi-pi-worker-1 (worker)"
            " failed for good, the others Running, compute_status returned Succeeded"
            " (LauncherSucceeded), where the kind declares Failed",
            "return Failed when a replica the job needs is ReplicaState.failed_for_good",
        ],
    ),
    # The launcher's success judged first, as the template does, by an author who never said
    # that it outweighs a worker's loss: the XGBoostJob whose master succeeded beside a worker
    # lost for good.
    "success-beside-lost-worker": (
        [("t9kjobs_mpijob/spec.py", 'finisher_outweighs=frozenset({"worker"}),', "")],
        "test_compute_status_pairs_outcomes[pi.yaml]",
        [
            "pi.yaml: with mpi-pi-launcher (launcher) Succeeded beside mpi-pi-worker-0 (worker)"
            " failed for good, the others Running, compute_status returned Succeeded"
            " (LauncherSucceeded), where the kind declares Failed: mpi-pi-launcher's success"
            " finishes the job (Lifecycle.finished_by ('launcher', 0)), but the kind declares"
            " that a worker lost for good fails it even then",
            "finisher_outweighs=frozenset({'worker'})",
        ],
    ),
    "uncompilable-cel": (
        [("t9kjobs_mpijob/spec.py", "!self.mpirunArgs.exists(", "!self.mpirunArguments.exists(")],
        "test_crd_is_accepted_by_the_api_server[MPIJob]",
        ["contract violated: A real API server accepts the kind's CRD", "mpirunArguments"],
    ),
}


def _kit(
    venv: Path, project: Path, selected: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The conformance kit on `project`, installed first: the tests `-k selected`."""
    python = str(venv / "bin" / "python")
    # As ci.sh's offline mode installs it in a plain virtualenv (no `wheel` package there).
    develop = [python, "-c", "from setuptools import setup; setup()", "--quiet", "develop"]
    subprocess.run([*develop, "--no-deps"], check=True, cwd=project, capture_output=True)
    if env is None:
        env = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "T9KJOBS_BLOCK_PLUGINS")
        }
    return subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "t9kjobs-conformance",
            "--t9kjobs-conformance=mpijob",
            "--t9kjobs-examples=examples",
            "-k",
            selected,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_kit_fails_each_broken_copy_of_the_template(venv: Path, mutation: str) -> None:
    """Each mistake a plugin written from the docs made passed the kit of the previous
    version; the kit now fails the template broken that way, naming what to fix."""
    edits, contract, says = MUTATIONS[mutation]
    project = _copy(venv, f"mutated-{mutation}")
    for name, old, new in edits:
        path = project / name
        text = path.read_text()
        assert old in text, f"the template no longer has {old!r} in {name}: update the mutation"
        path.write_text(text.replace(old, new))
    done = _kit(venv, project, contract.split("[")[0].removeprefix("test_"))
    report = done.stdout + done.stderr
    assert done.returncode != 0, report
    assert f"FAILED t9kjobs-conformance[mpijob]::{contract}" in report, report
    for text in says:
        assert text in report, report


def test_an_author_builds_the_kits_api_server_with_the_wheels_command(
    venv: Path, tmp_path: Path
) -> None:
    """Outside this repository: `t9kjobs-kit-binaries` builds etcd and kube-apiserver from the
    Go module in the wheel into the cache, and the kit's admission tier starts them from there
    (nothing on PATH, no T9KJOBS_BIN_DIR, no KUBECONFIG)."""
    cache = tmp_path / "cache"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "T9KJOBS_BLOCK_PLUGINS", "T9KJOBS_BIN_DIR", "KUBECONFIG")
    }
    built = subprocess.run(
        [str(venv / "bin" / "t9kjobs-kit-binaries"), "--cache", str(cache)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1800,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    folder = Path(built.stdout.strip())
    assert folder.parent == cache / "bin", folder
    version = subprocess.run(
        [str(folder / "kube-apiserver"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("Kubernetes v1."), version
    project = _copy(venv, "kit-binaries-mpijob")
    env.update(T9KJOBS_CACHE=str(cache), PATH=f"{venv / 'bin'}:/usr/bin:/bin")
    done = _kit(venv, project, "crd_is_accepted or example_is_admitted", env)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert f"admission tier: etcd and kube-apiserver started from {folder}" in report, report
