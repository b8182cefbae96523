"""The MPIJob spec, what users write under `spec:` (camelCase on the wire, unknown fields
refused, by `ApiModel`). The CRD is generated from it; descriptions are its documentation.

A rule across fields, or one the schema's keywords cannot say, is written twice: as CEL
(`x-kubernetes-validations`), which the API server checks at `kubectl apply`, and as a pydantic
validator, which `t9kjobs validate` and the operator check. The conformance kit compiles the CEL
on a real API server and checks that the invalid examples are refused at the path they name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from pydantic import ConfigDict, Field, JsonValue, field_validator
from t9kjobs.plugin import (
    ApiModel,
    Distribution,
    Hostfile,
    JobSpec,
    LaunchOption,
    Lifecycle,
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


# Options that set the rank count, which the launcher computes (workers x slotsPerWorker).
RANK_COUNT_OPTIONS = ("-n", "-np", "--np", "-c")
# CEL rules, typed `list[JsonValue]` (a list of dicts is not one to `mypy --strict`).
# `fieldPath` names the field the error is reported at (`spec.mpirunArgs`), relative to the
# object the rule is on; a rule on a list needs the list and its strings bounded (`max_length`)
# for the API server to accept its estimated cost.
_SPEC_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.mpirunArgs) || !self.mpirunArgs.exists(a, a in"
        f" {list(RANK_COUNT_OPTIONS)})",
        "message": "mpirunArgs must not set the rank count (-n, -np, --np, -c): the launcher"
        " runs worker.replicas x slotsPerWorker ranks",
        "fieldPath": ".mpirunArgs",
        "reason": "FieldValueInvalid",
    }
]
_Arg = Annotated[str, Field(max_length=4096)]


class MPIJobSpec(JobSpec):
    """An MPI job: a launcher runs `mpirun` over ssh on N workers."""

    model_config = JobSpec.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _SPEC_RULES}
    )

    slots_per_worker: int = Field(default=1, ge=1, description="Ranks per worker. Defaults to 1.")
    mpirun_args: list[_Arg] = Field(
        default_factory=list, max_length=64, description="mpirun options."
    )
    program: list[str] = Field(min_length=1, description="The program every rank runs, and args.")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Restarts, cleanup.")
    run_mode: RunMode | None = Field(default=None, description="Immediate, debug or pause.")
    # JobSpec.lifecycle() reads run_policy, run_mode and scheduler by these names.
    scheduler: SchedulePolicy | None = Field(default=None, description="Gang scheduling.")
    launcher: Launcher = Field(description="The launcher pod.")
    worker: Workers = Field(description="The worker pods.")

    def lifecycle(self) -> Lifecycle:
        """What the job means, for the conformance kit: mpirun numbers the hostfile's slots
        (a rank a process, on the workers only) and starts `-np` of them; the launcher's exit
        alone decides the job (its success means every rank finished)."""
        return replace(
            super().lifecycle(),
            distribution=Distribution(
                unit="process",
                ranks=(Hostfile("hostfile"),),
                world_size=(Hostfile("hostfile"), LaunchOption("-np")),
                ranked_types=("worker",),
            ),
            finished_by=("launcher", 0),
            # mpirun exits 0 only when every rank did: a worker lost after the launcher
            # succeeded takes nothing from the job.
            finisher_outweighs=frozenset({"worker"}),
        )

    @field_validator("mpirun_args")
    @classmethod
    def _no_rank_count(cls, args: list[str]) -> list[str]:
        """The CEL rule's twin, for `t9kjobs validate` and the operator."""
        if any(a in RANK_COUNT_OPTIONS for a in args):
            raise ValueError(
                "must not set the rank count (-n, -np, --np, -c): the launcher runs"
                " worker.replicas x slotsPerWorker ranks"
            )
        return args
