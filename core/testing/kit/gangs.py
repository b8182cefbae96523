"""The contract on gangs: every job of the kind is placed whole, by kube-scheduler's own gang
scheduling (docs/scheduling.md), with nothing of the plugin's own to write.

The engine and the bundled `scheduling` feature plugin give each job a PodGroup and put its
pods in it; a plugin decides only how many pods the job cannot run without
(`Lifecycle.min_available`), and can break the gang by what its pods or its own
`t9kjobs_mutate_pod` do to them. The check runs the first reconcile with the `scheduling`
plugin configured as by `--gang-scheduling native`, on a cluster that serves the kind. Pause
and finish, which delete the PodGroup, are the engine's alone: its tests cover them, for every
kind.
"""

from __future__ import annotations

from t9kjobs.objects import Obj, object_key
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["jobs_are_gangs"]

_NATIVE = "PodGroup.scheduling.k8s.io"


def jobs_are_gangs(subject: Subject, example: Example) -> None:
    """Every job is a gang: one PodGroup, the pods it cannot run without, every pod in it.

    Under `--gang-scheduling native`, the first reconcile creates one kube-scheduler PodGroup
    named after the job before its pods, with `minCount` the pods the job cannot run without
    (every pod, or the kind's `Lifecycle.min_available`, never more than the pods, at least 1),
    and every pod has `spec.schedulingGroup.podGroupName` naming it. A gang of one is none
    (`t9kjobs.planner.idle_gangs`): when that count is 1, no PodGroup and
    no pod in one.
    """
    manager = subject.loaded()
    manager.configure({"gang-scheduling": "native"})  # the scheduling plugin's option
    try:
        job = subject.job(example)
        created = subject.first_reconcile(job).create
    finally:
        manager.configure({})
    pods = [o for o in created if o.get("kind") == "Pod"]
    if not pods:
        return  # a job without pods has nothing to place
    groups = [o for o in created if object_key(o)[0] == _NATIVE]
    where = f"{example.id}"
    least = job.spec.lifecycle().min_available
    wanted = len(pods) if least is None else max(1, min(least, len(pods)))
    if wanted == 1:
        _no_gang(where, groups, pods)
        return
    if [g["metadata"]["name"] for g in groups] != [job.name]:
        names = [g["metadata"]["name"] for g in groups]
        raise ContractViolation(f"{where}: one PodGroup named {job.name} expected, got {names}")
    group = groups[0]
    if created.index(group) > created.index(pods[0]):
        raise ContractViolation(f"{where}: the PodGroup must be created before the pods")
    count = group["spec"]["schedulingPolicy"]["gang"]["minCount"]
    if count != wanted:
        raise ContractViolation(
            f"{where}: minCount {count}, expected {wanted} ({len(pods)} pods, "
            f"Lifecycle.min_available {least})"
        )
    for pod in pods:
        joined = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if joined != job.name:
            raise ContractViolation(
                f"{where}: pod {pod['metadata']['name']} spec.schedulingGroup.podGroupName is"
                f" {joined!r}, not {job.name!r}: its own t9kjobs_mutate_pod, or its template,"
                " takes it out of the gang"
            )


def _no_gang(where: str, groups: list[Obj], pods: list[Obj]) -> None:
    """A job whose gang would count one pod has none: no PodGroup, no pod naming one."""
    if groups:
        raise ContractViolation(
            f"{where}: a gang of one pod is none, yet PodGroup"
            f" {groups[0]['metadata']['name']} was created"
        )
    for pod in pods:
        joined = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if joined is not None:
            raise ContractViolation(
                f"{where}: pod {pod['metadata']['name']} names PodGroup {joined!r}, which a"
                " job of one pod never has: it would wait for it for ever"
            )
