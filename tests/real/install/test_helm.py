"""The operator installed by its Helm chart on the real node, as a platform team installs it:
its pods become Ready through their probes, run hardened, hold exactly the chart's rights, and
run every kind's job to Succeeded; `helm upgrade` rolls them without losing a running job, and
`helm uninstall` leaves the CRDs and the jobs in place (docs/install.md).

The tests run in file order and share the release (the `release` fixture, per module).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import Cluster
from tests.real.install.conftest import NAMESPACE, RELEASE, Release
from tests.real.jobs import (
    MLP,
    apply,
    assert_trained,
    container,
    get,
    job_logs,
    pods_of,
    report,
    wait_finished,
    wait_for,
)
from tests.repo import REPO

ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"
# The routine Events too (PodsCreated of a job's first pods, Succeeded): the audit then shows the
# installed operator posting Events, which its Role must allow, and the chart value works.
CHART_VALUES = ["--set=routineEvents=true"]


def test_the_operator_pods_become_ready_and_one_leads(release: Release) -> None:
    pods = release.cluster.poll(
        lambda: len(release.ready_pods()) == 2 and release.ready_pods(),
        timeout=120,
        message="two Ready operator pods",
    )
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {release.image}
    leader = release.cluster.poll(release.leader, timeout=60, message="a Lease holder")
    assert leader in {p["metadata"]["name"] for p in pods}


def test_the_running_pods_are_hardened_as_the_chart_says(release: Release) -> None:
    """Read from the running process, not the spec: its uid, no_new_privs, capabilities,
    seccomp, and a root filesystem it cannot write."""
    for pod in release.ready_pods():
        name = pod["metadata"]["name"]

        def in_pod(*argv: str, check: bool = True, name: str = name) -> Any:
            return release.cluster.kubectl("-n", NAMESPACE, "exec", name, "--", *argv, check=check)

        status = dict(
            line.split(":\t", 1)
            for line in in_pod("cat", "/proc/1/status").stdout.splitlines()
            if ":\t" in line
        )
        assert status["Uid"].split()[:2] == ["65532", "65532"], status["Uid"]  # real, effective
        assert status["Gid"].split()[:2] == ["65532", "65532"], status["Gid"]
        assert status["NoNewPrivs"].strip() == "1"  # allowPrivilegeEscalation: false
        for caps in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(status[caps], 16) == 0, (caps, status[caps])  # drop: [ALL]
        assert status["Seccomp"].strip() == "2"  # filter mode: RuntimeDefault
        written = in_pod("touch", "/opt/t9kjobs/x", check=False)
        assert written.returncode != 0 and "Read-only file system" in written.stderr
        assert in_pod("sh", "-c", "grep ' / ' /proc/mounts").stdout.split()[3].startswith("ro,")


def test_the_service_account_may_do_exactly_what_the_chart_grants(release: Release) -> None:
    """`kubectl auth can-i --list` as the operator, in the release namespace: no wildcard, and
    its resource rules are the rendered ClusterRole's and Role's (the self-reviews every
    identity may create aside)."""
    table = release.cluster.kubectl(
        "auth", "can-i", "--list", f"--as={ACCOUNT}", "-n", NAMESPACE
    ).stdout
    listed = {rule for rule in can_i_rules(table) if rule[1] not in SELF_REVIEWS}
    assert listed, table
    assert not [rule for rule in listed if "*" in rule], table
    objects = yaml.safe_load_all(release.helm("get", "manifest", RELEASE, "-n", NAMESPACE))
    granted = {
        (group, resource, verb, name)
        for obj in objects
        if obj and obj["kind"] in ("ClusterRole", "Role")
        for rule in obj["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }
    assert listed == granted


# What every authenticated identity may create (system:basic-user), not the chart's grant.
SELF_REVIEWS = {"selfsubjectreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews"}


def can_i_rules(table: str) -> set[tuple[str, str, str, str]]:
    """(API group, resource[/subresource], verb, resource name or "") of each resource rule
    of `kubectl auth can-i --list`'s table (`pods`, `leases.coordination.k8s.io`,
    `deepspeedjobs.batch.tensorstack.dev/status`; `[a b]` lists)."""
    header, *rows = table.splitlines()
    starts = [
        header.index(title)
        for title in ("Resources", "Non-Resource URLs", "Resource Names", "Verbs")
    ]

    def cells(row: str) -> list[str]:
        return [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]

    rules = set()
    for row in rows:
        resource, _, names, verbs = cells(row)
        if not resource:
            continue  # a non-resource URL
        name, _, sub = resource.partition("/")
        plural, _, group = name.partition(".")
        full = f"{plural}/{sub}" if sub else plural
        for verb in verbs.strip("[]").split():
            for object_name in names.strip("[]").split() or [""]:
                rules.add((group, full, verb, object_name))
    return rules


def test_every_kind_trains_under_the_installed_operator_and_nothing_is_refused(
    release: Release, cluster: Cluster, namespace: str
) -> None:
    """The runnable examples train under the in-cluster operator, beside an elastic job in
    debug mode that is scaled up and down (pods created and deleted, status written, Events
    posted, cleanup): the API server refused the operator nothing (its audit log)."""
    started = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    examples = sorted(REPO.glob("examples/*/mlp-cpu.yaml"))
    docs = [yaml.safe_load(path.read_text()) for path in examples]
    elastic = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "elastic-debug"},
        "spec": {
            "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 2},
            "torchrunConfig": {"enabled": True},
            "runMode": {"debug": {"enabled": True}},
            "runPolicy": {"cleanUpPolicy": "All"},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "template": {"spec": {"containers": [container("pytorch", args=[MLP])]}},
                }
            ],
        },
    }
    apply(cluster, namespace, *docs, elastic)

    def running(count: int) -> Any:
        return lambda j: (j.get("status") or {}).get("aggregate", {}).get("running") == count

    for replicas in (3, 1):
        cluster.kubectl("-n", namespace, "scale", "ptj", "elastic-debug", f"--replicas={replicas}")
        wait_for(
            cluster,
            namespace,
            "ptj",
            "elastic-debug",
            f"{replicas} running",
            running(replicas),
            180,
        )
    for doc in docs:
        name = doc["metadata"]["name"]
        final = wait_finished(cluster, namespace, doc["kind"], name)
        logs = job_logs(cluster, namespace, name)
        assert final["status"]["phase"] == "Succeeded", f"{name}\n{report(final, logs)}"
        world = {"generic-mlp": 3, "torchrun-mlp": 6, "deepspeed-mlp": 3, "colossalai-mlp": 4}
        assert_trained(logs, world[name], name)
    cluster.kubectl("-n", namespace, "delete", "ptj", "elastic-debug")
    cluster.poll(
        lambda: not pods_of(cluster, namespace, "elastic-debug"), timeout=120, message="GC"
    )
    ours = [
        e
        for e in audit_events(cluster)
        if e["user"]["username"] == ACCOUNT and e["requestReceivedTimestamp"] >= started
    ]
    # RBAC's answer (not, say, a namespace being deleted refusing new objects)
    refused = [
        e for e in ours if e.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid"
    ]
    assert not refused, [(e["verb"], e["objectRef"], e["responseStatus"]) for e in refused]
    verbs = {(e["objectRef"].get("resource"), e["verb"]) for e in ours if e.get("objectRef")}
    # the lifecycle above used what it should: pods created and deleted, status, events
    assert {("pods", "create"), ("pods", "delete"), ("events", "create")} <= verbs, verbs


def test_an_upgrade_rolls_the_operator_without_losing_a_running_job(
    release: Release, cluster: Cluster, namespace: str
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "upgrade-mlp"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": type_,
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                container(
                                    "pytorch",
                                    command=["python3", MLP, "--steps=400", "--sleep=0.1"],
                                )
                            ]
                        }
                    },
                }
                for type_ in ("master", "worker")
            ]
        },
    }
    apply(cluster, namespace, job)
    wait_for(
        cluster,
        namespace,
        "ptj",
        "upgrade-mlp",
        "running",
        lambda j: (j.get("status") or {}).get("phase") == "Running",
        180,
    )
    before = {p["metadata"]["name"] for p in release.pods()}
    uids = {n: p["metadata"]["uid"] for n, p in pods_of(cluster, namespace, "upgrade-mlp").items()}
    release.helm(
        "upgrade", RELEASE, str(Path(REPO / "deploy/helm/t9k-jobs")), "-n", NAMESPACE,
        "--reuse-values", "--set=logLevel=debug", "--wait", "--timeout=5m",
    )  # fmt: skip
    after = release.cluster.poll(
        lambda: len(release.ready_pods()) == 2 and release.ready_pods(),
        timeout=180,
        message="two Ready operator pods after the upgrade",
    )
    assert not before & {p["metadata"]["name"] for p in after}  # every pod replaced
    assert all("--log-level=debug" in p["spec"]["containers"][0]["args"] for p in after)
    final = wait_finished(cluster, namespace, "ptj", "upgrade-mlp")
    logs = job_logs(cluster, namespace, "upgrade-mlp")
    assert final["status"]["phase"] == "Succeeded", report(final, logs)
    assert final["status"]["backoffCount"] == 0
    now = {n: p["metadata"]["uid"] for n, p in pods_of(cluster, namespace, "upgrade-mlp").items()}
    assert now == uids  # the same pods all along: none lost, none duplicated
    assert_trained(job_logs(cluster, namespace, "upgrade-mlp"), 2, "through the upgrade")


def test_uninstall_leaves_the_crds_and_the_jobs(
    release: Release, cluster: Cluster, namespace: str
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "kept"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [container("main", command=["sleep", "3600"])]}
                    },
                }
            ]
        },
    }
    apply(cluster, namespace, job)
    wait_for(
        cluster,
        namespace,
        "genericjob",
        "kept",
        "running",
        lambda j: (j.get("status") or {}).get("phase") == "Running",
        180,
    )
    release.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    cluster.poll(lambda: not release.pods(), timeout=120, message="operator pods gone")
    crds = get(cluster, namespace, "crd")["items"]
    names = {c["metadata"]["name"] for c in crds}
    for plural in ("genericjobs", "pytorchtrainingjobs", "deepspeedjobs", "colossalaijobs"):
        assert f"{plural}.batch.tensorstack.dev" in names
    assert get(cluster, namespace, "genericjob", "kept")["status"]["phase"] == "Running"
    assert pods_of(cluster, namespace, "kept")["kept-worker-0"]["status"]["phase"] == "Running"


def audit_events(cluster: Cluster) -> list[dict[str, Any]]:
    path = Path(cluster.env["AUDIT_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
