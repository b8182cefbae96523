"""No Secret's data in the operator's cache: the Secret informers list and watch metadata only
(PartialObjectMetadata), and every store keeps a Secret without its data, however it got there
(a list, a watch event, the answer to the Secret's creation, a lookup by name). The planner keys
the metadata-only Secrets by their kind like every other child, so a job's SSH Secret is created
once and never again."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from t9kjobs.controller.cache import Cache
from t9kjobs.controller.events import EventRecorder
from t9kjobs.controller.ownership import NameConflicts
from t9kjobs.controller.reconciler import Reconciler
from t9kjobs.kube.informer import Informer, Store
from t9kjobs.kube.resources import (
    CHILD_RESOURCES,
    METADATA_LIST,
    METADATA_WATCH,
    job_resource,
)
from t9kjobs.kube.slimming import slimmer
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj

from .fake_transport import FakeTransport

KEY_MATERIAL = "LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K"  # what must never be kept


def relabelled(obj: Obj) -> Obj:
    """`obj` with a label changed: news (a version that changes nothing kept is none)."""
    obj["metadata"]["labels"] = {"changed": "yes"}
    return obj


def secret(name: str, rv: str, *, data: bool = True) -> Obj:
    """A Secret as the API server sends it whole (`data`) or as PartialObjectMetadata."""
    meta: Obj = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": rv,
        "uid": f"uid-{name}",
        "ownerReferences": [{"kind": "DeepSpeedJob", "uid": "job-uid", "controller": True}],
        "managedFields": [{"manager": "t9k-jobs-operator"}],
    }
    if not data:
        return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    return {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": meta,
        "type": "Opaque",
        "data": {"id_rsa": KEY_MATERIAL},
        "stringData": {"config": "StrictHostKeyChecking no"},
    }


def assert_metadata_only(obj: Obj) -> None:
    assert KEY_MATERIAL not in repr(obj)
    assert obj["kind"] == "Secret" and obj["apiVersion"] == "v1", obj
    assert set(obj) == {"kind", "apiVersion", "metadata"}, obj
    assert "managedFields" not in obj["metadata"]


@pytest.mark.parametrize("store", [Store(slimmer("Secret")), Store()], ids=["secrets", "default"])
def test_a_secret_put_into_a_store_keeps_no_data(store: Store) -> None:
    given = secret("job-ssh", "5")
    assert store.put(given)
    kept = store.get("ns", "job-ssh")
    assert kept is not None
    assert_metadata_only(kept)
    assert kept["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert [o["metadata"]["name"] for o in store.owned_by("job-uid")] == ["job-ssh"]
    # The object given loses its data too: whoever put it holds no key material after.
    assert "data" not in given and "stringData" not in given


class ScriptedTransport:
    """One list page and one watch, then nothing; records what each request accepted."""

    def __init__(self, items: list[Obj], events: list[Obj]) -> None:
        self.items = items
        self.events = events
        self.accepted: list[tuple[str, str]] = []
        self.done = threading.Event()

    def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        self.accepted.append(("list", kwargs.get("accept", "application/json")))
        return {"metadata": {"resourceVersion": "10"}, "items": self.items}

    def stream(
        self, path: str, query: dict[str, Any], timeout: float, accept: str = "application/json"
    ) -> Iterator[Obj]:
        self.accepted.append(("watch", accept))
        if not self.events:
            self.done.set()
            threading.Event().wait(5)
            return
        yield from self.events
        self.events = []


def test_the_secret_informer_asks_for_metadata_and_keeps_no_data() -> None:
    transport = ScriptedTransport(
        # PartialObjectMetadata, and a whole Secret from a server that answered the
        # `application/json` the Accept header falls back to.
        items=[secret("a", "9", data=False), secret("b", "10")],
        events=[
            {"type": "ADDED", "object": secret("c", "11")},
            {"type": "MODIFIED", "object": relabelled(secret("a", "12", data=False))},
            {"type": "DELETED", "object": secret("b", "13", data=False)},
        ],
    )
    handled: list[tuple[str, Obj]] = []
    store = Store(slimmer("Secret"))
    informer = Informer(
        transport,  # type: ignore[arg-type]
        CHILD_RESOURCES["Secret"],
        lambda event, obj: handled.append((event, copy.deepcopy(obj))),
        store=store,
    )
    informer.start()
    assert transport.done.wait(5)
    informer.stop()
    assert transport.accepted[:2] == [("list", METADATA_LIST), ("watch", METADATA_WATCH)]
    assert [(e, o["metadata"]["name"]) for e, o in handled] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    for _, obj in handled[:4]:  # a DELETED event's object goes to no store
        assert_metadata_only(obj)
    assert handled[4][1]["kind"] == "Secret"
    assert sorted(o["metadata"]["name"] for o in store.all()) == ["a", "c"]
    for obj in store.all():
        assert_metadata_only(obj)


def test_only_secrets_are_read_as_metadata() -> None:
    assert {k for k, r in CHILD_RESOURCES.items() if r.metadata_only} == {"Secret"}
    pods = CHILD_RESOURCES["Pod"]
    assert (pods.list_accept, pods.watch_accept) == ("application/json", "application/json")
    # Another kind's objects keep their kind; list items without one get the resource's.
    assert pods.typed({"metadata": {}}) == {"kind": "Pod", "apiVersion": "v1", "metadata": {}}


def test_a_lookup_by_name_asks_for_a_secrets_metadata() -> None:
    asked: list[str] = []

    class Lister:
        def request(self, method: str, path: str, **kwargs: Any) -> Obj:
            asked.append(kwargs["accept"])
            return {"items": [secret("job-ssh", "3", data=False)]}

    found = NameConflicts(Lister()).lookup(  # type: ignore[arg-type]
        "ns", CHILD_RESOURCES["Secret"], "job-ssh"
    )
    assert asked == [METADATA_LIST]
    assert found is not None and found["kind"] == "Secret" and found["apiVersion"] == "v1"


JOB = yaml.safe_load(
    """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds, namespace: ns, uid: job-uid, resourceVersion: "1"}
spec:
  config:
    slotsPerWorker: 1
    run: {python: [train.py]}
  worker:
    replicas: 2
    template:
      spec:
        containers: [{name: worker, image: trainer:1}]
"""
)


def test_the_ssh_secret_created_by_a_reconcile_is_cached_without_its_keys(
    manager: PluginManager,
) -> None:
    """The reconciler puts the answer to the Secret's creation (keys and all) into the store:
    the store keeps its metadata only, and the next reconcile neither creates nor rewrites it."""
    fake = FakeTransport()
    jobs = Store()
    jobs.put(copy.deepcopy(JOB))
    resource = job_resource(manager.kind_info("DeepSpeedJob"))
    fake.seed(resource.path("ns", "ds"), copy.deepcopy(JOB))
    children = {kind: Store(slimmer(kind)) for kind in CHILD_RESOURCES}
    cache = Cache(
        {"DeepSpeedJob": resource},
        {"DeepSpeedJob": jobs},
        children,
        frozenset({"PodGroup", "PodGroup.scheduling.k8s.io", "TensorBoard"}),
    )
    reconciler = Reconciler(fake.as_transport(), manager, cache, EventRecorder(fake.as_transport()))
    key = ("DeepSpeedJob", "ns", "ds")
    reconciler.reconcile(key)
    (posted,) = fake.posted("secrets")
    assert posted.get("data") or posted.get("stringData")  # the keys went to the API server
    (cached,) = children["Secret"].all()
    assert_metadata_only(cached)
    assert cached["metadata"]["name"] == posted["metadata"]["name"]
    before = len(fake.requests)
    reconciler.reconcile(key)
    again = [(m, p) for m, p, _ in fake.requests[before:] if "/secrets" in p]
    assert again == []
