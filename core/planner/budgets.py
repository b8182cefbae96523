"""The two restart budgets of a job, and the counts one reconcile charges to them.

The user's budget is the one the seeds always had: `runPolicy.backoffLimit` shared by every
replica (`status.backoffCount`) and a replica's own `limit` (`replicas[].countedRestarts`,
absent: `restartCount`). The infrastructure budget is `recoveryPolicy.infrastructureRestartLimit`
(`status.infrastructureRestartCount`): restarts the recovery rules say are not the program's
fault (`Ignore`, `RestartReplica` with `budget: Infrastructure`) are charged there only, so
that evictions and preemptions do not eat the user's `backoffLimit`, and still end.

Counts only grow, and are written in the status before the failed pod is deleted (the crash
safety of `t9kjobs.planner.replicas`): a restart counted once is never counted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Budgets", "counted_floor"]


def counted_floor(
    recorded: dict[str, int], counted: dict[str, int], performed: dict[str, int]
) -> dict[str, int]:
    """Each replica's restarts charged to the user: as recorded (absent: its restart count),
    plus the restarts its pod's incarnation proves beyond the recorded count (a status restored
    from a backup): whose budget they were is unknown, so the user's (never count fewer)."""
    out: dict[str, int] = {}
    for name, done in performed.items():
        before = recorded.get(name, 0)
        out[name] = counted.get(name, before) + max(0, done - before)
    return out


@dataclass
class Budgets:
    """The counts of both budgets, as this reconcile charges them."""

    backoff_count: int  # restarts charged to backoffLimit, all replicas
    backoff_limit: int | None  # None: the kind has no shared budget
    infra_count: int
    infra_limit: int
    counted: dict[str, int] = field(default_factory=dict)  # replica -> charged to the user

    @property
    def backoff_spent(self) -> bool:
        return self.backoff_limit is not None and self.backoff_count >= self.backoff_limit

    @property
    def infra_left(self) -> bool:
        return self.infra_count < self.infra_limit

    def charge_user(self, name: str) -> None:
        self.counted[name] = self.counted.get(name, 0) + 1
        self.backoff_count += 1

    def charge_infrastructure(self) -> None:
        self.infra_count += 1
