"""`Client`: everything the CLI does for a job, from Python, typed with the plugins' models.

A job is named by a `Job` (as `get` returns it), by `"KIND/NAME"` (`"gj/mnist"`: any name of
the kind `kubectl` takes), or by a kind and a name (`client.get("GenericJob", "mnist")`); its
namespace is the one given, else the job's own, else the client's. Jobs come back as `Job`s
whose spec and status are the models of the kind's plugin (third-party kinds too: every plugin
installed is loaded), with `status.progress` as the operator read it from the job's log.

Creation checks the job as `t9kjobs validate` does before anything is sent; every refusal is
a `ClientError` (`t9kjobs.client.errors`) with the field path or the API's reason.
"""

from __future__ import annotations

import builtins
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from t9kjobs.client.describe import describe
from t9kjobs.client.dispatch import job_events, worker_reader
from t9kjobs.client.errors import (
    ClientError,
    JobEnded,
    JobInvalid,
    JobNotFound,
    NoCluster,
    WaitTimeout,
)
from t9kjobs.client.job_logs import JobLogs, LogLine
from t9kjobs.client.progress_bar import JobBar, bar_wanted, followed
from t9kjobs.client.reader import ClusterReader, JobRef, event_time, find_kind, uid_of
from t9kjobs.client.rendering import JobSummary
from t9kjobs.client.training import FunctionJobs
from t9kjobs.kinds import Problem
from t9kjobs.kube.resources import job_resource
from t9kjobs.kube.transport import Transport, default_namespace, load_configuration
from t9kjobs.loading import JobError, Unreadable, load_documents, load_job, parse_job, submitted
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import Job, dump
from t9kjobs.objects import deciding_replica
from t9kjobs.render import render_job
from t9kjobs.vocabulary import Obj

__all__ = ["Client", "JobEvent"]

JobLike = Job | str
Source = Job | Mapping[str, Any] | str | os.PathLike[str]


@dataclass(frozen=True)
class JobEvent:
    """An Event about a job or one of its pods."""

    time: str
    type: str
    reason: str
    about: str  # `Pod/mnist-worker-0`, `GenericJob/mnist`
    message: str
    count: int = 1


def _manifest(job: Job) -> dict[str, Any]:
    """The manifest of a Job built in Python: what the API server takes."""
    meta = job.metadata.model_dump(by_alias=True, exclude_none=True, mode="json")
    meta.pop("uid", None)
    if meta.get("generateName") and meta.get("name") == f"{meta['generateName']}xxxxx":
        del meta["name"]  # the stand-in name parsing gives (`t9kjobs.loading`): the server names it
    kept = {
        k: v
        for k, v in meta.items()
        if k in ("name", "namespace", "labels", "annotations", "generateName") and v != {}
    }
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "metadata": kept,
        "spec": dump(job.spec),
    }


def _configuration(
    kubeconfig: str | os.PathLike[str] | None, context: str | None, api_client: Any
) -> k8s_client.Configuration:
    if api_client is not None:
        # A kubernetes ApiClient, or its Configuration: its host, TLS files and token.
        cfg = getattr(api_client, "configuration", api_client)
        if not isinstance(cfg, k8s_client.Configuration):
            raise TypeError(
                "api_client: give a kubernetes.client.ApiClient or kubernetes.client.Configuration,"
                f" not {type(api_client).__name__}"
            )
        return cfg
    try:
        return load_configuration(os.fspath(kubeconfig) if kubeconfig else None, context)
    except Exception as exc:  # no kubeconfig, a broken one, not in a cluster
        raise NoCluster(f"no cluster to talk to: {exc}") from None


class Client(FunctionJobs):
    """Jobs on one cluster.

    `kubeconfig` (a path) and `context` choose the cluster as kubectl does ($KUBECONFIG,
    else ~/.kube/config, else the pod's own service account when running in a cluster);
    `api_client`, a `kubernetes.client.ApiClient` (or its `Configuration`), is used as it is.
    `namespace` is where jobs are unless named otherwise (default: the context's, else the
    pod's, else `default`). `plugins` is the plugin manager (default: every installed plugin).
    `backend="local"` runs jobs as processes of this machine instead (`LocalClient`).
    """

    def __new__(cls, *args: Any, backend: str = "cluster", **kwargs: Any) -> Client:
        """`backend="local"`: a `t9kjobs.client.local.LocalClient` (docs/python.md)."""
        if backend not in ("cluster", "local"):
            raise ValueError(f"backend={backend!r}: 'cluster' or 'local'")
        if backend == "local" and cls is Client:
            from t9kjobs.client.local import LocalClient  # a subclass: imported once this exists

            return super().__new__(LocalClient)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        backend: str = "cluster",
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        api_client: Any = None,
        namespace: str | None = None,
        plugins: PluginManager | None = None,
    ) -> None:
        cfg = _configuration(kubeconfig, context, api_client)
        self.plugins = plugins if plugins is not None else load_plugins()
        if namespace is None:
            try:
                path = os.fspath(kubeconfig) if kubeconfig else None
                namespace = (
                    "default" if api_client is not None else default_namespace(path, context)
                )
            except Exception:
                namespace = "default"
        self.namespace = namespace
        self.reader = ClusterReader(Transport(cfg, qps=0), self.plugins)
        self._kubeconfig = os.fspath(kubeconfig) if kubeconfig else None  # a worker's context

    # -- naming --------------------------------------------------------------------------------

    def kinds(self) -> builtins.list[str]:
        """The kinds the loaded plugins serve."""
        return sorted(self.plugins.kinds)

    def ref(self, job: JobLike, name: str | None = None, namespace: str | None = None) -> JobRef:
        """The job `job` (and `name`) names, in `namespace` (else its own, else the client's)."""
        if isinstance(job, Job):
            info = find_kind(job.kind, self.plugins)
            return JobRef(info, job.name, namespace or job.namespace or self.namespace)
        if name is None:
            return JobRef.parse(job, namespace or self.namespace, self.plugins)
        return JobRef(find_kind(job, self.plugins), name, namespace or self.namespace)

    def _typed(self, raw: Obj) -> Job:
        try:
            return parse_job(raw, self.plugins)
        except JobError as exc:
            meta = raw.get("metadata") or {}
            raise JobInvalid(f"{raw.get('kind')}/{meta.get('name')}", exc.problems) from None

    # -- create, get, list -------------------------------------------------------------------

    def check(self, source: Source, namespace: str | None = None) -> dict[str, Any]:
        """The manifest of `source` (a Job, a dict, or the path of a YAML or JSON file with one
        job), checked as `t9kjobs validate` checks it; JobInvalid with every problem's field
        path, and a `UserWarning` for each warning."""
        what = "the job"
        if isinstance(source, Job):
            doc = _manifest(source)
        elif isinstance(source, Mapping):
            doc = dict(source)
        else:
            path = Path(source)
            what = str(path)
            try:
                docs = load_documents(path.read_bytes(), str(path))
            except OSError as exc:
                raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
            except Unreadable as exc:
                raise ClientError(f"cannot read {path}: {exc}") from None
            except JobError as exc:
                raise JobInvalid(what, exc.problems) from None
            if len(docs) != 1:
                raise ClientError(f"{path} holds {len(docs)} documents; create one job a call")
            doc = docs[0]
        meta = doc.get("metadata")
        if isinstance(meta, dict):
            given = meta.get("namespace")
            if given and namespace and given != namespace:
                raise JobInvalid(
                    what,
                    [Problem("metadata.namespace", f"{given!r}, but namespace={namespace!r}")],
                )
            doc["metadata"] = {**meta, "namespace": given or namespace or self.namespace}
        try:
            doc, ignored = submitted(doc)
            _, found = load_job(doc, self.plugins)
        except JobError as exc:
            raise JobInvalid(what, exc.problems) from None
        for problem in [*ignored, *found]:
            warnings.warn(f"{what}: {problem}", UserWarning, stacklevel=3)
        return doc

    def render(self, source: Source, *, namespace: str | None = None) -> builtins.list[Obj]:
        """What `t9kjobs render` prints: every object the first reconcile of the job creates
        (pods with their launch commands, Services, hostfiles...), without a cluster's answer."""
        job, _ = load_job(self.check(source, namespace), self.plugins)
        return render_job(job, self.plugins)

    def create(self, source: Source, *, namespace: str | None = None) -> Job:
        """Submit a job (see `check`); the job as the API server stored it."""
        doc = self.check(source, namespace)
        info = find_kind(str(doc["kind"]), self.plugins)
        meta = doc["metadata"]
        name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
        what = f"{info.kind}/{name} in namespace {meta['namespace']}"
        path = job_resource(info).path(meta["namespace"])
        return self._typed(self.reader.call("POST", path, what, body=doc))

    def get(self, job: JobLike, name: str | None = None, *, namespace: str | None = None) -> Job:
        """The job, with its status."""
        return self._typed(self.reader.job(self.ref(job, name, namespace)))

    def list(
        self,
        kind: str | None = None,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        labels: str | Mapping[str, str] | None = None,
    ) -> builtins.list[Job]:
        """The jobs of `kind` (every kind for None) in the namespace, or in all of them, that
        carry `labels` (a selector such as `team=a,stage!=dev`, or a dict of equalities)."""
        selector = (
            ",".join(f"{k}={v}" for k, v in labels.items())
            if isinstance(labels, Mapping)
            else labels
        )
        infos = [find_kind(kind, self.plugins)] if kind else list(self.plugins.kinds.values())
        where = None if all_namespaces else (namespace or self.namespace)
        found = [
            self._typed(raw) for info in infos for raw in self.reader.jobs(info, where, selector)
        ]
        return sorted(found, key=lambda j: (j.kind, j.namespace, j.name))

    # -- waiting ------------------------------------------------------------------------------

    def wait(
        self,
        job: JobLike,
        name: str | None = None,
        *,
        namespace: str | None = None,
        phase: str | Iterable[str] | None = None,
        timeout: float = 600.0,
        interval: float = 2.0,
        callback: Callable[[Job], None] | None = None,
        progress_bar: bool | None = None,
    ) -> Job:
        """Wait until the job is in `phase` (one or several; None: Succeeded) and return it.
        JobEnded when it finished in a phase not waited for (Failed, for None: pass
        `phase=("Succeeded", "Failed")` to have either back); WaitTimeout after `timeout`
        seconds, naming the phase it is in. `callback` is called with the job whenever its
        phase, the reason it stands there (`status.reason`) or its progress changed;
        `progress_bar` shows its progress as a bar meanwhile (None: in a notebook or a
        terminal, as `progress_bar.bar_wanted` says)."""
        ref = self.ref(job, name, namespace)
        wanted = (
            {"Succeeded"} if phase is None else {phase} if isinstance(phase, str) else set(phase)
        )
        deadline = time.monotonic() + timeout
        seen: Any = None
        bar = JobBar(str(ref), enabled=bar_wanted(progress_bar))
        try:
            while True:
                current = self._typed(self.reader.job(ref))
                status = current.status
                look = (status.phase, status.reason, status.progress)
                bar.show(current)
                if callback is not None and look != seen:
                    callback(current)
                seen = look
                if status.phase in wanted:
                    return current
                if status.finished:
                    why = f": {status.reason}" if status.reason else ""
                    raise JobEnded(
                        f"{ref} {status.phase}{why}, while waiting for"
                        f" {' or '.join(sorted(wanted))}",
                        current,
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f": {status.reason}" if status.reason else ""
                    raise WaitTimeout(
                        f"{ref} is still {status.phase or 'without a status'} after"
                        f" {timeout:g}s (waiting for {' or '.join(sorted(wanted))}){why}",
                        current,
                    )
                time.sleep(min(interval, left))
        finally:
            bar.close()

    # -- logs, events, describe ----------------------------------------------------------------

    def logs(
        self,
        job: JobLike,
        name: str | None = None,
        *,
        namespace: str | None = None,
        replica: str | None = None,
        all_replicas: bool = False,
        follow: bool = False,
        tail: int | None = None,
        since: int | None = None,
        container: str | None = None,
        timeout: float = 600.0,
        progress_bar: bool | None = None,
    ) -> Iterator[LogLine]:
        """The job's log lines, each tagged with its replica: of `replica` (default the
        deciding one: master-0, launcher, worker-0) or of all replicas; `follow` follows
        across restarts until the job finishes, WaitTimeout when a replica has had no log to
        follow for `timeout` seconds (not started, queued, its container never starting), and
        shows the job's progress as a bar meanwhile (`progress_bar`, as `wait`'s). `tail`: the
        last lines of each pod; `since`: seconds back. NoLog when a replica's log cannot be
        read (its pod gone, or on a simulated node)."""
        if replica is not None and all_replicas:
            raise ClientError("give a replica or all_replicas, not both")
        ref = self.ref(job, name, namespace)
        there = worker_reader(self.reader, ref, self._kubeconfig)
        home = None if there is self.reader else self.reader  # dispatched: the manager's
        logs = JobLogs(there, ref, container, timeout=timeout, home=home)
        if not follow:
            if all_replicas:
                return iter(logs.all_once(tail, since))
            return iter(logs.once(*logs.resolve(replica), tail, since))
        bar = JobBar(str(ref), enabled=bar_wanted(progress_bar))
        if all_replicas:
            lines = logs.follow_all(tail, since)
        else:
            lines = logs.follow(*logs.resolve(replica, wait=True), tail, since)
        if not bar.enabled:
            return lines

        def look() -> Job:
            return self._typed(self.reader.job(ref))

        deciding = deciding_replica(list(logs.replicas()))  # whose log the operator reads
        return followed(lines, bar, look, interval=2.0, deciding=deciding)

    def summary(
        self, job: JobLike, name: str | None = None, *, namespace: str | None = None
    ) -> JobSummary:
        """The job and its newest Events, rendered in a notebook (`_repr_html_`) as the job
        is, with the Events below (the job alone has no client to read them)."""
        return JobSummary(
            self.get(job, name, namespace=namespace), self.events(job, name, namespace=namespace)
        )

    def events(
        self, job: JobLike, name: str | None = None, *, namespace: str | None = None
    ) -> builtins.list[JobEvent]:
        """The Events about the job and its pods, oldest first."""
        found = job_events(self.reader, self.ref(job, name, namespace), self._kubeconfig)
        return [
            JobEvent(
                time=event_time(e),
                type=str(e.get("type") or ""),
                reason=str(e.get("reason") or ""),
                about=f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}",
                message=str(e.get("message") or "").strip(),
                count=int(e.get("count") or 1),
            )
            for e in found
        ]

    def describe(
        self, job: JobLike, name: str | None = None, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """What `t9kjobs describe -o json` prints: phase, progress, conditions, replicas with
        exit codes and last log lines, the newest recoveries, launch commands, hostfile,
        cleanup, Events."""
        return describe(self.reader, self.ref(job, name, namespace))

    # -- delete, pause, resume ---------------------------------------------------------------

    def delete(
        self,
        job: JobLike,
        name: str | None = None,
        *,
        namespace: str | None = None,
        wait: bool = False,
        timeout: float = 120.0,
    ) -> None:
        """Delete the job; its pods and other children go with it. With `wait`, return once
        the job and its pods are gone (WaitTimeout after `timeout` seconds)."""
        ref = self.ref(job, name, namespace)
        policy = "Foreground" if wait else "Background"
        path = job_resource(ref.info).path(ref.namespace, ref.name)
        said = self.reader.call("DELETE", path, ref.where, body={"propagationPolicy": policy})
        if not wait:
            return
        # The job's uid, to know its pods from any others with its labels: the deleted job (or
        # the Status of its deletion) names it.
        uid = uid_of(said) or str((said.get("details") or {}).get("uid") or "")
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.reader.job(ref)  # JobNotFound once it is gone
                uid = uid or uid_of(found)
                left = "the job"
            except JobNotFound:
                pods = self.reader.pods(ref, uid)
                if not pods:
                    return
                left = f"{len(pods)} pod(s)"
            if time.monotonic() > deadline:
                raise WaitTimeout(f"{ref}: {left} still there after {timeout:g}s")
            time.sleep(0.5)

    def _run_mode(self, ref: JobRef, paused: bool) -> Job:
        path = job_resource(ref.info).path(ref.namespace, ref.name)
        patch = {"spec": {"runMode": {"pause": {"enabled": paused}}}}
        answer = self.reader.call(
            "PATCH", path, ref.where, body=patch, content_type="application/merge-patch+json"
        )
        return self._typed(answer)

    def pause(self, job: JobLike, name: str | None = None, *, namespace: str | None = None) -> Job:
        """Pause the job (`spec.runMode.pause.enabled: true`): its pods are deleted, its
        state kept, until `resume`."""
        return self._run_mode(self.ref(job, name, namespace), True)

    def resume(self, job: JobLike, name: str | None = None, *, namespace: str | None = None) -> Job:
        """Resume a paused job (`spec.runMode.pause.enabled: false`)."""
        return self._run_mode(self.ref(job, name, namespace), False)
