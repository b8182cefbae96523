"""Fixtures for a plugin's own unit tests: a job from YAML, fake pod states, a plan's objects.

The conformance kit checks what every plugin must do; a plugin's own tests check what its kind
does (its environment variables, hostfiles, verdicts). These helpers give such tests the engine
as the operator runs it, without a cluster: jobs are parsed and validated by the installed
plugins (`load_plugins()`, as `t9kjobs validate` does), reconciles are the real planner's, and
pods move through the phases the kubelet would report.

    job = job_from_yaml(Path("examples/pi.yaml"))
    plan = first_reconcile(job)                          # what `t9kjobs render` prints
    launcher = objects_of(plan, "Pod")["mpi-pi-launcher"]
    done = reconcile_with(job, {"mpi-pi-launcher": ("Succeeded", 0)})
    assert done.status.phase == "Succeeded"

Plain functions, no pytest fixtures: use them from any test runner. Documented in
docs/plugin-guide.md, "Testing your plugin".
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from t9kjobs.loading import JobError, load_documents, load_job
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import Job
from t9kjobs.objects import Obj, child_kind, object_key
from t9kjobs.planner import Observed, Plan, plan

__all__ = [
    "NOW",
    "JobError",
    "apply_plan",
    "first_reconcile",
    "installed_plugins",
    "job_from_yaml",
    "objects_of",
    "pod_in_phase",
    "reconcile",
    "reconcile_with",
]

# The clock of every reconcile here: hooks read no clock, and a fixed one keeps plans equal.
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@cache
def installed_plugins() -> PluginManager:
    """Every installed plugin, loaded once per process as the operator loads them."""
    return load_plugins()


def job_from_yaml(
    source: str | Path | Mapping[str, Any], manager: PluginManager | None = None
) -> Job:
    """The job of a manifest (YAML text, a file, or a dict), parsed by its kind's spec model and
    checked by its plugin's `t9kjobs_validate`: a `t9kjobs.loading.JobError` listing every
    problem with its field path when either refuses it (warnings pass)."""
    if isinstance(source, Mapping):
        manifest = copy.deepcopy(dict(source))
    else:
        text = source.read_text() if isinstance(source, Path) else source
        (manifest,) = load_documents(text, str(source) if isinstance(source, Path) else "<yaml>")
    job, _ = load_job(manifest, manager or installed_plugins())
    return job


def reconcile(
    job: Job,
    children: Iterable[Obj] = (),
    *,
    absent_kinds: Iterable[str] = (),
    manager: PluginManager | None = None,
) -> Plan:
    """One reconcile of `job` (its status as it is) with the cluster holding `children`;
    `absent_kinds` are child kinds whose CRD the cluster does not serve (e.g. `TensorBoard`)."""
    hooks = (manager or installed_plugins()).hooks_for(job.kind)
    return plan(job, Observed.of(children, absent_kinds), NOW, hooks)


def first_reconcile(
    job: Job, *, absent_kinds: Iterable[str] = (), manager: PluginManager | None = None
) -> Plan:
    """The first reconcile of a new job: `plan.create` is what `t9kjobs render` prints."""
    manager = manager or installed_plugins()
    fresh = job.model_copy(update={"status": manager.kind_info(job.kind).status_model()})
    return reconcile(fresh, absent_kinds=absent_kinds, manager=manager)


def objects_of(plan_or_objects: Plan | Iterable[Obj], kind: str) -> dict[str, Obj]:
    """The objects of `kind` by name: of a plan's `create` and `update`, or of a list."""
    if isinstance(plan_or_objects, Plan):
        plan_or_objects = [*plan_or_objects.update, *plan_or_objects.create]
    return {o["metadata"]["name"]: o for o in plan_or_objects if o["kind"] == kind}


def pod_in_phase(pod: Obj, phase: str, exit_code: int | None = None) -> Obj:
    """A copy of a created pod as the cluster reports it in `phase` (with a uid): every
    container running, waiting, or terminated with `exit_code` (default 0 when Succeeded,
    1 when Failed)."""
    pod = copy.deepcopy(pod)
    pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    if phase in ("Succeeded", "Failed"):
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
        state: Obj = {"terminated": terminated}
    elif phase == "Running":
        state = {"running": {}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    statuses = [{"name": c["name"], "state": state} for c in pod["spec"].get("containers") or []]
    pod["status"] = {"phase": phase, "containerStatuses": statuses}
    return pod


def apply_plan(objects: Mapping[tuple[str, str], Obj], plan: Plan) -> dict[tuple[str, str], Obj]:
    """The children by (kind, name) after `plan` was applied (deletions take effect at once;
    a status patch merges its fields into the child's status, `null` removing one)."""
    out = dict(objects)
    for ref in plan.delete:
        out.pop((child_kind(ref.api_version, ref.kind), ref.name), None)
    for obj in [*plan.update, *plan.create]:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        out[object_key(obj)] = obj
    for patch in plan.patch_status:
        key = object_key(patch)
        if key in out:
            patched = copy.deepcopy(out[key])
            status = {**(patched.get("status") or {}), **copy.deepcopy(patch["status"])}
            patched["status"] = {k: v for k, v in status.items() if v is not None}
            out[key] = patched
    return out


def reconcile_with(
    job: Job,
    phases: Mapping[str, tuple[str, int | None]],
    *,
    manager: PluginManager | None = None,
) -> Plan:
    """The reconcile of a running job once some of its pods reached a phase: every pod of the
    first reconcile was created and Running, then the pods named in `phases` (pod name →
    (phase, exit code)) moved there, the others kept running. Its `status` holds the verdict
    (`phase`, the `Completed` / `Failed` conditions); `delete` the replicas to restart."""
    manager = manager or installed_plugins()
    first = first_reconcile(job, manager=manager)
    children = apply_plan({}, first)
    running = [pod_in_phase(o, "Running") if k == "Pod" else o for (k, _), o in children.items()]
    started = reconcile(job.model_copy(update={"status": first.status}), running, manager=manager)
    unknown = sorted(set(phases) - {name for kind, name in children if kind == "Pod"})
    if unknown:
        raise ValueError(f"no pod named {', '.join(unknown)} in the job's first reconcile")
    now = [
        pod_in_phase(o, *phases[o["metadata"]["name"]])
        if o["kind"] == "Pod" and o["metadata"]["name"] in phases
        else o
        for o in running
    ]
    return reconcile(job.model_copy(update={"status": started.status}), now, manager=manager)
