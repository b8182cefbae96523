"""Contracts on what the hooks build for a valid example: the pods and their children.

`build_pods` is deterministic and hands out fresh objects; pods are named and labelled by
convention; every pod and child object is owned by the job; launch commands are lists of
strings; and none of the hooks does I/O while building, nor while the engine reconciles.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from t9kjobs.models import Job
from t9kjobs.objects import (
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    DesiredPod,
    Obj,
    owner_reference,
    pod_name,
)
from t9kjobs.testing.kit.calls import EXIT_CODE as _EXIT_CODE
from t9kjobs.testing.kit.calls import build_pods as _build_pods
from t9kjobs.testing.kit.calls import plan_at
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject, observed_from
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "build_pods_is_deterministic",
    "children_carry_owner_labels_and_references",
    "hooks_do_no_io",
    "launch_command_is_list_of_str",
    "pods_are_named_by_convention",
]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else f"{path or '<value>'}: {a!r} then {b!r}"


def _pods_view(pods: Sequence[DesiredPod]) -> list[dict[str, Any]]:
    return [{f.name: copy.deepcopy(getattr(p, f.name)) for f in fields(p)} for p in pods]


def _same_pods(before: list[dict[str, Any]], after: Sequence[DesiredPod], when: str) -> None:
    diff = _first_difference(before, _pods_view(after))
    if diff is not None:
        raise ContractViolation(f"build_pods returned different pods {when}: {diff}")


def _scribble(pod: DesiredPod) -> None:
    """Edit a desired pod as the engine does after build_pods (command, env, labels)."""
    pod.manifest["metadata"].setdefault("labels", {})["conformance.t9kjobs.dev/edited"] = "1"
    for container in pod.manifest["spec"].get("containers") or []:
        container["command"] = ["edited"]
        container.setdefault("env", []).append({"name": "EDITED", "value": "1"})
    pod.extra["edited"] = True


def build_pods_is_deterministic(subject: Subject, example: Example) -> None:
    """`build_pods` is deterministic: the same job gives the same pods, as fresh objects.

    Two equal jobs give equal pods (names, manifests, restart rules, every DesiredPod field),
    also after the engine edited the pods of an earlier call (the plugin must not hand out
    objects it keeps), and the whole first reconcile (`t9kjobs render`) is the same twice.
    """
    first_job, second_job = subject.job(example), subject.job(example)
    hooks = subject.hooks(first_job.kind)
    first = _build_pods(hooks, first_job)
    before = _pods_view(first)
    _same_pods(before, _build_pods(hooks, second_job), "for two equal jobs")
    for pod in first:
        _scribble(pod)
    _same_pods(before, _build_pods(hooks, first_job), "after the engine edited earlier ones")
    once = subject.first_reconcile(first_job).create
    diff = _first_difference(list(once), list(subject.first_reconcile(second_job).create))
    if diff is not None:
        raise ContractViolation(
            f"the first reconcile created different objects for equal jobs: {diff}"
        )


def pods_are_named_by_convention(subject: Subject, example: Example) -> None:
    """Pods are named `<job>-<type>-<index>` (`<job>-<type>` for a single pod of a type).

    Names are unique DNS names (DNS labels when the pod sets a hostname, which must be its
    name), pods are labelled with their replica type and index, and live in the job's
    namespace.
    """
    job = subject.job(example)
    pods = _build_pods(subject.hooks(job.kind), job)
    per_type = Counter(p.replica_type for p in pods)
    for name, count in Counter(p.name for p in pods).items():
        if count > 1:
            raise ContractViolation(f"{count} pods are named {name}")
    for pod in pods:
        _check_pod_name(job, pod, per_type[pod.replica_type])


def _check_pod_name(job: Job, pod: DesiredPod, of_type: int) -> None:
    manifest = pod.manifest
    if manifest.get("kind") != "Pod" or manifest.get("apiVersion") != "v1":
        raise ContractViolation(
            f"{pod.name}: the manifest must be a v1 Pod (use t9kjobs.objects.new_pod)"
        )
    allowed = [pod_name(job.name, pod.replica_type, pod.index)]
    if of_type == 1 and pod.index == 0:
        allowed.append(f"{job.name}-{pod.replica_type}")
    if pod.name not in allowed:
        raise ContractViolation(
            f"pod {pod.name!r} (type {pod.replica_type!r}, index {pod.index}) should be named"
            f" {' or '.join(repr(a) for a in allowed)}"
        )
    if len(pod.name) > 253 or not _DNS_SUBDOMAIN.match(pod.name):
        raise ContractViolation(f"pod name {pod.name!r} is not a DNS subdomain name")
    spec = manifest.get("spec") or {}
    hostname = spec.get("hostname")
    if hostname is not None and (hostname != pod.name or len(pod.name) > 63):
        raise ContractViolation(
            f"{pod.name}: spec.hostname {hostname!r} must be the pod name, <= 63 chars"
        )
    labels = manifest["metadata"].get("labels") or {}
    want = {LABEL_REPLICA_TYPE: pod.replica_type, LABEL_REPLICA_INDEX: str(pod.index)}
    for key, value in want.items():
        if labels.get(key) != value:
            raise ContractViolation(
                f"{pod.name}: label {key} is {labels.get(key)!r}, expected {value!r}"
            )
    if manifest["metadata"].get("namespace") != job.namespace:
        raise ContractViolation(f"{pod.name}: namespace must be the job's ({job.namespace})")


def children_carry_owner_labels_and_references(subject: Subject, example: Example) -> None:
    """Every pod and child object carries the owner labels and the job as controller owner.

    Labels `tensorstack.dev/owner-kind` and `owner-name`, exactly one controller
    ownerReference naming the job (apiVersion, kind, name, uid), the job's namespace: so that
    deleting the job garbage-collects everything. Checked on the pods and objects of the first
    reconcile and on `build_pods` and `build_objects` results.
    """
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    pods = _build_pods(hooks, job)
    objects = [p.manifest for p in pods] + hooks.auxiliary_objects(job, pods)
    for obj in [*objects, *subject.first_reconcile(job).create]:
        _check_owner(job, obj)


def _check_owner(job: Job, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    what = f"{obj.get('kind')} {meta.get('name')}"
    labels = meta.get("labels") or {}
    for key, value in ((LABEL_OWNER_KIND, job.kind), (LABEL_OWNER_NAME, job.name)):
        if labels.get(key) != value:
            raise ContractViolation(
                f"{what}: label {key} is {labels.get(key)!r}, expected {value!r}"
            )
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if len(refs) != 1:
        raise ContractViolation(
            f"{what}: {len(refs)} controller ownerReferences, expected 1 (the job)"
        )
    expected = owner_reference(job)
    wrong = {k: refs[0].get(k) for k, v in expected.items() if refs[0].get(k) != v}
    if wrong:
        raise ContractViolation(
            f"{what}: the controller ownerReference has {wrong}, expected {expected}"
        )
    if meta.get("namespace") != job.namespace:
        raise ContractViolation(
            f"{what}: namespace {meta.get('namespace')!r}, expected {job.namespace!r}"
        )


def launch_command_is_list_of_str(subject: Subject, example: Example) -> None:
    """`build_launch_command` returns a non-empty list of strings, or None.

    A list (not a tuple) of `str` (not numbers or paths), the same on every call, and the pod
    it is given is left as it was (adjusting pods is `t9kjobs_mutate_pod`'s job).
    """
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    for pod in _build_pods(hooks, job):
        before = copy.deepcopy(pod)
        argv = hooks.build_launch_command(job, pod)
        if argv is None:
            continue
        if type(argv) is not list:
            raise ContractViolation(
                f"{pod.name}: returned a {type(argv).__name__}, not a list: {argv!r}"
            )
        if not argv:
            raise ContractViolation(
                f"{pod.name}: returned an empty list (return None to keep the command)"
            )
        bad = [a for a in argv if not isinstance(a, str)]
        if bad:
            raise ContractViolation(f"{pod.name}: the argv holds non-strings {bad!r}: {argv!r}")
        if pod != before:
            raise ContractViolation(f"{pod.name}: build_launch_command modified the pod")
        if hooks.build_launch_command(job, pod) != argv:
            raise ContractViolation(f"{pod.name}: a second call returned another argv")


def hooks_do_no_io(subject: Subject, example: Example) -> None:
    """Hooks do no I/O: no file opened outside the plugin's templates, no socket, no process.

    Every hook runs for the example (validate, build_pods, launch commands, mutate_pod,
    build_objects, compute_status, update_status, through whole reconciles) while opening a
    file other than one under the plugin's package folder or core's templates (for reading),
    connecting or resolving, or starting a process raises; an error a hook caught still counts.
    """
    subject.guard.violations.clear()
    try:
        job = subject.job(example)
        hooks = subject.hooks(job.kind)
        start = subject.first_reconcile(job)
        running = job.model_copy(update={"status": start.status})
        for phase in ("Running", "Succeeded", "Failed"):
            plan_at(hooks, running, observed_from(start.create, phase, _EXIT_CODE), 60)
    except Exception:
        if not subject.guard.violations:
            raise
    if subject.guard.violations:
        raise ContractViolation("\n".join(dict.fromkeys(subject.guard.violations)))
