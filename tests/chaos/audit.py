"""What the API server's audit log says about the operator replicas (hack/cluster/up.sh with
T9KJOBS_AUDIT=1 records every write made with the admin certificate, and the Lease writes with
their bodies): who held the Lease when, and whether a replica wrote outside its terms.

Only writes count: a service account's reads are in the log too (the operator installed by its
chart runs as one). Replicas are told apart by their user agent,
`t9k-jobs-operator/<version> (<identity>)`. A term
of a replica begins when a write of the Lease naming it as holder is accepted, and ends when one
naming anybody else (or nobody: a release) is. Every other write a replica makes must arrive
within one of its terms; times are the API server's own (`requestReceivedTimestamp`,
`stageTimestamp`), so no clock is compared with another.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["Audit", "Term", "Write"]

Obj = dict[str, Any]

_AGENT = re.compile(r"^t9k-jobs-operator/\S+ \((?P<identity>[^)]+)\)$")
_WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@dataclass(frozen=True)
class Write:
    at: float  # when the API server received it
    identity: str
    verb: str
    resource: str
    name: str
    code: int


@dataclass(frozen=True)
class Term:
    identity: str
    start: float
    end: float | None  # None: still holding when the log ends


class Audit:
    def __init__(self, path: Path, lease: str, namespace: str | None = None) -> None:
        """`namespace`: count only the writes into it (and the Lease's): the cluster's audit
        log holds whatever ran on it before, other operators' writes too."""
        self.writes: list[Write] = []
        # (accepted at, holder it names): a replica names itself, or nobody when it releases
        lease_writes: list[tuple[float, str]] = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            agent = _AGENT.match(event.get("userAgent") or "")
            ref = event.get("objectRef") or {}
            if (
                agent is None
                or event.get("stage") != "ResponseComplete"
                or event.get("verb") not in _WRITES
                or not ref
            ):
                continue
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            if ref.get("resource") == "leases" and ref.get("name") == lease:
                holder = ((event.get("requestObject") or {}).get("spec") or {}).get(
                    "holderIdentity"
                )
                if code < 300:
                    lease_writes.append((_time(event["stageTimestamp"]), str(holder or "")))
                continue
            if namespace is not None and ref.get("namespace") != namespace:
                continue
            resource = ref["resource"] + (
                f"/{ref['subresource']}" if ref.get("subresource") else ""
            )
            self.writes.append(
                Write(
                    _time(event["requestReceivedTimestamp"]),
                    agent["identity"],
                    event["verb"],
                    resource,
                    str(ref.get("name") or ""),
                    code,
                )
            )
        self.lease_writes = sorted(lease_writes)
        self.terms = _terms(self.lease_writes)

    def outside_terms(self) -> list[Write]:
        """Writes of a replica that arrived while it did not hold the Lease."""
        return [
            w
            for w in self.writes
            if not any(
                t.identity == w.identity and t.start <= w.at and (t.end is None or w.at < t.end)
                for t in self.terms
            )
        ]

    def creations(self, resource: str, since: float = 0.0) -> dict[str, int]:
        """How many times each object of `resource` was created (accepted creations only,
        received at `since` or later)."""
        out: dict[str, int] = {}
        for w in self.writes:
            if w.verb == "create" and w.resource == resource and w.code == 201 and w.at >= since:
                out[w.name] = out.get(w.name, 0) + 1
        return out

    def takeover_after(self, at: float, victim: str) -> Term | None:
        """The first term of another replica than `victim` to begin after `at`."""
        return next((t for t in self.terms if t.start >= at and t.identity != victim), None)

    def last_renewal(self, identity: str, before: float) -> float | None:
        """When the last accepted Lease write of `identity` before `before` was accepted."""
        return max(
            (at for at, who in self.lease_writes if who == identity and at < before), default=None
        )

    def first_write(self, term: Term) -> Write | None:
        return next(
            (w for w in self.writes if w.identity == term.identity and w.at >= term.start), None
        )


def _terms(lease_writes: list[tuple[float, str]]) -> list[Term]:
    terms: list[Term] = []
    holder, since = "", 0.0
    for at, named in lease_writes:
        if named == holder:
            continue  # a renewal
        if holder:
            terms.append(Term(holder, since, at))
        holder, since = named, at
    if holder:
        terms.append(Term(holder, since, None))
    return terms
