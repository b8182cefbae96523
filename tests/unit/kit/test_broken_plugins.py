"""The conformance kit fails each deliberately broken plugin of `broken`, with a message that
says what to fix, and passes the same plugin fixed.

Each test runs the kit on the good plugin of tests/unit/test_conformance.py with one mistake
appended, and checks which contract fails and what it says; the contracts the mistake does not
touch still pass. Tests that need the admission tier use the session's API server
(`kit_kubeconfig`); the others deselect its contracts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.kit import broken
from tests.unit.test_conformance import (
    ALL_CONTRACTS,
    GOOD_PLUGIN,
    INVALID,
    INVALID_PATH,
    KitRun,
    install_plugin,
    kit_on,
    run_kit,
    write_examples,
)

pytest_plugins = ["pytester"]


def only_failure(run_failed: dict[str, str], contract: str) -> str:
    """The report of `contract`, the only one that failed."""
    assert set(run_failed) == {contract}, set(run_failed)
    return run_failed[contract]


def fixed_run(pytester: pytest.Pytester, broken_name: str, source: str) -> KitRun:
    """The kit on the good plugin with `source` appended, in place of the broken plugin
    `broken_name` (uninstalled: both serve ConfJob), the examples already written."""
    shutil.rmtree(pytester.path / f"{broken_name}-0.1.dist-info")
    install_plugin(pytester, f"{broken_name}_fixed", GOOD_PLUGIN + source)
    return run_kit(pytester, f"{broken_name}_fixed")


def test_succeeded_while_a_replica_restarts_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_restarting", broken.RESTARTING_COUNTS_AS_DONE)
    report = only_failure(run.failed, "test_compute_status_waits_for_restarting_replicas[job.yaml]")
    assert (
        "contract violated: No Succeeded while a replica the job waits for is restarting" in report
    )
    assert (
        "returned Succeeded (NoneRunning) for conf-worker-0 Restarting, conf-worker-1 Succeeded,"
        " but no verdict while conf-worker-0 was Running"
    ) in report
    assert "judge it as a running one" in report


def test_a_subdomain_without_its_headless_service_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_subdomain", broken.SUBDOMAIN_WITHOUT_SERVICE)
    report = only_failure(run.failed, "test_subdomains_have_headless_services[job.yaml]")
    assert (
        "pod conf-worker-0 sets spec.subdomain 'conf', but the job creates no Service 'conf'"
        in report
    )
    assert "return t9kjobs.objects.headless_service(job) from t9kjobs_build_objects" in report
    fixed = fixed_run(pytester, "conf_subdomain", broken.FIXED_SUBDOMAIN)
    assert fixed.failed == {}


def test_a_training_container_the_pod_lacks_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_container", broken.UNKNOWN_TRAINING_CONTAINER)
    report = only_failure(run.failed, "test_training_container_exists[job.yaml]")
    assert (
        "conf-worker-0: DesiredPod.training_container is 'trainer', but the pod's containers"
        " are ['main']"
    ) in report


def test_dropped_run_mode_problems_fail(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_run_mode", broken.RUN_MODE_PROBLEMS_DROPPED)
    report = only_failure(run.failed, "test_validate_checks_run_mode[job.yaml]")
    assert (
        "spec.runMode.debug.replicaSpecs[0].type: 'conformance-no-such-type' names no replica"
        " type of the job, and validate says nothing about it"
    ) in report
    assert "t9kjobs.validation.run_mode_problems(spec.run_mode" in report


def test_an_ignored_restart_policy_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_restart", broken.RESTART_POLICY_IGNORED)
    report = only_failure(run.failed, "test_pods_follow_restart_policy[job.yaml]")
    assert (
        "with spec.replicaSpecs[0].restartPolicy: Never, the pods of that replica keep another"
        " restart policy (conf-worker-0: OnFailure, conf-worker-1: OnFailure)"
    ) in report
    assert "RestartRule.of(replica.restart_policy)" in report


def test_a_status_model_never_filled_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_status", broken.STATUS_NEVER_FILLED)
    report = only_failure(run.failed, "test_status_model_is_filled[ConfJob]")
    assert (
        "ConfJobStatus declares hosts, but the plugin implements no t9kjobs_update_status" in report
    )
    fixed = fixed_run(pytester, "conf_status", broken.FIXED_STATUS)
    assert fixed.failed == {}
    assert "test_status_model_is_filled[ConfJob]" in fixed.passed


def test_an_uncompilable_cel_rule_fails_at_the_kit(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    run = kit_on(pytester, "conf_cel", broken.UNCOMPILABLE_CEL_RULE, kubeconfig=kit_kubeconfig)
    report = run.failed["test_crd_is_accepted_by_the_api_server[ConfJob]"]
    assert "contract violated: A real API server accepts the kind's CRD" in report
    assert (
        "the CEL rule on spec: 'self.replicaSpecs.all(r, r.replicas <= self.maxReplicas)'" in report
    )
    assert "undefined field 'maxReplicas'" in report
    # The offline checks cannot see it; the examples cannot be admitted without the CRD.
    assert "test_crd_is_structural[ConfJob]" in run.passed
    assert set(run.failed) == {
        "test_crd_is_accepted_by_the_api_server[ConfJob]",
        "test_example_is_admitted[job.yaml]",
    }


def test_an_invalid_example_the_api_server_admits_fails(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    run = kit_on(
        pytester, "conf_admitted", broken.INVALID_EXAMPLE_ADMITTED, kubeconfig=kit_kubeconfig
    )
    report = only_failure(run.failed, "test_invalid_example_is_rejected[invalid/bad.yaml]")
    assert f"invalid/bad.yaml was accepted; it should be rejected at {INVALID_PATH}" in report
    assert "the API server admits it too (`kubectl apply` would create the job)" in report


def test_an_invalid_example_refused_at_admission_only_passes(
    pytester: pytest.Pytester, kit_kubeconfig: Path
) -> None:
    install_plugin(pytester, "conf_cel_only", GOOD_PLUGIN + broken.ADMISSION_ONLY_RULE)
    write_examples(pytester)
    too_many = INVALID.format(path="spec.replicaSpecs").replace(
        "template:\n        spec: {}",
        "replicas: 5\n      template:\n        spec:\n          containers: [{name: main, image: busybox}]",
    )
    (pytester.path / "examples" / "invalid" / "too-many.yaml").write_text(too_many)
    run = run_kit(pytester, "conf_cel_only", kubeconfig=kit_kubeconfig)
    assert run.failed == {}
    assert run.passed == {*ALL_CONTRACTS, "test_invalid_example_is_rejected[invalid/too-many.yaml]"}
