"""Schema and semantic problems of a DeepSpeedJob, each with the field path it is about."""

from __future__ import annotations

import json
from typing import Any

import pytest

from t9kjobs.kinds import Problem
from t9kjobs.loading import JobError, check_job, parse_job
from t9kjobs.plugins.deepspeed.launch import slots_per_worker
from t9kjobs.plugins.deepspeed.spec import RUN_RULE, DeepSpeedConfig, DeepSpeedJobSpec
from tests.unit.plugins.deepspeed.jobs import base_manifest, container, with_spec


def problems(manager: Any, doc: dict[str, Any]) -> list[Problem]:
    """Schema problems if the spec does not parse, else the plugin's semantic findings."""
    try:
        job = parse_job(doc, manager)
    except JobError as exc:
        return exc.problems
    return check_job(job, manager)


def errors(manager: Any, doc: dict[str, Any]) -> dict[str, str]:
    return {p.path: p.message for p in problems(manager, doc) if p.severity == "error"}


def test_base_job_is_valid(manager: Any) -> None:
    assert problems(manager, base_manifest()) == []


def test_defaults_follow_the_api_reference(manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"] = {"template": doc["spec"]["worker"]["template"]}
    doc["spec"]["config"] = {"run": {"python": ["t.py"]}}
    spec = parse_job(doc, manager).spec
    assert isinstance(spec, DeepSpeedJobSpec)
    assert (spec.worker.replicas, spec.worker.restart_policy) == (1, "OnFailure")
    assert (spec.config.local_rank, spec.config.slots_per_worker) == (True, None)
    assert slots_per_worker(spec) == 1  # the template asks for no GPU
    assert spec.config.autotune is None and spec.config.other_args == []
    assert spec.disable_custom_env is False
    assert spec.run_policy.backoff_limit == 3


@pytest.mark.parametrize(
    "run",
    [{}, {"python": ["a.py"], "module": ["m"]}, {"module": ["m"], "Exec": ["x"]}],
)
def test_exactly_one_program(manager: Any, run: dict[str, Any]) -> None:
    found = errors(manager, with_spec(config={"run": run}))
    assert found == {
        "spec.config": "run must set exactly one of python, module and exec, unless"
        " customCommand is set"
    }


def test_run_is_required_without_custom_command(manager: Any) -> None:
    assert "spec.config" in errors(manager, with_spec(config={"slotsPerWorker": 2}))
    assert errors(manager, with_spec(config={"customCommand": "deepspeed x.py"})) == {}


def test_both_spellings_of_one_field_are_refused(manager: Any) -> None:
    found = errors(manager, with_spec(config={"run": {"module": ["a"], "Module": ["b"]}}))
    assert found == {"spec.config.run": "set run.module or its alias run.Module, not both"}


def test_aliases_serialize_to_the_canonical_spelling(manager: Any) -> None:
    spec = parse_job(with_spec(config={"run": {"Exec": ["/bin/train"]}}), manager).spec
    assert isinstance(spec, DeepSpeedJobSpec)
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["config"]["run"] == {"exec": ["/bin/train"]}


def test_autotune_is_an_enum(manager: Any) -> None:
    found = errors(manager, with_spec(config={"autotune": "yes", "run": {"python": ["a"]}}))
    assert list(found) == ["spec.config.autotune"]


def test_restart_policy_values(manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["restartPolicy"] = "Sometimes"
    assert list(errors(manager, doc)) == ["spec.worker.restartPolicy"]


def test_cel_rule_counts_both_spellings() -> None:
    schema = DeepSpeedConfig.model_json_schema()
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["rule"] == RUN_RULE
    for field in ("customCommand", "run.python", "run.module", "run.Module", "run.exec"):
        assert f"has(self.{field})" in rule["rule"]
    assert "has(self.run.Exec)" in rule["rule"]


def test_every_field_is_described() -> None:
    def walk(schema: dict[str, Any], path: str) -> list[str]:
        missing = []
        for name, prop in (schema.get("properties") or {}).items():
            if "description" not in prop and "$ref" not in prop:
                missing.append(f"{path}.{name}")
        return missing

    full = DeepSpeedJobSpec.model_json_schema()
    missing = walk(full, "spec")
    for name, sub in full.get("$defs", {}).items():
        missing += walk(sub, name)
    assert missing == [], json.dumps(missing)


@pytest.mark.parametrize(
    "arg",
    [
        ["--no_local_rank"],
        ["--autotuning=tune"],
        ["--autotuning", "run"],
        ["--module"],
        ["--mod"],
        ["--no_python"],
        ["--hostfile=/tmp/hosts"],
        ["--hostfile", "/tmp/hosts"],
        ["-H", "/tmp/hosts"],
        ["-H/tmp/hosts"],
        ["--launcher=openmpi"],
        ["--launcher", "mvapich"],
        ["--launcher"],
        ["--elastic_training"],
        ["--min_elastic_nodes=1"],
        ["--max_elastic_nodes", "4"],
        ["--launch=pdsh"],
    ],
)
def test_other_args_that_conflict(manager: Any, arg: list[str]) -> None:
    doc = with_spec(config={"otherArgs": ["--master_port=29600", *arg], "run": {"python": ["t"]}})
    found = errors(manager, doc)
    assert list(found) == ["spec.config.otherArgs[1]"], found


@pytest.mark.parametrize(
    "arg",
    [
        ["--launcher=pdsh"],
        ["--launcher", "PDSH"],
        ["--launcher_args", "-R ssh"],
        ["--include", "ds-worker-0.ds"],
        ["--num_gpus=2"],
        ["--master_addr=ds-worker-0.ds"],
        ["--bind_cores_to_rank"],
    ],
)
def test_other_args_that_are_allowed(manager: Any, arg: list[str]) -> None:
    doc = with_spec(config={"otherArgs": arg, "run": {"python": ["t"]}})
    assert errors(manager, doc) == {}


def test_master_addr_is_owned_in_elastic_mode(manager: Any) -> None:
    doc = with_spec(
        config={"otherArgs": ["--master_addr=x"], "run": {"python": ["t"]}},
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
    )
    assert list(errors(manager, doc)) == ["spec.config.otherArgs[0]"]


@pytest.mark.parametrize(
    "path",
    ["/root/.ssh", "/root/.ssh/", "/root/.ssh/keys", "/t9k/hostfile", "/root/.deepspeed_env"],
)
def test_reserved_mount_paths(manager: Any, path: str) -> None:
    doc = base_manifest()
    container(doc)["volumeMounts"] = [
        {"name": "data", "mountPath": "/t9k/mnt"},
        {"name": "other", "mountPath": path},
    ]
    found = errors(manager, doc)
    assert list(found) == ["spec.worker.template.spec.containers[0].volumeMounts[1].mountPath"]


@pytest.mark.parametrize("path", ["/t9k", "/t9k/mnt", "/root", "/root/.sshx"])
def test_mount_paths_beside_the_reserved_ones(manager: Any, path: str) -> None:
    doc = base_manifest()
    container(doc)["volumeMounts"] = [{"name": "data", "mountPath": path}]
    assert errors(manager, doc) == {}


def test_reserved_volume_names(manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["template"]["spec"]["volumes"] = [
        {"name": "data", "emptyDir": {}},
        {"name": "t9k-ssh", "emptyDir": {}},
        {"name": "t9k-hostfile", "emptyDir": {}},
    ]
    assert list(errors(manager, doc)) == [
        "spec.worker.template.spec.volumes[1].name",
        "spec.worker.template.spec.volumes[2].name",
    ]


def test_env_value_with_a_newline(manager: Any) -> None:
    doc = base_manifest()
    container(doc)["env"] = [
        {"name": "OK", "value": "1"},
        {"name": "MULTI", "value": "line1\nline2"},
    ]
    found = errors(manager, doc)
    assert list(found) == ["spec.worker.template.spec.containers[0].env[1]"]
    assert "MULTI" in found["spec.worker.template.spec.containers[0].env[1]"]
    doc["spec"]["disableCustomEnv"] = True
    assert errors(manager, doc) == {}


def test_env_name_that_is_no_shell_variable(manager: Any) -> None:
    doc = base_manifest()
    container(doc)["env"] = [{"name": "my.setting", "value": "1"}]
    assert list(errors(manager, doc)) == ["spec.worker.template.spec.containers[0].env[0]"]


def test_the_containers_own_command_and_args_are_ignored_with_warnings(manager: Any) -> None:
    """Replaced by sshd and the launcher: said in validate (and in an Event by the operator)."""
    doc = base_manifest()
    container(doc).update(command=["python", "train.py"], args=["--epochs=3"])
    base = "spec.worker.template.spec.containers[0]"
    reason = (
        "ignored: worker-0 runs sshd and the launcher (the deepspeed command of spec.config),"
        " the other workers sshd; the training program is spec.config.run (or customCommand)"
    )
    assert [str(p) for p in problems(manager, doc)] == [
        f"warning: {base}.command: {reason}",
        f"warning: {base}.args: {reason}",
    ]


def test_env_from_is_a_warning(manager: Any) -> None:
    doc = base_manifest()
    container(doc)["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    (found,) = problems(manager, doc)
    assert (found.path, found.severity) == (
        "spec.worker.template.spec.containers[0].envFrom",
        "warning",
    )


def test_custom_command_ignores_the_other_fields_with_warnings(manager: Any) -> None:
    doc = with_spec(
        config={
            "customCommand": "deepspeed t.py",
            "run": {"python": ["t.py"]},
            "otherArgs": ["--module"],
            "localRank": False,
        }
    )
    found = problems(manager, doc)
    assert {p.severity for p in found} == {"warning"}
    assert sorted(p.path for p in found) == [
        "spec.config.localRank",
        "spec.config.otherArgs",
        "spec.config.run",
    ]


def test_elastic_needs_bounds_and_local_rank(manager: Any) -> None:
    doc = with_spec(
        elastic={"enable": True, "expectedReplicas": 2},
        config={"localRank": False, "run": {"python": ["t"]}},
    )
    assert sorted(errors(manager, doc)) == [
        "spec.config.localRank",
        "spec.elastic.maxReplicas",
        "spec.elastic.minReplicas",
    ]


def test_elastic_bounds_order(manager: Any) -> None:
    doc = with_spec(elastic={"enabled": True, "minReplicas": 4, "maxReplicas": 2})
    assert list(errors(manager, doc)) == ["spec.elastic"]


def test_debug_replica_type_must_be_worker(manager: Any) -> None:
    doc = with_spec(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "master"}]}})
    assert list(errors(manager, doc)) == ["spec.runMode.debug.replicaSpecs[0].type"]


def test_template_needs_a_container(manager: Any) -> None:
    doc = base_manifest()
    doc["spec"]["worker"]["template"] = {"spec": {}}
    assert list(errors(manager, doc)) == ["spec.worker.template.spec.containers"]


def test_worker_and_config_are_required(manager: Any) -> None:
    doc = base_manifest()
    del doc["spec"]["worker"], doc["spec"]["config"]
    assert sorted(errors(manager, doc)) == ["spec.config", "spec.worker"]
