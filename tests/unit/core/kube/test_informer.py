"""The informer against a scripted transport: list, watch, resume from the last version, and
list again after 410 Gone, telling handlers what changed and what vanished meanwhile."""

from __future__ import annotations

from typing import Any

from t9kjobs.kube.informer import LIST_PAGE, Informer, Store
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.slimming import slimmer
from t9kjobs.vocabulary import Obj
from tests.unit.core.kube.scripted import ScriptedTransport, pod


def _changed(obj: Obj) -> Obj:
    """`obj` with something a store keeps changed (a label)."""
    obj["metadata"]["labels"] = {"changed": obj["metadata"]["resourceVersion"]}
    return obj


def run_out(transport: ScriptedTransport) -> tuple[Informer, list[tuple[str, str]]]:
    """An informer of pods run until its scripts are spent; the events it handed out."""
    events: list[tuple[str, str]] = []
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    return informer, events


def test_watch_resumes_and_relists_after_410() -> None:
    transport = ScriptedTransport(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "9"), pod("b", "10")]},
            {"metadata": {"resourceVersion": "30"}, "items": [pod("a", "25"), pod("c", "30")]},
        ],
        watches=[
            [
                {"type": "MODIFIED", "object": _changed(pod("a", "11"))},
                {"type": "BOOKMARK", "object": pod("", "15")},
            ],
            [{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
        ],
    )
    informer, events = run_out(transport)
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


def test_the_echo_of_a_version_the_store_holds_is_no_news() -> None:
    store = Store()
    transport = ScriptedTransport(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": []}],
        watches=[
            [
                {"type": "ADDED", "object": pod("ours", "11")},  # its answer is stored below
                {"type": "ADDED", "object": pod("theirs", "12")},
                {"type": "MODIFIED", "object": _changed(pod("ours", "13"))},
            ]
        ],
    )
    store.put(pod("ours", "11"))  # the reconciler stored the answer to its creation
    events: list[tuple[str, str]] = []
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
        store=store,
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    assert events == [("ADDED", "theirs"), ("MODIFIED", "ours")]
    assert store.get("ns", "ours")["metadata"]["resourceVersion"] == "13"  # type: ignore[index]


def test_a_list_comes_in_pages_each_slimmed_as_it_arrives() -> None:
    def served(name: str, rv: str) -> Obj:
        return {**pod(name, rv), "spec": {"containers": [{"name": "c"}]}, "status": {}}

    transport = ScriptedTransport(
        lists=[
            {"metadata": {"resourceVersion": "40", "continue": "t1"}, "items": [served("a", "9")]},
            {"metadata": {"resourceVersion": "40", "continue": "t2"}, "items": [served("b", "9")]},
            {"metadata": {"resourceVersion": "40"}, "items": [served("c", "9")]},
        ],
        watches=[],
    )
    store = Store(slimmer("Pod"))
    listed_items: list[Obj] = []
    original = store.replace

    def replace(objects: Any, namespace: Any = None, version: str = "") -> Any:
        listed_items.extend(objects)
        return original(objects, namespace, version)

    store.replace = replace  # type: ignore[method-assign]
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: None,
        store=store,
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    assert [q.get("continue") for q in transport.listed_with] == [None, "t1", "t2"]
    assert all(q["limit"] == str(LIST_PAGE) for q in transport.listed_with)
    assert transport.watched_from == ["40"]
    assert sorted(o["metadata"]["name"] for o in store.all()) == ["a", "b", "c"]
    assert all(o["spec"] == {} for o in listed_items)  # trimmed page by page, before the store


def test_a_relist_never_takes_the_store_back_in_time() -> None:
    # Listed empty at 10; the watch brings `a` at 20; then 410, and the list that follows is
    # older than what the store holds (15: a cache that lags, or a list racing our own write).
    transport = ScriptedTransport(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": []},
            {"metadata": {"resourceVersion": "15"}, "items": []},
        ],
        watches=[
            [
                {"type": "ADDED", "object": pod("a", "20")},
                {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}},
            ],
            [{"type": "ADDED", "object": pod("a", "20")}],  # the watch from 15 sees it again
        ],
    )
    informer, events = run_out(transport)
    # Consistent reads: no resourceVersion, never "0" (whatever the server's cache holds).
    assert transport.listed_with == [{"limit": str(LIST_PAGE)}] * 2
    assert informer.store.get("ns", "a") is not None  # not forgotten, not refused after
    assert ("DELETED", "a") not in events


def test_a_relist_keeps_what_is_newer_than_the_listing() -> None:
    store = Store()
    store.put(pod("written", "20"))  # the answer to one of our creations, after the listing
    store.put(pod("changed", "18"))  # a watch event newer than the listing
    store.put(pod("deleted", "9"))
    listed = [pod("changed", "12"), pod("new", "14")]
    changed, gone = store.replace(listed, None, "15")
    assert [o["metadata"]["name"] for o in changed] == ["new"]
    assert [o["metadata"]["name"] for o in gone] == ["deleted"]
    assert store.get("ns", "changed")["metadata"]["resourceVersion"] == "18"  # type: ignore[index]
    assert store.get("ns", "written") is not None


def test_a_tombstone_keeps_the_version_not_the_object() -> None:
    """A removed object still refuses an older copy of itself, and a newer one comes back; its
    tombstone holds no more than the version and uid (a whole pod, kept 5 minutes for each of
    a wave's deleted objects, grew the soak's operator by about 100 KiB a job)."""
    store = Store()
    big = {**pod("a", "7"), "spec": {"containers": [{"name": "c", "args": ["x" * 10_000]}]}}
    big["metadata"]["uid"] = "u1"
    store.put(big)
    store.remove("ns", "a")
    assert store._tombstones[("ns", "a")][0] == {"metadata": {"resourceVersion": "7", "uid": "u1"}}
    assert not store.put(pod("a", "6")) and store.get("ns", "a") is None
    assert store.put(pod("a", "8")) and store.get("ns", "a") is not None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_tombstones_expire_after_their_time_oldest_first() -> None:
    """A tombstone refuses older copies for TOMBSTONE_SECONDS after its removal, then goes; a
    key removed again gets a tombstone of its own time (not its first one's)."""
    clock = Clock()
    store = Store(clock=clock)
    for name in ("a", "b", "c"):
        store.put(pod(name, "5"))
    store.remove("ns", "a")
    clock.now += 100
    store.remove("ns", "b")
    store.put(pod("a", "6"))  # back, newer: its tombstone goes
    clock.now += 100
    store.remove("ns", "a")  # removed again, 200 s after its first removal
    store.remove("ns", "c")
    assert list(store._tombstones) == [("ns", "b"), ("ns", "a"), ("ns", "c")]
    clock.now += Store.TOMBSTONE_SECONDS - 150  # b's is 250 s old, a's and c's 150 s
    assert not store.put(pod("b", "4"))  # still refused
    assert not store.put(pod("a", "6"))
    clock.now += 60  # b's is 310 s old: gone at the next removal
    store.remove("ns", "nothing-here")
    assert list(store._tombstones) == [("ns", "a"), ("ns", "c")]
    assert store.put(pod("b", "4"))  # no tombstone left to refuse it
    assert not store.put(pod("c", "5"))
    clock.now += Store.TOMBSTONE_SECONDS
    store.remove("ns", "b")
    assert list(store._tombstones) == [("ns", "b")]


def test_a_refused_copy_leaves_the_tombstone_where_it_was() -> None:
    """An older copy refused by a tombstone must not make it younger (or move it behind younger
    ones): it expires at its own time."""
    clock = Clock()
    store = Store(clock=clock)
    store.put(pod("a", "5"))
    store.put(pod("b", "5"))
    store.remove("ns", "a")
    clock.now += 200
    store.remove("ns", "b")
    assert not store.put(pod("a", "3"))
    assert list(store._tombstones) == [("ns", "a"), ("ns", "b")]
    clock.now += 150  # a's is 350 s old, b's 150 s
    store.remove("ns", "nothing-here")
    assert list(store._tombstones) == [("ns", "b")]


def test_thousands_of_removals_keep_every_young_tombstone() -> None:
    """However many objects go within TOMBSTONE_SECONDS (the pod GC deleting thousands of
    finished pods), each keeps refusing its older copies."""
    clock = Clock()
    store = Store(clock=clock)
    for i in range(3000):
        store.put(pod(f"p{i}", "10"))
    for i in range(3000):
        clock.now += 0.05
        store.remove("ns", f"p{i}")
    assert len(store._tombstones) == 3000
    assert not any(store.put(pod(f"p{i}", "9")) for i in range(3000))


def test_a_change_of_nothing_the_store_keeps_is_no_news() -> None:
    """kube-scheduler patches a gang member's nominated node before it waits at the gang's
    Permit; the kubelet writes its conditions. A pod's store keeps neither (slimming), so the
    new version changes nothing a plan reads and queues no job (#50)."""
    # As the API server sends them: a watch's objects name their kind (a list's items do not:
    # the informer names it).
    typed = {"apiVersion": "v1", "kind": "Pod"}
    pending = {**pod("a", "10"), "status": {"phase": "Pending"}}
    waiting = {**typed, **pod("a", "11"), "status": {"phase": "Pending", "nominatedNodeName": "n1"}}
    ready = {**typed, **pod("a", "12"), "status": {"phase": "Pending"}}
    ready["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    bound = {**typed, **pod("a", "13"), "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}
    transport = ScriptedTransport(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [pending]}],
        watches=[
            [
                {"type": "MODIFIED", "object": waiting},
                {"type": "MODIFIED", "object": ready},
                {"type": "MODIFIED", "object": bound},
            ]
        ],
    )
    events: list[tuple[str, str]] = []
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Pod"],
        lambda kind, obj: events.append((kind, obj["metadata"]["resourceVersion"])),
        store=Store(slimmer("Pod")),
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    # Listed (10), then only the binding: the nominated node and the conditions were no news.
    assert events == [("ADDED", "10"), ("MODIFIED", "13")]
    # The store holds the newest version all the same.
    assert informer.store.get("ns", "a")["metadata"]["resourceVersion"] == "13"  # type: ignore[index]
