"""Kit v4's declarations of what a job means (`Lifecycle`): a kind must make them, and a
replica lost for good beside the finisher's success is judged by them.

Each test runs the kit on the good plugin of `tests.unit.core.testing.kit_runs` with a broken
copy's source appended (`broken`), as tests/unit/core/testing/kit/test_broken_plugins.py does.
"""

from __future__ import annotations

import pytest

from tests.unit.core.testing.kit import broken
from tests.unit.core.testing.kit_runs import fixed_run, kit_on

pytest_plugins = ["pytester"]


def test_a_lost_replica_beats_the_finishers_success_unless_declared(
    pytester: pytest.Pytester,
) -> None:
    """worker-0's success finishes the job (`finished_by`), but a worker lost for good beside
    it fails the job unless the kind declares that the finisher's success outweighs a worker's
    loss (`finisher_outweighs`): the XGBoostJob written from the docs whose master's success
    hid a worker lost for good. Declared so, the same verdict passes."""
    source = broken.WORKER_ZERO_DECIDES + broken.WORKER_ZERO_FINISHES
    run = kit_on(pytester, "conf_finisher", source)
    assert set(run.failed) == {"test_compute_status_pairs_outcomes[job.yaml]"}, set(run.failed)
    report = run.failed["test_compute_status_pairs_outcomes[job.yaml]"]
    assert (
        "job.yaml: with conf-worker-0 (worker) Succeeded beside conf-worker-1 (worker) failed for"
        " good, the others Running, compute_status returned Succeeded (WorkerSucceeded), where"
        " the kind declares Failed: conf-worker-0's success finishes the job"
        " (Lifecycle.finished_by ('worker', 0)), but the kind declares that a worker lost for"
        " good fails it even then"
    ) in report, report
    assert "before judging the finisher's success" in report
    assert "finisher_outweighs=frozenset({'worker'})" in report
    fixed = fixed_run(pytester, "conf_finisher", source + broken.FIXED_OUTWEIGHS)
    assert fixed.failed == {}
    assert "test_compute_status_pairs_outcomes[job.yaml]" in fixed.passed


def test_a_kind_that_declares_nothing_of_its_meaning_fails_saying_what_to_declare(
    pytester: pytest.Pytester,
) -> None:
    """Kit v4 (0.3): a 0.2 plugin that declares no distribution and no finisher fails the two
    contracts that need them, each naming the declaration; nothing else changes."""
    run = kit_on(pytester, "conf_undeclared", broken.UNDECLARED)
    assert set(run.failed) == {
        "test_ranks_cover_the_world[job.yaml]",
        "test_compute_status_pairs_outcomes[job.yaml]",
    }, set(run.failed)
    ranks = run.failed["test_ranks_cover_the_world[job.yaml]"]
    assert "job.yaml: the kind declares no Lifecycle.distribution" in ranks
    assert "declare that: Distribution() with no carrier" in ranks
    pairs = run.failed["test_compute_status_pairs_outcomes[job.yaml]"]
    assert "job.yaml: the kind declares no Lifecycle.finished_by" in pairs
    assert '"all" when the job succeeds once every replica has' in pairs


@pytest.mark.parametrize(
    "source",
    [
        broken.RANKS_FROM_ONE,
        broken.WORLD_SIZE_SHORT,
        broken.COORDINATOR_WITHOUT_SERVICE,
        broken.BARE_POD_COORDINATOR,
    ],
    ids=["ranks-from-one", "world-size-short", "coordinator-without-service", "bare-pod"],
)
def test_a_broken_jax_like_copy_that_declares_nothing_fails_too(
    pytester: pytest.Pytester, source: str
) -> None:
    """The JAXJob copies passed 0.2.x's kit until their author declared; undeclared, they now
    fail on the missing declaration (and whatever else the kit sees without it)."""
    run = kit_on(pytester, "conf_jax_undeclared", source + broken.UNDECLARED)
    report = run.failed["test_ranks_cover_the_world[job.yaml]"]
    assert "job.yaml: the kind declares no Lifecycle.distribution" in report, report
    assert "test_compute_status_pairs_outcomes[job.yaml]" in run.failed


def test_a_verdict_that_fails_where_the_finisher_outweighs_the_loss_fails_the_pairing(
    pytester: pytest.Pytester,
) -> None:
    """Declared the other way round: worker-0's success outweighs a lost worker, but the
    verdict (every replica must succeed) still fails the job."""
    run = kit_on(pytester, "conf_outweighs", broken.WORKER_ZERO_FINISHES + broken.FIXED_OUTWEIGHS)
    assert set(run.failed) == {"test_compute_status_pairs_outcomes[job.yaml]"}, set(run.failed)
    report = run.failed["test_compute_status_pairs_outcomes[job.yaml]"]
    assert (
        "job.yaml: with conf-worker-0 (worker) Succeeded beside conf-worker-1 (worker) failed for"
        " good, the others Running, compute_status returned Failed (ReplicaFailed), where the"
        " kind declares Succeeded: conf-worker-0 is the replica whose success finishes the job"
        " (Lifecycle.finished_by ('worker', 0)), and a worker's loss does not undo it"
        " (Lifecycle.finisher_outweighs); return Succeeded when it succeeded"
    ) in report, report
