"""Validation: schema errors from the spec model, semantic problems from the hook, with paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.cli.main import main
from t9kjobs.kinds import Problem
from t9kjobs.loading import JobError, load_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import MAX_PODS, dump
from t9kjobs.plugins.pytorch.spec import (
    PyTorchTrainingJobSpec,
    PyTorchTrainingJobStatus,
    TorchrunConfig,
)
from tests.unit.plugins.pytorch.helpers import (
    OPERATOR_ENV,
    Obj,
    container,
    example,
    manifest,
    replica,
)


def problems(manager: PluginManager, doc: Obj) -> list[Problem]:
    """Every problem of a manifest: the errors it is refused for, else its warnings."""
    try:
        _, warnings = load_job(doc, manager)
    except JobError as exc:
        return exc.problems
    return warnings


def by_path(found: list[Problem]) -> dict[str, Problem]:
    return {p.path: p for p in found}


def gpu_job(**torchrun: Any) -> Obj:
    return manifest(
        replica("worker", 2, container(args=["train.py"])),
        torchrunConfig={"enabled": True, **torchrun},
    )


@pytest.mark.parametrize("name", ["ddp", "master-worker", "elastic", "debug", "ps"])
def test_examples_are_clean(manager: PluginManager, name: str) -> None:
    assert problems(manager, example(name)) == []


def test_repeated_replica_types(manager: PluginManager) -> None:
    doc = manifest(replica("worker", 2), replica("ps", 1), replica("worker", 1), replica("ps"))
    assert [str(p) for p in problems(manager, doc)] == [
        "spec.replicaSpecs: replica types must be unique; repeated: ps, worker"
    ]


def test_master_has_exactly_one_replica(manager: PluginManager) -> None:
    found = problems(manager, manifest(replica("worker", 2), replica("master", 2)))
    assert [str(p) for p in found] == [
        "spec.replicaSpecs: replicaSpecs[1].replicas is 2: the master replica type must have"
        " exactly 1 replica"
    ]


def test_an_empty_torchrun_config_is_off(manager: PluginManager) -> None:
    job, warnings = load_job(manifest(replica("worker", 1), torchrunConfig={}), manager)
    assert warnings == []
    config = job.spec_as(PyTorchTrainingJobSpec).torchrun_config
    assert config is not None and config.enabled is False


def test_reserved_env_names_the_field(manager: PluginManager) -> None:
    python = container(
        "python",
        command=["python", "t.py"],
        env=[{"name": "OK", "value": "1"}, {"name": "WORLD_SIZE", "value": "8"}],
    )
    sidecar = container("sidecar", env=[{"name": "RANK", "value": "x"}])  # not the training one
    found = problems(manager, manifest(replica("worker", 1, sidecar, python)))
    assert [p.path for p in found] == ["spec.replicaSpecs[0].template.spec.containers[1].env[1]"]
    assert found[0].severity == "error"
    assert "WORLD_SIZE" in found[0].message


@pytest.mark.parametrize("name", OPERATOR_ENV)
def test_every_reserved_env_name_is_refused(manager: PluginManager, name: str) -> None:
    env = [{"name": "OK", "value": "1"}, {"name": name, "value": "x"}]
    found = problems(manager, manifest(replica("worker", 1, container(command=["p"], env=env))))
    assert [(str(p), p.severity) for p in found] == [
        (
            f"spec.replicaSpecs[0].template.spec.containers[0].env[1]: {name} is set by the"
            " operator on the training container; remove it",
            "error",
        )
    ]


def test_secret_sourced_reserved_env_is_refused_too(manager: PluginManager) -> None:
    ref = {"secretKeyRef": {"name": "s", "key": "k"}}
    own = container(command=["python"], env=[{"name": "PET_RDZV_ID", "valueFrom": ref}])
    found = problems(manager, manifest(replica("worker", 1, own)))
    assert [p.path for p in found] == ["spec.replicaSpecs[0].template.spec.containers[0].env[0]"]


def test_gpu_procs_without_gpus(manager: PluginManager) -> None:
    found = problems(manager, gpu_job(procPerNode="gpu"))
    assert [str(p) for p in found] == [
        "spec.replicaSpecs[0].template.spec.containers[0].resources.limits:"
        " spec.torchrunConfig.procPerNode is 'gpu' but the training container sets no"
        " positive whole-number nvidia.com/gpu limit or request"
    ]


@pytest.mark.parametrize(
    ("resources", "known"),
    [
        ({"limits": {"nvidia.com/gpu": 2}}, True),
        ({"limits": {"nvidia.com/gpu": "2"}}, True),
        ({"requests": {"nvidia.com/gpu": "2"}}, True),
        ({"limits": {"cpu": "2"}, "requests": {"nvidia.com/gpu": 1}}, True),
        ({"limits": {"nvidia.com/gpu": "1.5"}, "requests": {"nvidia.com/gpu": 1}}, False),
        ({"limits": {"nvidia.com/gpu": 0}}, False),  # no process runs on no GPU
        ({"limits": {"nvidia.com/gpu": "\u0662"}}, False),  # a digit, but not an ASCII one
        ({"limits": {"amd.com/gpu": 2}}, False),
        ({}, False),
    ],
)
def test_gpu_procs_need_a_positive_whole_gpu_count(
    manager: PluginManager, resources: Obj, known: bool
) -> None:
    doc = gpu_job(procPerNode="gpu")
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = resources
    found = [p.path for p in problems(manager, doc)]
    assert found == (
        [] if known else ["spec.replicaSpecs[0].template.spec.containers[0].resources.limits"]
    )


@pytest.mark.parametrize("value", ["auto", "0", "-1", "1.5", "", 0, -2])
def test_proc_per_node_must_be_a_number_or_gpu(manager: PluginManager, value: Any) -> None:
    found = problems(manager, gpu_job(procPerNode=value))
    assert [p.path for p in found] == ["spec.torchrunConfig.procPerNode"]
    assert f"procPerNode must be a positive number or 'gpu', got {value!r}" in found[0].message


@pytest.mark.parametrize("value", ["4", 4, "gpu"])
def test_proc_per_node_accepts_numbers_and_strings(value: Any) -> None:
    config = TorchrunConfig.model_validate({"procPerNode": value})
    assert dump(config)["procPerNode"] == value
    assert config.fixed_procs() == (None if value == "gpu" else 4)


def test_torchrun_ignores_the_command_with_a_warning(manager: PluginManager) -> None:
    doc = manifest(
        replica("worker", 1, container(command=["python"], args=["train.py"])),
        torchrunConfig={"enable": True},
    )
    _, warnings = load_job(doc, manager)  # accepted: warnings do not stop the job
    assert [(p.path, p.severity) for p in warnings] == [
        ("spec.replicaSpecs[0].template.spec.containers[0].command", "warning")
    ]


def test_torchrun_needs_args(manager: PluginManager) -> None:
    doc = manifest(replica("worker", 1), torchrunConfig={"enabled": True})
    c = "spec.replicaSpecs[0].template.spec.containers[0]"
    assert [str(p) for p in problems(manager, doc)] == [
        f"warning: {c}.command: ignored: with spec.torchrunConfig.enabled the container runs"
        " `torchrun <options> <args...>`",
        f"{c}.args: torchrun needs the training script (and its arguments) in args: the command"
        " is ignored with spec.torchrunConfig.enabled",
    ]


def test_extra_options_overriding_generated_ones_warn(manager: PluginManager) -> None:
    found = problems(manager, gpu_job(extraOptions=["--role=x", "--nproc-per-node=3"]))
    assert [(p.path, p.severity) for p in found] == [
        ("spec.torchrunConfig.extraOptions[1]", "warning")
    ]
    assert "--nproc_per_node" in found[0].message


# The options the operator writes on every torchrun line (docs/pytorch.md), spelled out.
GENERATED_TORCHRUN_OPTIONS = [
    "nnodes",
    "nproc_per_node",
    "rdzv_backend",
    "rdzv_endpoint",
    "rdzv_id",
    "max_restarts",
    "node_rank",
]


@pytest.mark.parametrize("name", GENERATED_TORCHRUN_OPTIONS)
@pytest.mark.parametrize("form", ["--{}=1", "--{}"], ids=["one-item", "two-item"])
@pytest.mark.parametrize("dashes", [False, True], ids=["underscores", "dashes"])
def test_every_generated_torchrun_option_overridden_warns(
    manager: PluginManager, name: str, form: str, dashes: bool
) -> None:
    option = form.format(name.replace("_", "-") if dashes else name)
    extra = ["--monitor_interval=5", option, "1"]
    found = problems(manager, gpu_job(extraOptions=extra))
    assert [(str(p), p.severity) for p in found] == [
        (
            f"warning: spec.torchrunConfig.extraOptions[1]: overrides the generated --{name}",
            "warning",
        )
    ]


@pytest.mark.parametrize(
    "extra",
    [["--rdzv_conf=timeout=9"], ["--role", "trainer"], ["--monitor-interval=1"], ["-m"]],
)
def test_extra_options_the_operator_does_not_generate_are_fine(
    manager: PluginManager, extra: list[str]
) -> None:
    assert problems(manager, gpu_job(extraOptions=extra)) == []


def test_extra_options_are_not_checked_without_torchrun(manager: PluginManager) -> None:
    doc = manifest(
        replica("worker", 1), torchrunConfig={"enabled": False, "extraOptions": ["--nnodes=3"]}
    )
    assert problems(manager, doc) == []


def test_run_mode_overrides_name_existing_types(manager: PluginManager) -> None:
    doc = example("debug")
    doc["spec"]["runMode"]["debug"]["replicaSpecs"][0]["type"] = "worker"  # T9k's tutorial slip
    found = problems(manager, doc)
    assert [p.path for p in found] == ["spec.runMode.debug.replicaSpecs[0].type"]
    assert "no replica type 'worker'" in found[0].message


@pytest.mark.parametrize(
    ("elastic", "message"),
    [
        ({"enabled": True, "minReplicas": 4, "maxReplicas": 10, "expectedReplicas": 11}, "<= max"),
        ({"enabled": True, "minReplicas": 4, "maxReplicas": 10, "expectedReplicas": 3}, ">= min"),
        ({"enabled": True, "maxReplicas": 10}, "needs minReplicas and maxReplicas"),
        ({"enabled": True, "minReplicas": 1}, "needs minReplicas and maxReplicas"),
        ({"enable": True}, "needs minReplicas and maxReplicas"),
        ({"enabled": True, "minReplicas": 5, "maxReplicas": 4}, "must be <= maxReplicas (4)"),
    ],
)
def test_elastic_bounds(manager: PluginManager, elastic: Obj, message: str) -> None:
    assert problems(manager, gpu_job()) == []
    doc = gpu_job()
    doc["spec"]["elastic"] = elastic
    found = problems(manager, doc)
    assert [p.path for p in found] == ["spec.elastic"]
    assert message in found[0].message


def test_elastic_without_torchrun_warns(manager: PluginManager) -> None:
    doc = manifest(
        replica("worker", 2), elastic={"enable": True, "minReplicas": 1, "maxReplicas": 3}
    )
    assert [str(p) for p in problems(manager, doc)] == [
        "warning: spec.elastic.enabled: elastic training without spec.torchrunConfig.enabled:"
        " the pods scale, but the training program must handle membership changes itself (e.g."
        " run torchrun, which reads the PET_* variables)"
    ]


def test_a_job_needs_replicas_and_containers(manager: PluginManager) -> None:
    empty = replica("worker", 0)
    empty["template"] = {}
    assert [str(p) for p in problems(manager, manifest(empty))] == [
        "spec.replicaSpecs[0].template.spec.containers: at least one container",
        "spec.replicaSpecs: the job has no replicas",
    ]


def test_restart_policy_is_a_string_defaulting_to_never(manager: PluginManager) -> None:
    job, _ = load_job(manifest(replica("worker", 1)), manager)
    assert job.spec_as(PyTorchTrainingJobSpec).replica_specs[0].restart_policy == "Never"
    doc = manifest(replica("worker", 1, restartPolicy={"policy": "OnFailure", "limit": 2}))
    assert [p.path for p in problems(manager, doc)] == ["spec.replicaSpecs[0].restartPolicy"]


def test_enable_alias_is_read_and_written_canonically(manager: PluginManager) -> None:
    doc = example("elastic")
    doc["spec"]["torchrunConfig"] = {"enable": True, "procPerNode": 1}
    doc["spec"]["elastic"]["enable"] = doc["spec"]["elastic"].pop("enabled")
    job, _ = load_job(doc, manager)
    wire = dump(job.spec)
    assert wire["torchrunConfig"]["enabled"] is True
    assert wire["elastic"]["enabled"] is True


def test_kind_info(manager: PluginManager) -> None:
    info = manager.kind_info("PyTorchTrainingJob")
    assert (info.plural, info.short_names) == ("pytorchtrainingjobs", ("ptj",))
    assert info.scale_spec_path == "spec.elastic.expectedReplicas"
    assert info.status_model is PyTorchTrainingJobStatus
    assert info.spec_model is PyTorchTrainingJobSpec


def test_admission_rules_are_in_the_schema() -> None:
    schema = PyTorchTrainingJobSpec.model_json_schema(by_alias=True)
    messages = [r["message"] for r in schema["x-kubernetes-validations"]]
    assert "replica types must be unique" in messages
    assert "the master replica type must have exactly 1 replica" in messages
    torchrun = TorchrunConfig.model_json_schema(by_alias=True)
    assert "procPerNode" in torchrun["x-kubernetes-validations"][0]["rule"]


def test_cli_validate_prints_warnings_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    doc = gpu_job()
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = ["python"]
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: spec.replicaSpecs[0].template.spec.containers[0].command: ignored" in err


def test_a_job_has_at_most_max_pods_replicas_in_all(manager: PluginManager) -> None:
    at_most = manifest(replica("worker", MAX_PODS // 2), replica("ps", MAX_PODS // 2))
    assert problems(manager, at_most) == []
    over = manifest(replica("worker", MAX_PODS // 2), replica("ps", MAX_PODS // 2 + 1))
    assert [str(p) for p in problems(manager, over)] == [
        f"spec.replicaSpecs: a job has at most {MAX_PODS} replicas in all, this one {MAX_PODS + 1}"
    ]
