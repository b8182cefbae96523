"""Which namespaces give their pods requests by default (`t9kjobs.controller.limit_ranges`):
a LimitRange's container defaults do, its maxima alone do not; until the informers synced, or
where listing is refused, every namespace is taken to (jobs stay gangs); a watch exists only
where the plugins make gangs."""

from __future__ import annotations

import threading

from t9kjobs.controller.limit_ranges import LimitRangeWatch, gives_defaults
from t9kjobs.controller.threads import Supervisor
from t9kjobs.features import ChildKind, GangFormat
from t9kjobs.kube.transport import ApiError
from t9kjobs.vocabulary import Obj
from tests.unit.core.kube.fake_transport import FakeTransport


def _limits(namespace: str, *items: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": namespace, "resourceVersion": "1"},
        "spec": {"limits": list(items)},
    }


def test_container_defaults_give_requests_maxima_alone_do_not() -> None:
    assert gives_defaults(_limits("a", {"type": "Container", "defaultRequest": {"cpu": "1"}}))
    assert gives_defaults(_limits("a", {"type": "Container", "default": {"memory": "1Gi"}}))
    assert not gives_defaults(_limits("a", {"type": "Container", "max": {"cpu": "8"}}))
    assert not gives_defaults(_limits("a", {"type": "Pod", "max": {"cpu": "8"}}))
    assert not gives_defaults(_limits("a"))


def test_a_namespace_gives_defaults_until_the_informers_synced() -> None:
    watch = LimitRangeWatch(FakeTransport().as_transport())
    assert watch.default_requests("a")  # not started
    [informer] = watch.start(Supervisor(threading.Event()), [])
    informer.stop()
    assert informer.namespace is None  # one informer of every namespace
    watch.store.put(_limits("a", {"type": "Container", "defaultRequest": {"cpu": "1"}}))
    watch.store.put(_limits("b", {"type": "Container", "max": {"cpu": "8"}}))
    assert watch.default_requests("b")  # not synced yet
    informer.synced.set()
    assert watch.default_requests("a")
    assert not watch.default_requests("b") and not watch.default_requests("c")


def test_listing_refused_leaves_every_namespace_giving_defaults() -> None:
    def refuse(method: str, path: str, body: Obj | None) -> None:
        if path == "/api/v1/namespaces/b/limitranges":
            raise ApiError(403, {"message": "forbidden"})

    watch = LimitRangeWatch(FakeTransport(refuse).as_transport())
    assert watch.start(Supervisor(threading.Event()), ["a", "b"]) == []
    assert watch.default_requests("a") and watch.default_requests("c")


def test_only_an_operator_that_makes_gangs_reads_limit_ranges() -> None:
    plain = ChildKind("example.com/v1", "Thing", "things")
    gang = ChildKind("example.com/v1", "Group", "groups", gang=GangFormat(lambda g: 2))
    transport = FakeTransport().as_transport()
    assert LimitRangeWatch.wired({"Thing": plain}, transport) is None
    assert LimitRangeWatch.wired({"Thing": plain, "Group": gang}, transport) is not None
