"""What an informer store's removal costs while many objects go at once, without a cluster: N
pods put, then removed one after another within the tombstones' 5 minutes, as
kube-controller-manager's pod GC deletes finished pods once more than 12,500 exist (the
10,000-job burst, docs/benchmarks.md). Prints CPU microseconds a removal for each N: flat when
a removal is O(1), growing with N when each one walks every tombstone.

    python -m bench.store_churn [--sizes 1000,5000,20000]
"""

from __future__ import annotations

import argparse
import time

from t9kjobs.kube.informer import Store
from t9kjobs.kube.slimming import slimmer

__all__ = ["main", "removal_microseconds"]


def removal_microseconds(n: int) -> float:
    store = Store(slimmer("Pod"))
    for i in range(n):
        store.put({"metadata": {"name": f"p{i}", "namespace": "bench", "resourceVersion": "7"}})
    started = time.process_time()
    for i in range(n):
        store.remove("bench", f"p{i}")
    return (time.process_time() - started) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.store_churn", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--sizes", default="1000,5000,20000", help="pods removed (1000,5000,20000)")
    args = p.parse_args(argv)
    for n in (int(s) for s in args.sizes.split(",") if s):
        print(f"{n:>6} pods removed within 5 minutes: {removal_microseconds(n):8.1f} us a removal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
