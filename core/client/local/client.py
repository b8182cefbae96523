"""`Client(backend="local")`: the client's API over jobs that run as processes of this machine.

Jobs are checked as on a cluster (`Client.check`), rendered as the operator's first reconcile
would render them and started at once (`t9kjobs.client.local.launch`); they live as long as
this client's interpreter. The reading side is the cluster client's own: `get`, `list`,
`wait`, `logs` and `events` go through `LocalReader`, which answers the reader's questions
(the job with its status, its pods, their logs, Events) from the local jobs instead of an API
server, so a local job's status, progress and log lines read exactly as a cluster job's.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import string
import sys
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from t9kjobs.client.client import Client, JobLike, Source
from t9kjobs.client.errors import ClientError, JobExists, JobNotFound
from t9kjobs.client.local.jobs import LocalJob, follow_lines
from t9kjobs.client.local.launch import LocalUnsupported, replicas
from t9kjobs.client.reader import ClusterReader, JobRef
from t9kjobs.kinds import KindInfo
from t9kjobs.kube.transport import Transport
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import MANAGED_BY_T9KJOBS, Job
from t9kjobs.objects import Obj
from t9kjobs.planner.conditions import parse_time
from t9kjobs.render import render_job

__all__ = ["PYTHON_ENV", "LocalClient", "LocalReader"]

_Key = tuple[str, str, str]  # namespace, kind, name
# The interpreter of the replicas when `python` is not given (e.g. one with torch).
PYTHON_ENV = "T9KJOBS_LOCAL_PYTHON"


def _selected(labels: dict[str, str], selector: str | None) -> bool:
    """Whether `labels` match an equality selector (`a=b,c!=d`)."""
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        else:
            key, _, value = term.partition("=")
            if labels.get(key.strip()) != value.strip().lstrip("="):
                return False
    return True


class LocalReader(ClusterReader):
    """The reader's answers from the local jobs (no transport: every method that would use one
    is answered here)."""

    def __init__(self, manager: PluginManager, jobs: dict[_Key, LocalJob]) -> None:
        super().__init__(cast(Transport, None), manager)
        self.local_jobs = jobs

    def call(self, method: str, path: str, what: str, **kwargs: Any) -> Obj:
        raise ClientError(f"{what}: the local backend has no API server to {method} {path}")

    def find(self, ref: JobRef) -> LocalJob:
        found = self.local_jobs.get((ref.namespace, ref.info.kind, ref.name))
        if found is None:
            raise JobNotFound(f"{ref} not found in namespace {ref.namespace} (local backend)")
        return found

    def job(self, ref: JobRef) -> Obj:
        return self.find(ref).raw()

    def jobs(self, info: KindInfo, namespace: str | None, selector: str | None) -> list[Obj]:
        return [
            job.raw()
            for (ns, kind, _), job in list(self.local_jobs.items())
            if kind == info.kind
            and namespace in (None, ns)
            and _selected(dict(job.job.metadata.labels), selector)
        ]

    def pods(self, ref: JobRef, uid: str) -> list[Obj]:
        try:
            job = self.find(ref)
        except JobNotFound:
            return []
        return job.pods() if job.job.metadata.uid == uid or not uid else []

    def pod(self, namespace: str, name: str, uid: str | None = None) -> Obj | None:
        for (ns, _, _), job in list(self.local_jobs.items()):
            if ns != namespace or (uid and job.job.metadata.uid != uid):
                continue
            for pod in job.pods():
                if pod["metadata"]["name"] == name:
                    return pod
        return None

    def on_simulated_node(self, pod: Obj | None) -> bool:
        return False

    def topology_levels(self, namespace: str, workload: str) -> dict[str, list[str]]:
        return {}

    def node_labels(self, name: str) -> dict[str, str] | None:
        return None

    def config_maps(self, ref: JobRef, uid: str) -> list[Obj]:
        return []

    def job_events(self, raw: Obj, pods: list[Obj]) -> list[Obj]:
        meta = raw["metadata"]
        job = self.local_jobs.get((meta["namespace"], raw["kind"], meta["name"]))
        return sorted(job.events if job else [], key=lambda e: str(e["lastTimestamp"]))

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
        process = next(
            (
                p
                for (ns, _, _), job in list(self.local_jobs.items())
                if ns == namespace
                for p in job.processes
                if p.replica.name == pod
            ),
            None,
        )
        if process is None:
            return
        start = max(0, len(process.lines) - tail) if tail is not None else 0
        cutoff = None
        if since_seconds is not None:
            cutoff = datetime.now(UTC).timestamp() - since_seconds
        elif since_time is not None:
            cutoff = parse_time(since_time).timestamp()
        for line in follow_lines(process, start, follow):
            stamp = line.partition(" ")[0].replace("Z", "+00:00")
            if cutoff is None or datetime.fromisoformat(stamp).timestamp() >= cutoff:
                yield line


class LocalClient(Client):
    """Jobs as process groups of this machine (docs/python.md, "The local backend").

    `python` is the interpreter every replica runs (`python3`, `python` and `torchrun` in the
    pods' commands; default: $T9KJOBS_LOCAL_PYTHON, else this one); `folder` holds each job's
    folder, its working directory and its replicas' logs (default: a new temporary folder)."""

    default_image = "local"

    def __init__(
        self,
        *,
        backend: str = "local",
        namespace: str | None = None,
        plugins: PluginManager | None = None,
        python: str | os.PathLike[str] | None = None,
        folder: str | os.PathLike[str] | None = None,
        **cluster: Any,
    ) -> None:
        given = sorted(k for k, v in cluster.items() if v is not None)
        if given:
            raise ClientError(f"the local backend talks to no cluster: {', '.join(given)} given")
        self.plugins = plugins if plugins is not None else load_plugins()
        self.namespace = namespace or "default"
        self.python = os.fspath(python or os.environ.get(PYTHON_ENV) or sys.executable)
        self.folder = Path(folder or tempfile.mkdtemp(prefix="t9kjobs-local-"))
        self.local_jobs: dict[_Key, LocalJob] = {}
        self.local_reader = LocalReader(self.plugins, self.local_jobs)
        self.reader = self.local_reader
        self._kubeconfig = None  # no worker cluster to follow a job to (`Client.logs`)

    def create(self, source: Source, *, namespace: str | None = None) -> Job:
        """Check the job as on a cluster, then start its replicas here (LocalUnsupported for
        what cannot run here, before anything starts)."""
        doc = self.check(source, namespace)
        meta = doc["metadata"]
        if not meta.get("name"):
            alphabet = string.ascii_lowercase + string.digits
            suffix = "".join(secrets.choice(alphabet) for _ in range(5))
            meta["name"] = f"{meta.get('generateName') or 'job-'}{suffix}"
        key = (meta["namespace"], doc["kind"], meta["name"])
        if key in self.local_jobs:
            raise JobExists(f"{doc['kind']}/{meta['name']} already exists (local backend)")
        managed_by = (doc.get("spec") or {}).get("managedBy")
        if managed_by and managed_by != MANAGED_BY_T9KJOBS:
            raise LocalUnsupported(
                f"{doc['kind']}/{meta['name']}: spec.managedBy is {managed_by!r}: that controller"
                " runs it, on a cluster; the local backend runs only jobs it manages itself"
            )
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        job = self._typed(doc)
        local = replicas(render_job(job, self.plugins), meta["namespace"], self.python)
        base = {
            **os.environ,
            "PATH": os.pathsep.join([os.path.dirname(self.python), os.environ.get("PATH", "")]),
            "PYTHONUNBUFFERED": "1",  # lines reach the log as they are printed
        }
        local = [dataclasses.replace(r, env={**base, **r.env}) for r in local]
        folder = self.folder / meta["namespace"] / meta["name"]
        self.local_jobs[key] = LocalJob(job, doc, local, folder, self.plugins)
        return self.get(job)

    def delete(
        self,
        job: JobLike,
        name: str | None = None,
        *,
        namespace: str | None = None,
        wait: bool = False,
        timeout: float = 120.0,
    ) -> None:
        """Stop the job's processes (SIGTERM, SIGKILL after a grace) and forget it; its
        folder and logs stay."""
        ref = self.ref(job, name, namespace)
        found = self.local_jobs.pop((ref.namespace, ref.info.kind, ref.name), None)
        if found is None:
            raise JobNotFound(f"{ref} not found in namespace {ref.namespace} (local backend)")
        found.stop()

    def pause(self, job: JobLike, name: str | None = None, *, namespace: str | None = None) -> Job:
        raise LocalUnsupported("the local backend cannot pause a job (delete it instead)")

    def resume(self, job: JobLike, name: str | None = None, *, namespace: str | None = None) -> Job:
        raise LocalUnsupported("the local backend cannot resume a job")

    def folder_of(self, job: JobLike, name: str | None = None) -> Path:
        """The job's folder: its working directory and `<pod>.log` of each replica."""
        ref = self.ref(job, name)
        return self.local_reader.find(ref).folder
