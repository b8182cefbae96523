"""List+watch of one resource into an in-memory store, with handlers for every change.

A reconcile reads only these stores: no LIST per reconcile. A watch resumes from the last
resourceVersion seen (bookmarks keep it fresh); a 410 Gone means the server no longer has that
history, and the informer lists again, telling handlers about anything that changed or vanished.

A store never goes back in time. Lists are consistent reads (`resourceVersion` unset: the
server's current state, not whatever its cache held), and a relisted object replaces the cached
one only if it is not older; an object missing from the list is forgotten only if the cache's
copy is not newer than the list (an answer to one of our writes may be).

A watch event for a version the store holds already is not handed to the handlers: it is the
echo of the operator's own write, whose answer the reconciler stored, and queueing the job for
it would only reconcile again on what that reconcile just did. Nor is one that changes nothing
the store keeps but the version: kube-scheduler's patch of a gang member's nominated node, a
kubelet's conditions (`t9kjobs.kube.slimming` drops what no reader reads), issue #50.

A watch is bounded: the server ends it after `timeoutSeconds` (jittered, so informers do not
all come back at once), and the client gives up when no byte came for a few seconds longer,
with TCP keepalive under it. A stream that died without a word (an API server frozen, or gone
with its host) is replaced in under a minute, from the last resourceVersion.

A resource read for its metadata alone (`Resource.metadata_only`: Secrets) is listed and
watched as PartialObjectMetadata, so a Secret's data never reaches the operator; every object
is given its resource's kind and apiVersion back before a store or a handler sees it. And a
store keeps every object as its slimmer trims it, on every `put` (whoever puts it: an informer,
or the reconciler with the answer to a write), so a Secret's data that comes some other way
(the answer to its creation) is never kept either (`t9kjobs.kube.slimming`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from t9kjobs.kube.resources import Resource
from t9kjobs.kube.slimming import slimmer
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.vocabulary import Obj

__all__ = ["LIST_PAGE", "Informer", "Store", "newer"]

Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj], None]  # (event type, object)

log = logging.getLogger("t9kjobs.informer")

LIST_PAGE = 500  # objects a list asks for at once


def _strictly_newer(candidate: Obj, gone: Obj) -> bool:
    a = candidate["metadata"].get("resourceVersion", "")
    b = gone["metadata"].get("resourceVersion", "")
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return bool(candidate["metadata"].get("uid") != gone["metadata"].get("uid"))


def _tombstone(final: Obj) -> Obj:
    """What a tombstone keeps of a removed object: what `_strictly_newer` reads, no more (the
    whole object, kept for the tombstone's 5 minutes, grew the operator by about 100 KiB a
    deleted job: the soak's RSS rose wave after wave)."""
    meta = final["metadata"]
    return {"metadata": {k: meta[k] for k in ("resourceVersion", "uid") if k in meta}}


def _same_but_version(a: Obj, b: Obj) -> bool:
    """Whether two stored versions of an object differ in their resourceVersion alone."""

    def rest(obj: Obj) -> Obj:
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        return {**obj, "metadata": meta}

    return rest(a) == rest(b)


def newer(candidate: Obj, current: Obj | None) -> bool:
    """Whether `candidate` is at least as new as `current` (resourceVersions are etcd revisions
    in practice; when they are not numbers, trust arrival order)."""
    if current is None:
        return True
    a = candidate["metadata"].get("resourceVersion", "")
    b = current["metadata"].get("resourceVersion", "")
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def _after(obj: Obj, version: str) -> bool:
    """Whether `obj` was written after the listing at `version` (so a list cannot know it)."""
    rv = obj["metadata"].get("resourceVersion", "")
    return rv.isdigit() and version.isdigit() and int(rv) > int(version)


class Store:
    """Objects by (namespace, name), with an index of children by the job they belong to.

    A removed object leaves a tombstone (its last resourceVersion) for a while: an API answer
    that arrives after the watch reported the deletion (a DELETE's own response, say) must not
    bring the object back. Objects are kept as `slim` trims them (`t9kjobs.kube.slimming`;
    by default, without managedFields, and a Secret without its data), on every `put`.
    """

    TOMBSTONE_SECONDS = 300.0

    def __init__(
        self,
        slim: Callable[[Obj], Obj] | None = None,
        clock: Callable[[], float] = time.monotonic,
        owner: Callable[[Obj], str | None] | None = None,
        index: Callable[[Obj], str | None] | None = None,
    ) -> None:
        """`owner`: the uid of the job an object belongs to, for the index (`owned_by`); by
        default its controller ownerReference's, which anyone who may create the object can
        write: the operator passes the check of its marks (`t9kjobs.controller.marks`).
        `index`: a second key to find objects by (`indexed`; the Pod store's is the node a
        pod runs on, for the lost-node detection); none by default."""
        self._slim = slim or slimmer("")
        self._clock = clock
        self._owner = owner or self.owner_uid
        self._objects: dict[Key, Obj] = {}
        self._by_owner: dict[str, set[Key]] = {}
        # Whose each indexed object is, as `owner` said when it was put: the index is undone
        # from this, without asking `owner` (a hash, for the operator's marks) again.
        self._owner_of: dict[Key, str] = {}
        self._index = index
        self._by_index: dict[str, set[Key]] = {}
        self._index_of: dict[Key, str] = {}
        # Oldest first: a tombstone is laid at the end and never moved, so expiring them is a
        # walk from the front that stops at the first young one (`_expire_tombstones`).
        self._tombstones: OrderedDict[Key, tuple[Obj, float]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(obj: Obj) -> Key:
        meta = obj["metadata"]
        return meta.get("namespace", ""), meta["name"]

    @staticmethod
    def owner_uid(obj: Obj) -> str | None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                return str(ref.get("uid"))
        return None

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def slim(self, obj: Obj) -> Obj:
        """`obj` as this store keeps it (`put` keeps it so)."""
        return self._slim(obj)

    def holds(self, obj: Obj) -> bool:
        """Whether the store holds `obj` at its resourceVersion already (the reconciler put the
        API's answer to its write there before the watch reported the change)."""
        rv = obj["metadata"].get("resourceVersion")
        with self._lock:
            current = self._objects.get(self.key(obj))
        return bool(rv) and current is not None and current["metadata"].get("resourceVersion") == rv

    def put(self, obj: Obj) -> bool:
        """Store `obj` unless the store already holds a newer version; True if stored."""
        obj = self._slim(obj)
        key = self.key(obj)
        with self._lock:
            current = self._objects.get(key)
            if not newer(obj, current):
                return False
            tomb = self._tombstones.get(key)
            if tomb is not None:
                if not _strictly_newer(obj, tomb[0]):
                    return False
                del self._tombstones[key]
            if current is not None:
                self._unindex(key)
            self._objects[key] = obj
            uid = self._owner(obj)
            if uid:
                self._by_owner.setdefault(uid, set()).add(key)
                self._owner_of[key] = uid
            value = self._index(obj) if self._index is not None else None
            if value:
                self._by_index.setdefault(value, set()).add(key)
                self._index_of[key] = value
            return True

    def remove(self, namespace: str, name: str, last: Obj | None = None) -> Obj | None:
        """Forget an object; `last` is its final state as the watch reported it."""
        with self._lock:
            current = self._objects.pop((namespace, name), None)
            if current is not None:
                self._unindex((namespace, name))
            final = last or current
            now = self._clock()
            if final is not None:
                self._tombstones.pop((namespace, name), None)  # laid anew, at the end
                self._tombstones[(namespace, name)] = (_tombstone(final), now)
            self._expire_tombstones(now)
            return current

    def _expire_tombstones(self, now: float) -> None:
        """Forget the tombstones older than TOMBSTONE_SECONDS, oldest first, stopping at the
        first younger one: each is dropped once, so a removal costs O(1) however many were laid
        lately. (Filtering every tombstone on each removal cost O(tombstones) a removal: at
        10,000 jobs, kube-controller-manager's pod GC deleted thousands of finished pods within
        5 minutes, and that filter took a third of the operator's CPU; docs/benchmarks.md.)"""
        horizon = now - self.TOMBSTONE_SECONDS
        while self._tombstones:
            key, (_, laid) = next(iter(self._tombstones.items()))
            if laid > horizon:
                return
            del self._tombstones[key]

    def _unindex(self, key: Key) -> None:
        for of, by in ((self._owner_of, self._by_owner), (self._index_of, self._by_index)):
            value = of.pop(key, None)
            if value and value in by:
                by[value].discard(key)
                if not by[value]:
                    del by[value]

    def owned_by(self, uid: str) -> list[Obj]:
        with self._lock:
            return [self._objects[k] for k in sorted(self._by_owner.get(uid, ()))]

    def indexed(self, value: str) -> list[Obj]:
        """The objects whose `index` key is `value` (none without an index)."""
        with self._lock:
            return [self._objects[k] for k in sorted(self._by_index.get(value, ()))]

    def all(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def replace(
        self, objects: Iterable[Obj], namespace: str | None = None, version: str = ""
    ) -> tuple[list[Obj], list[Obj]]:
        """Bring in a listing of `namespace` (None: all namespaces) taken at resourceVersion
        `version`; returns (objects that changed or appeared, objects gone). Nothing newer than
        what the store holds is replaced, nothing written after the listing is forgotten.
        Informers of several namespaces share one store."""
        fresh = {self.key(o): o for o in objects}
        with self._lock:
            old = {k: o for k, o in self._objects.items() if namespace in (None, k[0])}
        gone = [o for k, o in old.items() if k not in fresh and not _after(o, version)]
        for o in gone:
            self.remove(*self.key(o))
        changed = [
            o
            for k, o in fresh.items()
            if (
                k not in old
                or old[k]["metadata"].get("resourceVersion") != o["metadata"].get("resourceVersion")
            )
            and self.put(o)
        ]
        return changed, gone


class Informer:
    """Keeps a Store in sync with one resource (in one namespace, or all) in a thread."""

    def __init__(
        self,
        transport: Transport,
        resource: Resource,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 40,
        read_slack: float = 10.0,
        store: Store | None = None,
    ) -> None:
        """Each watch asks the server to end it after 75-100% of `watch_timeout` seconds, and
        is dropped when no byte came for `read_slack` seconds longer than that."""
        self.transport = transport
        self.resource = resource
        self.store = store if store is not None else Store()
        self.namespace = namespace
        self.label_selector = label_selector
        self._handler = handler
        self._watch_timeout = watch_timeout
        self._read_slack = read_slack
        self._rv = ""
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        """`informer-<plural>`, and `-<namespace>` for an informer of one namespace."""
        return f"informer-{self.resource.plural}" + (f"-{self.namespace}" if self.namespace else "")

    @property
    def thread(self) -> threading.Thread:
        assert self._thread is not None, "not started"
        return self._thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> None:
        # No resourceVersion: a consistent read of the current state. ("0" would take whatever
        # the server's watch cache holds, which may be older than our store after a restart.)
        # In pages of LIST_PAGE, each trimmed as the store keeps it before the next comes: the
        # 40,000 pods of 10,000 jobs in one answer would more than double the operator's memory
        # for a moment. An expired continue token is a 410: the list starts again (`_run`).
        items: list[Obj] = []
        token: str | None = None
        while True:
            answer = self.transport.request(
                "GET",
                self.resource.path(self.namespace),
                query={
                    "labelSelector": self.label_selector,
                    "limit": str(LIST_PAGE),
                    "continue": token,
                },
                timeout=120,
                accept=self.resource.list_accept,
            )
            for item in answer.get("items") or []:
                # List items carry no kind (a metadata list's, PartialObjectMetadata); the
                # handlers want objects of the resource's kind.
                items.append(self.store.slim(self.resource.typed(item)))
            page = answer.get("metadata") or {}
            token = page.get("continue") or None
            if token is None:
                break
        version = str(page.get("resourceVersion", ""))
        changed, gone = self.store.replace(items, self.namespace, version)
        self._rv = version
        self.synced.set()
        for obj in changed:
            self._handler("ADDED", obj)
        for obj in gone:
            self._handler("DELETED", obj)

    def _watch(self) -> None:
        seconds = max(1, round(self._watch_timeout * random.uniform(0.75, 1.0)))
        query = {
            "watch": "1",
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
            "labelSelector": self.label_selector,
        }
        log.debug("watching %s from %s for %ds", self.name, self._rv, seconds)
        events = 0
        # The Accept header only when it is not the default: the stand-ins of tests take none.
        accept = self.resource.watch_accept
        extra = {"accept": accept} if accept != "application/json" else {}
        for event in self.transport.stream(
            self.resource.path(self.namespace), query, timeout=seconds + self._read_slack, **extra
        ):
            events += 1
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                status = obj.get("code", 0)
                raise ApiError(int(status), obj)
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            if rv:
                self._rv = rv
            if kind == "BOOKMARK":
                continue
            if self.resource.metadata_only:
                self.resource.typed(obj)
            try:
                if kind == "DELETED":
                    self.store.remove(*Store.key(obj), last=obj)
                elif self.store.holds(obj):
                    continue  # the answer to our own write, in the store already: no news
                else:
                    before = self.store.get(*Store.key(obj))
                    if self.store.put(obj) and before is not None:
                        after = self.store.get(*Store.key(obj))
                        if after is not None and _same_but_version(before, after):
                            continue  # nothing kept changed: no news
                self._handler(str(kind), obj)
            except Exception as exc:  # one odd object must not stop the watch of all others
                log.warning("ignored a %s event of %s: %r", kind, self.resource.plural, exc)
            if self._stop.is_set():
                return
        log.debug("watch of %s ended after %d event(s), at %s", self.name, events, self._rv)

    def _run(self) -> None:
        backoff = 1.0
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                backoff = 1.0
            except ApiError as exc:
                if exc.status == 410:
                    log.info("watch of %s expired (410 Gone); listing again", self.resource.plural)
                    need_list = True
                    continue
                log.warning("watch of %s failed: %s", self.resource.plural, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception as exc:  # network errors: resume the watch after a pause
                log.warning("watch of %s interrupted: %s", self.resource.plural, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
