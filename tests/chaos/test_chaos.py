"""The chaos tier: jobs of every kind with scripted outcomes (workload.py) run on KWOK nodes
while the operator, two replicas with leader election (replicas.py), is SIGKILLed and SIGSTOPped
and kube-apiserver is killed and started again (hack/cluster/restart.sh). Then, from an observer
of its own (observer.py), the cluster's final state and the API server's audit log (audit.py):

| check | counted |
| --- | --- |
| two live pods of one replica | a pod of a replica appearing while another of it exists |
| uncounted restarts | replicas whose pods (creations in the audit log, or pods the observer saw) minus one differ from their restartCount |
| status regressions | a job's phase, restart counts or completion time going back |
| stuck jobs | jobs without a verdict once the faults are over |
| wrong verdicts | phase, reason or restart counts other than the script's |
| orphans | children whose controller is no job of the namespace (or none), PodGroups included |
| gangs astray | pods in another job's gang (`spec.schedulingGroup`), finished jobs' PodGroups not deleted |
| queues astray | a queued job (one in three waits in a Kueue queue with room for all) whose Workload was created more than once, is missing, or is not Finished once the job is; a Workload of a job not queued |
| verdicts without their Event | finished jobs with no Event of their phase (the replicas post routine Events too: Succeeded as well as Failed) |
| writes after the Lease was lost | writes of a replica arriving outside its terms as leader |
| pods left on lost nodes | a pod of an unfinished job on a node deleted or not Ready for longer than the operator's `--lost-node-seconds` + `LOST_NODE_SLACK`, not counting the faults' pauses (stranding.py) |

Each must be zero. Right after the first fault the lost-node phase (lost_nodes.py) makes a node
unreachable and deletes another under two jobs of their own; the next fault strikes within the
bound. The replicas run with `--lost-node-seconds` `CHAOS_LOST_NODE_SECONDS` (10), which the
check judges against 10 s whatever it is: 0 (lost-node handling off) shows it failing. The size
comes from the environment: `CHAOS_JOBS` (27), `CHAOS_KILLS` (1), `CHAOS_FREEZES` (1),
`CHAOS_APISERVER_RESTARTS` (1); `make chaos` runs 200 jobs, 3 kills, 2 freezes and 1 restart.
The report (counts, failover times, how long the lost nodes' pods stayed) goes to `build/chaos/`
(`CHAOS_REPORT`): report.json, report.md, the replicas' logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.kube.transport import Transport, load_configuration
from t9kjobs.objects import LABEL_OWNER_KIND
from t9kjobs.testing.harness import crds
from t9kjobs.vocabulary import Obj
from tests.chaos.audit import Audit
from tests.chaos.judges import QUEUE_LABEL, controller_uid, gangs_astray, queues_astray
from tests.chaos.lost_nodes import LostNodes
from tests.chaos.observer import Observer
from tests.chaos.replicas import LEASE, Replicas
from tests.chaos.workload import PLURALS, Scripted, workload
from tests.cluster import Cluster, fresh_namespace
from tests.repo import REPO
from tests.waiting import TimedOut, until

JOBS = "/apis/batch.tensorstack.dev/v1beta1"
FREEZE_SECONDS = 25  # longer than the Lease (15 s): the standby takes over meanwhile
CHILDREN = ("pods", "services", "configmaps", "secrets")
GANGS = "/apis/scheduling.k8s.io/v1alpha2"  # every job is a gang (--gang-scheduling auto)
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"  # one job in three waits in a queue (hack/cluster/kueue)
LOST_NODE_BOUND = 10  # the replicas' --lost-node-seconds, and what the invariant allows
# Beyond the bound, for the operator to act once it can: its requeue at the bound, a reconcile
# behind the others queued, the force deletion reaching the observer's watch, and a new
# leader's start (its informers listed, every job reconciled: its first write came 0.1-3.2 s
# after the takeover in the runs of docs/reliability.md). The faults themselves (a leader
# killed or frozen until the standby holds the Lease, the API server and the nodes restarted)
# are not counted at all: they are the pauses of `Chaos.pauses`.
LOST_NODE_SLACK = 15


def _env(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


def faults() -> list[str]:
    """The faults of the run, interleaved: kill, freeze, restart, kill, freeze, kill..."""
    left = {
        "kill": _env("CHAOS_KILLS", 1),
        "freeze": _env("CHAOS_FREEZES", 1),
        "apiserver": _env("CHAOS_APISERVER_RESTARTS", 1),
    }
    order: list[str] = []
    while any(left.values()):
        for fault in ("kill", "freeze", "apiserver"):
            if left[fault]:
                order.append(fault)
                left[fault] -= 1
    return order


@dataclass
class Fault:
    kind: str
    at: float  # wall clock, as the audit log's
    victim: str = ""
    back_at: float | None = None  # SIGCONT / the API server ready again
    recovered_at: float | None = None  # a live leader again (the standby, or after a restart)
    exit_code: int | None = None  # of a frozen leader once thawed
    detail: dict[str, Any] = field(default_factory=dict)


class Chaos:
    """One run: submit, fault, wait, collect."""

    def __init__(self, cluster: Cluster, namespace: str, out: Path) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.out = out
        cfg = load_configuration(str(cluster.kubeconfig))
        self.http = Transport(cfg, qps=0)
        self.http.user_agent = "t9kjobs-chaos-harness"
        observer_http = Transport(cfg, qps=0)
        observer_http.user_agent = "t9kjobs-chaos-observer"
        self.observer = Observer(observer_http, namespace, PLURALS)
        lost_node_seconds = str(_env("CHAOS_LOST_NODE_SECONDS", LOST_NODE_BOUND))
        self.replicas = Replicas(
            cluster.kubeconfig,
            namespace,
            out / "logs",
            self.http,
            flags=("--lost-node-seconds", lost_node_seconds),
        )
        self.lost = LostNodes(self.http, namespace)
        self.jobs = workload(_env("CHAOS_JOBS", 27), namespace)
        # One job in three waits in a Kueue queue whose ClusterQueue has room for every pod:
        # admitted at once, it must be admitted once, and its Workload finished with it.
        for job in self.jobs[1::3]:
            job.manifest["metadata"].setdefault("labels", {})[QUEUE_LABEL] = "chaos"
        self.deleted: set[str] = set()
        self.faults: list[Fault] = []
        self.ended_at = 0.0  # when the run's jobs were last waited for

    # -- the run -----------------------------------------------------------------------------

    def queue(self) -> str:
        """The LocalQueue `chaos` of the namespace, and its ClusterQueue (named after the
        namespace; the caller deletes it): room for every pod of the workload at once."""
        cq: Obj = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": self.namespace},
            "spec": {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                },
                "resourceGroups": [
                    {
                        # Every resource the workload's pods ask for must be covered, or
                        # Kueue admits none of them ("resource cpu unavailable").
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu", "pods"],
                        "flavors": [
                            {
                                "name": self.namespace,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100000"},
                                    {"name": "memory", "nominalQuota": "100000Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "100000"},
                                    {"name": "pods", "nominalQuota": "10000"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
        flavor = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": self.namespace},
        }
        local = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "chaos", "namespace": self.namespace},
            "spec": {"clusterQueue": self.namespace},
        }
        self.http.request("POST", f"{KUEUE}/resourceflavors", body=flavor)
        self.http.request("POST", f"{KUEUE}/clusterqueues", body=cq)
        self.http.request("POST", f"{KUEUE}/namespaces/{self.namespace}/localqueues", body=local)
        return self.namespace

    def run(self) -> None:
        self.observer.start()
        self.replicas.start()
        self.replicas.wait_leader()
        plan = faults()
        # The nodes break right after the first fault, while a leader that has watched them
        # since its start leads: the next fault strikes within the bound. (A node deleted while
        # no replica leads is the e2e tier's: tests/e2e/test_lost_nodes.py.)
        steps = [*plan[:1], "lost-nodes", *plan[1:]]
        waves = [self.jobs[i :: len(steps) + 1] for i in range(len(steps) + 1)]
        for wave, step in zip(waves, [*steps, None], strict=True):
            self._submit(wave)
            time.sleep(3)  # the operator is creating and restarting pods when it strikes
            if step == "lost-nodes":
                self.lost.strike(self._create)
            elif step is not None:
                self.faults.append(getattr(self, f"_{step}")())
            if step is not None:
                time.sleep(3)
        self.lost.release()

    def pauses(self) -> list[tuple[float, float]]:
        """When the operator could not act: from each fault until a live leader again."""
        return [(f.at, f.recovered_at or time.time()) for f in self.faults]

    def _retry(self, what: str, call: Any, done: int = 0) -> Any:
        """`call()`, retried while the API server restarts; an answer `done` (the 409 of a
        creation, the 404 of a deletion, whose first try went through) ends it too."""

        def attempt() -> tuple[Any]:
            try:
                return (call(),)
            except Exception as exc:
                status = getattr(exc, "status", 0)
                if status and status == done:
                    return (None,)
                if status in (404, 409):
                    raise AssertionError(f"{what}: {exc}") from exc
                raise

        def retried(exc: Exception) -> bool:
            return not isinstance(exc, AssertionError)

        return until(attempt, 120, interval=0.5, what=what, retry=retried)[0]

    def _create(self, job: Scripted) -> None:
        path = f"{JOBS}/namespaces/{self.namespace}/{PLURALS[job.kind]}"
        self._retry(
            f"create {job.name}",
            lambda: self.http.request("POST", path, body=job.manifest),
            done=409,
        )

    def _submit(self, wave: list[Scripted]) -> None:
        for job in wave:
            self._create(job)
        # One job in twelve is deleted while it runs: its children must all go.
        doomed = [job for job in wave if int(job.name.rsplit("-", 1)[1]) % 12 == 5]
        if doomed:
            threading.Timer(2.0, self._delete, args=(doomed,)).start()

    def _delete(self, doomed: list[Scripted]) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        for job in doomed:
            path = f"{JOBS}/namespaces/{self.namespace}/{PLURALS[job.kind]}/{job.name}"
            self.deleted.add(job.name)
            self._retry(
                f"delete {job.name}",
                lambda p=path: self.http.request("DELETE", p, body=body),
                done=404,
            )

    def _kill(self) -> Fault:
        victim, _ = self.replicas.wait_leader()
        fault = Fault("kill", time.time(), victim)
        self.replicas.signal(victim, signal.SIGKILL)
        self.replicas.wait_leader(other_than=victim)
        fault.recovered_at = time.time()
        return fault

    def _freeze(self) -> Fault:
        victim, _ = self.replicas.wait_leader()
        fault = Fault("freeze", time.time(), victim)
        self.replicas.signal(victim, signal.SIGSTOP)
        self.replicas.wait_leader(other_than=victim)
        fault.recovered_at = time.time()
        time.sleep(max(0.0, fault.at + FREEZE_SECONDS - time.time()))
        self.replicas.signal(victim, signal.SIGCONT)
        fault.back_at = time.time()
        fault.exit_code = self.replicas.wait_exit(victim)  # it lost the Lease: it must go
        return fault

    def _apiserver(self) -> Fault:
        victim, _ = self.replicas.wait_leader()
        fault = Fault("apiserver", time.time(), victim)
        self._restart("kube-apiserver", "3")
        fault.back_at = time.time()
        # KWOK v0.8.0 (the simulated kubelets) stalls across it: its stage workers' requests
        # fail while the server is down, and no pod moves again until kwok restarts (seen in
        # kwok.log: the last failed deletes, then nothing). A kubelet does not; the operator's
        # recovery is what is tested here, so the nodes are restarted with the API server.
        # So is kube-scheduler: at 200 jobs its cache came back corrupted ("Pod updated on a
        # different node than previously added to. Scheduler cache is corrupted"), it logged
        # nothing more, and 108 jobs' pods stayed Pending. A real control plane's scheduler runs
        # with leader election, which it loses when the API server is away longer than its
        # renew deadline (10 s; this restart takes longer): it exits and is started again.
        self._restart("kube-scheduler")
        self._restart("kwok")
        leader, fault.recovered_at = self.replicas.wait_leader()
        fault.detail["leader_after"] = leader
        return fault

    def _restart(self, *args: str) -> None:
        subprocess.run(
            ["bash", str(REPO / "hack/cluster/restart.sh"), *args],
            env={**os.environ, "T9KJOBS_CLUSTER_DIR": str(self.cluster.dir)},
            check=True,
        )

    # -- the end -----------------------------------------------------------------------------

    def finish(self, timeout: float = 300) -> list[Obj]:
        """Wait for every job still there to finish (or `timeout`); the jobs, as listed then."""
        with contextlib.suppress(TimedOut):  # the jobs still running are judged stuck
            until(
                lambda: all(
                    (j.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                    for j in self._jobs()
                ),
                timeout,
                interval=2,
                what="every job finished",
            )
        time.sleep(5)  # the last status writes and Events
        return self._jobs()

    def _jobs(self) -> list[Obj]:
        out = []
        for kind, plural in PLURALS.items():
            answer = self._retry(
                "list jobs",
                lambda p=plural: self.http.request(
                    "GET", f"{JOBS}/namespaces/{self.namespace}/{p}"
                ),
            )
            for item in answer.get("items") or []:
                item["kind"] = kind
                out.append(item)
        return out

    def children(self) -> list[Obj]:
        out = []
        for resource in CHILDREN:
            answer = self.http.request(
                "GET",
                f"/api/v1/namespaces/{self.namespace}/{resource}",
                query={"labelSelector": LABEL_OWNER_KIND},
            )
            out += answer.get("items") or []
        return out + self.gangs() + self.workloads()

    def gangs(self) -> list[Obj]:
        """The namespace's kube-scheduler PodGroups (the cluster serves them: hack/cluster)."""
        answer = self.http.request("GET", f"{GANGS}/namespaces/{self.namespace}/podgroups")
        return [{**g, "kind": "PodGroup"} for g in answer.get("items") or []]

    def workloads(self) -> list[Obj]:
        """The namespace's Kueue Workloads."""
        answer = self.http.request("GET", f"{KUEUE}/namespaces/{self.namespace}/workloads")
        return [{**w, "kind": "Workload"} for w in answer.get("items") or []]

    def events(self) -> list[Obj]:
        answer = self.http.request("GET", f"/api/v1/namespaces/{self.namespace}/events")
        return list(answer.get("items") or [])


def judge(chaos: Chaos, jobs: list[Obj], audit: Audit) -> dict[str, list[str]]:
    """Every check, with what it found (empty when it holds)."""
    scripted = {j.name: j for j in [*chaos.jobs, *chaos.lost.jobs]}
    by_name = {j["metadata"]["name"]: j for j in jobs}
    # A pod's incarnations: its creations in the audit log, or the uids the observer saw if
    # more (an API server killed between storing a pod and writing its audit event).
    created = audit.creations("pods")
    lives = chaos.observer.pod_lives
    creations = {n: max(created.get(n, 0), len(lives.get(n, []))) for n in {*created, *lives}}
    checks: dict[str, list[str]] = {
        "two live pods of one replica": [
            v for v in chaos.observer.violations if v.startswith("pod ")
        ],
        "status regressions": [v for v in chaos.observer.violations if not v.startswith("pod ")],
        "uncounted restarts": [],
        "stuck jobs": [],
        "wrong verdicts": [],
        "orphans": [],
        "gangs astray": [],
        "queues astray": [],
        "verdicts without their Event": [],
        "writes after the Lease was lost": [
            f"{w.identity} {w.verb} {w.resource}/{w.name} ({w.code})" for w in audit.outside_terms()
        ],
        "pods left on lost nodes": chaos.observer.ledger.stranded(
            LOST_NODE_BOUND, LOST_NODE_SLACK, chaos.pauses(), chaos.ended_at
        ),
    }
    events = {(e["involvedObject"].get("uid"), e.get("reason")) for e in chaos.events()}
    children = chaos.children()
    pods_of: dict[str | None, list[Obj]] = {}
    for child in children:
        if child.get("kind", "Pod") == "Pod" and "containers" in (child.get("spec") or {}):
            pods_of.setdefault(controller_uid(child), []).append(child)
    for name, job in sorted(by_name.items()):
        status = job.get("status") or {}
        phase = status.get("phase")
        if phase not in ("Succeeded", "Failed"):
            pods = {  # the phase, and the node (None: never scheduled)
                p["metadata"]["name"]: (
                    (p.get("status") or {}).get("phase"),
                    (p.get("spec") or {}).get("nodeName"),
                )
                for p in pods_of.get(job["metadata"]["uid"], [])
            }
            checks["stuck jobs"].append(f"{name}: {phase}, pods {pods}")
            continue
        script = scripted[name]
        counts = {
            r["name"]: r.get("restartCount", 0) for t in status["tasks"] for r in t["replicas"]
        }
        for replica, count in sorted(counts.items()):
            if creations.get(replica, 0) - 1 != count:
                checks["uncounted restarts"].append(
                    f"{replica}: {creations.get(replica, 0)} pod(s), restartCount {count}"
                )
        final = [c for c in status.get("conditions") or [] if c["type"] in ("Completed", "Failed")]
        reason = final[0].get("reason") if final else None
        # Every replica restarted replica_restarts times, `infrastructure` of them once more.
        restarts = [script.replica_restarts] * len(counts)
        restarts[: script.infrastructure] = [script.replica_restarts + 1] * script.infrastructure
        infrastructure = status.get("infrastructureRestartCount", 0)
        if (
            phase != script.phase
            or reason not in script.reasons
            or sorted(counts.values()) != sorted(restarts)
            or infrastructure != script.infrastructure
            or status.get("backoffCount", 0) != sum(counts.values()) - infrastructure
        ):
            checks["wrong verdicts"].append(
                f"{name}: {phase}/{reason}, restarts {counts}, backoffCount"
                f" {status.get('backoffCount', 0)}, infrastructureRestartCount {infrastructure};"
                f" the script: {script.phase}/{'|'.join(script.reasons)},"
                f" {script.replica_restarts} a replica, {script.infrastructure} more by the"
                " infrastructure"
            )
        if (job["metadata"]["uid"], phase) not in events:
            checks["verdicts without their Event"].append(f"{name}: no {phase} Event")
    checks["gangs astray"] = gangs_astray(jobs, children)
    checks["queues astray"] = queues_astray(jobs, children, audit.creations("workloads"))
    uids = {j["metadata"]["uid"] for j in jobs}
    for child in children:
        if controller_uid(child) not in uids:
            meta = child["metadata"]
            checks["orphans"].append(f"{meta['name']} (controller {controller_uid(child)})")
    return checks


def report(chaos: Chaos, jobs: list[Obj], audit: Audit, checks: dict[str, list[str]]) -> Obj:
    phases: dict[str, int] = {}
    for job in jobs:
        phase = (job.get("status") or {}).get("phase") or "none"
        phases[phase] = phases.get(phase, 0) + 1
    faults = []
    for fault in chaos.faults:
        entry: Obj = {"fault": fault.kind, "victim": fault.victim, **fault.detail}
        taken = audit.takeover_after(fault.at, fault.victim)
        if taken is not None and fault.kind != "apiserver":
            entry["new_leader"] = taken.identity
            entry["failover_seconds"] = round(taken.start - fault.at, 1)
            first = audit.first_write(taken)
            if first is not None:
                entry["first_write_seconds"] = round(first.at - fault.at, 1)
        if fault.back_at is not None:
            entry["back_after_seconds"] = round(fault.back_at - fault.at, 1)
        if fault.exit_code is not None:
            entry["victim_exit_code"] = fault.exit_code
        faults.append(entry)
    pods = audit.creations("pods")
    return {
        "jobs": {
            "submitted": len(chaos.jobs) + len(chaos.lost.jobs),
            "deleted while running": len(chaos.deleted),
            "by phase": phases,
        },
        "pods created": sum(pods.values()),
        "restarts counted": sum(
            r.get("restartCount", 0)
            for j in jobs
            for t in (j.get("status") or {}).get("tasks") or []
            for r in t["replicas"]
        ),
        "operator writes": len(audit.writes),
        "lease terms": [
            {"identity": t.identity, "seconds": round((t.end or time.time()) - t.start, 1)}
            for t in audit.terms
        ],
        "operator exits": [{"identity": i, "code": c} for i, c in chaos.replicas.exits],
        "faults": faults,
        "lost nodes": [
            {"node": node, "how": how, "pods stayed (s)": chaos.observer.ledger.stays(node, at)}
            for node, how, at in chaos.lost.broken
        ],
        "checks": {
            name: {"count": len(found), "first": found[:5]} for name, found in checks.items()
        },
    }


def markdown(result: Obj) -> str:
    lines = ["| check | count |", "| --- | --- |"]
    lines += [f"| {name} | {c['count']} |" for name, c in result["checks"].items()]
    lines += ["", "| fault | victim | new leader | failover (s) | first write (s) |"]
    lines += ["| --- | --- | --- | --- | --- |"]
    for f in result["faults"]:
        lines.append(
            f"| {f['fault']} | {f['victim']} | {f.get('new_leader', f.get('leader_after', ''))}"
            f" | {f.get('failover_seconds', '')} | {f.get('first_write_seconds', '')} |"
        )
    lines += ["", "| lost node | how | its pods stayed (s) |", "| --- | --- | --- |"]
    for lost in result["lost nodes"]:
        stays = ", ".join(f"{pod} {s}" for pod, s in lost["pods stayed (s)"].items())
        lines.append(f"| {lost['node']} | {lost['how']} | {stays} |")
    return "\n".join(lines) + "\n"


@pytest.fixture
def out() -> Iterator[Path]:
    path = Path(os.environ.get("CHAOS_REPORT") or REPO / "build" / "chaos")
    shutil.rmtree(path, ignore_errors=True)
    (path / "logs").mkdir(parents=True)
    yield path


def test_no_fault_loses_or_doubles_anything(cluster: Cluster, out: Path) -> None:
    audit_log = cluster.env.get("AUDIT_LOG")
    assert audit_log, f"the cluster at {cluster.dir} runs without an audit log: stop it"
    crds.install_crds(cluster.kubectl_path, cluster.kubeconfig)
    with fresh_namespace(cluster, "chaos") as namespace:
        chaos = Chaos(cluster, namespace, out)
        try:
            chaos.queue()
            chaos.lost.create()
            chaos.run()
            jobs = chaos.finish()
        finally:
            chaos.ended_at = time.time()
            chaos.replicas.stop()
            chaos.observer.stop()
            chaos.lost.delete()
            for plural in ("clusterqueues", "resourceflavors"):
                with contextlib.suppress(Exception):
                    chaos.http.request("DELETE", f"{KUEUE}/{plural}/{namespace}")
        time.sleep(10)  # the garbage collector, for the children of deleted jobs
        audit = Audit(Path(audit_log), LEASE, namespace)
        checks = judge(chaos, jobs, audit)
        result = report(chaos, jobs, audit, checks)
    (out / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "report.md").write_text(markdown(result))
    print(f"\n[chaos] {out / 'report.md'}\n" + markdown(result))
    for name, found in checks.items():  # CI keeps only the log: what failed, named in it
        for line in found[:5]:
            print(f"[chaos] {name}: {line}")
    assert {name: c["count"] for name, c in result["checks"].items()} == dict.fromkeys(checks, 0)
    assert len(chaos.faults) == len(faults())
