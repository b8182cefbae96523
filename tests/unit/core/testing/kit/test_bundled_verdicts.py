"""The pairing of outcomes on the bundled kinds: each passes as it declares, and a copy whose
declaration no longer says that the finisher's success outweighs a lost worker fails, naming
the pairing and both fixes (return Failed first, or declare `finisher_outweighs`).

The copy is the bundled plugin itself with its `lifecycle()` patched (the verdict unchanged):
what a plugin whose author judges the launcher first, as these do, and declares nothing more,
would meet. GenericJob has no finisher (failures are judged first), so it has no such copy;
without failureRules it is held to its `finished_by`, "rules" or "all".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from t9kjobs.models import JobSpec, Lifecycle
from t9kjobs.plugins.colossalai.spec import ColossalAIJobSpec
from t9kjobs.plugins.deepspeed.spec import DeepSpeedJobSpec
from t9kjobs.plugins.pytorch.spec import PyTorchTrainingJobSpec
from t9kjobs.testing.kit.subject import Subject, load_subject
from t9kjobs.testing.kit.verdicts import compute_status_pairs_outcomes
from t9kjobs.testing.kit.violation import ContractViolation
from tests.repo import REPO

# (plugin, its examples folder, an example with a finisher and workers, its spec model, the
# finisher that succeeds, a worker lost for good beside it)
KINDS = [
    (
        "pytorch",
        "pytorchtrainingjob",
        "master-worker.yaml",
        PyTorchTrainingJobSpec,
        "torch-mnist-trainingjob-master-0 (master)",
        "torch-mnist-trainingjob-worker-0 (worker)",
    ),
    (
        "deepspeed",
        "deepspeedjob",
        "mlp-cpu.yaml",
        DeepSpeedJobSpec,
        "deepspeed-mlp-worker-0 (worker)",
        "deepspeed-mlp-worker-1 (worker)",
    ),
    (
        "colossalai",
        "colossalaijob",
        "mlp-cpu.yaml",
        ColossalAIJobSpec,
        "colossalai-mlp-launcher (launcher)",
        "colossalai-mlp-worker-0 (worker)",
    ),
]


def _subject(plugin: str, folder: Path) -> Subject:
    subject = load_subject(plugin, [folder])
    assert subject.error is None, subject.error
    return subject


@pytest.mark.parametrize(
    ("plugin", "folder", "file", "spec", "finisher", "lost"), KINDS, ids=[k[0] for k in KINDS]
)
def test_a_bundled_kind_without_finisher_outweighs_fails_the_pairing(
    monkeypatch: pytest.MonkeyPatch,
    plugin: str,
    folder: str,
    file: str,
    spec: type[JobSpec],
    finisher: str,
    lost: str,
) -> None:
    subject = _subject(plugin, REPO / "examples" / folder)
    [example] = [e for e in subject.examples if e.id == file]
    compute_status_pairs_outcomes(subject, example)  # as declared: it passes
    declared = spec.lifecycle
    assert "worker" in declared(subject.job(example).spec).finisher_outweighs

    def undeclared(self: JobSpec) -> Lifecycle:
        return replace(declared(self), finisher_outweighs=frozenset())

    monkeypatch.setattr(spec, "lifecycle", undeclared)
    with pytest.raises(ContractViolation) as found:
        compute_status_pairs_outcomes(subject, example)
    said = str(found.value)
    assert f"{finisher} Succeeded beside " in said, said
    assert f"{lost} failed for good, the others Running, compute_status returned Succeeded" in said
    assert "where the kind declares Failed" in said
    assert "but the kind declares that a worker lost for good fails it even then" in said
    assert "finisher_outweighs=frozenset({'worker'})" in said


_GENERIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: rules}
spec:
  %s
  replicaSpecs:
    - type: master
      template: {spec: {containers: [{name: main, image: busybox}]}}
    - type: worker
      replicas: 2
      template: {spec: {containers: [{name: main, image: busybox}]}}
"""


@pytest.mark.parametrize(
    ("rules", "finished_by"),
    [("successRules: [{master: [0]}]", "rules"), ("successRules: []", "all")],
    ids=["success-rules", "no-rules"],
)
def test_a_generic_job_without_failure_rules_is_held_to_what_it_declares(
    tmp_path: Path, rules: str, finished_by: str
) -> None:
    """Without failureRules the pairing applies to GenericJob: its success rules decide
    ("rules": Succeeded beside a running worker is the rule's), or every replica must succeed
    ("all"); either way a replica lost for good beside a success fails the job."""
    (tmp_path / "job.yaml").write_text(_GENERIC % rules)
    subject = _subject("generic", tmp_path)
    [example] = subject.examples
    life = subject.job(example).spec.lifecycle()
    assert (life.finished_by, life.failure_rules) == (finished_by, False)
    compute_status_pairs_outcomes(subject, example)
