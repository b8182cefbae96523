"""The DeepSpeedJob spec, per the DeepSpeedJob API reference (every field).

Where the user reference spells a field differently (`run.Module`, `run.Exec`, `elastic.enable`,
`t9kScheduler.Queue`), the API reference's spelling is canonical and the other is accepted as an
alias, so that nothing a user writes from either document is dropped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, model_validator

from t9kjobs.plugin import (
    INT32_MAX,
    MAX_ARGS,
    MAX_REPLICAS,
    ApiModel,
    Distribution,
    ElasticConfig,
    GeneratedCommandRunMode,
    Hostfile,
    JobSpec,
    JobStatus,
    Lifecycle,
    RestartPolicyType,
    RunPolicy,
    SchedulePolicy,
    SshPodTemplate,
    SshSettings,
    not_elastic_rule,
)

__all__ = [
    "RUN_RULE",
    "DeepSpeedConfig",
    "DeepSpeedJobSpec",
    "DeepSpeedJobStatus",
    "RunType",
    "Worker",
]

# Both spellings of `module` and `exec` count: the API server stores what the user wrote.
RUN_RULE = (
    "has(self.customCommand) || (has(self.run) && "
    "((has(self.run.python) ? 1 : 0)"
    " + (has(self.run.module) || has(self.run.Module) ? 1 : 0)"
    " + (has(self.run.exec) || has(self.run.Exec) ? 1 : 0)) == 1)"
)
_RUN_MESSAGE = "run must set exactly one of python, module and exec, unless customCommand is set"


def _program_field(canonical: str, alias: str | None, description: str) -> Any:
    extra = f" `{alias}` is accepted as an alias." if alias else ""
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_ARGS,
        validation_alias=AliasChoices(canonical, alias) if alias else canonical,
        serialization_alias=canonical,
        description=description + extra,
    )


class RunType(ApiModel):
    """How the training program starts; exactly one of python, module and exec."""

    python: list[str] | None = _program_field(
        "python", None, "A Python script and its arguments: `deepspeed ... <script> <args>`."
    )
    module: list[str] | None = _program_field(
        "module",
        "Module",
        "A Python module and its arguments: `deepspeed --module ... <module> <args>`.",
    )
    exec: list[str] | None = _program_field(
        "exec",
        "Exec",
        "An executable and its arguments: `deepspeed --no_python ... <program> <args>`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        # AliasChoices keeps the first spelling found; both present would drop one silently.
        if isinstance(data, dict):
            for canonical, alias in (("module", "Module"), ("exec", "Exec")):
                if data.get(canonical) is not None and data.get(alias) is not None:
                    raise ValueError(f"set run.{canonical} or its alias run.{alias}, not both")
        return data

    def chosen(self) -> list[str]:
        """The names of the set fields (valid when exactly one)."""
        fields = (("python", self.python), ("module", self.module), ("exec", self.exec))
        return [name for name, value in fields if value is not None]


class DeepSpeedConfig(ApiModel):
    """How worker-0 launches DeepSpeed: `deepspeed --hostfile=/t9k/hostfile ...`."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": RUN_RULE, "message": _RUN_MESSAGE}]
        }
    )

    custom_command: str | None = Field(
        default=None,
        min_length=1,
        description="A launch command run by bash on worker-0 instead of the generated"
        " `deepspeed` command; every other field of config but slotsPerWorker is then ignored.",
    )
    slots_per_worker: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="Slots of each worker in the hostfile (`slots=N`), normally its GPU count."
        " Defaults to the training container's nvidia.com/gpu limit (else request), else 1;"
        " status.slotsPerWorker shows the value used.",
    )
    local_rank: bool = Field(
        default=True,
        description="Pass --local_rank to the training program; false adds --no_local_rank."
        " Defaults to true.",
    )
    autotune: Literal["tune", "run"] | None = Field(
        default=None,
        description="Run DeepSpeed's autotuner first (`--autotuning tune|run`).",
    )
    run: RunType | None = Field(
        default=None, description="The training program; required unless customCommand is set."
    )
    other_args: list[str] = Field(
        default_factory=list,
        max_length=MAX_ARGS,
        description="More `deepspeed` launcher options, placed before the program.",
    )

    @model_validator(mode="after")
    def _exactly_one_program(self) -> DeepSpeedConfig:
        if self.custom_command is None and (self.run is None or len(self.run.chosen()) != 1):
            raise ValueError(_RUN_MESSAGE)
        return self


class Worker(ApiModel):
    """The worker replicas: every one runs sshd, worker-0 also runs the launcher."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLICAS,
        description=f"Number of workers (without elastic), at most {MAX_REPLICAS}. Defaults to 1.",
    )
    template: SshPodTemplate = Field(
        default_factory=dict,
        description="The workers' pod template; the operator sets restartPolicy Never and the"
        " training container's command. It may not set hostname or subdomain (the operator"
        " sets them: the job's headless Service) nor `hostNetwork: true` or a `hostPort` (workers"
        " run sshd on port 22), nor `schedulingGroup` (the operator's).",
    )
    restart_policy: RestartPolicyType = Field(
        default="OnFailure",
        description="Always, OnFailure, Never or ExitCode. Defaults to OnFailure.",
    )


class DeepSpeedJobStatus(JobStatus):
    """The shared job status plus the hostfile's slots."""

    slots_per_worker: int | None = Field(
        default=None,
        description="Slots of each worker in the hostfile, as used: spec.config.slotsPerWorker,"
        " else the training container's nvidia.com/gpu limit (else request), else 1.",
    )


class DeepSpeedJobSpec(JobSpec):
    """A DeepSpeed job: N workers reached over ssh, launched by `deepspeed` on worker-0."""

    model_config = JobSpec.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [not_elastic_rule("DeepSpeedJob")]}
    )

    scheduler: SchedulePolicy | None = Field(
        default=None, description="Scheduler of the pods; the cluster default when unset."
    )
    run_policy: RunPolicy = Field(
        default_factory=RunPolicy, description="Cleanup, deadline and restart budget."
    )
    run_mode: GeneratedCommandRunMode | None = Field(
        default=None, description="Immediate (default), debug or pause."
    )
    elastic: ElasticConfig | None = Field(
        default=None,
        description="Elastic training: expectedReplicas, clamped to [minReplicas, maxReplicas],"
        " is the number of workers.",
    )
    config: DeepSpeedConfig = Field(description="How to launch DeepSpeed.")
    disable_custom_env: bool = Field(
        default=False,
        description="false (default): the training container's env is written to"
        " /root/.deepspeed_env so that the launcher exports it to every process; true: the env"
        " only reaches the container's entrypoint.",
    )
    worker: Worker = Field(description="The worker replicas.")
    ssh: SshSettings = Field(
        default_factory=SshSettings,
        description="Where the job's SSH keys are mounted and the port its sshd listen on (not"
        " in the API reference: an extension of t9k-jobs, for pods that run as a normal user;"
        " the defaults, /root/.ssh and 22, are the reference's behaviour). The env file is"
        " written to `.deepspeed_env` in the folder that holds authMountPath (the user's home).",
    )

    def lifecycle(self) -> Lifecycle:
        """The shared settings; an elastic job runs with as few as minReplicas workers."""
        life = replace(
            super().lifecycle(),
            # DeepSpeed's launcher numbers the hostfile's slots: a rank a process.
            distribution=Distribution(
                unit="process",
                ranks=(Hostfile("hostfile"),),
                world_size=(Hostfile("hostfile"),),
                ranked_types=("worker",),
            ),
            finished_by=("worker", 0),  # worker-0 runs the launcher
            # The launcher exits 0 only when every rank did: a worker lost after it is no
            # loss of the job's (docs/deepspeed.md, "Status").
            finisher_outweighs=frozenset({"worker"}),
        )
        elastic = self.elastic
        if elastic is None or not elastic.enabled or elastic.min_replicas is None:
            return life
        return replace(life, min_available=elastic.min_replicas)

    @property
    def elastic_enabled(self) -> bool:
        return self.elastic is not None and self.elastic.enabled

    def worker_count(self) -> int:
        """The number of workers now: the elastic count when elastic is enabled."""
        if self.elastic is not None and self.elastic.enabled:
            return self.elastic.replicas(self.worker.replicas)
        return self.worker.replicas
