"""Which namespaces give their pods requests by default: an informer of LimitRanges, for the
plans' `Observed.default_requests` (`t9kjobs.planner.idle_gangs`).

A job whose pods reserve nothing is no gang: nothing its placed pods hold is scarce. A
LimitRange's `default` or `defaultRequest` for containers changes that after the manifest is
written: the API server gives every container of the namespace those requests as the pod is
created. So the operator reads the namespaces' LimitRanges (few objects, rarely changed; a change
queues no job: it matters to the pods created next). Where it cannot (listing them refused:
RBAC without `limitranges list, watch`, said once in the log) or has not read them yet, every
namespace is taken to give defaults, and jobs are gangs as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from t9kjobs.controller.threads import Supervisor
from t9kjobs.features import ChildKind
from t9kjobs.kube.informer import Informer, Store
from t9kjobs.kube.resources import Resource
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.vocabulary import Obj

__all__ = ["LIMIT_RANGES", "LimitRangeWatch", "gives_defaults"]

log = logging.getLogger("t9kjobs.limitranges")

LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange")


def gives_defaults(limit_range: Obj) -> bool:
    """Whether a LimitRange gives containers requests or limits they do not set."""
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container" and (item.get("default") or item.get("defaultRequest")):
            return True
    return False


def _namespace(obj: Obj) -> str | None:
    return str(obj["metadata"].get("namespace") or "") or None


def _ignore(event: str, obj: Obj) -> None:
    """A LimitRange's change queues no job: it matters to the pods created next."""


class LimitRangeWatch:
    """The LimitRange informers of the namespaces served, and what a plan reads of them."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.store = Store(index=_namespace)
        self.informers: list[Informer] = []

    @classmethod
    def wired(
        cls, child_kinds: Mapping[str, ChildKind], transport: Transport
    ) -> LimitRangeWatch | None:
        """The watch of an operator whose plugins make gangs (a child kind that is one); None
        where they make none: nothing to read, no right needed."""
        if any(c.gang is not None for c in child_kinds.values()):
            return cls(transport)
        return None

    def _readable(self, namespaces: Sequence[str | None]) -> bool:
        for ns in namespaces:
            try:
                self.transport.request("GET", LIMIT_RANGES.path(ns), query={"limit": "1"})
            except ApiError as exc:
                if exc.status in (401, 403):
                    log.warning(
                        "cannot list LimitRanges (%s): every namespace is taken to give its"
                        " pods requests, so every job is a gang; grant limitranges list, watch"
                        " (the chart does) to place jobs whose pods reserve nothing one pod at a"
                        " time (docs/scheduling.md)",
                        exc.status,
                    )
                    return False
                # Anything else is the informer's to retry.
        return True

    def start(self, supervisor: Supervisor, served: Sequence[str]) -> list[Informer]:
        """Start an informer per namespace `served` (none: one of all namespaces) unless
        listing is refused: the informers started. Not waited for: until they synced, every
        namespace gives defaults."""
        namespaces: list[str | None] = list(served) or [None]
        if not self._readable(namespaces):
            return []
        self.informers = [
            Informer(self.transport, LIMIT_RANGES, _ignore, namespace=ns, store=self.store)
            for ns in namespaces
        ]
        for informer in self.informers:
            informer.start()
            supervisor.watch(informer.name, informer.thread)
        return list(self.informers)

    def default_requests(self, namespace: str) -> bool:
        """Whether pods created in `namespace` get requests their manifests do not set; True
        while that cannot be known (refused, not synced yet)."""
        if not self.informers or not all(i.synced.is_set() for i in self.informers):
            return True
        return any(gives_defaults(o) for o in self.store.indexed(namespace))
