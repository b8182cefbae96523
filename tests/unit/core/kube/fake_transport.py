"""A stand-in for `Transport` (the operator's one I/O boundary) in unit tests: it answers
creations and status writes as the API server would, records every request, and can be told to
hold or refuse some. End-to-end tests use the real control plane instead."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, cast

from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.vocabulary import Obj

Hook = Callable[[str, str, Obj | None], None]


class FakeTransport:
    def __init__(self, before: Hook | None = None) -> None:
        self.requests: list[tuple[str, str, Obj | None]] = []
        self.before = before  # runs first: may block (to see concurrency) or raise ApiError
        # What the API server holds, by (collection path, name): what was created, and what a
        # test puts there (a leftover, another job's child). Lists by name answer from it.
        self.existing: dict[tuple[str, str], Obj] = {}
        self._lock = threading.Lock()
        self._uids = itertools.count(1)
        self.objects: dict[str, Obj] = {}  # by path: what a status write is applied to
        self.created_at: str | None = None  # the creationTimestamp of what it creates, if set
        self.dry_runs: list[tuple[str, str]] = []  # (kind, name) of each dry run, in order

    def seed(self, path: str, obj: Obj) -> None:
        """An object the API server holds at `path` (a job the test put in a store)."""
        self.objects[path] = obj

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | None = None,
        query: dict[str, Any] | None = None,
        **_: Any,
    ) -> Obj:
        with self._lock:
            self.requests.append((method, path, body))
            if (query or {}).get("dryRun") and body is not None:
                self.dry_runs.append((str(body.get("kind")), body["metadata"]["name"]))
        if self.before is not None:
            self.before(method, path, body)
        selector = (query or {}).get("fieldSelector", "")
        if method == "GET" and selector.startswith("metadata.name="):
            held = self.existing.get((path, selector.split("=", 1)[1]))
            return {"items": [held] if held is not None else []}
        if body is None:
            raise ApiError(404, {"message": f"{path} not found"})
        if (query or {}).get("dryRun"):
            return {**body}  # judged, never stored
        if method == "PUT" and path.endswith("/status"):
            # The status subresource takes the status alone; the answer is the whole object.
            body = {**self.objects.get(path.removesuffix("/status"), {}), **body}
        answer = self.hold(path, body)
        if method == "PUT":
            self.objects[path.removesuffix("/status")] = answer
        return answer

    def hold(self, path: str, body: Obj) -> Obj:
        """`body` as the API server stores it (uid, resourceVersion) at `path`."""
        answer = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": "1"}}
        answer["metadata"].setdefault("uid", f"uid-{next(self._uids)}")
        if self.created_at is not None:
            answer["metadata"].setdefault("creationTimestamp", self.created_at)
        if body.get("kind") not in (None, "Event", "DeleteOptions"):
            self.existing[(path, answer["metadata"]["name"])] = answer
        return answer

    def as_transport(self) -> Transport:
        return cast(Transport, self)

    def posted(self, resource: str) -> list[Obj]:
        """Bodies POSTed to a collection path ending in `resource` ("pods", "events")."""
        with self._lock:
            return [
                b for m, p, b in self.requests if m == "POST" and p.endswith(f"/{resource}") and b
            ]
