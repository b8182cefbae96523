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
* A job labelled `kueue.x-k8s.io/prebuilt-workload-name` (MultiKueue's copy on a worker
  cluster) adopts that Workload instead of making one (`t9kjobs.planner.prebuilt`).
* What Kueue cannot accept is said: a Workload whose podSets no longer match the job's pods
  (an elastic job scaled) is deleted and created again, so the job queues anew.

The queue cannot be skipped (docs/scheduling.md, "Queueing made mandatory"):

* Where the administrator requires a queue (`Observed.kueue_policy`), a job that names
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

The protocol is three modules of the planner, each to be read on its own: this one decides
where a job waits, and the Workload it wants there or why it is refused a place (`queued`;
`queue_problems` for `t9kjobs validate`), from the job and its pods alone;
`t9kjobs.planner.admission` is what a plan then does with that Workload (admitted, waiting,
evicted, finished); `t9kjobs.planner.workloads` is the Workload object both write and read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from t9kjobs.kinds import Problem
from t9kjobs.messages import path_of
from t9kjobs.models import Job
from t9kjobs.objects import DesiredPod
from t9kjobs.planner.kueue_policy import KueuePolicy
from t9kjobs.planner.prebuilt import prebuilt_place
from t9kjobs.planner.topology import TOPOLOGY_PROBLEM, topology_problem
from t9kjobs.planner.types import Kueue, Observed, Queued
from t9kjobs.planner.workloads import (
    KUEUE_API_VERSION,
    LABEL_PREBUILT_WORKLOAD,
    WORKLOAD,
    new_workload,
    prebuilt_name,
    workload_name,
    workload_priority,
)
from t9kjobs.vocabulary import Obj

__all__ = [
    "LABEL_QUEUE_NAME",
    "NOT_COUNTED",
    "QUEUE_LABEL_IGNORED",
    "QUEUE_LABEL_REMOVED",
    "QUEUE_REQUIRED",
    "queue_of",
    "queue_problems",
    "queued",
]

LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
# Why a job is refused a place in a queue (the reason of its Admitted condition and of a
# Warning Event): it names no queue where one is required; it was queued and names none now;
# its pods hold what Kueue cannot count.
QUEUE_REQUIRED = "QueueRequired"
QUEUE_LABEL_REMOVED = "QueueLabelRemoved"
NOT_COUNTED = "ResourcesNotCounted"
# A Warning: the job names another queue, or none, than the Workload it has (ignored).
QUEUE_LABEL_IGNORED = "QueueLabelIgnored"
# A DNS subdomain (RFC 1123), as a Workload's name is.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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
    policy = observed.kueue_policy
    namespace = job.namespace or ""
    if not served and policy.requires_queue(namespace):
        return _refused(
            QUEUE_REQUIRED,
            f"namespace {namespace} requires a Kueue queue (t9kjobs operator"
            " --kueue-require-queue) and the cluster does not serve Kueue's Workloads"
            f" ({KUEUE_API_VERSION}): no pod is created until it does",
        )
    name = workload_name(job)
    asked = queue_of(job, kueue)
    prebuilt = prebuilt_name(job)
    if prebuilt is not None:
        return prebuilt_place(job, prebuilt, pods, observed, asked)  # its Workload is given
    made = observed.get(WORKLOAD, name)  # being deleted or not: the queue it was made for
    held = _queue_name(made)
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
    problem = topology_problem(pods)
    if problem is not None:
        return _refused(
            TOPOLOGY_PROBLEM, f"{problem}: the job is not queued, and no pod is created", queue
        )
    priority = workload_priority(job, pods, kueue or Kueue())
    if isinstance(priority, str):
        # A Workload made before its class went keeps what it was made with.
        return (
            Queued(queue, made, None, ignored=ignored)
            if made is not None
            else Queued(queue, None, priority, ignored=ignored)
        )
    ref, value = priority
    return Queued(queue, new_workload(job, queue, pods, ref, value), ignored=ignored)


def _prebuilt_name_problems(job: Job) -> list[Problem]:
    """The label `kueue.x-k8s.io/prebuilt-workload-name` names a Workload: a DNS subdomain."""
    name = (job.metadata.labels or {}).get(LABEL_PREBUILT_WORKLOAD)
    if name is None or _SUBDOMAIN.fullmatch(name):
        return []
    return [
        Problem(
            path_of("metadata.labels", [LABEL_PREBUILT_WORKLOAD]),
            f"{name!r} is no Workload's name: lowercase letters, digits, '-' and '.', starting"
            " and ending with a letter or digit (a DNS subdomain, as Kueue requires)",
        )
    ]


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
    (`_not_counted`), found in every `template.spec` of the manifest's spec; and a prebuilt
    Workload's name that no Workload can have (Kueue's `ValidateLabelAsCRDName`)."""
    out = _prebuilt_name_problems(job)
    if not (job.metadata.labels or {}).get(LABEL_QUEUE_NAME):
        return out

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
