"""Gangs that can never be complete: noticed, said, and undone.

A scheduler places a gang's pods only once its size (kube-scheduler's PodGroup's `minCount`,
the T9k scheduler's `minMember`: read by the plugin that writes it, `GangFormat`) of its
members are there to be placed together, and it counts only members that have not ended. A
restart's replacement joins its gang when enough members are live at its creation
(`t9kjobs.planner.placement.rejoin_or_alone`); members that end *after* it was created leave it
waiting for a count the group can no longer reach — for ever, and without even a scheduling
condition (a held-out chaos run: a GenericJob Running for 8 minutes, its last worker's
replacement Pending in a gang of 4 whose other workers had ended for good).

`stranded` notices it from the pods alone: a live member (Pending or Running, not being
deleted) is unplaced while the live members are fewer than the gang needs. The job says so in
its `Scheduled` condition (False, reason `GangIncomplete`), which counts the time from when it
first said so; `GANG_INCOMPLETE_SECONDS` later (the bound: a wave of pods created together, or
a cache that has not seen all of them yet, settles first), the engine acts:

- a gang whose members can be placed on their own (`GangFormat.leave`: kube-scheduler's): the
  unplaced members are deleted at once (they never ran) and created again on their own, out
  of the gang (`rejoin_or_alone` decides so, the ended members no longer counting). Not a
  restart: the same incarnation, no budget charged.
- one whose members cannot (the T9k scheduler's places by the group's label, which the
  engine cannot take off one pod): the job fails with reason `GangIncomplete` and a message
  naming the members.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from t9kjobs.features import GangFormat
from t9kjobs.models import JobStatus
from t9kjobs.objects import object_key
from t9kjobs.planner.children import pod_state
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.types import ObjectRef
from t9kjobs.vocabulary import Obj

__all__ = ["GANG_INCOMPLETE", "GANG_INCOMPLETE_SECONDS", "Stranded", "overdue", "stranded"]

# How long a gang is said to be incomplete before the engine acts (module docstring).
GANG_INCOMPLETE_SECONDS = 30.0
GANG_INCOMPLETE = "GangIncomplete"


@dataclass(frozen=True)
class Stranded:
    """A gang that can never be complete: its group, and its members waiting to be placed."""

    kind: str  # the group's kind, as `t9kjobs.objects.child_kind` names it
    group: str
    separable: bool  # its members can be placed on their own (`GangFormat.leave`)
    waiting: tuple[Obj, ...]  # live members without a node
    message: str

    def deletions(self) -> tuple[ObjectRef, ...]:
        """The waiting members, deleted at once: they never ran, nothing stops gracefully."""
        return tuple(
            ObjectRef("v1", "Pod", p["metadata"]["name"], p["metadata"].get("uid"), 0)
            for p in self.waiting
        )


def stranded(gangs: Sequence[tuple[Obj, GangFormat]], pods: Iterable[Obj]) -> Stranded | None:
    """The job's gang (`gangs`: its gang objects as the cluster holds them, each with how to
    read it: `Observed.gangs`), when some of its live members wait to be placed and the live
    members are fewer than it needs."""
    if not gangs:
        return None
    group, gang = gangs[0]
    size = gang.size(group)
    if size is None:
        return None
    kind, name = object_key(group)
    live = sorted(
        (
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and pod_state(p) in ("Pending", "Running")
            and gang.counts(group, p)
        ),
        key=lambda p: str(p["metadata"]["name"]),
    )
    waiting = tuple(p for p in live if not (p.get("spec") or {}).get("nodeName"))
    if not waiting or len(live) >= size:
        return None
    names = ", ".join(p["metadata"]["name"] for p in waiting)
    message = (
        f"{kind} {name} ({size} pods at once) can never be placed: {len(live)} live"
        f" member(s), the others ended; {names} wait(s) for the rest of the gang"
    )
    return Stranded(kind, name, gang.leave is not None, waiting, message)


def overdue(before: JobStatus, now: datetime) -> float | None:
    """Seconds left before the engine acts on a gang the stored status says is incomplete;
    0 once due; None when it says nothing of the kind."""
    said = before.condition("Scheduled")
    if said is None or said.status != "False" or said.reason != GANG_INCOMPLETE:
        return None
    if said.last_transition_time is None:
        return 0.0
    elapsed = (now - parse_time(said.last_transition_time)).total_seconds()
    return max(0.0, GANG_INCOMPLETE_SECONDS - elapsed)
