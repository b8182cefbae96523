"""What `describe` and `logs` read from the API server: a job named as `KIND/NAME`, its pods,
ConfigMaps, Events and pod logs, each in one request (the pods by their owner labels).

A job's replicas are named as users see them: the pod name without `<job>-` (`worker-1`,
`master-0`, ColossalAI's `launcher`). The deciding replica, whose log and progress matter most,
is the first of master-0, launcher, launcher-0 and worker-0 the job has.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from t9kjobs.kinds import KindInfo
from t9kjobs.kube.resources import CHILD_RESOURCES, job_resource
from t9kjobs.kube.transport import ApiError, Transport, default_namespace, load_configuration
from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import LABEL_OWNER_KIND, LABEL_OWNER_NAME, DesiredPod, Obj, find_container
from t9kjobs.planner.desired import desired_pods

__all__ = [
    "DECIDING",
    "CliError",
    "ClusterReader",
    "JobRef",
    "add_cluster_arguments",
    "deciding_replica",
    "event_time",
    "find_kind",
    "replica_id",
    "training_container",
]

# In this order, the first replica a job has decides its outcome (or runs its launcher).
DECIDING = ("master-0", "launcher", "launcher-0", "worker-0")


class CliError(Exception):
    """A user-facing failure of a cluster command: one line, exit 1."""


def find_kind(text: str, manager: PluginManager) -> KindInfo:
    """The kind named by `text`: its kind, plural, singular or a short name, any case."""
    wanted = text.lower()
    for info in manager.kinds.values():
        if wanted in {info.kind.lower(), info.plural, info.singular, *info.short_names}:
            return info
    names = ", ".join(
        sorted(f"{i.kind} ({', '.join(i.short_names)})" for i in manager.kinds.values())
    )
    raise CliError(f"unknown kind {text!r}; the loaded plugins serve {names}")


@dataclass(frozen=True)
class JobRef:
    info: KindInfo
    name: str
    namespace: str

    @classmethod
    def parse(cls, target: str, namespace: str, manager: PluginManager) -> JobRef:
        kind, slash, name = target.partition("/")
        if not slash or not kind or not name:
            raise CliError(f"{target!r}: name a job as KIND/NAME, e.g. gj/my-job")
        return cls(find_kind(kind, manager), name, namespace)

    def __str__(self) -> str:
        return f"{self.info.kind}/{self.name}"


def replica_id(job_name: str, pod_name: str) -> str:
    """`worker-1` for the pod `<job>-worker-1`: how a user names a replica."""
    return pod_name.removeprefix(f"{job_name}-")


def deciding_replica(ids: list[str]) -> str | None:
    return next((i for i in DECIDING if i in ids), min(ids) if ids else None)


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", help="the job's namespace (default: the context's)")
    p.add_argument("--kubeconfig", help="path of a kubeconfig file")


class ClusterReader:
    """Reads through the operator's Transport (no client models: plain JSON)."""

    def __init__(self, transport: Transport, manager: PluginManager) -> None:
        self.transport = transport
        self.manager = manager

    @classmethod
    def connect(cls, args: argparse.Namespace, manager: PluginManager) -> tuple[ClusterReader, str]:
        """The reader and the namespace `args` name (else the kubeconfig context's)."""
        try:
            cfg = load_configuration(args.kubeconfig)
            namespace = args.namespace or default_namespace(args.kubeconfig)
        except Exception as exc:  # no kubeconfig, a broken one, not in a cluster
            raise CliError(f"no cluster to talk to: {exc}") from None
        return cls(Transport(cfg, qps=0), manager), namespace

    def _get(self, path: str, **query: Any) -> Obj:
        try:
            return self.transport.request("GET", path, query=query)
        except ApiError as exc:
            raise CliError(str(exc)) from None
        except OSError as exc:  # urllib3's connection errors
            raise CliError(f"cannot reach the API server: {exc}") from None

    def job(self, ref: JobRef) -> Obj:
        path = job_resource(ref.info).path(ref.namespace, ref.name)
        try:
            return self.transport.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                raise CliError(f"{ref} not found in namespace {ref.namespace}") from None
            raise CliError(str(exc)) from None
        except OSError as exc:
            raise CliError(f"cannot reach the API server: {exc}") from None

    def _owned(self, kind: str, ref: JobRef) -> list[Obj]:
        selector = f"{LABEL_OWNER_KIND}={ref.info.kind},{LABEL_OWNER_NAME}={ref.name}"
        found = self._get(CHILD_RESOURCES[kind].path(ref.namespace), labelSelector=selector)
        return sorted(found.get("items") or [], key=lambda o: o["metadata"]["name"])

    def pods(self, ref: JobRef) -> list[Obj]:
        return self._owned("Pod", ref)

    def pod(self, namespace: str, name: str) -> Obj | None:
        try:
            return self.transport.request("GET", CHILD_RESOURCES["Pod"].path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise CliError(str(exc)) from None

    def config_maps(self, ref: JobRef) -> list[Obj]:
        return self._owned("ConfigMap", ref)

    def events(self, namespace: str, uids: set[str]) -> list[Obj]:
        """The namespace's Events about the objects of `uids`, oldest first."""
        items = self._get(f"/api/v1/namespaces/{namespace}/events").get("items") or []
        mine = [e for e in items if (e.get("involvedObject") or {}).get("uid") in uids]
        return sorted(mine, key=event_time)

    def log_lines(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        *,
        follow: bool = False,
        tail: int | None = None,
        since_seconds: int | None = None,
        since_time: str | None = None,
    ) -> Iterator[str]:
        """The container's log, each line with its RFC 3339 timestamp in front (ApiError when
        the server cannot give it: no such pod, a container not started, no kubelet)."""
        query = {
            "container": container,
            "timestamps": "true",
            "follow": "true" if follow else None,
            "tailLines": tail,
            "sinceSeconds": since_seconds,
            "sinceTime": since_time,
        }
        path = CHILD_RESOURCES["Pod"].path(namespace, pod, "log")
        timeout = 24 * 3600.0 if follow else 60.0
        for line in self.transport.lines(path, query, timeout):
            yield line.decode(errors="replace").rstrip("\r")

    def parsed(self, raw: Obj) -> Job | None:
        """The job as the operator reads it; None when its spec no longer validates."""
        with contextlib.suppress(JobError, ValueError):
            return parse_job(raw, self.manager)
        return None

    def desired_pods(self, raw: Obj) -> dict[str, DesiredPod]:
        """The pods the job's plugin builds, by name (which container trains, each pod's
        command), as the operator built them; none when the spec no longer validates."""
        job = self.parsed(raw)
        if job is None:
            return {}
        hooks = self.manager.hooks_for(job.kind)
        try:
            pods = desired_pods(job, hooks, job.spec.lifecycle(), False, frozenset())
        except Exception:  # a plugin that cannot build this job: describe goes on without
            return {}
        return {pod.name: pod for pod in pods}


def training_container(desired: dict[str, DesiredPod], name: str, pod: Obj | None) -> str | None:
    """The container of pod `name` that trains: the one its plugin names, else its first."""
    known = desired.get(name)
    if known is not None and known.training_container:
        return known.training_container
    source = pod or (known.manifest if known is not None else None)
    found = find_container(source, None) if source is not None else None
    return str(found["name"]) if found is not None else None


def event_time(event: Obj) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
