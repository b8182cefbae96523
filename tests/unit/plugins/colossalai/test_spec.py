"""The ColossalAIJob spec model: defaults, replica rules, restart policies, lifecycle."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from t9kjobs.loading import JobError, load_job, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import RestartRule
from t9kjobs.plugins.colossalai.spec import ColossalAIJobSpec
from tests.unit.plugins.colossalai.jobs import EXAMPLE


def _manifest(**spec: Any) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"].update(spec)
    return doc


def _problems(manager: PluginManager, doc: dict[str, Any]) -> list[str]:
    with pytest.raises(JobError) as err:
        parse_job(doc, manager)
    return [str(p) for p in err.value.problems]


def _worker(**fields: Any) -> dict[str, Any]:
    container = {"name": "worker", "image": "trainer"}
    return {"type": "worker", "template": {"spec": {"containers": [container]}}, **fields}


def test_defaults() -> None:
    spec = ColossalAIJobSpec.model_validate(
        {"torchConfig": {"script": ["train.py"]}, "replicaSpecs": [_worker()]}
    )
    assert spec.ssh.auth_mount_path == "/root/.ssh"
    assert spec.ssh.sshd_path == "/usr/sbin/sshd"
    assert spec.torch_config.proc_per_worker == 1
    assert spec.torch_config.extra_args == []
    assert spec.run_policy.clean_up_workers is False
    assert spec.worker.replicas == 1
    assert spec.worker.restart_rule() == RestartRule(policy="OnFailure", limit=0)
    assert spec.replica_spec("launcher") is None


def test_restart_policy_forms() -> None:
    obj = ColossalAIJobSpec.model_validate(
        {
            "torchConfig": {"script": ["train.py"]},
            "replicaSpecs": [_worker(restartPolicy={"policy": "ExitCode", "limit": 3})],
        }
    )
    assert obj.worker.restart_rule() == RestartRule(policy="ExitCode", limit=3)
    text = ColossalAIJobSpec.model_validate(
        {"torchConfig": {"script": ["train.py"]}, "replicaSpecs": [_worker(restartPolicy="Always")]}
    )
    # The string form has no limit of its own, and ColossalAIJob no backoffLimit: by the one
    # restart rule it restarts nothing, as the object form's default limit 0 (test_status.py).
    assert text.worker.restart_rule() == RestartRule(policy="Always")


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([{"type": "launcher"}], "exactly one replica spec of type worker, found 0"),
        ([_worker(), _worker()], "exactly one replica spec of type worker, found 2"),
        (
            [{"type": "launcher"}, {"type": "launcher"}, _worker()],
            "at most one replica spec of type launcher, found 2",
        ),
        ([{"type": "launcher", "replicas": 2}, _worker()], "must have replicas 1, got 2"),
    ],
)
def test_replica_spec_rules(
    manager: PluginManager, specs: list[dict[str, Any]], message: str
) -> None:
    problems = _problems(manager, _manifest(replicaSpecs=specs))
    assert len(problems) == 1
    assert problems[0].startswith("spec: ")
    assert message in problems[0]


def test_replica_field_errors(manager: PluginManager) -> None:
    problems = _problems(
        manager,
        _manifest(replicaSpecs=[{"type": "ps"}, _worker(replicas=0)]),
    )
    assert (
        "spec.replicaSpecs[0].type: must be `launcher` or `worker`, got the string 'ps'" in problems
    )
    assert "spec.replicaSpecs[1].replicas: must be >= 1" in problems


def test_unknown_fields_are_refused(manager: PluginManager) -> None:
    problems = _problems(manager, _manifest(runPolicy={"cleanUpWorkers": True, "backoffLimit": 3}))
    assert problems == ["spec.runPolicy.backoffLimit: unknown field"]


@pytest.mark.parametrize(
    ("torch_config", "message"),
    [
        (
            {"script": []},
            "spec.torchConfig.script: must have at least 1 item, got 0",
        ),
        ({}, "spec.torchConfig.script: required field is missing"),
        (
            {"script": ["train.py"], "procPerWorker": 0},
            "spec.torchConfig.procPerWorker: must be >= 1",
        ),
        (
            {"script": ["python", "train.py"]},
            "spec.torchConfig.script: script: must start with a Python file (*.py) or with"
            " -m <module>, got 'python'",
        ),
        (
            {"script": ["-m", "pkg/train.py"]},
            "spec.torchConfig.script: script: -m takes a module name, not a file: 'pkg/train.py'",
        ),
        (
            {"script": ["my train.py"]},
            "spec.torchConfig.script: script: 'my train.py' must not contain spaces or shell"
            " characters",
        ),
    ],
)
def test_torch_config_errors(
    manager: PluginManager, torch_config: dict[str, Any], message: str
) -> None:
    assert _problems(manager, _manifest(torchConfig=torch_config)) == [message]


def test_extra_args_are_checked_by_the_plugin(manager: PluginManager) -> None:
    # Read in pairs (`--name value`): no CEL rule can, so the plugin checks them, as the
    # operator does (InvalidSpec), and the API server admits them.
    doc = _manifest(torchConfig={"script": ["train.py"], "extraArgs": ["max_restarts=0"]})
    with pytest.raises(JobError) as err:
        load_job(doc, manager)
    assert [str(p) for p in err.value.problems] == [
        "spec.torchConfig.extraArgs: extraArgs[0] ('max_restarts=0'): expected a torchrun"
        " option, --name[=value]"
    ]


def test_ssh_paths_must_be_absolute(manager: PluginManager) -> None:
    problems = _problems(manager, _manifest(ssh={"authMountPath": ".ssh"}))
    assert len(problems) == 1
    assert problems == [
        "spec.ssh.authMountPath: authMountPath must be an absolute path of letters, digits and"
        " `._+-` between `/`, without `..` (shell scripts hold it as it is), got '.ssh'"
    ]


def test_admission_rules_are_declared() -> None:
    schema = ColossalAIJobSpec.model_json_schema(by_alias=True)
    rules = [r["rule"] for r in schema["x-kubernetes-validations"]]
    assert "self.replicaSpecs.exists_one(r, r.type == 'worker')" in rules
    assert any("r.replicas == 1" in r for r in rules)
    torch = schema["$defs"]["TorchConfig"]["x-kubernetes-validations"]
    assert "self.script[0].endsWith('.py')" in torch[0]["rule"]
    for name, definition in schema["$defs"].items():
        for prop, body in definition.get("properties", {}).items():
            assert body.get("description"), f"{name}.{prop} has no description"


def test_lifecycle(make_job: Any) -> None:
    job = make_job(EXAMPLE.read_text())
    life = job.spec.lifecycle()
    assert life.backoff_limit is None
    assert life.active_deadline_seconds is None
    assert life.clean_up_policy == "All"  # the example sets cleanUpWorkers
    assert life.clean_up_keeps == frozenset({"launcher"})
    doc = _manifest(runPolicy={})
    assert make_job(doc).spec.lifecycle().clean_up_policy == "None"
