"""The ColossalAIJob spec, per the ColossalAIJob API reference (every field).

One launcher and N workers. The replica types are fixed (`launcher`, `worker`); the launcher
replica spec may be left out, and is then derived from the worker template (see `pods.py`).
Restart policies default to the object form `{policy: OnFailure, limit: 0}`, and the string
form also gets `limit: 0`: the kind has no job-wide restart budget (no `backoffLimit`), so
every replica's restarts are bounded by its own limit, as the API reference's default says.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from t9kjobs.plugin import (
    INT32_MAX,
    MAX_ARGS,
    MAX_REPLICAS,
    SAFE_PATH_PATTERN,
    SAFE_PATH_SAID,
    Address,
    ApiModel,
    Distribution,
    GeneratedCommandRunMode,
    Hostfile,
    JobSpec,
    LaunchOption,
    Lifecycle,
    RestartPolicy,
    RestartPolicyType,
    RestartRule,
    RunMode,
    SchedulePolicy,
    SshPodTemplate,
    safe_path_field,
    safe_path_problem,
    ssh_port_field,
)
from t9kjobs.plugins.colossalai.launch import MASTER_PORT, script_problem

__all__ = [
    "EXTRA_ARG_PATTERN",
    "LAUNCHER",
    "SAFE_PATH_PATTERN",
    "WORKER",
    "ColossalAIJobSpec",
    "ColossalAIReplicaSpec",
    "ColossalAIRunPolicy",
    "SSHConfig",
    "TorchConfig",
]

LAUNCHER = "launcher"
WORKER = "worker"


class SSHConfig(ApiModel):
    """How the workers run sshd and where the job's SSH key is mounted."""

    auth_mount_path: str = safe_path_field(
        "/root/.ssh",
        "Directory where the job's SSH key pair, authorized_keys and ssh config are mounted in"
        " the launcher and the workers; it should be the home `.ssh` directory of the user the"
        f" containers run as, and {SAFE_PATH_SAID} (shell scripts hold it as it is). Defaults"
        " to /root/.ssh.",
    )
    sshd_path: str = safe_path_field(
        "/usr/sbin/sshd",
        f"The sshd executable in the worker image: {SAFE_PATH_SAID} (shell scripts hold it as"
        " it is). Defaults to /usr/sbin/sshd.",
    )
    port: int = ssh_port_field()

    @field_validator("auth_mount_path", "sshd_path")
    @classmethod
    def _safe_path(cls, value: str, info: ValidationInfo) -> str:
        field = "authMountPath" if info.field_name == "auth_mount_path" else "sshdPath"
        problem = safe_path_problem(field, value)
        if problem is not None:
            raise ValueError(problem)
        return value


class ColossalAIRunPolicy(ApiModel):
    """What to do with the replicas once the job finished."""

    clean_up_workers: bool = Field(
        default=False,
        description="Delete the worker pods when the job finishes; the launcher pod is always"
        " kept (its log holds the training result). Defaults to false.",
    )


# `launch.script_problem` in CEL: a plain Python file, or -m and a plain module name (plain: what
# shlex.quote leaves alone, so the worker's shell needs no quoting).
_PLAIN_TARGET = "matches('^[A-Za-z0-9_@%+=:,./-]+$')"
_SCRIPT_RULE = (
    f"self.script[0] == '-m' ? (self.script.size() >= 2 && !self.script[1].startsWith('-')"
    f" && !self.script[1].endsWith('.py') && self.script[1].{_PLAIN_TARGET})"
    f" : (self.script[0].endsWith('.py') && self.script[0].{_PLAIN_TARGET})"
)


# An element of extraArgs: what shlex.quote leaves alone, and spaces (`--name value` in one
# element). colossalai run writes each option into the workers' shell command line unquoted, so
# nothing there may be special to a shell. The CRD's `pattern` and the model's check.
EXTRA_ARG_PATTERN = r"^[A-Za-z0-9_@%+=:,./ -]*$"
_EXTRA_ARG = re.compile(EXTRA_ARG_PATTERN)


def _extra_arg(value: str) -> str:
    if not _EXTRA_ARG.fullmatch(value):
        raise ValueError(
            "a torchrun option may hold only letters, digits, spaces and `_@%+=:,./-`"
            " (colossalai run writes it into the workers' shell command line unquoted),"
            f" got {value!r}"
        )
    return value


_ExtraArg = Annotated[
    str, Field(json_schema_extra={"pattern": EXTRA_ARG_PATTERN}), AfterValidator(_extra_arg)
]


class TorchConfig(ApiModel):
    """How `colossalai run` starts the training processes on the workers."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": _SCRIPT_RULE,
                    "message": "script must start with a Python file (*.py) or with -m and a"
                    " module name, without spaces or shell characters",
                    "fieldPath": ".script",
                }
            ]
        }
    )

    proc_per_worker: int = Field(
        default=1,
        ge=1,
        le=INT32_MAX,
        description="Processes started on each worker (`--nproc_per_node`), usually its GPU"
        " count. Defaults to 1.",
    )
    script: list[str] = Field(
        min_length=1,
        max_length=MAX_ARGS,
        description="The training script and its arguments, e.g. [train.py, --epochs=3], or"
        " [-m, package.module, ...]; run on every worker from the launcher's working"
        " directory.",
    )
    extra_args: list[_ExtraArg] = Field(
        default_factory=list,
        max_length=MAX_ARGS,
        description="torchrun options, e.g. [--max_restarts=0]; passed as colossalai run's"
        " `--extra_launch_args max_restarts=0`. Write `--name=value`, `--name value` or"
        " `--flag`, of letters, digits, spaces and `_@%+=:,./-` only (colossalai run writes"
        " them into the workers' shell command line unquoted).",
    )

    @field_validator("script")
    @classmethod
    def _script(cls, script: list[str]) -> list[str]:
        problem = script_problem(script)
        if problem is not None:
            raise ValueError(f"script: {problem}")
        return script


class ColossalAIReplicaSpec(ApiModel):
    """The launcher or the workers: how many pods, from which template, restarted how."""

    type: Literal["launcher", "worker"] = Field(description="Replica type: launcher or worker.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLICAS,
        description=f"Number of replicas: 1 for the launcher, 1 to {MAX_REPLICAS} workers."
        " Defaults to 1.",
    )
    restart_policy: RestartPolicyType | RestartPolicy = Field(
        default_factory=RestartPolicy,
        description="How a finished replica is restarted: the object form {policy, limit}"
        " (limit defaults to 0) or a policy name (Always, OnFailure, Never, ExitCode) with"
        " limit 0. Defaults to {policy: OnFailure, limit: 0}.",
    )
    template: SshPodTemplate = Field(
        default_factory=dict,
        description="The pod template. Workers run sshd in their container named `worker` (else"
        " the first); its command and args are ignored. A launcher template without"
        " containers gets one derived from the worker container. It may not set hostname or"
        " subdomain (the operator sets them: the job's headless Service) nor `hostNetwork:"
        " true` or a `hostPort` (workers run sshd on port 22), nor `schedulingGroup` (the"
        " operator's).",
    )

    def restart_rule(self) -> RestartRule:
        """The restart policy in normal form (the string form has limit 0 too)."""
        return RestartRule.of(self.restart_policy)


_SPEC_RULES: list[JsonValue] = [
    {
        "rule": "self.replicaSpecs.exists_one(r, r.type == 'worker')",
        "message": "replicaSpecs must have exactly one replica spec of type worker",
    },
    {
        "rule": "self.replicaSpecs.filter(r, r.type == 'launcher').size() <= 1",
        "message": "replicaSpecs may have at most one replica spec of type launcher",
    },
    {
        "rule": "self.replicaSpecs.all(r, r.type != 'launcher' || !has(r.replicas)"
        " || r.replicas == 1)",
        "message": "the launcher replica spec must have replicas 1",
    },
]


class ColossalAIJobSpec(JobSpec):
    """A ColossalAI training job: a launcher runs `colossalai run` over ssh on the workers."""

    model_config = JobSpec.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _SPEC_RULES}
    )

    ssh: SSHConfig = Field(
        default_factory=SSHConfig, description="sshd and SSH key settings of the replicas."
    )
    run_mode: GeneratedCommandRunMode | None = Field(
        default=None, description="Immediate (default), debug or pause mode."
    )
    run_policy: ColossalAIRunPolicy = Field(
        default_factory=ColossalAIRunPolicy,
        description="What to do with the replicas once the job finished.",
    )
    scheduler: SchedulePolicy | None = Field(
        default=None,
        description="Scheduler of the pods; the cluster's default scheduler when unset.",
    )
    torch_config: TorchConfig = Field(
        description="The training script and how `colossalai run` starts it."
    )
    replica_specs: list[ColossalAIReplicaSpec] = Field(
        min_length=1,
        description="The worker replica spec (required) and the launcher replica spec"
        " (optional: derived from the worker template when left out).",
    )

    @model_validator(mode="after")
    def _replica_types(self) -> ColossalAIJobSpec:
        workers = [s for s in self.replica_specs if s.type == WORKER]
        launchers = [s for s in self.replica_specs if s.type == LAUNCHER]
        if len(workers) != 1:
            raise ValueError(
                f"replicaSpecs must have exactly one replica spec of type worker, found"
                f" {len(workers)}"
            )
        if len(launchers) > 1:
            raise ValueError(
                f"replicaSpecs may have at most one replica spec of type launcher, found"
                f" {len(launchers)}"
            )
        if launchers and launchers[0].replicas != 1:
            raise ValueError(
                f"the launcher replica spec must have replicas 1, got {launchers[0].replicas}"
            )
        return self

    def replica_spec(self, replica_type: str) -> ColossalAIReplicaSpec | None:
        return next((s for s in self.replica_specs if s.type == replica_type), None)

    @property
    def worker(self) -> ColossalAIReplicaSpec:
        spec = self.replica_spec(WORKER)
        assert spec is not None  # the model validator requires one
        return spec

    def lifecycle(self) -> Lifecycle:
        clean_up = self.run_policy.clean_up_workers
        return Lifecycle(
            run_mode=self.run_mode or RunMode(),
            backoff_limit=None,  # restarts are limited per replica, by restartPolicy.limit
            active_deadline_seconds=None,
            clean_up_policy="All" if clean_up else "None",
            clean_up_keeps=frozenset({LAUNCHER}),
            scheduler=self.scheduler,
            # `colossalai run` numbers the hostfile's hosts (node ranks) and tells torchrun
            # worker-0 as the master, on the port the kind documents.
            distribution=Distribution(
                unit="node",
                ranks=(Hostfile("hostfile"),),
                world_size=(Hostfile("hostfile"),),
                addresses=(Address(LaunchOption("--master_addr"), LaunchOption("--master_port")),),
                ports=(MASTER_PORT,),
                ranked_types=(WORKER,),
            ),
            finished_by=(LAUNCHER, 0),  # the launcher's exit decides
            # `colossalai run` exits 0 only when every node did (docs/colossalai.md, "Status").
            finisher_outweighs=frozenset({WORKER}),
        )
