"""Judges of the chaos tier's final state that read only the objects (unit-tested in
tests/unit/chaos/)."""

from __future__ import annotations

from t9kjobs.vocabulary import Obj


def controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def gangs_astray(jobs: list[Obj], children: list[Obj]) -> list[str]:
    """No pod in another job's gang, and no gang left to a finished job: a job's pods name its
    PodGroup (named after it) or none, and a finished job's PodGroup is deleted (it may wait,
    marked, for the pods the job keeps: podgroup-protection)."""
    found: list[str] = []
    by_uid = {j["metadata"]["uid"]: j for j in jobs}
    for child in children:
        job = by_uid.get(controller_uid(child) or "")
        if job is None:
            continue  # an orphan: counted there
        name, meta = job["metadata"]["name"], child["metadata"]
        finished = (job.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if child.get("kind") == "PodGroup":
            if finished and not meta.get("deletionTimestamp"):
                found.append(f"{meta['name']}: the PodGroup of finished {name} is not deleted")
        elif "containers" in (child.get("spec") or {}):
            # No gang at all is allowed: a replacement beside a member that ended is placed on
            # its own (t9kjobs.planner.placement.rejoin_or_alone).
            group = (child["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if group not in (None, name):
                found.append(f"{meta['name']}: in gang {group!r}, not its job's ({name})")
    return found


def queues_astray(jobs: list[Obj], children: list[Obj], created: dict[str, int]) -> list[str]:
    """A queued job has one Workload, created once (a duplicate would be a second admission),
    Finished once the job is; a job not queued has none (t9kjobs.planner.queueing)."""
    found: list[str] = []
    workloads = {w["metadata"]["name"]: w for w in children if w.get("kind") == "Workload"}
    for job in jobs:
        name = job["metadata"]["name"]
        workload = f"{job['kind'].lower()}-{name}"
        queued = QUEUE_LABEL in (job["metadata"].get("labels") or {})
        if not queued:
            if workload in workloads or created.get(workload):
                found.append(f"{name}: not queued, yet Workload {workload} was made")
            continue
        if created.get(workload, 0) != 1:
            found.append(f"{name}: Workload {workload} created {created.get(workload, 0)} times")
        if (job.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            continue  # stuck: counted there
        held = workloads.get(workload)
        finished = [
            c
            for c in ((held or {}).get("status") or {}).get("conditions") or []
            if c["type"] == "Finished" and c["status"] == "True"
        ]
        if not finished:
            found.append(f"{name}: finished, its Workload {workload} not Finished: {held}")
    return found


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
