"""The MPIJob spec, what users write under `spec:` (camelCase on the wire, unknown fields
refused, by `ApiModel`). The CRD is generated from it; descriptions are its documentation."""

from __future__ import annotations

from pydantic import Field
from t9kjobs.models import (
    ApiModel,
    JobSpec,
    PodTemplate,
    RestartPolicyType,
    RunMode,
    RunPolicy,
    SchedulePolicy,
)

__all__ = ["Launcher", "MPIJobSpec", "Workers"]


class Launcher(ApiModel):
    """The launcher pod: it runs mpirun, so its exit is the job's result."""

    restart_policy: RestartPolicyType = Field(
        default="OnFailure",
        description="When a finished pod is restarted (Always, OnFailure, Never, ExitCode); the"
        " restarts of all pods together are bounded by runPolicy.backoffLimit.",
    )
    template: PodTemplate = Field(description="Pod template; its first container runs mpirun.")


class Workers(Launcher):
    """The worker pods: they run sshd; mpirun starts the ranks on them."""

    replicas: int = Field(default=1, ge=1, description="Number of workers. Defaults to 1.")


class MPIJobSpec(JobSpec):
    """An MPI job: a launcher runs `mpirun` over ssh on N workers."""

    slots_per_worker: int = Field(default=1, ge=1, description="Ranks per worker. Defaults to 1.")
    mpirun_args: list[str] = Field(default_factory=list, description="mpirun options.")
    program: list[str] = Field(min_length=1, description="The program every rank runs, and args.")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Restarts, cleanup.")
    run_mode: RunMode | None = Field(default=None, description="Immediate, debug or pause.")
    # JobSpec.lifecycle() reads run_policy, run_mode and scheduler by these names.
    scheduler: SchedulePolicy | None = Field(default=None, description="Gang scheduling.")
    launcher: Launcher = Field(description="The launcher pod.")
    worker: Workers = Field(description="The worker pods.")
