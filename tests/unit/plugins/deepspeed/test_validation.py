"""Schema and semantic problems of a DeepSpeedJob, each with the field path it is about."""

from __future__ import annotations

import argparse
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


@pytest.mark.parametrize(("canonical", "alias"), [("module", "Module"), ("exec", "Exec")])
def test_both_spellings_of_one_field_are_refused(manager: Any, canonical: str, alias: str) -> None:
    run = {canonical: ["a"], alias: ["b"]}
    found = errors(manager, with_spec(config={"run": run}))
    assert found == {"spec.config.run": f"set run.{canonical} or its alias run.{alias}, not both"}


@pytest.mark.parametrize(
    ("elastic", "min_available"),
    [
        ({"enabled": True, "minReplicas": 2, "maxReplicas": 4}, 2),
        ({"enabled": False, "minReplicas": 2, "maxReplicas": 4}, None),
        (None, None),
    ],
)
def test_an_elastic_job_runs_with_its_minimum(
    manager: Any, elastic: dict[str, Any] | None, min_available: int | None
) -> None:
    doc = with_spec(elastic=elastic) if elastic is not None else base_manifest()
    assert parse_job(doc, manager).spec.lifecycle().min_available == min_available


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


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["--master_port=1", "--launcher", "openmpi", "--num_gpus=2"], "got 'openmpi'"),
        (["--launcher", "pdsh", "--num_gpus=2"], None),
        (["--num_gpus=2", "--launcher", "PDSH"], None),
        (["--num_gpus=2", "--launcher"], "got ''"),
        (["--launcher=mpich", "pdsh"], "got 'mpich'"),
    ],
)
def test_the_launcher_value_of_the_two_item_form_is_the_next_item(
    manager: Any, args: list[str], found: str | None
) -> None:
    doc = with_spec(config={"otherArgs": args, "run": {"python": ["t"]}})
    index = args.index(next(a for a in args if a.startswith("--launcher")))
    message = f"the launcher must be pdsh (workers are reached over ssh), {found}"
    assert errors(manager, doc) == (
        {} if found is None else {f"spec.config.otherArgs[{index}]": message}
    )


# The long options of DeepSpeed's launcher (deepspeed/launcher/runner.py `parse_args`), in its
# order, spelled out: argparse itself resolves their abbreviations below.
LAUNCHER_OPTIONS = [
    "--hostfile",
    "--include",
    "--exclude",
    "--num_nodes",
    "--min_elastic_nodes",
    "--max_elastic_nodes",
    "--num_gpus",
    "--num_accelerators",
    "--master_port",
    "--master_addr",
    "--node_rank",
    "--launcher",
    "--launcher_args",
    "--module",
    "--no_python",
    "--no_local_rank",
    "--no_ssh",
    "--no_ssh_check",
    "--force_multi",
    "--save_pid",
    "--enable_each_rank_log",
    "--autotuning",
    "--comment",
    "--account",
    "--elastic_training",
    "--bind_cores_to_rank",
    "--bind_core_list",
    "--ssh_port",
]
# The options the operator sets itself, and what the message tells the user to do instead.
OWNED = {
    "--hostfile": "the operator passes --hostfile=/t9k/hostfile",
    "--no_local_rank": "set spec.config.localRank: false instead",
    "--autotuning": "set spec.config.autotune instead",
    "--module": "set spec.config.run.module instead",
    "--no_python": "set spec.config.run.exec instead",
    "--elastic_training": "set spec.elastic instead",
    "--min_elastic_nodes": "set spec.elastic.minReplicas instead",
    "--max_elastic_nodes": "set spec.elastic.maxReplicas instead",
}


class _Ambiguous(Exception):
    pass


def launcher_takes(arg: str) -> str | list[str]:
    """What DeepSpeed's launcher (argparse, abbreviations allowed) takes `arg` for: an option,
    or the options it could match."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    for option in LAUNCHER_OPTIONS:
        parser.add_argument(option, nargs="?", const=True)

    def refuse(message: str) -> None:
        raise _Ambiguous(message.split(" could match ")[1])

    parser.error = refuse  # type: ignore[method-assign]
    try:
        parsed = vars(parser.parse_args([arg]))
    except (_Ambiguous, argparse.ArgumentError) as exc:
        return str(exc).split(" could match ")[-1].split(", ")
    (dest,) = [k for k, v in parsed.items() if v is not None]
    return f"--{dest}"


@pytest.mark.parametrize("option", LAUNCHER_OPTIONS)
def test_every_abbreviation_of_each_option_is_read_as_deepspeed_reads_it(
    manager: Any, option: str
) -> None:
    for end in range(3, len(option) + 1):
        arg = option[:end]
        doc = with_spec(config={"otherArgs": [arg], "run": {"python": ["t"]}})
        taken = launcher_takes(arg)
        if isinstance(taken, list):
            expected = {
                "spec.config.otherArgs[0]": f"{arg!r} is an ambiguous abbreviation of"
                f" {', '.join(taken)}: spell the option out"
            }
        elif taken in OWNED:
            expected = {"spec.config.otherArgs[0]": f"{arg!r} is {taken}: {OWNED[taken]}"}
        elif taken == "--launcher":
            expected = {
                "spec.config.otherArgs[0]": "the launcher must be pdsh (workers are reached"
                " over ssh), got ''"
            }
        else:
            expected = {}
        assert errors(manager, doc) == expected, arg


@pytest.mark.parametrize(
    ("arg", "candidates"),
    [
        ("--no", "--node_rank, --no_python, --no_local_rank, --no_ssh, --no_ssh_check"),
        ("--no_s", "--no_ssh, --no_ssh_check"),
        ("--master=x", "--master_port, --master_addr"),
        (
            "--n",
            "--num_nodes, --num_gpus, --num_accelerators, --node_rank, --no_python,"
            " --no_local_rank, --no_ssh, --no_ssh_check",
        ),
    ],
)
def test_ambiguous_abbreviations_name_the_candidates(
    manager: Any, arg: str, candidates: str
) -> None:
    doc = with_spec(config={"otherArgs": ["--num_gpus=1", arg], "run": {"python": ["t"]}})
    name = arg.partition("=")[0]
    assert errors(manager, doc) == {
        "spec.config.otherArgs[1]": f"{name!r} is an ambiguous abbreviation of {candidates}:"
        " spell the option out"
    }


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
            "autotune": "tune",
            "localRank": False,
        }
    )
    assert [str(p) for p in problems(manager, doc)] == [
        f"warning: spec.config.{field}: ignored: spec.config.customCommand replaces the"
        " generated launch command"
        for field in ("run", "otherArgs", "autotune", "localRank")
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


C = "spec.worker.template.spec.containers[0]"


@pytest.mark.parametrize(
    ("change", "found"),
    [
        (
            {"otherArgs": ["-H/tmp/h"]},
            "spec.config.otherArgs[0]: '-H/tmp/h' sets the hostfile: the operator passes"
            " --hostfile=/t9k/hostfile",
        ),
        (
            {"mount": "/root/.ssh/keys"},
            f"{C}.volumeMounts[0].mountPath: /root/.ssh is reserved: the operator mounts or"
            " writes it",
        ),
        (
            {"env": {"name": "my.setting", "value": "1"}},
            f"{C}.env[0]: 'my.setting' is not a shell variable name, so /root/.deepspeed_env"
            " cannot carry it to the training processes; rename it or set"
            " spec.disableCustomEnv",
        ),
        (
            {"env": {"value": "1"}},  # the model's verdict comes first, as admission's does
            f"{C}.env[0].name: required field is missing",
        ),
        (
            {"env": {"name": "MULTI", "value": "a\nb"}},
            f"{C}.env[0]: the value of MULTI holds a newline; /root/.deepspeed_env has one"
            " VAR=VAL a line: remove the newline or set spec.disableCustomEnv",
        ),
        (
            {"envFrom": [{"configMapRef": {"name": "settings"}}]},
            f"warning: {C}.envFrom: variables from envFrom are not written to"
            " /root/.deepspeed_env: only the entrypoint of each worker sees them, not the"
            " training processes",
        ),
        (
            {"volume": "t9k-ssh"},
            "spec.worker.template.spec.volumes[0].name: volume name 't9k-ssh' is reserved",
        ),
        (
            {"containers": []},
            "spec.worker.template.spec.containers: at least one container",
        ),
        (
            {"elastic": {"enabled": True, "maxReplicas": 3}},
            "spec.elastic.minReplicas: required when elastic training is enabled",
        ),
        (
            {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3}, "localRank": False},
            "spec.config.localRank: must be true with elastic training: DeepSpeed does not"
            " support --no_local_rank in elastic training",
        ),
        (
            {
                "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
                "otherArgs": ["--master_addr=x"],
            },
            "spec.config.otherArgs[0]: with spec.elastic enabled the operator passes --master_addr",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_each_problem_word_for_word(manager: Any, change: dict[str, Any], found: str) -> None:
    doc = base_manifest()
    config = doc["spec"]["config"]
    pod_spec = doc["spec"]["worker"]["template"]["spec"]
    if "otherArgs" in change:
        config["otherArgs"] = change["otherArgs"]
    if "localRank" in change:
        config["localRank"] = change["localRank"]
    if "elastic" in change:
        doc["spec"]["elastic"] = change["elastic"]
    if "mount" in change:
        container(doc)["volumeMounts"] = [{"name": "v", "mountPath": change["mount"]}]
    if "env" in change:
        container(doc)["env"] = [change["env"]]
    if "envFrom" in change:
        container(doc)["envFrom"] = change["envFrom"]
    if "volume" in change:
        pod_spec["volumes"] = [{"name": change["volume"], "emptyDir": {}}]
    if "containers" in change:
        pod_spec["containers"] = change["containers"]
    assert [str(p) for p in problems(manager, doc)] == [found]


@pytest.mark.parametrize("values", [["--include", "ds-worker-0.ds"], ["-"], [""], ["--"], ["x"]])
def test_what_is_no_option_is_left_alone(manager: Any, values: list[str]) -> None:
    doc = with_spec(config={"otherArgs": values, "run": {"python": ["t"]}})
    assert problems(manager, doc) == []
