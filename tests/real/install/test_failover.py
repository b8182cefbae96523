"""Failover of the operator installed by its chart (two replicas, leader election), measured:
the leader pod deleted while a job runs, then the leader frozen (SIGSTOP) for longer than its
Lease and thawed. The API server's audit log (tests/chaos/audit.py: replicas told apart by
their user agents) says who held the Lease when, which pods the operator created, and whether
the old leader wrote after the new one's first write. The figures (seconds from the leader's
loss to the Lease taken and to the new leader's first write) are printed and written to
build/failover.json; docs/install.md, "Failover", has them.

The tests run in file order and share the release (the `release` fixture, per module).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.chaos.audit import Audit, Term, Write
from tests.cluster import Cluster
from tests.real.install.conftest import LEASE, NAMESPACE, Release, signal_pod
from tests.real.jobs import (
    MLP,
    apply,
    assert_trained,
    events_of,
    job,
    job_logs,
    pods_of,
    report,
    scripted,
    wait_finished,
)
from tests.repo import REPO

REPORT = REPO / "build" / "failover.json"
LEASE_SECONDS = 15.0  # the operator's --leader-election-lease-duration, which the chart keeps


def two_ready(release: Release) -> list[dict[str, Any]]:
    def both() -> list[dict[str, Any]] | None:
        pods = release.ready_pods()
        return pods if len(pods) == 2 else None

    return release.cluster.poll(both, timeout=180, message="two Ready operator pods")


def new_holder(release: Release, victim: str) -> str:
    """Wait until the Lease names a replica other than `victim`; that replica."""

    def other() -> str | None:
        holder = release.holder()
        return holder if holder not in ("", victim) else None

    return release.cluster.poll(
        other, timeout=90, interval=0.2, message=f"a replica other than {victim} holding the Lease"
    )


def audit_of(cluster: Cluster) -> Audit:
    audit_log = cluster.env.get("AUDIT_LOG")
    assert audit_log, f"the cluster at {cluster.dir} runs without an audit log: stop it"
    audit = Audit(Path(audit_log), LEASE)
    assert audit.terms, (
        "no Lease write with its body in the audit log: the cluster's audit policy predates"
        " hack/cluster/up.sh's rule for service accounts' Lease writes; stop the cluster"
    )
    return audit


def takeover(audit: Audit, lost_at: float, victim: str) -> tuple[Term, Write]:
    """The first term of another replica after `lost_at`, and that replica's first write."""
    term = audit.takeover_after(lost_at, victim)
    assert term is not None, (lost_at, victim, audit.terms)
    first = audit.first_write(term)
    assert first is not None, f"{term.identity} took the Lease and wrote nothing"
    return term, first


def record(case: str, figures: dict[str, Any]) -> None:
    """Print the figures (pytest -s) and keep them in build/failover.json, by case."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    known[case] = figures
    REPORT.write_text(json.dumps(known, indent=2) + "\n")
    print(f"\n[failover] {case}: {json.dumps(figures)}")


def described(write: Write) -> str:
    return f"{write.verb} {write.resource}/{write.name} ({write.code})"


def replica_counts(obj: dict[str, Any]) -> dict[str, int]:
    return {r["name"]: r["restartCount"] for t in obj["status"]["tasks"] for r in t["replicas"]}


def test_the_standby_takes_over_a_running_job_when_the_leader_pod_is_deleted(
    release: Release, cluster: Cluster, namespace: str
) -> None:
    """A master+worker job: the leader pod is deleted, and the worker's first pod killed at
    once (exit 137, its policy OnFailure: restart 1), while the master waits for it. The
    standby takes the Lease and goes on: the worker restarted once and counted once, the job
    trained and ends Succeeded, written by the new leader, and the operator created each pod
    once per incarnation (the audit log)."""
    pods = two_ready(release)
    started = time.time()
    train = f"exec python3 {MLP} --steps=200 --sleep=0.1"
    mlp = job(
        "PyTorchTrainingJob",
        "failover-mlp",
        scripted("master", train),
        # its first incarnation waits to be killed, without joining the master; the next trains
        scripted("worker", f'[ "$INCARNATION" != 0 ] || exec sleep 600; {train}', "OnFailure"),
    )
    apply(cluster, namespace, mlp)

    def running() -> dict[str, Any] | None:
        found = pods_of(cluster, namespace, "failover-mlp")
        up = [p for p in found.values() if p["status"].get("phase") == "Running"]
        return found["failover-mlp-worker-0"] if len(up) == 2 else None

    worker = cluster.poll(running, timeout=180, interval=1, message="master and worker running")
    victim, victim_pod = release.holder(), release.leader()
    (standby_pod,) = [p["metadata"]["name"] for p in pods if p["metadata"]["name"] != victim_pod]
    lost_at = time.time()
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", victim_pod, "--wait=false")
    signal_pod(cluster, worker, "SIGKILL")
    holder = new_holder(release, victim)
    # The standby, or the Deployment's replacement of the deleted pod when it asks first (seen
    # once: it won by a fraction of a second): another replica either way.
    assert not holder.startswith(victim_pod + "_"), (holder, victim_pod, standby_pod)

    final = wait_finished(cluster, namespace, "ptj", "failover-mlp")
    logs = job_logs(cluster, namespace, "failover-mlp")
    assert final["status"]["phase"] == "Succeeded", report(final, logs)
    assert replica_counts(final) == {"failover-mlp-master-0": 0, "failover-mlp-worker-0": 1}
    assert final["status"]["backoffCount"] == 1
    assert_trained(logs, 2, "through the failover")
    restarting = [
        e["message"]
        for e in events_of(cluster, namespace, "failover-mlp")
        if e["reason"] == "Restarting"
    ]
    assert restarting == ["failover-mlp-worker-0 failed with exit code 137; restart 1"], restarting
    audit = audit_of(cluster)
    created = audit.creations("pods", since=started)
    assert created == {"failover-mlp-master-0": 1, "failover-mlp-worker-0": 2}, created
    assert not [described(w) for w in audit.outside_terms() if w.at >= started]
    term, first = takeover(audit, lost_at, victim)
    assert term.identity == holder
    # a clean stop (SIGTERM) gives the Lease up: the victim's term ends before the next begins
    released = max(
        t.end for t in audit.terms if t.identity == victim and t.end and t.end <= term.start
    )
    # the new leader carried the job on: the restart and the verdict are its writes
    verdicts = [
        w
        for w in audit.writes
        if w.name == "failover-mlp" and w.resource == "pytorchtrainingjobs/status"
    ]
    after = {w.identity for w in verdicts if w.at >= term.start}
    assert after == {holder}, [(w.identity, round(w.at - lost_at, 2)) for w in verdicts]
    record(
        "leader pod deleted",
        {
            "lease released (s)": round(released - lost_at, 2),
            "lease taken (s)": round(term.start - lost_at, 2),
            "first write (s)": round(first.at - lost_at, 2),
            "first write": described(first),
            "pods created": created,
            "writes outside a term": 0,
        },
    )


def test_a_frozen_leader_thawed_after_its_lease_passed_on_writes_nothing_more_and_exits(
    release: Release, cluster: Cluster, namespace: str
) -> None:
    """The leader's process SIGSTOPped; a job submitted meanwhile; the standby takes the Lease
    once it expired and creates the job's pod; the old leader, thawed (SIGCONT), writes
    nothing after the new leader's first write, and exits (its container restarts)."""
    two_ready(release)
    started = time.time()
    victim, victim_pod = release.holder(), release.leader()
    (pod,) = [p for p in release.pods() if p["metadata"]["name"] == victim_pod]
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    signal_pod(cluster, pod, "SIGSTOP")
    frozen_at = time.time()
    try:
        apply(cluster, namespace, job("GenericJob", "during-freeze", scripted("worker", "sleep 3")))
        holder = new_holder(release, victim)
        cluster.poll(
            lambda: pods_of(cluster, namespace, "during-freeze"),
            timeout=60,
            message="the new leader creating the job's pod",
        )
    finally:
        # As soon as the new leader wrote: a frozen process fails its liveness probe too, and
        # the kubelet would kill it (three failures, 10 s apart) before it could be thawed.
        signal_pod(cluster, pod, "SIGCONT")
    thawed_at = time.time()

    def restarted() -> dict[str, Any] | None:
        (now,) = [p for p in release.pods() if p["metadata"]["name"] == victim_pod]
        status = now["status"]["containerStatuses"][0]
        return status if status["restartCount"] > restarts else None

    status = cluster.poll(restarted, timeout=120, interval=1, message=f"{victim_pod} restarting")
    exited = status["lastState"]["terminated"]
    previous = cluster.kubectl("-n", NAMESPACE, "logs", victim_pod, "--previous").stdout
    assert exited["exitCode"] == 1, (exited, previous[-3000:])
    assert "lost leadership" in previous, previous[-3000:]

    final = wait_finished(cluster, namespace, "genericjob", "during-freeze")
    assert final["status"]["phase"] == "Succeeded", final["status"]
    audit = audit_of(cluster)
    term, first = takeover(audit, frozen_at, victim)
    assert term.identity == holder
    late = [described(w) for w in audit.writes if w.identity == victim and w.at >= first.at]
    assert not late, f"{victim} wrote after {holder}'s first write: {late}"
    assert not [described(w) for w in audit.outside_terms() if w.at >= started]
    assert audit.creations("pods", since=started) == {"during-freeze-worker-0": 1}
    renewed = audit.last_renewal(victim, term.start)
    assert renewed is not None
    record(
        "leader frozen",
        {
            "frozen (s)": round(thawed_at - frozen_at, 2),
            "last renewal before the freeze (s)": round(renewed - frozen_at, 2),
            "lease taken (s)": round(term.start - frozen_at, 2),
            "first write (s)": round(first.at - frozen_at, 2),
            "first write after the Lease expired (s)": round(
                first.at - (renewed + LEASE_SECONDS), 2
            ),
            "first write": described(first),
            "old leader's writes after it": 0,
            "old leader's exit code": exited["exitCode"],
        },
    )
