"""The conformance kit itself: it passes a good plugin and fails broken ones, naming the contract.

Each test writes a small framework plugin (the kind `ConfJob`) into a fresh folder, declares it
through a `dist-info` entry point on sys.path (installed, as far as `importlib.metadata` and so
`load_plugins()` can tell), and runs the kit on it in a pytest sub-session (`pytester`). Broken
variants redefine one hook at the end of the good module (more of them, one per behavioural
contract, in tests/unit/core/testing/kit/). The admission tier's contracts are deselected (`-k`, as an author
may) where a test is about others; where it runs, it uses one API server started for this test
session (`kit_kubeconfig`), as a plugin author's `--t9kjobs-kubeconfig` cluster: each run
creates its CRDs there and deletes them when it ends.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.conftest import REPO

pytest_plugins = ["pytester"]

GOOD_PLUGIN = '''
"""A good plugin: replica types, one ConfigMap, success when all succeeded."""

from pydantic import Field

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo, Problem, Verdict
from t9kjobs.models import JobSpec, ReplicaSpec, RestartRule, RunMode, RunPolicy
from t9kjobs.objects import DesiredPod, config_map, headless_service, new_pod, pod_host
from t9kjobs.templating import render_template
from t9kjobs.validation import run_mode_problems


class ConfJobSpec(JobSpec):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: RunMode | None = None
    replica_specs: list[ReplicaSpec] = Field(min_length=1, max_length=8)


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
          containers: [{name: main, image: busybox, args: [train.py, --epochs, "3"]}]
"""

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
            "compute_status_never_regresses",
            "hooks_do_no_io",
            "compute_status_waits_for_restarting_replicas",
            "subdomains_have_headless_services",
            "pods_use_only_declared_objects",
            "training_container_exists",
            "validate_checks_run_mode",
            "pods_follow_restart_policy",
            "jobs_are_gangs",
            "jobs_wait_in_queues",
            "host_names_resolve",
            "scripts_parse",
            "arguments_survive_the_shell",
        )
    ),
}


# The contracts that need the API server (the invalid examples' asks it only when `validate`
# does not reject them).
ADMISSION_CONTRACTS = ("crd_is_accepted_by_the_api_server", "example_is_admitted")


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


def test_a_good_plugin_passes_every_contract(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    run = kit_on(pytester, "conf_good", kubeconfig=kit_kubeconfig)
    assert run.failed == {}
    assert run.passed == ALL_CONTRACTS


def test_non_deterministic_pod_names_fail_determinism_and_naming(
    pytester: pytest.Pytester,
) -> None:
    run = kit_on(
        pytester,
        "conf_random_names",
        """
        import itertools
        _calls = itertools.count()

        @hookimpl
        def t9kjobs_build_pods(job):
            spec = job.spec_as(ConfJobSpec)
            call = next(_calls)
            return [
                DesiredPod(rs.type, i, RestartRule.of(rs.restart_policy),
                           new_pod(job, rs.type, i, rs.template, name=f"{job.name}-{call}-{i}"))
                for rs in spec.replica_specs for i in range(rs.replicas)
            ]
        """,
    )
    report = run.failed["test_build_pods_is_deterministic[job.yaml]"]
    assert "contract violated: `build_pods` is deterministic" in report
    assert "conf-0-0" in report and "conf-1-0" in report
    assert (
        "should be named 'conf-worker-0'"
        in run.failed["test_pods_are_named_by_convention[job.yaml]"]
    )
    assert "test_compute_status_all_succeeded[job.yaml]" in run.passed


def test_shared_pod_objects_fail_determinism(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_shared",
        """
        _cache = {}

        @hookimpl
        def t9kjobs_build_pods(job):
            if job.name not in _cache:
                spec = job.spec_as(ConfJobSpec)
                _cache[job.name] = [
                    DesiredPod(
            rs.type,
            i,
            RestartRule.of(rs.restart_policy),
            new_pod(job, rs.type, i, rs.template, subdomain=job.name),
        )
                    for rs in spec.replica_specs for i in range(rs.replicas)
                ]
            return _cache[job.name]
        """,
    )
    report = run.failed["test_build_pods_is_deterministic[job.yaml]"]
    assert "after the engine edited earlier ones" in report


def test_missing_owner_references_fail(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_orphans",
        """
        @hookimpl
        def t9kjobs_build_objects(job):
            return [{"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": f"{job.name}-hosts", "namespace": job.namespace,
                                  "labels": {"tensorstack.dev/owner-kind": job.kind,
                                             "tensorstack.dev/owner-name": job.name}},
                     "data": {}}, headless_service(job)]
        """,
    )
    report = run.failed["test_children_carry_owner_labels_and_references[job.yaml]"]
    assert "contract violated: Every pod and child object carries the owner labels" in report
    assert "ConfigMap conf-hosts: 0 controller ownerReferences, expected 1" in report
    assert set(run.failed) == {"test_children_carry_owner_labels_and_references[job.yaml]"}


def test_an_owner_reference_with_a_hard_coded_uid_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_uid",
        """
        from t9kjobs.objects import owner_reference

        @hookimpl
        def t9kjobs_build_objects(job):
            cm = config_map(job, f"{job.name}-hosts", {})
            cm["metadata"]["ownerReferences"] = [{**owner_reference(job), "uid": "<job-uid>"}]
            return [cm]
        """,
    )
    report = run.failed["test_children_carry_owner_labels_and_references[job.yaml]"]
    assert "'uid': '<job-uid>'" in report


def test_reading_a_file_in_a_hook_fails_no_io(pytester: pytest.Pytester) -> None:
    secret = pytester.path / "cluster-token"
    secret.write_text("token")
    run = kit_on(
        pytester,
        "conf_reads",
        f"""
        @hookimpl
        def t9kjobs_build_pods(job):
            try:
                open({str(secret)!r}).read()  # the guard refuses; swallowing it does not help
            except Exception:
                pass
            return build_pods(job)
        """,
    )
    report = run.failed["test_hooks_do_no_io[job.yaml]"]
    assert "contract violated: Hooks do no I/O" in report
    assert f"t9kjobs_build_pods opened {secret}" in report
    assert set(run.failed) == {"test_hooks_do_no_io[job.yaml]"}


def test_a_socket_in_a_hook_fails_no_io(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_socket",
        """
        import socket

        @hookimpl
        def t9kjobs_compute_status(replicas):
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        """,
    )
    report = run.failed["test_hooks_do_no_io[job.yaml]"]
    assert "t9kjobs_compute_status connected to ('127.0.0.1', 9)" in report
    # The other contracts that call compute_status fail too, saying why.
    assert "hooks must do no I/O" in run.failed["test_compute_status_all_succeeded[job.yaml]"]


def test_a_launch_command_that_is_not_a_list_of_str_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_tuple",
        """
        @hookimpl
        def t9kjobs_build_launch_command(job, pod):
            return ("python", "train.py", pod.index)
        """,
    )
    report = run.failed["test_launch_command_is_list_of_str[job.yaml]"]
    assert "contract violated: `build_launch_command` returns a non-empty list of strings" in report
    assert "returned a tuple, not a list" in report


def test_a_launch_command_holding_numbers_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_numbers",
        """
        @hookimpl
        def t9kjobs_build_launch_command(job, pod):
            return ["python", "train.py", pod.index]
        """,
    )
    assert (
        "the argv holds non-strings [0]"
        in run.failed["test_launch_command_is_list_of_str[job.yaml]"]
    )


def test_compute_status_that_rejudges_a_finished_job_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_rejudge",
        """
        @hookimpl
        def t9kjobs_compute_status(job, replicas):
            if job.status.phase == "Succeeded":
                return Verdict("Failed", "Rejudged", "finished, but judged again")
            return judge(replicas)
        """,
    )
    report = run.failed["test_compute_status_never_regresses[job.yaml]"]
    assert "contract violated: A finished job never regresses" in report
    assert "it said Succeeded (AllSucceeded), then Failed (Rejudged) when asked again" in report


def test_a_status_hook_undoing_the_verdict_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_undo",
        """
        @hookimpl
        def t9kjobs_update_status(status):
            status.phase = "Running"
        """,
    )
    report = run.failed["test_compute_status_never_regresses[job.yaml]"]
    assert "the reconcile that finished the job (Succeeded) left status.phase 'Running'" in report


def test_a_verdict_while_pods_run_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(
        pytester,
        "conf_eager",
        """
        @hookimpl
        def t9kjobs_compute_status(replicas):
            return Verdict("Succeeded", "Eager", "done")
        """,
    )
    assert (
        "returned Succeeded (Eager) for conf-worker-0 Creating"
        in run.failed["test_compute_status_no_pods[job.yaml]"]
    )
    assert (
        "returned Succeeded for conf-worker-0 Failed"
        in run.failed["test_compute_status_one_failed[job.yaml]"]
    )


def test_an_invalid_example_rejected_at_another_path_fails(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    install_plugin(pytester, "conf_paths", GOOD_PLUGIN)
    write_examples(pytester, invalid_path="spec.replicaSpecs[0].replicas")
    run = run_kit(pytester, "conf_paths", kubeconfig=kit_kubeconfig)
    report = run.failed["test_invalid_example_is_rejected[invalid/bad.yaml]"]
    assert "was rejected, but not at spec.replicaSpecs[0].replicas" in report
    assert f"{INVALID_PATH}: at least one container" in report
    # The API server has no rule about containers: it admits the example.
    assert "the API server admits it too" in report


def test_missing_examples_fail_naming_the_folder(pytester: pytest.Pytester) -> None:
    install_plugin(pytester, "conf_bare", GOOD_PLUGIN)
    run = run_kit(pytester, "conf_bare", "--t9kjobs-examples=nowhere")
    assert (
        f"no valid example of ConfJob under {pytester.path / 'nowhere'}"
        in run.failed["test_has_examples[ConfJob]"]
    )
    assert run.passed == {
        "test_loads_through_entry_point",
        "test_declares_kinds_and_spec_model",
        "test_crd_is_structural[ConfJob]",
        "test_status_model_is_filled[ConfJob]",
    }


def test_an_unknown_plugin_fails_to_load(pytester: pytest.Pytester) -> None:
    run = run_kit(pytester, "no_such_plugin")
    assert "no entry point named 'no_such_plugin'" in run.failed["test_loads_through_entry_point"]
    assert set(run.failed) == {
        "test_loads_through_entry_point",
        "test_declares_kinds_and_spec_model",
    }


def test_a_plain_pytest_run_is_unaffected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    recorder = pytester.inline_run()
    passed, _, failed = recorder.listoutcomes()
    assert [r.nodeid for r in passed] == ["test_plain.py::test_one"] and failed == []


def test_the_kit_runs_alone_unless_paths_are_given(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    install_plugin(pytester, "conf_alone", GOOD_PLUGIN)
    write_examples(pytester)
    alone = run_kit(pytester, "conf_alone", kubeconfig=kit_kubeconfig)
    assert alone.passed == ALL_CONTRACTS
    both = run_kit(pytester, "conf_alone", "test_plain.py", kubeconfig=kit_kubeconfig)
    assert both.passed == {*ALL_CONTRACTS, "test_plain.py::test_one"}


def test_the_bundled_plugins_pass_the_kit(pytester: pytest.Pytester, kit_kubeconfig: Path) -> None:
    names = ["generic", "pytorch", "deepspeed", "colossalai"]
    recorder = pytester.inline_run(
        f"--t9kjobs-conformance={','.join(names)}",
        f"--t9kjobs-examples={REPO / 'examples'}",
        f"--t9kjobs-kubeconfig={kit_kubeconfig}",
    )
    passed, _, failed = recorder.listoutcomes()
    assert [r.nodeid for r in failed] == []
    suites = {r.nodeid.split("::")[0] for r in passed}
    assert suites == {f"t9kjobs-conformance[{n}]" for n in names}
    invalid = [r.nodeid for r in passed if "test_invalid_example_is_rejected" in r.nodeid]
    assert len(invalid) >= 2 * len(names)
