"""The run mode of a job: Immediate (default), Debug or Pause, and how it resumes.

Debug mode starts the replicas with another command (or none of the init containers); pause
mode deletes the pods, and `resumeSpecs` say how they start again. A kind whose operator
generates every pod's command (the launcher, sshd) refuses resume overrides of the command:
`GeneratedCommandRunMode`. The rule that `resumeSpecs` do not change while the job is paused
is a transition rule (it reads `oldSelf`), so it exists only as CEL, in the CRD.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from t9kjobs.models._base import ApiModel
from t9kjobs.models._spellings import _OneSpelling, enabled_field
from t9kjobs.models.bounds import MAX_ARGS, MAX_REPLICA_TYPES

__all__ = [
    "Args",
    "DebugMode",
    "GeneratedCommandPauseMode",
    "GeneratedCommandResumeSpec",
    "GeneratedCommandRunMode",
    "PauseMode",
    "ReplicaDebugSet",
    "ResumeSpec",
    "RunMode",
    "RunModeName",
]

# An argument list: a command, its arguments, launcher options.
Args = Annotated[list[str], Field(max_length=MAX_ARGS)]
RunModeName = Literal["Immediate", "Debug", "Pause"]


class ReplicaDebugSet(ApiModel):
    """How to start the replicas of one type in debug mode."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: Args | None = Field(
        default=None, description="Command that replaces the containers' command."
    )


class DebugMode(_OneSpelling):
    """Whether and how to start the job in debug mode."""

    enabled: bool = enabled_field("Whether to enable debug mode.")
    replica_specs: list[ReplicaDebugSet] = Field(
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides in debug mode.",
    )


class ResumeSpec(ApiModel):
    """How to start the replicas of one type when the job resumes from pause."""

    type: str = Field(description="Replica type.")
    skip_init_container: bool = Field(
        default=False, description="Skip the init containers, if true."
    )
    command: Args | None = Field(
        default=None, description="Command to run instead of the template's, when resuming."
    )
    args: Args | None = Field(
        default=None, description="Args to use instead of the template's, when resuming."
    )


# True when the stored (old) object is paused, whichever spelling of `enabled` it uses; a
# transition rule only runs when the old object has a `pause` at all.
_WAS_PAUSED = (
    "((has(oldSelf.enabled) && oldSelf.enabled) || (has(oldSelf.enable) && oldSelf.enable))"
)
_RESUME_SPECS_FROZEN = (
    f"!{_WAS_PAUSED} || (has(self.resumeSpecs) ? self.resumeSpecs : [])"
    " == (has(oldSelf.resumeSpecs) ? oldSelf.resumeSpecs : [])"
)


class PauseMode(_OneSpelling):
    """Whether the job is paused (its pods deleted) and how it resumes."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": _RESUME_SPECS_FROZEN,
                    "message": "resumeSpecs cannot be changed while the job is paused; set them"
                    " together with pause.enabled: true",
                    "fieldPath": ".resumeSpecs",
                    "reason": "FieldValueForbidden",
                }
            ]
        }
    )

    enabled: bool = enabled_field("Whether to enable pause mode.")
    resume_specs: list[ResumeSpec] = Field(
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides used when resuming.",
    )


class RunMode(ApiModel):
    """Immediate (default), Debug or Pause. Pause wins when both are enabled."""

    debug: DebugMode | None = Field(default=None, description="Debug mode.")
    pause: PauseMode | None = Field(default=None, description="Pause mode.")

    @property
    def paused(self) -> bool:
        return self.pause is not None and self.pause.enabled

    @property
    def debugging(self) -> bool:
        return not self.paused and self.debug is not None and self.debug.enabled

    @property
    def name(self) -> RunModeName:
        """The mode in force, as status.runMode shows it."""
        return "Pause" if self.paused else "Debug" if self.debugging else "Immediate"


_GENERATED_COMMAND = (
    "cannot be set on resume in this kind: the operator generates the command of every pod"
    " (the launcher, sshd), so it would be dropped; resumeSpecs may only skip init containers"
)


def _refused_on_resume(field: str) -> Any:
    return Field(default=None, description=f"Not allowed: `{field}` {_GENERATED_COMMAND}.")


class GeneratedCommandResumeSpec(ResumeSpec):
    """How to start the replicas of one type when the job resumes: the command is generated."""

    # The engine sets such a kind's launch command after the resume overrides, so `command` and
    # `args` would be dropped without a word: they are refused, here and at admission.

    model_config = ResumeSpec.model_config | ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!has(self.{field})",
                    "message": f"`{field}` {_GENERATED_COMMAND}",
                    "fieldPath": f".{field}",
                    "reason": "FieldValueForbidden",
                }
                for field in ("command", "args")
            ]
        }
    )

    command: list[str] | None = _refused_on_resume("command")
    args: list[str] | None = _refused_on_resume("args")

    @field_validator("command", "args")
    @classmethod
    def _refused(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        # Called only for a value the user wrote (a null is absent): the CRD refuses any value.
        raise ValueError(f"`{info.field_name}` {_GENERATED_COMMAND}")


class GeneratedCommandPauseMode(PauseMode):
    """Pause mode whose resumeSpecs may only skip init containers."""

    resume_specs: list[GeneratedCommandResumeSpec] = Field(  # type: ignore[assignment]
        default_factory=list,
        max_length=MAX_REPLICA_TYPES,
        description="Per replica type overrides used when resuming: skipInitContainer only.",
    )


class GeneratedCommandRunMode(RunMode):
    """The run mode of a kind whose operator generates every pod's command (DeepSpeedJob,
    ColossalAIJob): resume overrides of command and args are refused."""

    pause: GeneratedCommandPauseMode | None = Field(default=None, description="Pause mode.")
