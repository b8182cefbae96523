"""Where a job saves its checkpoints (`spec.checkpoint`, every kind) and the newest one it
reported (`status.checkpoint`).

A field of the base `JobSpec` beside `recoveryPolicy`, so every kind and its CRD have it. The
engine gives every pod the folder and the stop grace in its environment, a longer
`terminationGracePeriodSeconds` (SIGTERM, then this long, then SIGKILL, for every stop the
operator causes), mounts the claim when one is named, and gives every pod created after a
checkpoint was reported its path (`T9KJOBS_RESUME_FROM`): docs/lifecycle.md, "Checkpoints".
Its own module so that the recovery rules' module stays about rules.
"""

from __future__ import annotations

import posixpath
from typing import Literal

from pydantic import ConfigDict, Field, JsonValue, model_validator

from t9kjobs.models._base import ApiModel

__all__ = ["DEFAULT_STOP_GRACE_SECONDS", "MAX_CHECKPOINT_PATH", "CheckpointSpec", "checkpoint_of"]

DEFAULT_STOP_GRACE_SECONDS = 60
MAX_STOP_GRACE_SECONDS = 3600
# The longest checkpoint path a report may name (`t9kjobs.progress`), and the folder's.
MAX_CHECKPOINT_PATH = 1024
# Folders the engine mounts its own files under: a checkpoint folder there would hide them.
RESERVED_PREFIX = "/t9k"

_CHECKPOINT_RULES: list[JsonValue] = [
    {
        "rule": f"self.path.startsWith('/') && !self.path.startsWith('{RESERVED_PREFIX}')",
        "message": f"path must be absolute and not under {RESERVED_PREFIX} (the engine's own"
        " files)",
    },
]


class CheckpointSpec(ApiModel):
    """Where the job's program saves its checkpoints, and how long it has to save one when
    the operator stops a pod."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _CHECKPOINT_RULES}
    )

    path: str = Field(
        min_length=1,
        max_length=MAX_CHECKPOINT_PATH,
        description="The folder the program saves checkpoints in, shared by the job's pods"
        " (absolute, not under /t9k): T9KJOBS_CHECKPOINT_DIR in every pod. A reported"
        " checkpoint is recorded only under it.",
    )
    claim_name: str | None = Field(
        default=None,
        max_length=253,
        description="A PersistentVolumeClaim the engine mounts at path in the training"
        " container of every pod (ReadWriteMany when the pods run on several nodes); absent:"
        " the template mounts its own volume there.",
    )
    grace_period_seconds: int = Field(
        default=DEFAULT_STOP_GRACE_SECONDS,
        ge=0,
        le=MAX_STOP_GRACE_SECONDS,
        description="Seconds between SIGTERM and SIGKILL when the operator stops a pod (a"
        " restart, a pause, an eviction): the pod's terminationGracePeriodSeconds is at least"
        " this. Defaults to 60.",
    )
    resume: Literal["Latest", "Never"] = Field(
        default="Latest",
        description="Latest: every pod created after a checkpoint was reported gets its path in"
        " T9KJOBS_RESUME_FROM; Never: T9KJOBS_RESUME_FROM stays empty.",
    )

    @model_validator(mode="after")
    def _path(self) -> CheckpointSpec:
        if not self.path.startswith("/") or self.path.startswith(RESERVED_PREFIX):
            raise ValueError(
                f"path must be absolute and not under {RESERVED_PREFIX} (the engine's own files)"
            )
        return self

    def holds(self, path: str) -> str | None:
        """`path`, normalised, when it is under the checkpoint folder (no `..` out of it);
        None otherwise."""
        if not path.startswith("/"):
            return None
        folder = posixpath.normpath(self.path)
        normal = posixpath.normpath(path)
        if normal == folder or normal.startswith(folder.rstrip("/") + "/"):
            return normal
        return None


def checkpoint_of(spec: object) -> CheckpointSpec | None:
    """The job's checkpoint settings, None when it has none."""
    found = getattr(spec, "checkpoint", None)
    return found if isinstance(found, CheckpointSpec) else None
