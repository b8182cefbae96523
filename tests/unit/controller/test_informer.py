"""The informer against a scripted transport: list, watch, resume from the last version, and
list again after 410 Gone, telling handlers what changed and what vanished meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from t9kjobs.controller.informer import Informer
from t9kjobs.controller.resources import CHILD_RESOURCES
from t9kjobs.controller.transport import ApiError

Obj = dict[str, Any]


def pod(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class ScriptedTransport:
    """Answers lists and watches from scripts; records the resourceVersions watches ask for."""

    def __init__(self, lists: list[Obj], watches: list[list[Obj] | ApiError]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.done = threading.Event()

    def request(self, method: str, path: str, **kwargs: Any) -> Obj:
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


def test_watch_resumes_and_relists_after_410() -> None:
    transport = ScriptedTransport(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "9"), pod("b", "10")]},
            {"metadata": {"resourceVersion": "30"}, "items": [pod("a", "25"), pod("c", "30")]},
        ],
        watches=[
            [
                {"type": "MODIFIED", "object": pod("a", "11")},
                {"type": "BOOKMARK", "object": pod("", "15")},
            ],
            [{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
        ],
    )
    events: list[tuple[str, str]] = []
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    # Listed at 10; the first watch resumed from the list, the second from the bookmark; after
    # 410 a new list, and the watch resumed from that list's version.
    assert transport.watched_from == ["10", "15", "30"]
    assert events == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("ADDED", "a"),  # changed while the watch was gone
        ("ADDED", "c"),
        ("DELETED", "b"),  # vanished while the watch was gone
    ]
    assert sorted(o["metadata"]["name"] for o in informer.store.all()) == ["a", "c"]
    assert informer.store.get("ns", "a")["metadata"]["resourceVersion"] == "25"  # type: ignore[index]
