"""`t9kjobs operator` with changes applied at run time, to measure a proposed change to the
operator before anyone makes it in core/ (the benchmark never edits core):

    python -m bench.patches --patch NAME [--patch NAME ...] -- operator [operator flags]

`python -m bench --ours-patch NAME` runs the `ours` phase through it. Patches:

- `strip-managed-fields`: the informer stores drop `metadata.managedFields` (never read by a
  reconcile; a status PUT without the field keeps the server's copy).
- `async-events`: Events are posted by one background thread instead of by the reconcile
  worker, so a worker's next job does not wait for them (as client-go's event broadcaster).
- `parallel-create`: a reconcile creates its pods concurrently (up to 8 at once), after the
  other children, in plan order.
- `coalesce-child-events`: a change of a child queues its job after 1 s, once per window, so
  the pods of a job that change together cost one reconcile and one status write.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from t9kjobs.cli.main import main as t9kjobs_main
from t9kjobs.controller import informer, operator, reconciler
from t9kjobs.models import API_GROUP

__all__ = ["PATCHES", "main"]

Obj = dict[str, Any]


def strip_managed_fields() -> None:
    put = informer.Store.put

    def lean_put(self: informer.Store, obj: Obj, *, force: bool = False) -> bool:
        obj.get("metadata", {}).pop("managedFields", None)
        return put(self, obj, force=force)

    informer.Store.put = lean_put  # type: ignore[method-assign]


def async_events() -> None:
    send = reconciler.Reconciler._event
    pending: queue.Queue[tuple[Any, ...]] = queue.Queue()

    def drain() -> None:
        while True:
            args = pending.get()
            with contextlib.suppress(Exception):  # an event is worth a log line, never a retry
                send(*args)

    threading.Thread(target=drain, name="events", daemon=True).start()

    def enqueue(self: reconciler.Reconciler, *args: Any) -> None:
        pending.put((self, *args))

    reconciler.Reconciler._event = enqueue  # type: ignore[method-assign,assignment]


def parallel_create() -> None:
    create = reconciler.Reconciler._create
    apply = reconciler.Reconciler._apply
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="create")

    def apply_in_parallel(
        self: reconciler.Reconciler, key: Any, raw: Obj, the_plan: Any, jlog: Any
    ) -> None:
        pods = [o for o in the_plan.create if o["kind"] == "Pod"]
        if len(pods) < 2:
            apply(self, key, raw, the_plan, jlog)
            return
        others = [o for o in the_plan.create if o["kind"] != "Pod"]
        # Status, deletions, updates and the other children as before, then the pods at once.
        apply(self, key, raw, replace(the_plan, create=others, events=()), jlog)
        for future in [pool.submit(create, self, key[1], pod) for pod in pods]:
            future.result()
        for event in the_plan.events:
            self._event(raw, event, jlog)

    reconciler.Reconciler._apply = apply_in_parallel  # type: ignore[method-assign]


COALESCE_SECONDS = 1.0


def coalesce_child_events() -> None:
    due: dict[Any, float] = {}
    lock = threading.Lock()

    def on_child(self: operator.Operator, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") in self.job_resources
                and str(ref.get("apiVersion", "")).startswith(API_GROUP + "/")
            ):
                key = (ref["kind"], meta["namespace"], ref["name"])
                now = time.monotonic()
                with lock:  # one pending entry per key, as client-go's delaying queue keeps
                    if due.get(key, 0.0) > now:
                        continue
                    due[key] = now + COALESCE_SECONDS
                self.queue.add_after(key, COALESCE_SECONDS)

    operator.Operator._on_child = on_child  # type: ignore[method-assign]


PATCHES: dict[str, Callable[[], None]] = {
    "strip-managed-fields": strip_managed_fields,
    "async-events": async_events,
    "parallel-create": parallel_create,
    "coalesce-child-events": coalesce_child_events,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(prog="python -m bench.patches", description=__doc__)
    p.add_argument("--patch", action="append", default=[], choices=sorted(PATCHES))
    args = p.parse_args(argv[:split])
    for name in args.patch:
        PATCHES[name]()
    return t9kjobs_main(argv[split + 1 :])


if __name__ == "__main__":
    raise SystemExit(main())
