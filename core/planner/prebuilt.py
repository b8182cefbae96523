"""A job that names a prebuilt Workload (the label `kueue.x-k8s.io/prebuilt-workload-name`)
uses that Workload instead of making its own.

MultiKueue is why: it copies the manager cluster's Workload to the worker cluster it picks,
then the job, labelled with that Workload's name (`externalframeworks/adapter.go`,
`createRemoteObject`), so that the worker's controller runs the job under the Workload Kueue
admits there. What Kueue v0.17's own integrations do with such a job
(`pkg/controller/jobframework/reconciler.go`) is what this engine does:

* The Workload does not exist (yet): the job waits, with no pod (`ensureOneWorkload` finds
  none, `handleJobWithNoWorkload` stops the job and returns `ErrPrebuiltWorkloadNotFound`);
  its Admitted condition says so (`PrebuiltWorkloadMissing`), looked at again every few
  seconds (a Workload made by another hand is not watched until it is the job's).
* It is controlled by another object: ignored (Kueue: "The workload is already controlled by
  another object"); the job waits, its condition naming the controller (`NameConflict`).
* Its podSets do not match the job's pods (their names, in order, and counts, and no
  `minCount`: a job is admitted whole; Kueue's `EquivalentToWorkload` compares counts,
  minCounts and containers, and finishes the Workload `OutOfSync`): the job waits, with no
  pod, and says which podSet differs how in its Admitted condition and a Warning Event
  (`PrebuiltWorkloadMismatch`). The Workload is left as it is: whoever made it may make it
  again, and the job then takes it.
* Otherwise it is adopted: the job becomes its controller (ownerReference) and it gets the
  label `kueue.x-k8s.io/job-uid`, as `EnsurePrebuiltWorkloadOwnership` does, and the job's
  owner labels, so that the operator watches it. From then on it is the job's Workload, and
  the protocol is a queued job's (`t9kjobs.planner.admission`): no pod until it is admitted,
  eviction, `Finished` once the job has.

The job's queue is the Workload's (`spec.queueName`), whatever its own label says.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from t9kjobs.models import Job
from t9kjobs.objects import DesiredPod, owner_labels, owner_reference
from t9kjobs.planner.types import Observed, Queued
from t9kjobs.planner.workloads import (
    LABEL_JOB_UID,
    LABEL_PREBUILT_WORKLOAD,
    WORKLOAD,
    pod_set_name,
)
from t9kjobs.vocabulary import Obj

__all__ = ["PREBUILT_MISMATCH", "PREBUILT_MISSING", "prebuilt_place"]

PREBUILT_MISSING = "PrebuiltWorkloadMissing"
PREBUILT_MISMATCH = "PrebuiltWorkloadMismatch"


def prebuilt_place(
    job: Job, name: str, pods: Sequence[DesiredPod], observed: Observed, asked: str | None
) -> Queued:
    """The place of `job` under its prebuilt Workload `name` (the module's docstring);
    `asked`: the queue its own label names."""
    adopted = observed.get(WORKLOAD, name)
    found = adopted if adopted is not None else observed.prebuilt
    queue = str(((found or {}).get("spec") or {}).get("queueName") or asked or "")
    named = f"prebuilt Workload {name} (label {LABEL_PREBUILT_WORKLOAD})"
    if found is None:
        message = f"waiting for its {named} to be created; no pod is created until it is admitted"
        return Queued(queue, None, waiting=(PREBUILT_MISSING, message))
    holder = observed.conflicts.get((WORKLOAD, name))
    if adopted is None and holder is not None:
        message = f"its {named} is not the job's to use: {holder}; no pod is created"
        return Queued(queue, None, waiting=("NameConflict", message))
    differs = mismatch(pods, found)
    if differs:
        message = (
            f"its {named} does not match the job: {'; '.join(differs)}. No pod is created"
            " until a Workload of that name matches it"
        )
        return Queued(queue, None, waiting=(PREBUILT_MISMATCH, message))
    if adopted is None:
        message = f"adopting its {named}, in LocalQueue {queue}"
        return Queued(queue, None, waiting=("Queued", message), adopt=_adopted(job, found))
    return Queued(queue, adopted)


def mismatch(pods: Sequence[DesiredPod], workload: Obj) -> list[str]:
    """How the Workload's podSets differ from the job's pods (a podSet per replica type, in
    order, with its pod count), each said once; empty when they match."""
    wanted: dict[str, int] = {}
    for pod in pods:
        key = pod_set_name(pod.replica_type)
        wanted[key] = wanted.get(key, 0) + 1
    sets = ((workload.get("spec") or {}).get("podSets")) or []
    have = {str(s.get("name")): s.get("count", 1) for s in sets if isinstance(s, dict)}
    said = []
    for key, count in wanted.items():
        if key not in have:
            said.append(f"it has no podSet {key} (the job's {count} pod(s) of that type)")
        elif have[key] != count:
            said.append(f"podSet {key} counts {have[key]} pod(s), the job has {count}")
    said += [f"podSet {key} is no replica type of the job" for key in have if key not in wanted]
    said += [
        f"podSet {s.get('name')} has a minCount (partial admission, which the operator does"
        " not support: docs/scheduling.md)"
        for s in sets
        if isinstance(s, dict) and s.get("minCount") is not None
    ]
    if not said and list(have) != list(wanted):
        said.append(f"its podSets are in the order {list(have)}, the job's {list(wanted)}")
    return said


def _adopted(job: Job, workload: Obj) -> Obj:
    """The Workload with the job as its controller, and the labels that name the job."""
    adopted = copy.deepcopy(workload)
    adopted.pop("status", None)  # the spec's update: Kueue's status is not the operator's
    meta = adopted["metadata"]
    refs = [r for r in meta.get("ownerReferences") or [] if not r.get("controller")]
    meta["ownerReferences"] = [*refs, owner_reference(job)]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        **owner_labels(job),
        LABEL_JOB_UID: job.metadata.uid or "",
    }
    return adopted
