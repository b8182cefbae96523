"""One type of replica (`ReplicaSpec`): its name, count, pod template and restart policy.

Also the restart policy in the normal form the engine applies (`RestartRule`) and the exit
codes worth a retry under the ExitCode policy.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from t9kjobs.models._base import ApiModel
from t9kjobs.models.bounds import INT32_MAX, MAX_REPLICAS
from t9kjobs.models.pod import PodTemplate

__all__ = [
    "RETRYABLE_EXIT_CODES",
    "ReplicaSpec",
    "ReplicaType",
    "RestartPolicy",
    "RestartPolicyType",
    "RestartRule",
]

RestartPolicyType = Literal["Always", "OnFailure", "Never", "ExitCode"]

# Exit codes that mean "killed from outside" (SIGINT, SIGKILL, SIGTERM, SIGUSR1 + 128): worth a
# retry under the ExitCode policy; any other non-zero code is the program's own verdict.
RETRYABLE_EXIT_CODES = frozenset({130, 137, 143, 138})


class RestartPolicy(ApiModel):
    """The object form of a restart policy: a policy and a per-replica limit of restarts."""

    policy: RestartPolicyType = Field(
        default="OnFailure", description="The policy to restart a finished replica."
    )
    limit: int = Field(
        default=0,
        ge=0,
        le=INT32_MAX,
        description="The maximum number of restarts of one replica. Defaults to 0.",
    )


class RestartRule(ApiModel):
    """A replica's restart policy in normal form, as the engine applies it: one rule for every
    kind, built with `RestartRule.of(replica.restart_policy)`.

    A replica is restarted as its `policy` says, within its own `limit` (the object form
    `{policy, limit}`; None for a bare policy name, which has no limit of its own) and within
    the job's `runPolicy.backoffLimit`, which every restart of the job counts against, where the
    kind has one. A replica with neither limit is never restarted: a bare `OnFailure` restarts
    up to `backoffLimit` times in a kind that has one (DeepSpeedJob, PyTorchTrainingJob, and
    the plugin template's MPIJob), and never in one that has none (GenericJob, ColossalAIJob,
    whose references give the object form's `limit` the default 0).
    """

    policy: RestartPolicyType = Field(description="The policy the engine applies.")
    limit: int | None = Field(
        default=None,
        description="Restarts of this replica allowed; None: no limit of its own (bounded by"
        " runPolicy.backoffLimit, and never restarted where the kind has none).",
    )

    @classmethod
    def of(cls, value: RestartPolicyType | RestartPolicy) -> RestartRule:
        """The rule of a `restartPolicy`, either form: a bare policy name has no limit of its
        own, the object form its `limit`."""
        if isinstance(value, str):
            return cls(policy=value)
        return cls(policy=value.policy, limit=value.limit)


# No `-` in a replica type, and a letter first: a pod name `<job>-<type>-<index>` (or
# `<job>-<type>` for a kind's single pod) then reads back one way only, so the pods of two jobs
# of one namespace never share a name (job `a` with type `b-c` and job `a-b` with type `c`
# would both have a pod `a-b-c-0`).
_REPLICA_TYPE_PATTERN = r"^[a-z][a-z0-9]*$"


def _replica_type(value: str) -> str:
    if not re.fullmatch(_REPLICA_TYPE_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a replica type: lowercase letters and digits, a letter first, no"
            " '-' (pod names <job>-<type>-<index> must name one pod of one job)"
        )
    return value


ReplicaType = Annotated[
    str,
    Field(
        min_length=1,
        max_length=30,
        json_schema_extra={"pattern": _REPLICA_TYPE_PATTERN},
        description="Replica type: lowercase letters and digits, a letter first (no `-`); it"
        " becomes part of pod names.",
    ),
    AfterValidator(_replica_type),
]


class ReplicaSpec(ApiModel):
    """One type of replica: how many pods, from which template, restarted how."""

    type: ReplicaType
    replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description=f"Number of replicas, at most {MAX_REPLICAS}. Defaults to 1.",
    )
    restart_policy: RestartPolicyType | RestartPolicy = Field(
        default="OnFailure",
        description="How a finished replica is restarted: the object form {policy, limit}"
        " (at most `limit` restarts of this replica, default 0) or a policy name (Always,"
        " OnFailure, Never, ExitCode), which has no limit of its own: restarted within"
        " runPolicy.backoffLimit where the kind has one, else never. Defaults to OnFailure.",
    )
    template: PodTemplate = Field(
        default_factory=dict, description="The pod template of this replica type."
    )
