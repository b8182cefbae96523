"""Builders of the Kubernetes objects a job owns, as plain JSON-like dicts.

Plugins build every child through these functions, so names, labels and owner references follow
one convention: pods `<job>-<type>-<index>`, labels `tensorstack.dev/owner-kind`, `owner-name`,
`replica-type`, `replica-index`, and the job as controller owner (deleting the job
garbage-collects every child).

The operator's labels and annotations win: every builder applies them last, over what a plugin
or a template gave, and a pod keeps none of its template's keys of the operator's domains
(`RESERVED_DOMAINS`: `tensorstack.dev` and its subdomains, which the CRDs refuse in templates
too). A template's `tensorstack.dev/owner-name` would otherwise put the pod in another job's
Service, and its `batch.tensorstack.dev/stop-when-finished` would change what the engine does.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from t9kjobs.models import Job, RestartRule
from t9kjobs.models.pod import RESERVED_DOMAINS, reserved_key
from t9kjobs.progress import ENV_STALL_SECONDS
from t9kjobs.vocabulary import Obj

__all__ = [
    "ANNOTATION_DEFAULT_CONTAINER",
    "ANNOTATION_INCARNATION",
    "ANNOTATION_LAUNCH_COMMAND",
    "ANNOTATION_SPEC_HASH",
    "ANNOTATION_STOP_WHEN_FINISHED",
    "ANNOTATION_TRAINING_CONTAINER",
    "DECIDING",
    "ENGINE_ENV",
    "ENV_CHECKPOINT_DIR",
    "ENV_LAUNCH_COMMAND",
    "ENV_RESTART_COUNT",
    "ENV_RESUME_FROM",
    "ENV_RESUME_STEP",
    "ENV_STALL_SECONDS",
    "ENV_STOP_GRACE_SECONDS",
    "GPU_RESOURCE",
    "LABEL_OWNER_KIND",
    "LABEL_OWNER_NAME",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "RESERVED_DOMAINS",
    "DesiredPod",
    "Obj",
    "child_kind",
    "config_map",
    "deciding_replica",
    "engine_env_names",
    "find_container",
    "gpu_count",
    "headless_service",
    "new_pod",
    "object_key",
    "owner_labels",
    "owner_reference",
    "pod_host",
    "pod_name",
    "replica_id",
    "reserved_key",
    "secret",
    "service",
    "set_env",
    "spec_hash",
    "training_container",
]


LABEL_OWNER_KIND = "tensorstack.dev/owner-kind"
LABEL_OWNER_NAME = "tensorstack.dev/owner-name"
LABEL_REPLICA_TYPE = "tensorstack.dev/replica-type"
LABEL_REPLICA_INDEX = "tensorstack.dev/replica-index"
# Which incarnation of a replica a pod is: 0 for the first pod, n after n restarts.
ANNOTATION_INCARNATION = "batch.tensorstack.dev/restart-count"
# Set on pods created from a DesiredPod with stop_when_finished.
ANNOTATION_STOP_WHEN_FINISHED = "batch.tensorstack.dev/stop-when-finished"
# The container that trains, on every pod the engine creates: what the client reads instead
# of building the pods again (a plugin of another version could name another container); and,
# unless the template set it, kubectl's own (its `logs`/`exec` pick it without `-c`).
ANNOTATION_TRAINING_CONTAINER = "batch.tensorstack.dev/training-container"
ANNOTATION_DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
# A digest of the pod spec the engine created the pod from.
ANNOTATION_SPEC_HASH = "batch.tensorstack.dev/spec-hash"
# In debug mode, the command line the pod would run outside it (shell-quoted), on the pod and
# in the training container's environment, so that it can be run by hand.
ANNOTATION_LAUNCH_COMMAND = "batch.tensorstack.dev/launch-command"
ENV_LAUNCH_COMMAND = "T9KJOBS_LAUNCH_COMMAND"
# What the engine tells the training container of every pod of a job with `spec.checkpoint`
# or stall detection (docs/lifecycle.md, "Checkpoints"): static values, in the spec hash...
ENV_CHECKPOINT_DIR = "T9KJOBS_CHECKPOINT_DIR"
ENV_STOP_GRACE_SECONDS = "T9KJOBS_STOP_GRACE_SECONDS"
# ... and values set only once the hash is taken (`t9kjobs.planner.checkpoints`), so that a new
# checkpoint or a restart never relaunches a pod recreated on a change of its spec.
ENV_RESUME_FROM = "T9KJOBS_RESUME_FROM"
ENV_RESUME_STEP = "T9KJOBS_RESUME_STEP"
ENV_RESTART_COUNT = "T9KJOBS_RESTART_COUNT"
ENGINE_ENV = (
    ENV_CHECKPOINT_DIR,
    ENV_STOP_GRACE_SECONDS,
    ENV_STALL_SECONDS,
    ENV_RESUME_FROM,
    ENV_RESUME_STEP,
    ENV_RESTART_COUNT,
)
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass
class DesiredPod:
    """One pod the job should have, with what the engine needs to restart it."""

    replica_type: str
    index: int
    restart: RestartRule
    manifest: Obj
    # The container that runs the training program (its command is the launch command).
    training_container: str | None = None
    # Debug-mode command when the kind's default does not fit this replica.
    debug_command: list[str] | None = None
    # Delete the pod when the job finishes, whatever the cleanup policy: for pods that only
    # serve others (sshd workers) and would otherwise run, holding their resources, forever.
    stop_when_finished: bool = False
    # Replace the running pod when its desired spec changes (e.g. a launcher whose hostfile
    # changed with the worker count). Other pods keep running as created.
    recreate_on_change: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


def spec_hash(pod: Obj) -> str:
    """A short digest of a pod's spec, stable across processes and Python versions."""
    text = json.dumps(pod.get("spec") or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pod_name(job_name: str, replica_type: str, index: int) -> str:
    return f"{job_name}-{replica_type}-{index}"


# API groups whose kinds share a name with a kind of another group a job may own: their kinds
# are spelled `Kind.group` among a job's children, as kubectl spells them (`PodGroup` is the
# T9k scheduler's, `PodGroup.scheduling.k8s.io` kube-scheduler's own).
_QUALIFIED_GROUPS = frozenset({"scheduling.k8s.io"})


def child_kind(api_version: str, kind: str) -> str:
    """How a child's kind is spelled among a job's children: `kind`, or `Kind.group` for a kind
    whose name another group uses too (`PodGroup.scheduling.k8s.io`)."""
    group = api_version.rpartition("/")[0]
    return f"{kind}.{group}" if group in _QUALIFIED_GROUPS else kind


def object_key(obj: Obj) -> tuple[str, str]:
    """(kind, name): how a child is identified among a job's children (kind: `child_kind`)."""
    kind = child_kind(str(obj.get("apiVersion", "v1")), str(obj["kind"]))
    return kind, str(obj["metadata"]["name"])


def owner_labels(job: Job) -> dict[str, str]:
    return {LABEL_OWNER_KIND: job.kind, LABEL_OWNER_NAME: job.name}


def owner_reference(job: Job) -> Obj:
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _operator_wins(given: dict[str, str] | None, own: dict[str, str]) -> dict[str, str]:
    """`given` and the operator's `own` keys, `own`'s values winning: `own` keys first, in
    their order, then the others in theirs."""
    merged = {**own, **(given or {})}
    merged.update(own)
    return merged


def _unreserved(given: dict[str, str] | None) -> dict[str, str]:
    """A template's labels or annotations without the operator's keys (`RESERVED_DOMAINS`)."""
    return {k: v for k, v in (given or {}).items() if not reserved_key(k)}


def _child_metadata(job: Job, name: str, labels: dict[str, str] | None = None) -> Obj:
    """A child's metadata: `labels` with the owner labels over them, the job as owner."""
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": _operator_wins(labels, owner_labels(job)),
        "ownerReferences": [owner_reference(job)],
    }


def new_pod(
    job: Job,
    replica_type: str,
    index: int,
    template: Obj,
    *,
    subdomain: str | None = None,
    name: str | None = None,
) -> Obj:
    """A pod from a template: conventional name and labels, the job as owner, restartPolicy Never.

    The operator restarts replicas itself, so the kubelet must never do it. With `subdomain`
    (the job's headless Service), the pod is reachable as `<pod>.<subdomain>` before it is ready.
    The template's labels and annotations are kept but for keys of the operator's domains
    (`RESERVED_DOMAINS`), which it sets alone: the owner and replica labels here, the engine's
    annotations when it creates the pod.
    """
    template = copy.deepcopy(template)
    tmeta = template.get("metadata") or {}
    spec: Obj = template.get("spec") or {}
    pod_name_ = name or pod_name(job.name, replica_type, index)
    labels = _unreserved(tmeta.get("labels"))
    labels.update({LABEL_REPLICA_TYPE: replica_type, LABEL_REPLICA_INDEX: str(index)})
    metadata = _child_metadata(job, pod_name_, labels)
    annotations = _unreserved(tmeta.get("annotations"))
    if annotations:
        metadata["annotations"] = annotations
    spec["restartPolicy"] = "Never"
    spec.setdefault("containers", [])
    if subdomain:
        spec["hostname"] = pod_name_
        spec["subdomain"] = subdomain
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def training_container(template: Obj, preferred: str | None = None) -> tuple[int, Obj] | None:
    """(index, container) of the training container of a pod or a pod template: the container
    named `preferred`, else the first one; None when there is no container (or no spec).

    The index is for field paths (`...template.spec.containers[<index>]`); the container is
    the template's own dict, to read, or to edit in a pod the plugin builds. Set the pod's
    `DesiredPod.training_container` to its name: its exit code is the replica's.
    """
    containers: list[Obj] = (template.get("spec") or {}).get("containers") or []
    if preferred:
        for i, c in enumerate(containers):
            if c.get("name") == preferred:
                return i, c
    return (0, containers[0]) if containers else None


def find_container(pod: Obj, preferred: str | None = None) -> Obj | None:
    """The container named `preferred`, else the first one; None for a pod without containers."""
    found = training_container(pod, preferred)
    return found[1] if found is not None else None


def gpu_count(container: Obj) -> int | None:
    """The container's nvidia.com/gpu limit, else its request, when a positive whole number
    (no process runs on 0 GPUs).

    What a kind sizes its processes per pod by, when the user leaves that to the GPUs
    (PyTorchTrainingJob `procPerNode: gpu`, DeepSpeedJob `slotsPerWorker`).
    """
    resources = container.get("resources") or {}
    for key in ("limits", "requests"):
        value = (resources.get(key) or {}).get(GPU_RESOURCE)
        if value is not None:
            text = str(value)
            return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else None
    return None


def engine_env_names(spec: object) -> list[str]:
    """`ENGINE_ENV` for a job whose pods get it (a `checkpoint`, or stall detection on), else
    none: a launcher that carries its environment to remote ranks itself (DeepSpeed's env
    file) adds these names to its own."""
    checkpoint = getattr(spec, "checkpoint", None)
    recovery = getattr(spec, "recovery_policy", None)
    stall = getattr(recovery, "stall", None)
    return list(ENGINE_ENV) if checkpoint is not None or getattr(stall, "enabled", False) else []


def set_env(container: Obj, values: dict[str, str]) -> None:
    """Set env vars on a container, replacing same-named ones, keeping order otherwise."""
    env: list[Obj] = [e for e in container.get("env") or [] if e.get("name") not in values]
    env.extend({"name": k, "value": v} for k, v in values.items())
    container["env"] = env


def headless_service(
    job: Job, name: str | None = None, *, replica: tuple[str, int] | None = None
) -> Obj:
    """The Service that gives every pod of the job a DNS name `<pod>.<job>`, ready or not; with
    `replica` (type, index), that one pod alone.

    For the pods built with `new_pod(..., subdomain=job.name)`; `pod_host` names them. A pod
    whose `subdomain` no headless Service of that name matches has no DNS name, so build the
    others without one. Every pod a Service selects costs kube-controller-manager's endpoint
    controllers a write of the Service's Endpoints and EndpointSlice when it gets its address
    and again when it ends: a kind whose peers resolve one name only (a rendezvous address)
    selects that pod (docs/benchmarks.md, issue #50).
    """
    selector = owner_labels(job)
    if replica is not None:
        selector |= {LABEL_REPLICA_TYPE: replica[0], LABEL_REPLICA_INDEX: str(replica[1])}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _child_metadata(job, name or job.name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
        },
    }


# In this order, the first replica a job has decides its outcome (or runs its launcher): its
# log is the one `describe` and `logs` show first, and the one its progress is read from.
DECIDING = ("master-0", "launcher", "launcher-0", "worker-0")


def replica_id(job_name: str, pod_name: str) -> str:
    """`worker-1` for the pod `<job>-worker-1`: how a user names a replica."""
    return pod_name.removeprefix(f"{job_name}-")


def deciding_replica(ids: list[str]) -> str | None:
    """The deciding replica among replica ids (`DECIDING`, else the first by name)."""
    return next((i for i in DECIDING if i in ids), min(ids) if ids else None)


def pod_host(job: Job, pod: str) -> str:
    """`<pod>.<job>`: the DNS name of the job's pod `pod` through its headless Service, which
    resolves before the pod is ready (the hosts of a hostfile, a rendezvous address)."""
    return f"{pod}.{job.name}"


def service(
    job: Job, name: str, selector: dict[str, str], ports: list[Obj], *, headless: bool = False
) -> Obj:
    """A Service of the job selecting `selector` (on top of the owner labels): a ClusterIP one,
    or with `headless` one whose name resolves to the selected pods' own addresses as soon as
    they have one (no kube-proxy involved, so a port reaches the pod unchanged)."""
    spec: Obj = {"selector": _operator_wins(selector, owner_labels(job)), "ports": ports}
    if headless:
        spec = {"clusterIP": "None", "publishNotReadyAddresses": True, **spec}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _child_metadata(job, name),
        "spec": spec,
    }


def config_map(job: Job, name: str, data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _child_metadata(job, name),
        "data": dict(data),
    }


def secret(job: Job, name: str, string_data: dict[str, str], annotations: dict[str, str]) -> Obj:
    meta = _child_metadata(job, name)
    meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": meta,
        "stringData": dict(string_data),
    }
