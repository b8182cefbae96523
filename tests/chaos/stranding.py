"""The chaos tier's lost-node invariant (issue #48): no job stays unfinished with a live pod on a
node gone — deleted, or its `Ready` condition not True — longer than the operator's
`--lost-node-seconds` plus a slack, not counting the time the operator could not act (a killed or
frozen leader until the standby took over, the API server down until it and the nodes are back).

`Ledger` keeps what the observer saw (observer.py feeds it every node, pod and job event, with
the time it saw it); `Ledger.stranded` judges. Both read only objects and times, so the judge is
unit-tested (tests/unit/chaos/) on made-up timelines, failing ones included.

A node's bad spell starts at its `Ready` condition's `lastTransitionTime` (what the operator
counts its bound from; the observer's own time if the stamp is missing) or, for a node deleted
while Ready, at the deletion the observer saw; it ends when the node is seen Ready again. A pod
is stranded from the start of its node's bad spell until the observer saw it end (phase
Succeeded/Failed) or go (deleted, or absent from a relist), or its job finish or go."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from t9kjobs.vocabulary import Obj

__all__ = ["Ledger", "Spell"]

ENDED = ("Succeeded", "Failed")


@dataclass
class Spell:
    """A node's time not Ready: from `start` to `end` (None: not Ready when the run ended)."""

    start: float
    how: str  # "Ready Unknown", "Ready False", "deleted"
    end: float | None = None


@dataclass
class _Pod:
    name: str
    job_uid: str | None
    node: str | None = None
    gone_at: float | None = None  # ended or deleted, as first seen


@dataclass
class Ledger:
    spells: dict[str, list[Spell]] = field(default_factory=dict)  # node -> its bad spells
    pods: dict[str, _Pod] = field(default_factory=dict)  # pod uid -> its life
    jobs_done: dict[str, float] = field(default_factory=dict)  # job uid -> finished or deleted
    job_names: dict[str, str] = field(default_factory=dict)  # job uid -> kind/name
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- what the observer saw ---------------------------------------------------------------

    def node(self, event: str, node: Obj, now: float) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            spells = self.spells.setdefault(name, [])
            open_spell = spells[-1] if spells and spells[-1].end is None else None
            if event == "DELETED":
                if open_spell is None:
                    spells.append(Spell(now, "deleted"))
                return
            ready = _ready(node)
            if ready is None or ready[0] == "True":
                if open_spell is not None:  # (a node of that name made again, for a deleted one)
                    open_spell.end = now
                return
            status, since = ready
            if open_spell is None:
                spells.append(Spell(min(since or now, now), f"Ready {status}"))

    def nodes_relisted(self, names: set[str], now: float) -> None:
        """After a relist: a node the ledger knew and the list lacks was deleted meanwhile."""
        for name in list(self.spells):
            if name not in names:
                self.node("DELETED", {"metadata": {"name": name}}, now)

    def pod(self, event: str, pod: Obj, now: float) -> None:
        meta = pod["metadata"]
        with self._lock:
            life = self.pods.setdefault(meta["uid"], _Pod(meta["name"], _controller(meta)))
            life.node = (pod.get("spec") or {}).get("nodeName") or life.node
            phase = (pod.get("status") or {}).get("phase")
            if life.gone_at is None and (event == "DELETED" or phase in ENDED):
                life.gone_at = now

    def pods_relisted(self, uids: set[str], now: float) -> None:
        with self._lock:
            for uid, life in self.pods.items():
                if uid not in uids and life.gone_at is None:
                    life.gone_at = now

    def job(self, event: str, job: Obj, now: float) -> None:
        meta = job["metadata"]
        with self._lock:
            self.job_names[meta["uid"]] = f"{job.get('kind')}/{meta['name']}"
            phase = (job.get("status") or {}).get("phase")
            if meta["uid"] not in self.jobs_done and (event == "DELETED" or phase in ENDED):
                self.jobs_done[meta["uid"]] = now

    def stays(self, node: str, since: float) -> dict[str, float | None]:
        """For the report: how long each pod on `node`, live when it went bad at `since`
        (its last bad spell's start, if the ledger has one), stayed there (None: to the end)."""
        with self._lock:
            spells = self.spells.get(node) or [Spell(since, "")]
            start = spells[-1].start
            return {
                life.name: None if life.gone_at is None else round(life.gone_at - start, 1)
                for life in self.pods.values()
                if life.node == node and (life.gone_at is None or life.gone_at > start)
            }

    # -- the judge ---------------------------------------------------------------------------

    def stranded(
        self, bound: float, slack: float, pauses: list[tuple[float, float]], now: float
    ) -> list[str]:
        """Every pod left on a bad node, its job unfinished, longer than `bound` + `slack` +
        the time of `pauses` (start, end: the operator could not act) within its stranding."""
        found: list[str] = []
        with self._lock:
            for life in self.pods.values():
                for spell in self.spells.get(life.node or "", []):
                    ends = [spell.end, life.gone_at, self.jobs_done.get(life.job_uid or "")]
                    until = min([t for t in ends if t is not None] + [now])
                    if until <= spell.start:
                        continue  # the pod ended (or the job finished) before the node went
                    paused = sum(max(0.0, min(until, b) - max(spell.start, a)) for a, b in pauses)
                    allowed = bound + slack + paused
                    if until - spell.start > allowed:
                        job = self.job_names.get(life.job_uid or "", life.job_uid)
                        left = "still there" if until == now else "until it went"
                        found.append(
                            f"{life.name} ({job}) on {life.node}, {spell.how}: "
                            f"{until - spell.start:.1f}s ({left}), allowed {allowed:.1f}s"
                            f" ({bound:g} + {slack:g} slack + {paused:.1f} paused)"
                        )
        return found


def _ready(node: Obj) -> tuple[str, float | None] | None:
    """The Ready condition's status and lastTransitionTime (None: no Ready condition)."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            stamp = c.get("lastTransitionTime")
            since = (
                datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None
            )
            return str(c.get("status")), since
    return None


def _controller(meta: Obj) -> str | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None
