"""Reading a job that Kueue's MultiKueue dispatched to a worker cluster (docs/scheduling.md,
"Multi-cluster: following a job from the manager").

On the manager, such a job (`spec.managedBy: kueue.x-k8s.io/multikueue`) is the user's handle:
its status is the worker's, copied back unchanged, so `get`, `wait`, `describe` and `kubectl get
t9k` read it there. Its pods, their logs and the Events about them stay on the worker, which
its Workload names once dispatched (`status.clusterName`). `worker_reader` gives the reader
of that worker, so that logs and events are read where they are, reached, in this order:

1. the user's own kubeconfig context named after the worker (its MultiKueueCluster's name):
   the user's identity there, the way an administrator would hand out access;
2. the kubeconfig MultiKueue itself uses, the Secret its MultiKueueCluster names in Kueue's
   namespace (`kueue-system`, else `$T9KJOBS_KUEUE_NAMESPACE`), where the user may read it;
3. else a `NotHere` naming the worker cluster and both ways to reach it.

Nothing here writes anything, on either cluster.
"""

from __future__ import annotations

import base64
import contextlib
import os

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from t9kjobs.client.errors import ClientError
from t9kjobs.client.reader import ClusterReader, JobRef, event_time, uid_of
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.vocabulary import Obj

__all__ = [
    "MULTIKUEUE",
    "NotDispatchedYet",
    "NotHere",
    "dispatched_to",
    "job_events",
    "kueue_namespace",
    "worker_reader",
]

# Kueue's `MultiKueueControllerName`: a job's spec.managedBy while MultiKueue dispatches it.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
_KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
# What Kueue's Secret keeps the kubeconfig under (`MultiKueueConfigSecretKey`).
_SECRET_KEY = "kubeconfig"


class NotHere(ClientError):
    """The job runs on a worker cluster this client cannot reach; the message names it."""


class NotDispatchedYet(ClientError):
    """The job waits on the manager for MultiKueue to dispatch it: it has no pod anywhere."""


def kueue_namespace() -> str:
    """Where Kueue keeps MultiKueue's Secrets: `$T9KJOBS_KUEUE_NAMESPACE`, else kueue-system."""
    return os.environ.get("T9KJOBS_KUEUE_NAMESPACE") or "kueue-system"


def _workload_name(ref: JobRef) -> str:
    # The operator names a job's Workload `<kind>-<job>` in lower case
    # (t9kjobs.planner.workloads.workload_name), and MultiKueue keeps that name on the worker.
    return f"{ref.info.kind.lower()}-{ref.name}"


def dispatched_to(reader: ClusterReader, ref: JobRef, raw: Obj) -> str | None:
    """The worker cluster MultiKueue runs the job on; None for a job MultiKueue does not
    manage (it runs here). `NotDispatchedYet` while it waits for a worker; `NotHere` when
    its Workload cannot be read."""
    if (raw.get("spec") or {}).get("managedBy") != MULTIKUEUE:
        return None
    name = _workload_name(ref)
    try:
        workload = reader.transport.request(
            "GET", f"{_KUEUE}/namespaces/{ref.namespace}/workloads/{name}"
        )
    except ApiError as exc:
        raise NotHere(
            f"{ref.where} is dispatched by MultiKueue to a worker cluster, and its Workload"
            f" {name} cannot be read here ({exc.status} {exc.reason}): its pods, logs and"
            " Events are on that worker"
        ) from None
    status = workload.get("status") or {}
    cluster = status.get("clusterName")
    if cluster:
        return str(cluster)
    nominated = ", ".join(str(c) for c in status.get("nominatedClusterNames") or [])
    raise NotDispatchedYet(
        f"{ref.where} waits on this (manager) cluster for MultiKueue to dispatch it to a worker"
        + (f" (nominated: {nominated})" if nominated else "")
        + ": it has no pod yet"
    )


def _own_context(kubeconfig: str | None, cluster: str) -> k8s_client.Configuration | None:
    """The user's kubeconfig context named `cluster`, if there is one."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if not os.path.exists(path.split(os.pathsep)[0]):
        return None
    with contextlib.suppress(Exception):  # no such context, or a kubeconfig it cannot read
        contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        if any(c.get("name") == cluster for c in contexts or []):
            return load_configuration(path, cluster)
    return None


def _multikueue_secret(
    reader: ClusterReader, cluster: str
) -> tuple[k8s_client.Configuration | None, str]:
    """MultiKueue's kubeconfig of `cluster`, or None and why it cannot be had."""
    namespace = kueue_namespace()
    try:
        mkc = reader.transport.request("GET", f"{_KUEUE}/multikueueclusters/{cluster}")
        source = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if source.get("locationType", "Secret") != "Secret" or not source.get("location"):
            return None, f"its MultiKueueCluster {cluster} names no kubeconfig Secret"
        secret_name = str(source["location"])
        secret = reader.transport.request(
            "GET", f"/api/v1/namespaces/{namespace}/secrets/{secret_name}"
        )
    except ApiError as exc:
        return None, f"its MultiKueue kubeconfig cannot be read ({exc.status} {exc.reason})"
    data = (secret.get("data") or {}).get(_SECRET_KEY)
    if not data:
        return None, f"the Secret {namespace}/{secret_name} has no key {_SECRET_KEY!r}"
    cfg = k8s_client.Configuration()
    k8s_config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
        yaml.safe_load(base64.b64decode(data)), client_configuration=cfg
    )
    return cfg, ""


def worker_reader(
    reader: ClusterReader, ref: JobRef, kubeconfig: str | None = None
) -> ClusterReader:
    """The reader of the cluster where the job's pods are: `reader` itself, unless MultiKueue
    dispatched the job to a worker; then that worker's (see the module's docstring)."""
    raw = reader.job(ref)
    cluster = dispatched_to(reader, ref, raw)
    if cluster is None:
        return reader
    cfg = _own_context(kubeconfig, cluster)
    why = ""
    if cfg is None:
        cfg, why = _multikueue_secret(reader, cluster)
    if cfg is None:
        raise NotHere(
            f"{ref.where} runs on the worker cluster {cluster!r} (dispatched by MultiKueue):"
            f" its pods, logs and Events are there, and {why}. Add a kubeconfig context named"
            f" {cluster!r} for that cluster, or read them there with kubectl"
        )
    return ClusterReader(Transport(cfg, qps=0), reader.manager)


def job_events(reader: ClusterReader, ref: JobRef, kubeconfig: str | None = None) -> list[Obj]:
    """The Events about the job and its pods, oldest first: on this cluster, and for a job
    MultiKueue dispatched, on its worker too (Kueue's on the manager, the operator's and the
    pods' there); a worker that cannot be reached raises `NotHere`."""
    raw = reader.job(ref)
    found = reader.job_events(raw, reader.pods(ref, uid_of(raw)))
    try:
        there = worker_reader(reader, ref, kubeconfig)
    except NotDispatchedYet:
        return found
    if there is reader:
        return found
    copy = there.job(ref)
    found += there.job_events(copy, there.pods(ref, uid_of(copy)))
    return sorted(found, key=event_time)
