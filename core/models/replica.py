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
    """A replica's restart policy in normal form, as the engine applies it.

    `limit` is the replica's own restart limit; None means none, for kinds whose
    `restartPolicy` is a string only and whose restarts are bounded by the job's
    `runPolicy.backoffLimit` (DeepSpeedJob, PyTorchTrainingJob). A kind with neither would
    restart a failing replica for ever.
    """

    policy: RestartPolicyType = Field(description="The policy the engine applies.")
    limit: int | None = Field(
        default=None,
        description="Restarts of one replica allowed; None: bounded by runPolicy.backoffLimit"
        " only.",
    )

    @classmethod
    def of(cls, value: RestartPolicyType | RestartPolicy) -> RestartRule:
        """A `restartPolicy` that has the object form: the string form is that policy with the
        object form's default limit (0), as the GenericJob and ColossalAIJob references say."""
        if isinstance(value, str):
            value = RestartPolicy(policy=value)
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
        " (limit defaults to 0) or a policy name (Always, OnFailure, Never, ExitCode) with"
        " limit 0. Defaults to OnFailure, limit 0.",
    )
    template: PodTemplate = Field(
        default_factory=dict, description="The pod template of this replica type."
    )
