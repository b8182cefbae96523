"""What a plugin declares about each kind it serves, and the small value types of the hook API."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from t9kjobs.models import JobSpec, JobStatus

__all__ = ["FunctionRun", "KindInfo", "Problem", "ReplicaState", "Verdict", "replicas_lost"]


@dataclass(frozen=True)
class KindInfo:
    """A kind served by a plugin: names for the CRD, the spec model, engine defaults."""

    kind: str
    spec_model: type[JobSpec]
    plural: str
    short_names: tuple[str, ...] = ()
    status_model: type[JobStatus] = JobStatus
    # Command of every container in debug mode unless a replica type overrides it.
    debug_command: tuple[str, ...] = ("sleep", "inf")
    # Dotted spec path of the elastic replica count, for the CRD's scale subresource.
    scale_spec_path: str | None = None
    categories: tuple[str, ...] = ("t9k",)
    description: str = ""

    @property
    def singular(self) -> str:
        return self.kind.lower()


@dataclass(frozen=True)
class FunctionRun:
    """A Python function to run as a job (`Client.train`), as `t9kjobs_function_spec` gets it.

    `command` runs the function in one process (`python3 -c <the runner>`): the kind's launcher
    starts it once per process, with the environment the kind gives each rank (RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/MASTER_PORT as torch reads them) plus `env`, which
    carries the function, its arguments and the runner (every training container needs all of
    it). `distributed` names what the runner initialises before calling the function: `torch`
    (`torch.distributed.init_process_group`), `deepspeed` (`deepspeed.init_distributed`), or ""
    (nothing: the function reads its rank and meets its peers itself). `resources` is the
    training container's `resources` (`{"limits": {...}}`), `{}` when none was asked for.
    """

    command: tuple[str, ...]
    env: Mapping[str, str]
    image: str
    nodes: int = 1
    procs_per_node: int = 1
    resources: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    """A validation finding, with the field path it is about (`spec.worker.replicas`)."""

    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{prefix}{self.path}: {self.message}"


@dataclass(frozen=True)
class ReplicaState:
    """One replica as the engine sees it after applying its restart policy.

    `state` is Creating (no pod yet), Pending, Running, Succeeded, Failed, Unknown, Restarting (a
    failed pod that is being replaced), Stopping (a live pod a job restart stops: recovery rule
    `RestartJob`) or Deleted. `final` is True for Succeeded and for a
    failure that will not be retried (non-retryable exit, or its restart limit reached).
    """

    replica_type: str
    index: int
    name: str
    state: str
    exit_code: int | None = None
    final: bool = False
    restarts: int = 0
    # The container whose exit code `exit_code` is (the training container when it exited).
    container: str | None = None

    @property
    def failure(self) -> str:
        """`<pod> failed with exit code N (container C)` (no code or container when none is
        known): how every message about a failed replica names it."""
        code = f" with exit code {self.exit_code}" if self.exit_code is not None else ""
        container = f" (container {self.container})" if self.container else ""
        return f"{self.name} failed{code}{container}"

    @property
    def succeeded(self) -> bool:
        return self.state == "Succeeded"

    @property
    def failed_for_good(self) -> bool:
        return self.state == "Failed" and self.final


@dataclass(frozen=True)
class Verdict:
    """A framework's judgement of a job from its replicas: finished or not, and why."""

    outcome: Literal["Succeeded", "Failed"]
    reason: str
    message: str
    replicas: Sequence[ReplicaState] = field(default=())


def replicas_lost(
    replicas: Sequence[ReplicaState],
    min_available: int | None = None,
    may_lose: Collection[str] = (),
) -> Verdict | None:
    """`Failed` (reason `ReplicaFailed`, naming each replica failed for good) when the job
    is left with fewer live replicas than it can run with: `min_available` (an elastic job's
    minimum, `Lifecycle.min_available`), None meaning all of them; else None. Replicas of the
    types in `may_lose` (`Lifecycle.may_lose`, an evaluator) are never counted as lost.

    What a `t9kjobs_compute_status` returns when a replica the job needs is gone: a job whose
    launcher waits on a rank that is gone, over ssh or in a collective, may never fail by itself
    (the conformance kit's `compute_status_fails_on_lost_replicas`). Call it before judging the
    finisher's success (`Lifecycle.finished_by`): a replica lost for good beats that success
    unless the kind declares its type in `Lifecycle.finisher_outweighs` (a launcher that exits
    0 only when every rank did), which may judge its finisher first and call this after
    (`compute_status_pairs_outcomes`)."""
    lost = [r for r in replicas if r.failed_for_good and r.replica_type not in may_lose]
    if not lost:
        return None
    needed = len(replicas) if min_available is None else min_available
    if len(replicas) - len(lost) >= needed:
        return None
    return Verdict("Failed", "ReplicaFailed", "; ".join(r.failure for r in lost), tuple(lost))
