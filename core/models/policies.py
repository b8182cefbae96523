"""The job-wide policies: cleanup, deadline and restart budget (`RunPolicy`), and which
scheduler places the pods (`SchedulePolicy`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from t9kjobs.models._base import ApiModel
from t9kjobs.models._spellings import _OneSpelling
from t9kjobs.models.bounds import INT32_MAX

__all__ = ["CleanUpPolicy", "RunPolicy", "SchedulePolicy", "T9kScheduler"]

CleanUpPolicy = Literal["All", "Unfinished", "None"]


class RunPolicy(ApiModel):
    """Runtime policies: cleanup, deadline and restart budget."""

    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="Seconds from the job's start after which it fails with DeadlineExceeded.",
    )
    backoff_limit: int = Field(
        default=3,
        ge=0,
        le=INT32_MAX,
        description="Restarts allowed, shared by all replicas, before the job fails."
        " Defaults to 3.",
    )
    clean_up_policy: CleanUpPolicy = Field(
        default="None",
        description="Pods deleted when the job finishes: All, Unfinished (those still pending or"
        " running) or None (default).",
    )


class T9kScheduler(_OneSpelling):
    """Gang scheduling through the T9k scheduler (a PodGroup per job)."""

    queue: str = Field(
        validation_alias=AliasChoices("queue", "Queue"),
        serialization_alias="queue",
        description="Queue of the PodGroup. `Queue` is accepted as an alias.",
    )
    priority: int = Field(
        default=0, ge=0, le=100, description="PodGroup priority in [0, 100]. Defaults to 0."
    )


class SchedulePolicy(ApiModel):
    """Which scheduler places the pods; the cluster's default scheduler when unset."""

    # An explicit alias: the camelCase generator spells `t9k_scheduler` as `t9KScheduler`.
    t9k_scheduler: T9kScheduler | None = Field(
        default=None,
        alias="t9kScheduler",
        description="Gang scheduling by the T9k scheduler: a PodGroup per job, in a queue.",
    )
