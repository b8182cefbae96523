"""Validation of a DeepSpeedJob beyond its schema, every problem with its field path.

The operator owns some `deepspeed` options (the hostfile, flags generated from `config` and
`elastic`) and some paths in the training container (`/root/.ssh`, `/t9k/hostfile`,
`/root/.deepspeed_env`); a user setting them too would be silently overridden or would break
the launch, so it is an error naming the field.
"""

from __future__ import annotations

import posixpath
import re

from t9kjobs.plugin import (
    SSH_VOLUME,
    Obj,
    Problem,
    recovery_problems,
    run_mode_problems,
    ssh_user_problems,
)
from t9kjobs.plugins.deepspeed.launch import (
    ENV_FILE,
    HOSTFILE_PATH,
    REPLICA_TYPE,
    SSH_DIR,
    env_file_path,
    ssh_dir,
)
from t9kjobs.plugins.deepspeed.spec import DeepSpeedJobSpec

__all__ = [
    "DEEPSPEED_OPTIONS",
    "HOSTFILE_VOLUME",
    "RESERVED_PATHS",
    "RESERVED_VOLUMES",
    "deepspeed_problems",
    "other_args_problems",
]

# With the default spec.ssh; a job's own are `_reserved_paths(spec)`.
RESERVED_PATHS = (SSH_DIR, HOSTFILE_PATH, ENV_FILE)
HOSTFILE_VOLUME = "t9k-hostfile"
# The volumes the operator adds to every worker (t9k-ssh is t9kjobs.ssh's Secret volume).
RESERVED_VOLUMES = (SSH_VOLUME, HOSTFILE_VOLUME)

# The long options of DeepSpeed's launcher (deepspeed/launcher/runner.py `parse_args`), to
# resolve the abbreviations argparse accepts (`--mod` is `--module`).
DEEPSPEED_OPTIONS = (
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
)

_OWNED = {
    "--hostfile": f"the operator passes --hostfile={HOSTFILE_PATH}",
    "--no_local_rank": "set spec.config.localRank: false instead",
    "--autotuning": "set spec.config.autotune instead",
    "--module": "set spec.config.run.module instead",
    "--no_python": "set spec.config.run.exec instead",
    "--elastic_training": "set spec.elastic instead",
    "--min_elastic_nodes": "set spec.elastic.minReplicas instead",
    "--max_elastic_nodes": "set spec.elastic.maxReplicas instead",
}
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TEMPLATE = "spec.worker.template.spec"


def _resolve(option: str) -> tuple[str | None, list[str]]:
    """The launcher option argparse would take `option` for, or the candidates if ambiguous."""
    if option in DEEPSPEED_OPTIONS:
        return option, []
    candidates = [o for o in DEEPSPEED_OPTIONS if o.startswith(option)]
    if len(candidates) == 1:
        return candidates[0], []
    return None, candidates


def other_args_problems(spec: DeepSpeedJobSpec) -> list[Problem]:
    """otherArgs that repeat or contradict what the operator generates."""
    problems = []
    args = spec.config.other_args
    elastic = spec.elastic_enabled
    for i, arg in enumerate(args):
        path = f"spec.config.otherArgs[{i}]"
        if arg.startswith("-H"):
            problems.append(Problem(path, f"{arg!r} sets the hostfile: {_OWNED['--hostfile']}"))
            continue
        if not arg.startswith("--") or arg == "--":
            continue
        name, _, value = arg.partition("=")
        option, candidates = _resolve(name)
        if option is None:
            if candidates:
                problems.append(
                    Problem(
                        path,
                        f"{name!r} is an ambiguous abbreviation of {', '.join(candidates)}:"
                        " spell the option out",
                    )
                )
            continue
        if option in _OWNED:
            problems.append(Problem(path, f"{arg!r} is {option}: {_OWNED[option]}"))
        elif option == "--master_addr" and elastic:
            problems.append(
                Problem(path, "with spec.elastic enabled the operator passes --master_addr")
            )
        elif option == "--launcher":
            if "=" not in arg:
                value = args[i + 1] if i + 1 < len(args) else ""
            if value.lower() != "pdsh":
                problems.append(
                    Problem(
                        path,
                        f"the launcher must be pdsh (workers are reached over ssh), got {value!r}",
                    )
                )
    return problems


def _reserved_paths(spec: DeepSpeedJobSpec) -> tuple[str, ...]:
    return (ssh_dir(spec), HOSTFILE_PATH, env_file_path(spec))


def _reserved(spec: DeepSpeedJobSpec, mount_path: str) -> str | None:
    path = posixpath.normpath(mount_path) if mount_path else ""
    for reserved in _reserved_paths(spec):
        if path == reserved or path.startswith(reserved + "/"):
            return reserved
    return None


def _container_problems(spec: DeepSpeedJobSpec, container: Obj) -> list[Problem]:
    """The training container (the first): its command, reserved mounts, and env the env file
    cannot hold."""
    base = f"{_TEMPLATE}.containers[0]"
    problems = [
        Problem(
            f"{base}.{key}",
            "ignored: worker-0 runs sshd and the launcher (the deepspeed command of spec.config),"
            " the other workers sshd; the training program is spec.config.run (or customCommand)",
            severity="warning",
        )
        for key in ("command", "args")
        if container.get(key)
    ]
    for j, mount in enumerate(container.get("volumeMounts") or []):
        reserved = _reserved(spec, str(mount.get("mountPath", "")))
        if reserved is not None:
            problems.append(
                Problem(
                    f"{base}.volumeMounts[{j}].mountPath",
                    f"{reserved} is reserved: the operator mounts or writes it",
                )
            )
    if spec.disable_custom_env:
        return problems
    env_file = env_file_path(spec)
    for j, env in enumerate(container.get("env") or []):
        name = str(env.get("name", ""))
        if not _SHELL_NAME.match(name):
            problems.append(
                Problem(
                    f"{base}.env[{j}]",
                    f"{name!r} is not a shell variable name, so {env_file} cannot carry it to"
                    " the training processes; rename it or set spec.disableCustomEnv",
                )
            )
        elif "\n" in str(env.get("value", "")):
            problems.append(
                Problem(
                    f"{base}.env[{j}]",
                    f"the value of {name} holds a newline; {env_file} has one VAR=VAL a line:"
                    " remove the newline or set spec.disableCustomEnv",
                )
            )
    if container.get("envFrom"):
        problems.append(
            Problem(
                f"{base}.envFrom",
                f"variables from envFrom are not written to {env_file}: only the entrypoint"
                " of each worker sees them, not the training processes",
                severity="warning",
            )
        )
    return problems


def _volume_problems(pod_spec: Obj) -> list[Problem]:
    return [
        Problem(f"{_TEMPLATE}.volumes[{i}].name", f"volume name {v.get('name')!r} is reserved")
        for i, v in enumerate(pod_spec.get("volumes") or [])
        if v.get("name") in RESERVED_VOLUMES
    ]


def _custom_command_warnings(spec: DeepSpeedJobSpec) -> list[Problem]:
    config = spec.config
    ignored = []
    if config.run is not None:
        ignored.append("run")
    if config.other_args:
        ignored.append("otherArgs")
    if config.autotune is not None:
        ignored.append("autotune")
    if not config.local_rank:
        ignored.append("localRank")
    return [
        Problem(
            f"spec.config.{field}",
            "ignored: spec.config.customCommand replaces the generated launch command",
            severity="warning",
        )
        for field in ignored
    ]


def _elastic_problems(spec: DeepSpeedJobSpec) -> list[Problem]:
    if spec.elastic is None or not spec.elastic.enabled:
        return []
    problems = [
        Problem(f"spec.elastic.{field}", "required when elastic training is enabled")
        for field, value in (
            ("minReplicas", spec.elastic.min_replicas),
            ("maxReplicas", spec.elastic.max_replicas),
        )
        if value is None
    ]
    if spec.config.custom_command is None and not spec.config.local_rank:
        problems.append(
            Problem(
                "spec.config.localRank",
                "must be true with elastic training: DeepSpeed does not support --no_local_rank"
                " in elastic training",
            )
        )
    return problems


def deepspeed_problems(spec: DeepSpeedJobSpec) -> list[Problem]:
    """Every problem of a DeepSpeedJob the spec model cannot express."""
    pod_spec: Obj = spec.worker.template.get("spec") or {}
    containers = pod_spec.get("containers") or []
    problems = []
    if not containers:
        problems.append(Problem(f"{_TEMPLATE}.containers", "at least one container"))
    else:
        problems += _container_problems(spec, containers[0])
    problems += _volume_problems(pod_spec)
    if spec.config.custom_command is None:
        problems += other_args_problems(spec)
    else:
        problems += _custom_command_warnings(spec)
    problems += _elastic_problems(spec)
    problems += run_mode_problems(spec.run_mode, {REPLICA_TYPE})
    problems += recovery_problems(spec.recovery_policy, {REPLICA_TYPE})
    problems += ssh_user_problems(spec.worker.template, "spec.worker.template", spec.ssh.port)
    return problems
