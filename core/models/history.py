"""What the engine did about each failure it recovered from: `status.restartHistory`.

One entry per restart the recovery rules or a replica's `restartPolicy` decide (jobs with a
`spec.recoveryPolicy` only: older jobs' status stays as it was), written in the same status
write as the restart's counts, so before any pod is deleted: a replay after a crash finds the
entry and adds none. Newest last, at most `MAX_RESTART_HISTORY` (the oldest dropped), each
message cut to `MAX_HISTORY_MESSAGE` characters: about 6 KiB at most in the status.

An entry is open until a plan finds every replica Running or Succeeded again
(`recoveredTime`); `status.reason` says the open entry's reason meanwhile.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from t9kjobs.models._base import ApiModel

__all__ = ["MAX_HISTORY_MESSAGE", "MAX_RESTART_HISTORY", "RestartRecord"]

MAX_RESTART_HISTORY = 16
MAX_HISTORY_MESSAGE = 256


class RestartRecord(ApiModel):
    """One restart the engine performed, and how long the job took to recover."""

    # Status is ours to write; fields added by a newer operator must not break an older one.
    model_config = ApiModel.model_config | ConfigDict(extra="ignore")

    time: str = Field(description="When the engine decided the restart (RFC 3339).")
    failure_time: str | None = Field(
        default=None,
        description="When the failure happened, when known: the container's finishedAt.",
    )
    recovered_time: str | None = Field(
        default=None,
        description="When every replica was Running or Succeeded again; absent while the"
        " recovery is under way.",
    )
    replica: str = Field(
        max_length=253, description="The failed replica's pod (a RestartJob's trigger)."
    )
    action: Literal["RestartReplica", "RestartJob", "Ignore"] = Field(
        description="What the engine did: RestartReplica, RestartJob or Ignore."
    )
    reason: str = Field(
        max_length=64,
        description="The failure's reason: NodeLost, Preempted, Evicted, OOMKilled, Error, or"
        " Completed (a replica restarted after a success, restartPolicy Always).",
    )
    exit_code: int | None = Field(default=None, description="The exit code, when one was seen.")
    node: str | None = Field(default=None, max_length=253, description="The pod's node.")
    rule: str = Field(
        max_length=128,
        description="The rule that decided: its name, `rules[i]`, `builtin:infrastructure`, or"
        " `restartPolicy`.",
    )
    budget: Literal["User", "Infrastructure", "None"] = Field(
        description="The budget charged: User (backoffLimit, limit), Infrastructure"
        " (infrastructureRestartLimit) or None."
    )
    steps_lost: int | None = Field(
        default=None,
        ge=0,
        description="Training steps to do again (status.progress.step, when the program"
        " reports it).",
    )
    message: str | None = Field(
        default=None, max_length=MAX_HISTORY_MESSAGE, description="What failed, for people."
    )
