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

from pathlib import Path

import pytest

from tests.repo import REPO
from tests.unit.core.testing.kit_runs import (
    ALL_CONTRACTS,
    GOOD_PLUGIN,
    INVALID_PATH,
    install_plugin,
    kit_on,
    run_kit,
    write_examples,
)

pytest_plugins = ["pytester"]


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
