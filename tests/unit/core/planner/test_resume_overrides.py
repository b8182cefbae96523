"""`runMode.pause.resumeSpecs[].command` / `args` where the operator generates every command.

DeepSpeedJob and ColossalAIJob pods run the command the operator builds (a launcher, sshd), so a
resume command or args would be dropped without a word: they are refused, by `t9kjobs validate`
(at the field) and at admission (a CEL rule on the same field), while `skipInitContainer` still
works. The kinds that run the container's own command (GenericJob) or build their launcher from
it (PyTorchTrainingJob) honour them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from t9kjobs.crds import crd_for
from t9kjobs.loading import JobError, load_job
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj
from tests.unit.plugins.colossalai.jobs import example as colossalai_job
from tests.unit.plugins.deepspeed.jobs import base_manifest as deepspeed_job
from tests.unit.plugins.generic.jobs import generic_example as generic_job

REFUSING: dict[str, Callable[[], Obj]] = {
    "DeepSpeedJob": deepspeed_job,
    "ColossalAIJob": colossalai_job,
}
REASON = (
    "cannot be set on resume in this kind: the operator generates the command of every pod"
    " (the launcher, sshd), so it would be dropped; resumeSpecs may only skip init containers"
)


def _paused(doc: Obj, resume: Obj) -> Obj:
    doc["spec"]["runMode"] = {"pause": {"enabled": True, "resumeSpecs": [resume]}}
    return doc


@pytest.mark.parametrize("field", ["command", "args"])
@pytest.mark.parametrize("kind", sorted(REFUSING))
def test_a_resume_command_or_args_is_refused_at_the_field(
    manager: PluginManager, kind: str, field: str
) -> None:
    doc = _paused(REFUSING[kind](), {"type": "worker", field: ["python", "resume.py"]})
    with pytest.raises(JobError) as err:
        load_job(doc, manager)
    assert [str(p) for p in err.value.problems] == [
        f"spec.runMode.pause.resumeSpecs[0].{field}: `{field}` {REASON}"
    ]


@pytest.mark.parametrize("kind", sorted(REFUSING))
def test_skip_init_container_alone_is_accepted(manager: PluginManager, kind: str) -> None:
    doc = _paused(REFUSING[kind](), {"type": "worker", "skipInitContainer": True})
    job, _ = load_job(doc, manager)
    assert job.kind == kind


def _resume_item_rules(manager: PluginManager, kind: str) -> list[str]:
    spec = crd_for(manager.kind_info(kind))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pause = spec["properties"]["spec"]["properties"]["runMode"]["properties"]["pause"]
    item = pause["properties"]["resumeSpecs"]["items"]
    return [r["rule"] for r in item.get("x-kubernetes-validations") or []]


@pytest.mark.parametrize("kind", sorted(REFUSING))
def test_the_crd_refuses_them_at_admission(manager: PluginManager, kind: str) -> None:
    assert _resume_item_rules(manager, kind) == ["!has(self.command)", "!has(self.args)"]


@pytest.mark.parametrize("kind", ["GenericJob", "PyTorchTrainingJob"])
def test_kinds_that_honour_them_keep_them(manager: PluginManager, kind: str) -> None:
    assert _resume_item_rules(manager, kind) == []


def test_generic_job_accepts_a_resume_command(manager: PluginManager) -> None:
    doc = _paused(generic_job(), {"type": "worker", "command": ["python", "resume.py"]})
    job, _ = load_job(doc, manager)
    assert job.kind == "GenericJob"
