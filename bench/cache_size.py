"""What a job costs the operator's informer stores, without a cluster: N of the benchmark's
jobs, each with its 4 pods as a finished KWOK pod looks (server fields, managedFields, the
kubelet's status) and its headless Service, decoded from JSON and put into stores as the
operator does, measured with tracemalloc. `--as-served` keeps the objects whole (no slimming).

    python -m bench.cache_size [--jobs 1000] [--as-served]
"""

from __future__ import annotations

import argparse
import copy
import json
import tracemalloc
import uuid
from collections.abc import Callable

from bench.workload import ours_job
from t9kjobs.kube.decoding import loads
from t9kjobs.kube.informer import Store
from t9kjobs.kube.slimming import slimmer
from t9kjobs.loading import parse_job
from t9kjobs.manager import load_plugins
from t9kjobs.render import render_job
from t9kjobs.vocabulary import Obj

__all__ = ["main"]

STAMP = "2026-01-01T00:00:00Z"


def _served(obj: Obj, version: int) -> bytes:
    """`obj` as the API server sends it once its pod has run: JSON text."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta.update(uid=str(uuid.uuid4()), resourceVersion=str(version), creationTimestamp=STAMP)
    labels = {f"f:{k}": {} for k in meta.get("labels", {})}
    meta["managedFields"] = [
        {
            "manager": m,
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": labels}},
        }
        for m in ("t9k-jobs-operator", "kube-scheduler", "kwok")
    ]
    if obj["kind"] == "Pod":
        obj["spec"].update(
            nodeName="kwok-node-1",
            serviceAccountName="default",
            volumes=[
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ]
                    },
                }
            ],
            tolerations=[
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        )
        obj["status"] = {
            "phase": "Succeeded",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": STAMP}
                for t in ("PodScheduled", "Initialized", "Ready", "ContainersReady")
            ],
            "hostIP": "10.0.0.1",
            "podIP": "10.244.0.7",
            "podIPs": [{"ip": "10.244.0.7"}],
            "startTime": STAMP,
            "qosClass": "BestEffort",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "image": "pytorch:bench",
                    "imageID": "",
                    "containerID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": STAMP,
                            "finishedAt": STAMP,
                        }
                    },
                    "lastState": {},
                }
            ],
        }
    return json.dumps(obj).encode()


def kib_per_job(jobs: int, as_served: bool) -> float:
    manager = load_plugins()
    job = ours_job("bench-0", 4, 5)
    job["metadata"].update(uid=str(uuid.uuid4()), resourceVersion="1", creationTimestamp=STAMP)
    children = [
        _served(o, 100 + i) for i, o in enumerate(render_job(parse_job(job, manager), manager))
    ]
    job_text = json.dumps(job).encode()

    def trim(kind: str) -> Callable[[Obj], Obj] | None:
        return (lambda o: o) if as_served else slimmer(kind)

    tracemalloc.start()
    stores = {kind: Store(trim(kind)) for kind in ("Pod", "Service")}
    job_store = Store(trim("PyTorchTrainingJob"))
    for n in range(jobs):
        for text in children:
            obj = loads(text)
            obj["metadata"]["name"] += f"-{n}"
            stores[obj["kind"]].put(obj)
        obj = loads(job_text)
        obj["metadata"]["name"] = f"bench-{n}"
        job_store.put(obj)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return held / jobs / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.cache_size", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--as-served", action="store_true", help="keep objects whole (no slimming)")
    args = p.parse_args(argv)
    kib = kib_per_job(args.jobs, args.as_served)
    what = "as served" if args.as_served else "as the stores keep them"
    print(f"{args.jobs} jobs x (4 pods, 1 Service, the job), {what}: {kib:.1f} KiB a job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
