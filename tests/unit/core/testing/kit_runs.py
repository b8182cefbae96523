"""Running the conformance kit on a plugin written into a pytester directory: the plugins, examples
and contract names the kit's tests share."""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

GOOD_PLUGIN = '''
"""A good plugin: replica types, one ConfigMap, success when all succeeded."""

from dataclasses import replace

from pydantic import Field

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo, Problem, Verdict
from t9kjobs.models import Distribution, JobSpec, ReplicaSpec, RestartRule, RunMode, RunPolicy
from t9kjobs.objects import DesiredPod, config_map, headless_service, new_pod, pod_host
from t9kjobs.templating import render_template
from t9kjobs.validation import run_mode_problems


class ConfJobSpec(JobSpec):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: RunMode | None = None
    replica_specs: list[ReplicaSpec] = Field(min_length=1, max_length=8)

    def lifecycle(self):
        # The program is told no rank (the user's own does it); every replica must succeed.
        return replace(super().lifecycle(), distribution=Distribution(), finished_by="all")


@hookimpl
def t9kjobs_kinds():
    return [KindInfo(kind="ConfJob", spec_model=ConfJobSpec, plural="confjobs")]


@hookimpl
def t9kjobs_validate(job):
    spec = job.spec_as(ConfJobSpec)
    types = [rs.type for rs in spec.replica_specs]
    return run_mode_problems(spec.run_mode, types) + [
        Problem(f"spec.replicaSpecs[{i}].template.spec.containers", "at least one container")
        for i, rs in enumerate(spec.replica_specs)
        if not (rs.template.get("spec") or {}).get("containers")
    ]


def build_pods(job):
    spec = job.spec_as(ConfJobSpec)
    return [
        DesiredPod(
            rs.type,
            i,
            RestartRule.of(rs.restart_policy),
            new_pod(job, rs.type, i, rs.template, subdomain=job.name),
        )
        for rs in spec.replica_specs
        for i in range(rs.replicas)
    ]


@hookimpl
def t9kjobs_build_pods(job):
    return build_pods(job)


@hookimpl
def t9kjobs_build_launch_command(job, pod):
    return ["python", "train.py", f"--rank={pod.index}"]


@hookimpl
def t9kjobs_build_objects(job, pods):
    hosts = [pod_host(job, p.name) for p in pods]
    text = render_template(__package__, "hosts.j2", hosts=hosts)
    return [config_map(job, f"{job.name}-hosts", {"hosts": text}), headless_service(job)]


def judge(replicas):
    failed = [r for r in replicas if r.failed_for_good]
    if failed:
        message = "; ".join(f"{r.name} failed with exit code {r.exit_code}" for r in failed)
        return Verdict("Failed", "ReplicaFailed", message)
    if replicas and all(r.succeeded for r in replicas):
        return Verdict("Succeeded", "AllSucceeded", "all replicas succeeded")
    return None


@hookimpl
def t9kjobs_compute_status(replicas):
    return judge(replicas)
'''


INVALID = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ConfJob
metadata:
  name: conf-invalid
  annotations:
    conformance.t9kjobs.dev/rejected-at: {path}
spec:
  replicaSpecs:
    - type: worker
      template:
        spec: {{}}
"""


INVALID_PATH = "spec.replicaSpecs[0].template.spec.containers"


# The contracts of one plugin with one kind, one valid and one invalid example.
ALL_CONTRACTS = {
    "test_loads_through_entry_point",
    "test_declares_kinds_and_spec_model",
    "test_crd_is_structural[ConfJob]",
    "test_crd_is_accepted_by_the_api_server[ConfJob]",
    "test_has_examples[ConfJob]",
    "test_status_model_is_filled[ConfJob]",
    "test_invalid_example_is_rejected[invalid/bad.yaml]",
    *(
        f"test_{name}[job.yaml]"
        for name in (
            "example_is_valid",
            "example_is_admitted",
            "build_pods_is_deterministic",
            "pods_are_named_by_convention",
            "children_carry_owner_labels_and_references",
            "launch_command_is_list_of_str",
            "compute_status_no_pods",
            "compute_status_all_succeeded",
            "compute_status_one_failed",
            "compute_status_fails_on_lost_replicas",
            "compute_status_pairs_outcomes",
            "compute_status_never_regresses",
            "hooks_do_no_io",
            "children_are_of_declared_kinds",
            "compute_status_waits_for_restarting_replicas",
            "subdomains_have_headless_services",
            "pods_use_only_declared_objects",
            "training_container_exists",
            "validate_checks_run_mode",
            "pods_follow_restart_policy",
            "jobs_are_gangs",
            "jobs_wait_in_queues",
            "jobs_managed_elsewhere_are_left_alone",
            "host_names_resolve",
            "scripts_parse",
            "arguments_survive_the_shell",
            "ranks_cover_the_world",
            "addresses_name_the_job",
        )
    ),
}


@dataclass
class KitRun:
    passed: set[str]
    failed: dict[str, str]  # contract test -> its failure report


def install_plugin(pytester: pytest.Pytester, name: str, source: str) -> Path:
    """A package `<name>` with the plugin module and a template, declared by a dist-info."""
    package = pytester.path / name
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(source)
    (package / "templates" / "hosts.j2").write_text("{% for h in hosts %}{{ h }}\n{% endfor %}")
    info = pytester.path / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[t9kjobs.plugins]\n{name} = {name}.plugin\n")
    pytester.syspathinsert()
    return package


def write_examples(pytester: pytest.Pytester, invalid_path: str = INVALID_PATH) -> None:
    (pytester.path / "examples" / "invalid").mkdir(parents=True)
    (pytester.path / "examples" / "job.yaml").write_text(VALID)
    (pytester.path / "examples" / "invalid" / "bad.yaml").write_text(
        INVALID.format(path=invalid_path)
    )


def run_kit(
    pytester: pytest.Pytester, name: str, *args: str, kubeconfig: Path | None = None
) -> KitRun:
    """The kit on plugin `name`; without `kubeconfig`, the admission tier's contracts are
    deselected."""
    if kubeconfig is None:
        args = (*args, "-k", " and ".join(f"not {c}" for c in ADMISSION_CONTRACTS))
    else:
        args = (*args, f"--t9kjobs-kubeconfig={kubeconfig}")
    recorder = pytester.inline_run(f"--t9kjobs-conformance={name}", *args)
    passed, _, failed = recorder.listoutcomes()
    prefix = f"t9kjobs-conformance[{name}]::"
    return KitRun(
        {r.nodeid.removeprefix(prefix) for r in passed},
        {r.nodeid.removeprefix(prefix): r.longreprtext for r in failed},
    )


def kit_on(
    pytester: pytest.Pytester, name: str, broken: str = "", kubeconfig: Path | None = None
) -> KitRun:
    """The kit's verdict on the good plugin with `broken` appended (redefining a hook)."""
    install_plugin(pytester, name, GOOD_PLUGIN + textwrap.dedent(broken))
    write_examples(pytester)
    return run_kit(pytester, name, kubeconfig=kubeconfig)


def fixed_run(pytester: pytest.Pytester, broken_name: str, source: str) -> KitRun:
    """The kit on the good plugin with `source` appended, in place of the broken plugin
    `broken_name` (uninstalled: both serve ConfJob), the examples already written."""
    shutil.rmtree(pytester.path / f"{broken_name}-0.1.dist-info")
    install_plugin(pytester, f"{broken_name}_fixed", GOOD_PLUGIN + source)
    return run_kit(pytester, f"{broken_name}_fixed")


VALID = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ConfJob
metadata:
  name: conf
spec:
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - {name: main, image: busybox, args: [train.py, --epochs, "3"]}
            # The user's own sidecar: the plugin passes its `sh -c` script through untouched,
            # and the kit's shell checks must not judge it (it is no launch line of the plugin).
            - name: heartbeat
              image: busybox
              command: [sh, -c, "while true; do echo \\"it's up\\"; sleep 60; done"]
"""


# The contracts that need the API server (the invalid examples' asks it only when `validate`
# does not reject them).
ADMISSION_CONTRACTS = ("crd_is_accepted_by_the_api_server", "example_is_admitted")
