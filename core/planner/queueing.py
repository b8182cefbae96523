"""Queues, quotas and preemption with Kueue: a job with a queue waits, with no pod, until Kueue
admits it, and goes back to waiting, with no pod, when Kueue evicts it.

Our kinds are Kueue's *external frameworks*: Kueue admits and evicts, and the job's controller
(this engine, for every kind, third-party ones too) keeps the protocol Kueue's own integrations
get from `jobframework/reconciler.go`:

* A job with a queue (the label `kueue.x-k8s.io/queue-name`, or `t9kScheduler.queue` where
  the T9k scheduler is not there to take it and a LocalQueue of that name exists) owns one
  `kueue.x-k8s.io/v1beta2` Workload named `<kind>-<job>`: a podSet per replica type, with its
  pod count and a template that says what Kueue needs to count and place it (each
  container's resources; node selector, affinity, tolerations, priority class). Its
  priority: the WorkloadPriorityClass of the label `kueue.x-k8s.io/priority-class`, else the
  pods' PriorityClass, else `t9kScheduler.priority`.
* No pod exists until the Workload is `Admitted`: the job is `Queued`, its `Admitted`
  condition False with Kueue's word for why (`Inadmissible` for a LocalQueue that does not
  exist), which is also its REASON. Admitted, its pods get the node labels and tolerations of
  the ResourceFlavors Kueue assigned to their podSet, and it runs (and is placed as a gang,
  where it has one: `t9kjobs.planner.placement`).
* `Evicted` (preempted, deactivated, timed out): its pods are deleted and it is `Queued`
  again. An eviction is not a failure: no restart is counted and no backoff spent, and its
  deadline counts again from the readmission. Once no pod is left, the Workload's quota
  reservation is cleared (`QuotaReserved` and `Admitted` False, `Requeued`, no `admission`),
  as `jobframework` does: only then does Kueue admit another job on that quota.
* Finished, the Workload is `Finished` (its quota goes back to the queue) once no pod of the
  job holds resources: a job that ends by its success rules while other replicas run on
  (`cleanUpPolicy: None`) keeps its quota until they have ended or are gone, as a batch/v1
  Job is `Complete` only once its pods have terminated. Evicted meanwhile, those pods are
  deleted. Paused, the job gives up its place: the Workload is deleted, and a new one queues
  it again on resume. Deleted, the garbage collector deletes the Workload with the job.
* What Kueue cannot accept is said: a Workload whose podSets no longer match the job's pods
  (an elastic job scaled) is deleted and created again, so the job queues anew.

The queue cannot be skipped (docs/scheduling.md, "Queueing made mandatory"):

* Where the administrator requires a queue (`t9kjobs.settings.KueuePolicy`), a job that names
  none waits in the default LocalQueue where one of that name exists in its namespace, and is
  refused otherwise (`QueueRequired`); where the cluster does not serve Workloads there, every
  job of the namespace is refused, labelled or not.
* Once a job has a Workload, its queue is the Workload's: a queue label removed or changed
  is ignored with a Warning (`QueueLabelIgnored`) and no pod is created until that Workload is
  admitted. A job that was queued (its status has an `Admitted` condition) and names no queue
  any more once its Workload is gone (paused and resumed) is refused (`QueueLabelRemoved`).
  The Helm chart's ValidatingAdmissionPolicy refuses the label's change at the API already.
* A podSet says all a pod takes that Kueue counts: its containers' and init containers'
  resources (a sidecar's `restartPolicy` with them), the pod-level `resources` (their
  requests as the API server defaults them from the limits), `overhead`, and the
  `resourceClaims` that name a ResourceClaimTemplate where Kueue is known to count them.
  What Kueue v0.17 cannot count is refused (`ResourcesNotCounted`): a claim that names a
  ResourceClaim, and a ResourceClaimTemplate unless the operator is told Kueue counts them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from t9kjobs.kinds import Problem
from t9kjobs.messages import path_of
from t9kjobs.models import Job, JobStatus
from t9kjobs.objects import DesiredPod, owner_labels, owner_reference
from t9kjobs.planner.conditions import set_condition
from t9kjobs.planner.placement import placement_objects
from t9kjobs.planner.running import subset
from t9kjobs.planner.situation import Changes
from t9kjobs.planner.stopping import deletion, shown_deleted
from t9kjobs.planner.types import Event, Kueue, Observed, Queued
from t9kjobs.settings import KueuePolicy, current
from t9kjobs.vocabulary import Obj

__all__ = [
    "KUEUE_API_VERSION",
    "LABEL_PRIORITY_CLASS",
    "LABEL_QUEUE_NAME",
    "NOT_COUNTED",
    "QUEUE_LABEL_IGNORED",
    "QUEUE_LABEL_REMOVED",
    "QUEUE_REQUIRED",
    "WORKLOAD",
    "admission",
    "finished_workloads",
    "label_ignored",
    "queue_of",
    "queue_problems",
    "queued",
    "workload_name",
    "workload_objects",
]

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
WORKLOAD = "Workload"
LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
# A job whose Workload cannot be built yet (its priority class is missing) looks again this often.
RETRY_SECONDS = 10.0
# Why a job is refused a place in a queue (the reason of its Admitted condition and of a
# Warning Event): it names no queue where one is required; it was queued and names none now;
# its pods hold what Kueue cannot count.
QUEUE_REQUIRED = "QueueRequired"
QUEUE_LABEL_REMOVED = "QueueLabelRemoved"
NOT_COUNTED = "ResourcesNotCounted"
# A Warning: the job names another queue, or none, than the Workload it has (ignored).
QUEUE_LABEL_IGNORED = "QueueLabelIgnored"
# Phases of a pod that holds nothing on its node any more.
_ENDED = ("Succeeded", "Failed")
# What a pod may ask for at pod level (PodLevelResources): what Kueue reads there too
# (k8s.io/component-helpers/resource.IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory")
# What a podSet's template keeps of a pod's spec: what Kueue counts and places by.
_TEMPLATE_KEYS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "runtimeClassName",
    "overhead",
)


def workload_objects(objects: Sequence[Obj]) -> list[Obj]:
    """The Workloads among `objects`, not being deleted already."""
    return [
        o
        for o in objects
        if o.get("kind") == WORKLOAD
        and str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/")
        and not o["metadata"].get("deletionTimestamp")
    ]


def workload_name(job: Job) -> str:
    """`<kind>-<job>`, lower case (a job's name is short enough for it: `t9kjobs.loading`)."""
    return f"{job.kind.lower()}-{job.name}"


def queue_of(job: Job, kueue: Kueue | None) -> str | None:
    """The LocalQueue `job` waits in: its label's, or `t9kScheduler.queue` where the T9k
    scheduler is not there to take it (`Kueue.t9k_queues`) and a LocalQueue of that name
    exists in the job's namespace; None for a job Kueue does not manage.

    The label is an explicit ask: a LocalQueue that does not exist is said (`Inadmissible`).
    `t9kScheduler.queue` was written for another scheduler: naming no LocalQueue, it leaves
    the job as it was without Kueue, so that installing Kueue for some teams holds no other
    team's jobs."""
    queue = (job.metadata.labels or {}).get(LABEL_QUEUE_NAME)
    if queue:
        return queue
    scheduler = job.spec.lifecycle().scheduler
    if kueue is not None and kueue.t9k_queues and scheduler and scheduler.t9k_scheduler:
        named = scheduler.t9k_scheduler.queue
        if (job.namespace or "", named) in kueue.local_queues:
            return named
    return None


def queued(job: Job, pods: Sequence[DesiredPod], observed: Observed) -> Queued | None:
    """The Workload `job` wants, when it waits in a queue and Kueue is watched (served or not:
    where it is not, the engine leaves the Workload out and says so, `Degraded`), or why it is
    refused a place (`Queued.refusal`: the module's docstring)."""
    kueue = observed.kueue
    served = WORKLOAD not in observed.absent_kinds
    if (kueue is None and served) or not pods:
        return None  # the operator does not speak to Kueue (--kueue=off), or nothing to run
    policy = current().kueue
    namespace = job.namespace or ""
    if not served and policy.requires_queue(namespace):
        return _refused(
            QUEUE_REQUIRED,
            f"namespace {namespace} requires a Kueue queue (t9kjobs operator"
            " --kueue-require-queue) and the cluster does not serve Kueue's Workloads"
            f" ({KUEUE_API_VERSION}): no pod is created until it does",
        )
    name = workload_name(job)
    made = observed.get(WORKLOAD, name)  # being deleted or not: the queue it was made for
    held = _queue_name(made)
    asked = queue_of(job, kueue)
    wanted = asked if asked is not None else _default_queue(namespace, policy, kueue)
    ignored = None
    if held is not None:
        queue = held
        if wanted != held:
            now = "names no queue" if asked is None else f"names LocalQueue {asked}"
            ignored = (
                f"the job {now} (label {LABEL_QUEUE_NAME}): ignored, it stays in LocalQueue"
                f" {held}, where Workload {name} was made for it (a queued job cannot leave"
                " its queue)"
            )
    elif wanted is not None:
        queue = wanted
    elif policy.requires_queue(namespace):
        fallback = (
            f", and no LocalQueue {policy.default_queue} (the default) exists there"
            if policy.default_queue
            else ""
        )
        return _refused(
            QUEUE_REQUIRED,
            f"namespace {namespace} requires a Kueue queue: set the label {LABEL_QUEUE_NAME}"
            f" to a LocalQueue of the namespace{fallback}; no pod is created until then",
        )
    elif _was_queued(job):
        return _refused(
            QUEUE_LABEL_REMOVED,
            f"the job was queued and names no queue any more (label {LABEL_QUEUE_NAME}"
            " removed): a queued job cannot leave Kueue; set the label again (or delete"
            " the job); no pod is created until then",
        )
    else:
        return None
    problem = _not_counted(pods, policy)
    if problem is not None:
        return _refused(NOT_COUNTED, problem, queue)
    priority = _priority(job, pods, kueue or Kueue())
    if isinstance(priority, str):
        # A Workload made before its class went keeps what it was made with.
        return (
            Queued(queue, made, None, ignored=ignored)
            if made is not None
            else Queued(queue, None, priority, ignored=ignored)
        )
    ref, value = priority
    spec: Obj = {"queueName": queue, "podSets": _pod_sets(pods)}
    if ref is not None:
        spec["priorityClassRef"] = ref
    if value is not None:
        spec["priority"] = value
    workload: Obj = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": WORKLOAD,
        "metadata": {
            "name": workload_name(job),
            "namespace": job.namespace,
            # Kueue names the job by this label in what it says (a preemption's message).
            "labels": {**owner_labels(job), LABEL_JOB_UID: job.metadata.uid or ""},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }
    return Queued(queue, workload, ignored=ignored)


def _refused(reason: str, message: str, queue: str = "") -> Queued:
    return Queued(queue, None, message, refusal=reason)


def _queue_name(workload: Obj | None) -> str | None:
    """The LocalQueue a Workload was made for (None: no Workload, or it names none)."""
    queue = ((workload or {}).get("spec") or {}).get("queueName")
    return str(queue) if queue else None


def _default_queue(namespace: str, policy: KueuePolicy, kueue: Kueue | None) -> str | None:
    """The default LocalQueue of a namespace that requires a queue, where one of that name
    exists there."""
    name = policy.default_queue
    if not name or kueue is None or not policy.requires_queue(namespace):
        return None
    return name if (namespace, name) in kueue.local_queues else None


def _was_queued(job: Job) -> bool:
    """Whether the job has waited in a queue: its status (the operator's alone to write) has
    an Admitted condition, but for a refusal for want of a queue, which it never had."""
    admitted = job.status.condition("Admitted")
    return admitted is not None and admitted.reason != QUEUE_REQUIRED


def _not_counted(pods: Sequence[DesiredPod], policy: KueuePolicy) -> str | None:
    """What of the pods Kueue v0.17 cannot count, naming the field; None when it counts all.

    Kueue counts the devices of a pod's ResourceClaimTemplates only with its
    DynamicResourceAllocation feature gate and a deviceClassMapping for their class
    (`pkg/dra`); a claim that names a ResourceClaim it never counts (with the gate, such a
    Workload is Inadmissible; without it, the claim is left out of the quota)."""
    said: set[str] = set()
    for pod in pods:
        if pod.replica_type in said:
            continue
        said.add(pod.replica_type)
        for i, claim in enumerate(pod.manifest["spec"].get("resourceClaims") or []):
            field = f"replica type {pod.replica_type}: the pods' spec.resourceClaims[{i}]"
            if not isinstance(claim, dict):
                continue
            if claim.get("resourceClaimName"):
                return (
                    f"{field}.resourceClaimName ({claim['resourceClaimName']}): Kueue does not"
                    " count the devices of a ResourceClaim a pod names, so its quota would not"
                    " hold them; name a resourceClaimTemplateName instead. The job is not"
                    " queued, and no pod is created"
                )
            if claim.get("resourceClaimTemplateName") and not policy.resource_claim_templates:
                return (
                    f"{field}.resourceClaimTemplateName ({claim['resourceClaimTemplateName']}):"
                    " Kueue counts the devices of ResourceClaimTemplates only with its"
                    " DynamicResourceAllocation feature gate and deviceClassMappings, and the"
                    " operator is not told it does (t9kjobs operator"
                    " --kueue-resource-claim-templates). The job is not queued, and no pod is"
                    " created"
                )
    return None


def queue_problems(job: Job) -> list[Problem]:
    """What `t9kjobs validate` can say of a job labelled with a queue without the operator's
    options: a pod template's claim that names a ResourceClaim, which Kueue never counts
    (`_not_counted`). Found in every `template.spec` of the manifest's spec."""
    if not (job.metadata.labels or {}).get(LABEL_QUEUE_NAME):
        return []
    out: list[Problem] = []

    def walk(node: object, parts: list[int | str]) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, [*parts, i])
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if (
                key == "template"
                and isinstance(value, dict)
                and isinstance(value.get("spec"), dict)
            ):
                claims = value["spec"].get("resourceClaims")
                for i, claim in enumerate(claims if isinstance(claims, list) else []):
                    if isinstance(claim, dict) and claim.get("resourceClaimName"):
                        where = [*parts, key, "spec", "resourceClaims", i, "resourceClaimName"]
                        out.append(
                            Problem(
                                path_of("spec", where),
                                f"Kueue does not count the devices of a ResourceClaim a pod"
                                f" names, and the job asks for a queue (label"
                                f" {LABEL_QUEUE_NAME}): name a resourceClaimTemplateName",
                            )
                        )
            walk(value, [*parts, key])

    walk((job.raw or {}).get("spec"), [])
    return out


def _priority(
    job: Job, pods: Sequence[DesiredPod], kueue: Kueue
) -> tuple[Obj | None, int | None] | str:
    """(priorityClassRef, priority) of the Workload, or why it cannot be said yet."""
    name = (job.metadata.labels or {}).get(LABEL_PRIORITY_CLASS)
    if name:
        value = kueue.workload_priorities.get(name)
        if value is None:
            return f"WorkloadPriorityClass {name} (label {LABEL_PRIORITY_CLASS}) does not exist"
        ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
        return ref, value
    classes = sorted({str(c) for p in pods if (c := p.manifest["spec"].get("priorityClassName"))})
    if classes:
        value = kueue.pod_priorities.get(classes[0])
        if value is None:
            return f"PriorityClass {classes[0]} (the pods' priorityClassName) does not exist"
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": classes[0]}, value
    scheduler = job.spec.lifecycle().scheduler
    if kueue.t9k_queues and scheduler is not None and scheduler.t9k_scheduler is not None:
        return None, scheduler.t9k_scheduler.priority
    return None, None


def pod_set_name(replica_type: str) -> str:
    """A podSet's name: the replica type as a DNS label."""
    name = re.sub(r"[^a-z0-9-]+", "-", replica_type.lower()).strip("-")[:63].strip("-")
    return name or "pods"


def _pod_sets(pods: Sequence[DesiredPod]) -> list[Obj]:
    sets: dict[str, Obj] = {}
    for pod in pods:
        name = pod_set_name(pod.replica_type)
        if name in sets:
            sets[name]["count"] += 1
            continue
        spec = pod.manifest["spec"]
        template: Obj = {k: spec[k] for k in _TEMPLATE_KEYS if spec.get(k)}
        for key in ("initContainers", "containers"):
            if spec.get(key):
                template[key] = [
                    {
                        "name": c["name"],
                        **({"resources": c["resources"]} if c.get("resources") else {}),
                        # A sidecar (an init container that runs on) adds to what the pod
                        # holds; another init container does not: Kueue sums them so.
                        **({"restartPolicy": c["restartPolicy"]} if c.get("restartPolicy") else {}),
                    }
                    for c in spec[key]
                ]
        if spec.get("resources"):
            template["resources"] = _pod_level(spec)
        if spec.get("resourceClaims"):
            template["resourceClaims"] = spec["resourceClaims"]  # counted: `_not_counted`
        sets[name] = {"name": name, "count": 1, "template": {"spec": template}}
    return list(sets.values())


def _pod_level(spec: Obj) -> Obj:
    """The pod-level `resources`, with the requests the API server gives the pod: where a
    resource has a pod-level limit, no pod-level request and no container that asks for it,
    its request is the limit. Kueue reads pod-level requests alone (it defaults container
    requests from limits, never the pod's), so it would count nothing of that resource."""
    resources: Obj = dict(spec["resources"])
    limits = resources.get("limits") or {}
    requests = dict(resources.get("requests") or {})
    asked = {
        str(name)
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        for part in ("requests", "limits")
        for name in ((c.get("resources") or {}).get(part) or {})
    }
    for name, value in limits.items():
        supported = name in _POD_LEVEL or str(name).startswith("hugepages-")
        if supported and name not in requests and name not in asked:
            requests[name] = value
    if requests:
        resources["requests"] = requests
    return resources


def _condition(obj: Obj | None, type_: str) -> Obj | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def _true(obj: Obj | None, type_: str) -> bool:
    condition = _condition(obj, type_)
    return condition is not None and condition.get("status") == "True"


def admission(
    job: Job,
    q: Queued,
    status: JobStatus,
    observed: Observed,
    pods: Sequence[DesiredPod],
    ts: str,
) -> Changes | None:
    """None when the job may run: its Workload is admitted (its pods then carry their
    flavors' node labels and tolerations, set here in place). Otherwise what a job waiting in
    its queue does: no pod, the Workload made or mended, the phase `Queued`; or what a job
    refused a place does (`Queued.refusal`): no pod and no Workload, a Warning."""
    name = workload_name(job)
    current = observed.get(WORKLOAD, name)
    if q.refusal is not None:
        return _refusal(q.refusal, q.problem or q.refusal, status, observed, current, ts)
    note = q.ignored

    def said(message: str) -> str:
        return f"{message}; {note}" if note else message

    if current is not None and current["metadata"].get("deletionTimestamp"):
        current = None
        going = True
    else:
        going = False
    wanted = q.workload
    if (
        current is not None
        and wanted is not None
        and subset(wanted["spec"], current.get("spec"))
        and _true(current, "Admitted")
        and not _true(current, "Evicted")
        and (current.get("status") or {}).get("admission")
    ):
        missing = _with_flavors(pods, current, observed.kueue or Kueue())
        if missing is None:
            cq = current["status"]["admission"].get("clusterQueue", "")
            set_condition(
                status,
                "Admitted",
                True,
                "Admitted",
                said(f"admitted by ClusterQueue {cq} (LocalQueue {q.queue}, Workload {name})"),
                ts,
            )
            return None
        return _held(status, observed, ts, "Queued", said(f"admitted, but {missing}"), requeue=1.0)

    creates: list[Obj] = []
    deletes = []
    patches: list[Obj] = []
    requeue = None
    if q.problem is not None:
        reason, message, requeue = "Inadmissible", q.problem, RETRY_SECONDS
    elif (WORKLOAD, name) in observed.conflicts:
        holder = observed.conflicts[(WORKLOAD, name)]
        reason = "NameConflict"
        message = f"Workload {name} exists and this job does not control it ({holder})"
        requeue = RETRY_SECONDS
    elif current is None:
        if not going and wanted is not None:
            creates.append(wanted)
        reason, message = "Queued", f"waiting in LocalQueue {q.queue} (Workload {name})"
    elif wanted is not None and not subset(wanted["spec"], current.get("spec")):
        # Its pods changed (an elastic job scaled): Kueue counts them anew, in a new Workload.
        deletes.append(deletion(current))
        reason = "Queued"
        message = f"the job's pods changed: Workload {name} is made again, to be queued anew"
    else:
        reason, message = _waiting(current, q.queue, name)
        evicted = _condition(current, "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            reason = str(evicted.get("reason") or "Evicted")
            message = f"evicted by Kueue ({reason}): {evicted.get('message') or ''}".rstrip(": ")
            if not observed.pods() and _true(current, "QuotaReserved"):
                patches.append(_cleared(current, evicted, ts))
    return _held(
        status,
        observed,
        ts,
        reason,
        said(message),
        requeue=requeue,
        changes=Changes(create=tuple(creates), delete=tuple(deletes), patch_status=tuple(patches)),
    )


def _refusal(
    reason: str,
    message: str,
    status: JobStatus,
    observed: Observed,
    current: Obj | None,
    ts: str,
) -> Changes:
    """A job refused a place in a queue: no pod, and no Workload (one it had, its pods
    changed since, is deleted: its place is given up); `Queued`, its Admitted condition and a
    Warning Event say why, once. Looked at again every `RETRY_SECONDS` (a default LocalQueue
    or Kueue's CRDs may come meanwhile)."""
    gone = []
    if current is not None and not current["metadata"].get("deletionTimestamp"):
        gone.append(deletion(current))
    return _held(
        status,
        observed,
        ts,
        reason,
        message,
        requeue=RETRY_SECONDS,
        changes=Changes(delete=tuple(gone)),
        warning=True,
    )


def label_ignored(q: Queued | None, before: JobStatus, status: JobStatus) -> tuple[Event, ...]:
    """A Warning, once, when the job names another queue (or none) than its Workload's: its
    Admitted condition's message says it from then on."""
    if q is None or not q.ignored:
        return ()
    was = before.condition("Admitted")
    now = status.condition("Admitted")
    if now is None or q.ignored not in (now.message or ""):
        return ()
    if was is not None and q.ignored in (was.message or ""):
        return ()
    return (Event("Warning", QUEUE_LABEL_IGNORED, q.ignored),)


def _waiting(workload: Obj, queue: str, name: str) -> tuple[str, str]:
    """Why an unadmitted Workload waits, in Kueue's words."""
    reserved = _condition(workload, "QuotaReserved")
    if reserved is not None and reserved.get("status") == "True":
        return "Queued", f"quota reserved in LocalQueue {queue}; waiting for admission checks"
    said = str((reserved or {}).get("message") or "")
    if reserved is not None and reserved.get("reason") == "Inadmissible":
        return "Inadmissible", f"LocalQueue {queue}: {said}" if said else f"LocalQueue {queue}"
    tail = f": {said}" if said else f" (Workload {name})"
    return "Queued", f"waiting in LocalQueue {queue}{tail}"


def _held(
    status: JobStatus,
    observed: Observed,
    ts: str,
    reason: str,
    message: str,
    *,
    requeue: float | None = None,
    changes: Changes | None = None,
    warning: bool = False,
) -> Changes:
    """A job that waits for admission: no pod (those it has are deleted, its PodGroups too).
    A `warning` (a refusal) is said as a Warning Event, never a routine one."""
    live = [p for p in observed.pods() if not p["metadata"].get("deletionTimestamp")]
    events: list[Event] = []
    was = status.condition("Admitted")
    kind: Literal["Normal", "Warning"] = "Warning" if warning else "Normal"
    if live:
        events.append(
            Event(kind, reason, f"{message}; deleted {len(live)} pod(s), the job waits again")
        )
    elif was is None or was.reason != reason:
        events.append(Event(kind, reason, message, routine=was is None and not warning))
    status.phase = "Queued"
    status.start_time = None  # its deadline counts from its admission
    set_condition(status, "Admitted", False, reason, message, ts)
    if status.condition("Running") is not None:
        set_condition(status, "Running", False, reason, "the job waits in its queue", ts)
    if live or status.tasks:
        shown_deleted(status)
    gone = [*live, *placement_objects(observed.objects.values())]
    changes = changes or Changes()
    return Changes(
        create=changes.create,
        delete=(*changes.delete, *(deletion(o) for o in gone)),
        patch_status=changes.patch_status,
        events=tuple(events),
        requeue_after=requeue,
    )


def _cleared(workload: Obj, evicted: Obj, ts: str) -> Obj:
    """The status patch that gives an evicted Workload's quota back (`jobframework`: its job
    stopped, the reservation is unset; Requeued True after a preemption or a node failure)."""
    message = str(evicted.get("message") or "")
    reason = str(evicted.get("reason") or "")
    generation = workload["metadata"].get("generation")

    def condition(type_: str, value: str, why: str, said: str) -> Obj:
        out: Obj = {
            "type": type_,
            "status": value,
            "reason": why,
            "message": said,
            "lastTransitionTime": ts,
        }
        if generation is not None:
            out["observedGeneration"] = generation
        return out

    requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
    changed = {
        "QuotaReserved": condition("QuotaReserved", "False", "Pending", message),
        "Admitted": condition(
            "Admitted", "False", "NoReservation", "The workload has no reservation"
        ),
        "Requeued": condition("Requeued", requeued, reason or "Evicted", message),
    }
    conditions = [
        changed.pop(c["type"], c) for c in (workload.get("status") or {}).get("conditions") or []
    ]
    conditions += list(changed.values())
    return _status_patch(workload, {"conditions": conditions, "admission": None})


def _status_patch(workload: Obj, status: Obj) -> Obj:
    meta = workload["metadata"]
    return {
        "apiVersion": workload.get("apiVersion", KUEUE_API_VERSION),
        "kind": WORKLOAD,
        "metadata": {"name": meta["name"], "resourceVersion": meta.get("resourceVersion")},
        "status": status,
    }


def finished_workloads(changes: Changes, status: JobStatus, observed: Observed, ts: str) -> Changes:
    """A finished job's `changes` with its Workloads marked `Finished` (their quota goes back
    to the queue) once no pod of the job holds resources on its node: not while one still
    runs, or is still being stopped (`cleanUpPolicy: None` keeps a replica that runs on after
    the job's verdict). A Workload Kueue evicts meanwhile (preempted, deactivated) gets those
    pods deleted, as an admitted job's would be, so that its quota can go."""
    workloads = [
        w for w in workload_objects(list(observed.objects.values())) if not _true(w, "Finished")
    ]
    holding = [p for p in observed.pods() if (p.get("status") or {}).get("phase") not in _ENDED]
    if workloads and holding:
        if not any(_true(w, "Evicted") for w in workloads):
            return replace(changes, patch_status=())
        deleting = {d.name for d in changes.delete}
        stop = [
            deletion(p)
            for p in holding
            if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in deleting
        ]
        return replace(changes, delete=(*changes.delete, *stop), patch_status=())
    return replace(changes, patch_status=_finished(workloads, status, ts))


def _finished(workloads: Sequence[Obj], status: JobStatus, ts: str) -> tuple[Obj, ...]:
    completed = status.condition("Completed")
    failed = status.condition("Failed")
    ended = completed if completed is not None and completed.status == "True" else failed
    reason = "Succeeded" if status.phase == "Succeeded" else "Failed"
    message = (ended.message if ended is not None else None) or f"the job {reason.lower()}"
    out = []
    for workload in workloads:
        conditions = [
            c
            for c in (workload.get("status") or {}).get("conditions") or []
            if c.get("type") != "Finished"
        ]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": reason,
                "message": message[:32768],
                "lastTransitionTime": ts,
            }
        )
        out.append(_status_patch(workload, {"conditions": conditions}))
    return tuple(out)


def _with_flavors(pods: Sequence[DesiredPod], workload: Obj, kueue: Kueue) -> str | None:
    """Give each pod the node labels and tolerations of the flavors assigned to its podSet;
    what is missing when a flavor is not known here yet (None when all are)."""
    assignments = {
        str(a.get("name")): a
        for a in (workload.get("status") or {}).get("admission", {}).get("podSetAssignments") or []
    }
    for pod in pods:
        assigned = assignments.get(pod_set_name(pod.replica_type))
        names = sorted({str(f) for f in ((assigned or {}).get("flavors") or {}).values()})
        spec = pod.manifest["spec"]
        for name in names:
            flavor = kueue.flavors.get(name)
            if flavor is None:
                return f"its ResourceFlavor {name} is not known to the operator yet"
            flavor_spec = flavor.get("spec") or {}
            if flavor_spec.get("nodeLabels"):
                spec["nodeSelector"] = {
                    **(spec.get("nodeSelector") or {}),
                    **flavor_spec["nodeLabels"],
                }
            tolerations = list(spec.get("tolerations") or [])
            for toleration in flavor_spec.get("tolerations") or []:
                if toleration not in tolerations:
                    tolerations.append(toleration)
            if tolerations:
                spec["tolerations"] = tolerations
    return None
