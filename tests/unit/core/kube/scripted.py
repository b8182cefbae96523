"""A transport that answers from a script (lists, watch streams, errors), and pods to put in it: the informer's and the decoder's tests share them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from t9kjobs.kube.transport import ApiError
from t9kjobs.vocabulary import Obj


def pod(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class ScriptedTransport:
    """Answers lists and watches from scripts; records the resourceVersions watches ask for."""

    def __init__(self, lists: list[Obj], watches: list[list[Obj] | ApiError]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.listed_with: list[dict[str, Any]] = []
        self.done = threading.Event()

    def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        self.listed_with.append({k: v for k, v in kwargs["query"].items() if v is not None})
        return self.lists.pop(0)

    def stream(self, path: str, query: dict[str, Any], timeout: float) -> Iterator[Obj]:
        self.watched_from.append(query["resourceVersion"])
        if not self.watches:
            self.done.set()
            threading.Event().wait(5)
            return
        script = self.watches.pop(0)
        if isinstance(script, ApiError):
            raise script
        yield from script
