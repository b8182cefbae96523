"""The conformance kit fails each deliberately broken plugin of `broken`, with a message that
says what to fix, and passes the same plugin fixed.

Each test runs the kit on the good plugin of tests/unit/core/testing/test_conformance.py with one mistake
appended, and checks which contract fails and what it says; the contracts the mistake does not
touch still pass. Tests that need the admission tier use the session's API server
(`kit_kubeconfig`); the others deselect its contracts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.core.testing.kit import broken
from tests.unit.core.testing.kit_runs import (
    ALL_CONTRACTS,
    GOOD_PLUGIN,
    INVALID,
    INVALID_PATH,
    fixed_run,
    install_plugin,
    kit_on,
    run_kit,
    write_examples,
)

pytest_plugins = ["pytester"]


# (broken plugin, the one contract it fails, what the report says: the contract and the fix)
BROKEN: list[tuple[str, str, list[str]]] = [
    (
        broken.RESTARTING_COUNTS_AS_DONE,
        "test_compute_status_waits_for_restarting_replicas[job.yaml]",
        [
            "contract violated: No Succeeded while a replica the job waits for is restarting",
            "returned Succeeded (NoneRunning) for conf-worker-0 Restarting, conf-worker-1"
            " Succeeded, but no verdict while conf-worker-0 was Running",
            "judge it as a running one",
        ],
    ),
    (
        broken.SUBDOMAIN_WITHOUT_SERVICE,
        "test_subdomains_have_headless_services[job.yaml]",
        [
            "pod conf-worker-0 sets spec.subdomain 'conf', but the job creates no Service 'conf'",
            "return t9kjobs.objects.headless_service(job) from t9kjobs_build_objects",
        ],
    ),
    (
        broken.MOUNTS_UNDECLARED_SECRET,
        "test_pods_use_only_declared_objects[job.yaml]",
        [
            "pod conf-worker-0 uses Secret 'conf-keys' (volume keys), which the job neither"
            " creates nor names in its spec",
            "return it from t9kjobs_build_objects",
        ],
    ),
    (
        broken.UNKNOWN_TRAINING_CONTAINER,
        "test_training_container_exists[job.yaml]",
        [
            "conf-worker-0: DesiredPod.training_container is 'trainer', but the pod's containers"
            " are ['main', 'heartbeat']: name a container of the replica's template",
        ],
    ),
    (
        broken.RUN_MODE_PROBLEMS_DROPPED,
        "test_validate_checks_run_mode[job.yaml]",
        [
            "spec.runMode.debug.replicaSpecs[0].type: 'conformance-no-such-type' names no replica"
            " type of the job, and validate says nothing about it",
            "t9kjobs.validation.run_mode_problems(spec.run_mode",
        ],
    ),
    (
        broken.RESTART_POLICY_IGNORED,
        "test_pods_follow_restart_policy[job.yaml]",
        [
            "with spec.replicaSpecs[0].restartPolicy: Never, the pods of that replica keep"
            " another restart policy (conf-worker-0: OnFailure, conf-worker-1: OnFailure)",
            "RestartRule.of(replica.restart_policy)",
        ],
    ),
    (
        broken.OUT_OF_THE_GANG,
        "test_jobs_are_gangs[job.yaml]",
        [
            "job.yaml: pod conf-worker-0 spec.schedulingGroup.podGroupName is None, not 'conf'",
            "its own t9kjobs_mutate_pod, or its template, takes it out of the gang",
        ],
    ),
    (
        broken.OURS_ALONE,
        "test_jobs_managed_elsewhere_are_left_alone[job.yaml]",
        [
            "job.yaml: with spec.managedBy: conformance.t9kjobs.dev/another-controller, the kind"
            " refuses the job",
            "keep JobSpec's managed_by field in the spec model",
        ],
    ),
    (
        broken.STATUS_NEVER_FILLED,
        "test_status_model_is_filled[ConfJob]",
        [
            "ConfJobStatus declares hosts, but the plugin implements no t9kjobs_update_status",
        ],
    ),
    (
        broken.UNRESOLVABLE_HOST,
        "test_host_names_resolve[job.yaml]",
        [
            "job.yaml: ConfigMap conf-hosts key hosts names host 'conf-worker-0.conf-workers',"
            " which never resolves: pod conf-worker-0 has subdomain 'conf', so"
            " conf-worker-0.conf-workers is no name of it",
            "name a pod as t9kjobs.objects.pod_host(job, pod)",
        ],
    ),
    (
        broken.HOSTS_WITHOUT_SUBDOMAIN,
        "test_host_names_resolve[job.yaml]",
        [
            "names host 'conf-worker-0.conf', which never resolves: pod conf-worker-0 has no"
            " spec.subdomain, so conf-worker-0.conf is no name of it",
            "build its pods with new_pod(..., subdomain=job.name)",
        ],
    ),
    (
        broken.SPACE_JOINED_ARGUMENTS,
        "test_arguments_survive_the_shell[job.yaml]",
        [
            "job.yaml: with spec.replicaSpecs[0].template.spec.containers[0].args[0] =",
            "the script of pod conf-worker-0 container main (/bin/bash -c) does not parse",
            "build command lines with shlex.join(argv)",
        ],
    ),
    (
        broken.SCRIPT_THAT_DOES_NOT_PARSE,
        "test_scripts_parse[job.yaml]",
        [
            "job.yaml: the script of pod conf-worker-0 container main (sh -c) does not parse:",
            "syntax error",
        ],
    ),
    (
        broken.LOST_REPLICA_IGNORED,
        "test_compute_status_fails_on_lost_replicas[job.yaml]",
        [
            "job.yaml: with conf-worker-1 (worker) failed for good and the others Running,"
            " compute_status returned no verdict",
            "return Failed when any ReplicaState.failed_for_good",
        ],
    ),
]

# Verdict mistakes the pairing of outcomes catches too, now that the good plugin declares
# what finishes its job (every replica): a restarting or lost worker beside a succeeded one.
ALSO_PAIRS = {broken.RESTARTING_COUNTS_AS_DONE, broken.LOST_REPLICA_IGNORED}


@pytest.mark.parametrize(
    ("source", "contract", "says"),
    BROKEN,
    ids=[
        "restarting",
        "subdomain",
        "undeclared-secret",
        "training-container",
        "run-mode",
        "restart-policy",
        "gang",
        "ours-alone",
        "status",
        "unresolvable-host",
        "hosts-without-subdomain",
        "space-joined-arguments",
        "script-does-not-parse",
        "lost-replica-ignored",
    ],
)
def test_a_broken_plugin_fails_its_contract_only(
    pytester: pytest.Pytester, source: str, contract: str, says: list[str]
) -> None:
    run = kit_on(pytester, "conf_broken", source)
    pairs = {"test_compute_status_pairs_outcomes[job.yaml]"} if source in ALSO_PAIRS else set()
    assert set(run.failed) == {contract, *pairs}, set(run.failed)
    for text in says:
        assert text in run.failed[contract]


def test_a_users_sidecar_passes_and_a_plugin_that_mangles_it_fails(
    pytester: pytest.Pytester,
) -> None:
    """The example's sidecar runs `sh -c "while true; ..."`: the good plugin passes it through
    and passes the shell checks (the script is the user's); a plugin that flattens the user's
    command into a line of its own fails them, on what it made of it."""
    run = kit_on(pytester, "conf_mangles", broken.MANGLES_USER_COMMAND)
    assert set(run.failed) == {
        "test_scripts_parse[job.yaml]",
        "test_arguments_survive_the_shell[job.yaml]",
    }, set(run.failed)
    assert (
        "the script of pod conf-worker-0 container heartbeat (/bin/sh -c) does not parse"
        in (run.failed["test_scripts_parse[job.yaml]"])
    )
    assert "containers[1].command[0] = " in run.failed["test_arguments_survive_the_shell[job.yaml]"]
    good = fixed_run(pytester, "conf_mangles", "")
    assert good.failed == {}
    assert {"test_scripts_parse[job.yaml]", "test_arguments_survive_the_shell[job.yaml]"} <= (
        good.passed
    )


# A JAX-like kind's broken copies: (copy, the contracts it fails, what the report says).
MEANING: list[tuple[str, set[str], list[str]]] = [
    (
        broken.RANKS_FROM_ONE,
        {"test_ranks_cover_the_world[job.yaml]"},
        [
            "job.yaml: the ranks (env JAX_PROCESS_ID) of the job's 2 ranked pods are"
            " conf-worker-0: 1, conf-worker-1: 2; they must be exactly 0..1",
            "number them from 0",
        ],
    ),
    (
        broken.WORLD_SIZE_SHORT,
        {"test_ranks_cover_the_world[job.yaml]"},
        [
            "job.yaml: pod conf-worker-0 is told the world size '1' (env JAX_NUM_PROCESSES),"
            " but the job's 2 ranked pods (processes: one rank each) make 2",
        ],
    ),
    (
        broken.COORDINATOR_WITHOUT_SERVICE,
        {"test_addresses_name_the_job[job.yaml]", "test_host_names_resolve[job.yaml]"},
        [
            "pod conf-worker-0 is told env JAX_COORDINATOR_ADDRESS = 'conf-coordinator:6666',"
            " but conf-coordinator never resolves: conf-coordinator is no pod and no Service"
            " of the job",
            "name a pod as t9kjobs.objects.pod_host(job, pod)",
        ],
    ),
    (
        broken.BARE_POD_COORDINATOR,
        {"test_addresses_name_the_job[job.yaml]", "test_host_names_resolve[job.yaml]"},
        [
            "pod conf-worker-0 is told env JAX_COORDINATOR_ADDRESS = 'conf-worker-0:6666', but"
            " conf-worker-0 never resolves: a pod's bare name resolves only inside that pod",
        ],
    ),
]


@pytest.mark.parametrize(
    ("source", "contracts", "says"),
    MEANING,
    ids=["ranks-from-one", "world-size-short", "coordinator-without-service", "bare-pod"],
)
def test_a_broken_copy_of_a_jax_like_kind_fails_on_what_its_program_is_told(
    pytester: pytest.Pytester, source: str, contracts: set[str], says: list[str]
) -> None:
    run = kit_on(pytester, "conf_meaning", source)
    assert set(run.failed) == contracts, set(run.failed)
    report = "\n".join(run.failed.values())
    for text in says:
        assert text in report, report


def test_the_jax_like_kind_passes_and_its_contracts_are_checked(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_jax", broken.JAX_LIKE)
    assert run.failed == {}
    assert {
        "test_ranks_cover_the_world[job.yaml]",
        "test_addresses_name_the_job[job.yaml]",
    } <= run.passed


def test_a_verdict_where_worker_zero_decides_fails_the_pairing(pytester: pytest.Pytester) -> None:
    """The kind declares that every replica must succeed; its verdict lets worker-0's success
    finish the job while worker-1 is lost for good."""
    run = kit_on(pytester, "conf_pairs", broken.WORKER_ZERO_DECIDES)
    assert set(run.failed) == {"test_compute_status_pairs_outcomes[job.yaml]"}, set(run.failed)
    report = run.failed["test_compute_status_pairs_outcomes[job.yaml]"]
    assert (
        "job.yaml: with conf-worker-0 (worker) Succeeded beside conf-worker-1 (worker) failed for"
        " good, the others Running, compute_status returned Succeeded (WorkerSucceeded), where"
        " the kind declares Failed"
    ) in report, report
    assert "return Failed when a replica the job needs is ReplicaState.failed_for_good" in report


@pytest.mark.parametrize(
    ("source", "fixed", "contract"),
    [
        (
            broken.SUBDOMAIN_WITHOUT_SERVICE,
            broken.FIXED_SUBDOMAIN,
            "test_subdomains_have_headless_services[job.yaml]",
        ),
        (broken.STATUS_NEVER_FILLED, broken.FIXED_STATUS, "test_status_model_is_filled[ConfJob]"),
    ],
    ids=["subdomain", "status"],
)
def test_the_fix_the_kit_names_passes(
    pytester: pytest.Pytester, source: str, fixed: str, contract: str
) -> None:
    assert contract in kit_on(pytester, "conf_broken", source).failed
    run = fixed_run(pytester, "conf_broken", fixed)
    assert run.failed == {}
    assert contract in run.passed


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
    assert set(run.failed) == {"test_invalid_example_is_rejected[invalid/bad.yaml]"}
    report = run.failed["test_invalid_example_is_rejected[invalid/bad.yaml]"]
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


def test_without_an_api_server_the_admission_tests_fail_saying_where_it_looked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("T9KJOBS_BIN_DIR", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("T9KJOBS_CACHE", str(pytester.path / "no-cache"))
    monkeypatch.setenv("PATH", str(pytester.path / "no-bin"))
    install_plugin(pytester, "conf_serverless", GOOD_PLUGIN)
    write_examples(pytester)
    recorder = pytester.inline_run("--t9kjobs-conformance=conf_serverless")
    failed = {r.nodeid.split("::")[1]: r.longreprtext for r in recorder.listoutcomes()[2]}
    assert set(failed) == {
        "test_crd_is_accepted_by_the_api_server[ConfJob]",
        "test_example_is_admitted[job.yaml]",
    }
    for report in failed.values():
        assert "the admission tier needs an API server: no etcd and kube-apiserver" in report
        assert f"in {pytester.path / 'no-cache'}/bin/k8s-*" in report
        assert "give --t9kjobs-kubeconfig=PATH" in report


def test_a_verdict_that_fails_on_a_replica_the_kind_may_lose_fails_the_pairing(
    pytester: pytest.Pytester,
) -> None:
    """Declared by replica type (`Lifecycle.may_lose`), not as a pod count: the pairing of a
    succeeded worker with a lost one must then give no verdict; the lost-replica contract spares
    the declared type."""
    run = kit_on(pytester, "conf_may_lose", broken.MAY_LOSE_WORKERS)
    assert set(run.failed) == {"test_compute_status_pairs_outcomes[job.yaml]"}, set(run.failed)
    report = run.failed["test_compute_status_pairs_outcomes[job.yaml]"]
    assert (
        "with conf-worker-0 (worker) Succeeded beside conf-worker-1 (worker) failed for good,"
        " the others Running, compute_status returned Failed (ReplicaFailed), where the kind"
        " declares no verdict"
    ) in report, report
    assert "test_compute_status_fails_on_lost_replicas[job.yaml]" in run.passed
