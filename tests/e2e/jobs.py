"""What the lifecycle tests (test_lifecycle.py, test_lifecycle_modes.py) share: jobs built from
replica specs, one test's namespace through the operator's own HTTP client (`Kube`: plain dicts,
cheap enough to poll), watches that record what the tests must not miss (`Recorder`: every pod
created, every phase a job went through), the module's operator (`Operators`: killed, restarted)
and the test PodGroup CRD.

Failures are injected the way docs/cluster.md describes: an exit code in a pod template (every
pod of the type exits), or patched onto one running pod (`Kube.fail`).

Fixtures (import them into the test module): `operators` (module: the CRDs installed, the
PodGroup CRD removed, one operator) and `kube` (a test's namespace).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.testing.harness.simulation import (
    SIM_EXIT_CODE,
    SIM_RUN_SECONDS,
    simulate,
    without_claims,
)
from tests import waiting
from tests.repo import REPO

Obj = dict[str, Any]
T = TypeVar("T")

JOBS = "/apis/batch.tensorstack.dev/v1beta1"
PLURALS = {
    "ColossalAIJob": "colossalaijobs",
    "DeepSpeedJob": "deepspeedjobs",
    "GenericJob": "genericjobs",
    "PyTorchTrainingJob": "pytorchtrainingjobs",
}
PODGROUPS = "/apis/scheduler.tensorstack.dev/v1beta1"
PODGROUP_CRD = Path(__file__).parent / "podgroup-crd.yaml"
INCARNATION = "batch.tensorstack.dev/restart-count"
ACTIVE = ("Pending", "Running")


def until(condition: Callable[[], T | None], what: str, timeout: float = 120) -> T:
    """`condition()` once it is truthy (`tests.waiting.until`, every 0.25 s). API errors and
    broken connections are retried; a failed assertion fails at once."""
    return waiting.until(condition, timeout, interval=0.25, what=what, retry=(ApiError, OSError))


def phase(obj: Obj) -> str | None:
    return (obj.get("status") or {}).get("phase")


def condition(status: Obj, type_: str) -> Obj:
    found = [c for c in status.get("conditions") or [] if c["type"] == type_]
    assert found, f"no {type_} condition in {status.get('conditions')}"
    return found[0]


def replicas(status: Obj) -> dict[str, Obj]:
    return {r["name"]: r for t in status.get("tasks") or [] for r in t["replicas"]}


def command(pod: Obj) -> list[str]:
    return list(pod["spec"]["containers"][0].get("command") or [])


# -- jobs ------------------------------------------------------------------------------------


def template(
    exit_code: int | None = None, seconds: float = 1, *, init: bool = False, **container: Any
) -> Obj:
    """A pod template whose pods run for ever, or exit with `exit_code` after `seconds`."""
    spec: Obj = {
        "containers": [
            {"name": "python", "image": "busybox", "command": ["python", "train.py"], **container}
        ]
    }
    if init:
        spec["initContainers"] = [{"name": "init", "image": "busybox", "command": ["true"]}]
    notes = (
        {} if exit_code is None else {SIM_EXIT_CODE: str(exit_code), SIM_RUN_SECONDS: str(seconds)}
    )
    return {"metadata": {"annotations": notes}, "spec": spec}


def replica(type_: str, count: int = 1, restart: Any = "Never", **pod: Any) -> Obj:
    return {"type": type_, "replicas": count, "restartPolicy": restart, "template": template(**pod)}


def job(kind: str, name: str, *replica_specs: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicaSpecs": list(replica_specs), **spec},
    }


# -- the cluster -----------------------------------------------------------------------------


class Recorder:
    """Every change of a collection from the moment it is built, recorded by a watch thread."""

    def __init__(self, http: Transport, path: str, query: dict[str, str] | None = None) -> None:
        self.http, self.path, self.query = http, path, dict(query or {})
        listing = http.request("GET", path, query=self.query)
        self.rv = str(listing["metadata"]["resourceVersion"])
        self.events: list[tuple[str, Obj]] = [("ADDED", o) for o in listing.get("items") or []]
        self.error: Obj | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.error is None:
            query = {
                **self.query,
                "watch": "1",
                "resourceVersion": self.rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "5",
            }
            try:
                for event in self.http.stream(self.path, query, timeout=20):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        self.error = obj  # e.g. 410 Gone: history lost, the record is not whole
                        return
                    self.rv = str((obj.get("metadata") or {}).get("resourceVersion", self.rv))
                    if event.get("type") != "BOOKMARK":
                        with self._lock:
                            self.events.append((str(event["type"]), obj))
                    if self._stop.is_set():
                        return
            except (ApiError, OSError):
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        assert self.error is None, f"the watch of {self.path} broke: {self.error}"

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def snapshot(self) -> list[tuple[str, Obj]]:
        with self._lock:
            return list(self.events)

    def created(self) -> list[Obj]:
        return [o for kind, o in self.snapshot() if kind == "ADDED"]

    def phases(self) -> list[str]:
        """The phases the object went through, in order, each once per stay."""
        out: list[str] = []
        for _, obj in self.snapshot():
            now = phase(obj)
            if now and (not out or out[-1] != now):
                out.append(now)
        return out


class Kube:
    """One test's namespace on the local cluster."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)

    def path(self, doc: Obj, sub: str = "") -> str:
        base = f"{JOBS}/namespaces/{self.ns}/{PLURALS[doc['kind']]}/{doc['metadata']['name']}"
        return base + (f"/{sub}" if sub else "")

    def create(self, doc: Obj) -> Obj:
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = self.ns
        plural = PLURALS[doc["kind"]]
        return self.http.request("POST", f"{JOBS}/namespaces/{self.ns}/{plural}", body=doc)

    def get(self, doc: Obj) -> Obj:
        return self.http.request("GET", self.path(doc))

    def status(self, doc: Obj) -> Obj:
        return dict(self.get(doc).get("status") or {})

    def patch(self, doc: Obj, patch: Obj, sub: str = "") -> Obj:
        return self.http.request(
            "PATCH", self.path(doc, sub), body=patch, content_type="application/merge-patch+json"
        )

    def pods(self) -> dict[str, Obj]:
        items = self.http.request("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def annotate(self, pod: str, notes: dict[str, str]) -> None:
        self.http.request(
            "PATCH",
            f"/api/v1/namespaces/{self.ns}/pods/{pod}",
            body={"metadata": {"annotations": notes}},
            content_type="application/merge-patch+json",
        )

    def fail(self, pod: str, code: int) -> None:
        """Make one running pod exit with `code` now."""
        self.annotate(pod, {SIM_EXIT_CODE: str(code), SIM_RUN_SECONDS: "0"})

    def events(self, doc: Obj) -> list[Obj]:
        query = {"fieldSelector": f"involvedObject.name={doc['metadata']['name']}"}
        path = f"/api/v1/namespaces/{self.ns}/events"
        return list(self.http.request("GET", path, query=query)["items"])

    def wait_phase(self, doc: Obj, want: str, timeout: float = 120) -> Obj:
        """The job's status once it reaches `want`; fails at once if it ends otherwise."""

        def reached() -> Obj | None:
            status = self.status(doc)
            now = status.get("phase")
            assert now == want or now not in ("Succeeded", "Failed"), f"ended {now}: {status}"
            return status if now == want else None

        return until(reached, f"{doc['metadata']['name']} {want}", timeout)

    def running(self, *names: str) -> dict[str, Obj]:
        """The pods once each of `names` is Running, and no other pod is left (a pod being
        deleted does not count as running)."""

        def all_running() -> dict[str, Obj] | None:
            pods = self.pods()
            ok = set(pods) == set(names) and all(
                phase(p) == "Running" and not p["metadata"].get("deletionTimestamp")
                for p in pods.values()
            )
            return pods if ok else None

        return until(all_running, f"pods {sorted(names)} running")

    def record_pods(self) -> Recorder:
        return Recorder(self.http, f"/api/v1/namespaces/{self.ns}/pods")

    def record_job(self, doc: Obj) -> Recorder:
        plural = PLURALS[doc["kind"]]
        query = {"fieldSelector": f"metadata.name={doc['metadata']['name']}"}
        return Recorder(self.http, f"{JOBS}/namespaces/{self.ns}/{plural}", query)


def _podgroups_served(http: Transport) -> bool:
    try:
        answer = http.request("GET", PODGROUPS)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return any(r["name"] == "podgroups" for r in answer.get("resources") or [])


def set_podgroup_crd(cluster: Any, installed: bool) -> None:
    """Install or remove the test PodGroup CRD, and wait until discovery says so."""
    http = Transport(load_configuration(str(cluster.kubeconfig)), qps=0)
    if installed:
        cluster.kubectl("apply", "--server-side", "-f", str(PODGROUP_CRD))
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/podgroups.scheduler.tensorstack.dev",
        )  # fmt: skip
    else:
        cluster.kubectl(
            "delete", "crd", "podgroups.scheduler.tensorstack.dev", "--ignore-not-found",
            "--wait=true",
        )  # fmt: skip
    until(lambda: _podgroups_served(http) == installed, f"PodGroups served: {installed}")


def finished_lives(pods: Recorder) -> dict[str, list[str]]:
    """For each pod name, the incarnation of every pod of it that ran to its end, in order.

    A pod deleted before it finished is left out: KWOK deletes pods by name (without the uid
    precondition a kubelet uses), so its late deletion of a replaced pod may hit the
    replacement, which the operator then recreates as the same incarnation, counting nothing.
    """
    ended: dict[str, tuple[str, str]] = {}
    order: list[str] = []
    for _, pod in pods.snapshot():
        meta = pod["metadata"]
        if meta["uid"] not in order:
            order.append(meta["uid"])
        if phase(pod) in ("Succeeded", "Failed"):
            ended[meta["uid"]] = (meta["name"], meta["annotations"][INCARNATION])
    out: dict[str, list[str]] = {}
    for uid in order:
        if uid in ended:
            name, incarnation = ended[uid]
            out.setdefault(name, []).append(incarnation)
    return out


def job_status(cluster: Any, doc: dict[str, Any]) -> dict[str, Any]:
    kind = doc["kind"].lower()
    meta = doc["metadata"]
    return dict(get_json(cluster, kind, meta["name"], "-n", meta["namespace"]).get("status") or {})


def watch_phases(cluster: Any, doc: dict[str, Any], until: str, timeout: float = 180) -> list[str]:
    seen: list[str] = []

    def reached() -> bool:
        phase = job_status(cluster, doc).get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        if phase == until:
            return True
        assert phase not in ("Succeeded", "Failed") or phase == until, f"ended {phase}: {seen}"
        return False

    waiting.until(
        reached,
        timeout,
        interval=0.2,
        what=lambda: f"the job to reach {until}; phases seen: {seen}",
    )
    return seen


def example(path: str, namespace: str) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / path).read_text())
    doc["metadata"]["namespace"] = namespace
    return simulate(without_claims(doc), exit_code=0, seconds=1)


def get_json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
