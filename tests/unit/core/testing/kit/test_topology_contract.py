"""The kit's topology contract (`pods_carry_topology_ranks`): a job that asks Kueue for
topology has its pods ranked and gated, and the ranks its program is told follow them; a
plugin that drops its templates' annotations, or tells its pods ranks against their order,
fails it, and the contracts those mistakes do not touch still pass; so does a copy of the
bundled DeepSpeed plugin whose hostfile runs backwards."""

from __future__ import annotations

import pytest

from t9kjobs.plugins.deepspeed import plugin
from t9kjobs.testing.kit.meaning import ranks_cover_the_world
from t9kjobs.testing.kit.subject import load_subject
from t9kjobs.testing.kit.topology import pods_carry_topology_ranks
from t9kjobs.testing.kit.violation import ContractViolation
from tests.repo import REPO
from tests.unit.core.testing.kit import broken
from tests.unit.core.testing.kit_runs import kit_on

pytest_plugins = ["pytester"]

CONTRACT = "test_pods_carry_topology_ranks[job.yaml]"


def test_a_plugin_that_drops_its_templates_annotations_fails(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_metadata", broken.BUILDS_ITS_OWN_METADATA)
    assert set(run.failed) == {CONTRACT}, set(run.failed)
    report = run.failed[CONTRACT]
    assert (
        "job.yaml: the pod templates ask Kueue for topology"
        " (kueue.x-k8s.io/podset-preferred-topology: conformance.t9kjobs.dev/rack (added by the"
        " kit)), but no podSet of the Workload has a topologyRequest"
    ) in report, report
    assert "build them with t9kjobs.objects.new_pod(job, type, index, template)" in report


def test_ranks_told_against_the_pods_order_fail(pytester: pytest.Pytester) -> None:
    """0..N-1, so `ranks_cover_the_world` passes; but the program's rank 0 is Kueue's last."""
    run = kit_on(pytester, "conf_against", broken.RANKS_AGAINST_THE_PODS)
    assert set(run.failed) == {CONTRACT}, set(run.failed)
    report = run.failed[CONTRACT]
    assert (
        "job.yaml: pod conf-worker-1 is rank 0 to its program (env JAX_PROCESS_ID) and pod"
        " conf-worker-0 rank 1, but Kueue places them as ranks 1 and 0 (tensorstack.dev/rank)"
    ) in report, report
    assert "return the pods from t9kjobs_build_pods in the order of the ranks" in report
    assert "test_ranks_cover_the_world[job.yaml]" in run.passed


def test_the_jax_like_kind_passes_with_its_ranks_compared(pytester: pytest.Pytester) -> None:
    run = kit_on(pytester, "conf_tas_jax", broken.JAX_LIKE)
    assert run.failed == {}
    assert CONTRACT in run.passed


def test_a_deepspeed_copy_whose_hostfile_runs_backwards_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bundled DeepSpeed plugin passes; a copy of it that lists its workers last first in
    the hostfile (DeepSpeed's rank order) still covers the world, but not the placement."""
    subject = load_subject("deepspeed", [REPO / "examples" / "deepspeedjob"])
    assert subject.error is None, subject.error
    example = next(e for e in subject.examples if e.id.endswith("mlp-cpu.yaml"))
    pods_carry_topology_ranks(subject, example)
    hosts = plugin.worker_hosts
    monkeypatch.setattr(plugin, "worker_hosts", lambda job, n: hosts(job, n)[::-1])
    ranks_cover_the_world(subject, example)
    with pytest.raises(ContractViolation) as caught:
        pods_carry_topology_ranks(subject, example)
    assert (
        "mlp-cpu.yaml: pod deepspeed-mlp-worker-2 is rank 0 to its program (its place in the"
        " hostfile (ConfigMap key hostfile)) and pod deepspeed-mlp-worker-1 rank 1, but Kueue"
        " places them as ranks 2 and 1 (tensorstack.dev/rank)"
    ) in str(caught.value), caught.value
