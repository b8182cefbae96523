"""Checkpoints (`spec.checkpoint`): what every pod is told, and the newest checkpoint recorded.

Two moments. `prepare` (from `desired_pods`, before the launch command is built, so that a
launcher that carries its environment to remote ranks sees the names) gives the training
container the static values (`T9KJOBS_CHECKPOINT_DIR`, `T9KJOBS_STOP_GRACE_SECONDS`,
`T9KJOBS_STALL_SECONDS`) and the names whose values change over the job's life, empty; the
pod's `terminationGracePeriodSeconds` at least the stop grace; the claim mounted at the path.
All of that is in the spec hash. `resume_values` (from `running`, for a pod about to be created,
after its hash is taken, as its incarnation annotation is) fills the changing ones: the newest
checkpoint (`T9KJOBS_RESUME_FROM`, `T9KJOBS_RESUME_STEP`) and the incarnation
(`T9KJOBS_RESTART_COUNT`). So a new checkpoint, or a restart, never makes a pod that is
recreated on a change of its spec (DeepSpeed's worker-0, ColossalAI's launcher) relaunch.

`record_checkpoint` writes `status.checkpoint` from the newest report read, when it names a
checkpoint under the folder (normalised, no `..` out of it); one elsewhere is refused with a
Warning Event `CheckpointOutsidePath`, said once per report read.
"""

from __future__ import annotations

from t9kjobs.models import CheckpointStatus, Job, JobStatus, checkpoint_of
from t9kjobs.objects import (
    ENGINE_ENV,
    ENV_CHECKPOINT_DIR,
    ENV_RESTART_COUNT,
    ENV_RESUME_FROM,
    ENV_RESUME_STEP,
    ENV_STALL_SECONDS,
    ENV_STOP_GRACE_SECONDS,
    DesiredPod,
    engine_env_names,
    find_container,
    set_env,
)
from t9kjobs.planner.conditions import parse_time, rfc3339
from t9kjobs.planner.types import Event, Reading

__all__ = [
    "CHECKPOINT_VOLUME",
    "DEFAULT_POD_GRACE_SECONDS",
    "prepare",
    "record_checkpoint",
    "resume_values",
    "resumed_from",
]

# The volume `spec.checkpoint.claimName` is mounted from.
CHECKPOINT_VOLUME = "t9kjobs-checkpoint"
# What Kubernetes gives a pod that says nothing.
DEFAULT_POD_GRACE_SECONDS = 30


def prepare(job: Job, pod: DesiredPod) -> None:
    """The static part (module docstring); nothing for a job without checkpoint or stall."""
    if not engine_env_names(job.spec):
        return
    container = find_container(pod.manifest, pod.training_container)
    checkpoint = checkpoint_of(job.spec)
    recovery = job.spec.recovery_policy
    values = dict.fromkeys(ENGINE_ENV, "")
    if recovery is not None and recovery.stall.enabled:
        values[ENV_STALL_SECONDS] = str(recovery.stall.floor_seconds)
    if checkpoint is not None:
        values[ENV_CHECKPOINT_DIR] = checkpoint.path
        values[ENV_STOP_GRACE_SECONDS] = str(checkpoint.grace_period_seconds)
        spec = pod.manifest["spec"]
        own = spec.get("terminationGracePeriodSeconds")
        spec["terminationGracePeriodSeconds"] = max(
            DEFAULT_POD_GRACE_SECONDS if own is None else int(own),
            checkpoint.grace_period_seconds,
        )
        if checkpoint.claim_name is not None and container is not None:
            volumes = [v for v in spec.get("volumes") or [] if v.get("name") != CHECKPOINT_VOLUME]
            volumes.append(
                {
                    "name": CHECKPOINT_VOLUME,
                    "persistentVolumeClaim": {"claimName": checkpoint.claim_name},
                }
            )
            spec["volumes"] = volumes
            mounts = [
                m for m in container.get("volumeMounts") or [] if m.get("name") != CHECKPOINT_VOLUME
            ]
            mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": checkpoint.path})
            container["volumeMounts"] = mounts
    if container is not None:
        set_env(container, values)


def resumed_from(job: Job, status: JobStatus) -> CheckpointStatus | None:
    """The checkpoint a pod created now resumes from: the newest recorded, unless the job says
    `resume: Never` or has no checkpoint section."""
    checkpoint = checkpoint_of(job.spec)
    return status.checkpoint if checkpoint is not None and checkpoint.resume == "Latest" else None


def resume_values(job: Job, status: JobStatus, pod: DesiredPod, incarnation: int) -> None:
    """The changing values of a pod about to be created, after its spec hash is taken."""
    if not engine_env_names(job.spec):
        return
    container = find_container(pod.manifest, pod.training_container)
    if container is None:
        return
    saved = resumed_from(job, status)
    values = {ENV_RESTART_COUNT: str(incarnation)}
    if saved is not None:
        values[ENV_RESUME_FROM] = saved.path
        values[ENV_RESUME_STEP] = "" if saved.step is None else str(saved.step)
    # In place: the names keep the order the hash was taken with.
    for entry in container.get("env") or []:
        if entry.get("name") in values:
            entry["value"] = values[entry["name"]]


def _new(status: JobStatus, reading: Reading) -> bool:
    """Whether the reading's checkpoint was saved after the report the status holds (called
    before that report is replaced): every report after a checkpoint repeats it."""
    progress = status.progress
    if progress is None or progress.step is None:
        return True
    step = reading.report.checkpoint_step
    return step is not None and progress.step < step


def record_checkpoint(job: Job, status: JobStatus, reading: Reading | None) -> list[Event]:
    """Record the checkpoint the newest report names (module docstring); called before the
    report itself is recorded (`record_progress`)."""
    checkpoint = checkpoint_of(job.spec)
    if checkpoint is None or reading is None or reading.report.checkpoint is None:
        return []
    said = reading.report.checkpoint
    before = status.checkpoint
    if before is not None and before.time is not None and parse_time(before.time) >= reading.time:
        return []  # recorded already, or older than what is
    path = checkpoint.holds(said)
    if path is None:
        if not _new(status, reading):
            return []  # said when it was new: every report since repeats it
        return [
            Event(
                "Warning",
                "CheckpointOutsidePath",
                f"{reading.replica} reported the checkpoint {said[:256]}, which is not under"
                f" spec.checkpoint.path {checkpoint.path}: not recorded, no pod resumes from it",
            )
        ]
    if before is not None and before.path == path and before.step == reading.report.checkpoint_step:
        return []  # repeated by every report since: its first report's time stands
    status.checkpoint = CheckpointStatus(
        path=path,
        step=reading.report.checkpoint_step,
        time=rfc3339(reading.time),
        replica=reading.replica,
    )
    return []
