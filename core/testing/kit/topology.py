"""The contract on topology: a job that asks Kueue for a place in a `Topology`'s domains has its
pods ranked and gated as Kueue's Topology-Aware Scheduling needs (docs/scheduling.md,
"Topology-aware placement"), and the ranks its program is told follow that placement.

The engine keeps Kueue's TAS protocol for every kind (`t9kjobs.planner.topology`): a replica's
template annotations become its podSet's `topologyRequest` with `podIndexLabel`
`tensorstack.dev/rank`, and at admission each pod gets its rank, Kueue's gate, label and
annotation. What a plugin decides is what reaches it: pods that keep their template's
annotations (or the user's request is dropped, silently), and pods built in the order of the
ranks their program is told (or neighbouring ranks land in different racks, the slowest link
of every collective). The kit reads Kueue's side as Kueue v0.17's ungater does
(`topology_ungater.go`): a pod's rank within its podSet is its label less the podSet's offset
(the smaller podSet's size for the larger of a `podset-group-name` pair, plus the pods'
`kueue.x-k8s.io/pod-index-offset`), and must be exactly 0..count-1.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import pairwise

from t9kjobs.models import Job
from t9kjobs.planner import Kueue, Observed, plan
from t9kjobs.planner.queueing import LABEL_QUEUE_NAME
from t9kjobs.planner.topology import (
    ANNOTATION_OFFSET,
    ANNOTATION_PREFERRED,
    ANNOTATION_REQUIRED,
    ANNOTATION_SLICE_REQUIRED,
    ANNOTATION_UNCONSTRAINED,
    ANNOTATION_WORKLOAD,
    GATE,
    LABEL_PODSET,
    LABEL_RANK,
)
from t9kjobs.planner.workloads import WORKLOAD, pod_set_name
from t9kjobs.testing.kit.calls import build_pods
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.meaning import told_ranks
from t9kjobs.testing.kit.subject import EPOCH, Subject
from t9kjobs.testing.kit.violation import ContractViolation
from t9kjobs.vocabulary import Obj

__all__ = ["pods_carry_topology_ranks"]

# The level the kit asks for on an example that asks for none (any node label key will do:
# no Kueue reads it here).
_LEVEL = "conformance.t9kjobs.dev/rack"
_HOST = "kubernetes.io/hostname"
_FLAVOR_LABEL = "conformance.t9kjobs.dev/flavor"
_KUEUE = Kueue(
    flavors={"kit": {"metadata": {"name": "kit"}, "spec": {"nodeLabels": {_FLAVOR_LABEL: "kit"}}}}
)
_ASKS = (
    ANNOTATION_REQUIRED,
    ANNOTATION_PREFERRED,
    ANNOTATION_UNCONSTRAINED,
    ANNOTATION_SLICE_REQUIRED,
)
_FIX_ORDER = (
    "return the pods from t9kjobs_build_pods in the order of the ranks their program is told"
    " (the engine ranks them replica type by replica type, in that order)"
)


def _pod_templates(node: object) -> Iterator[Obj]:
    """The pod templates in a job's spec: every `template` holding `spec.containers`."""
    if isinstance(node, dict):
        found = node.get("template")
        if isinstance(found, dict) and isinstance(
            (found.get("spec") or {}).get("containers"), list
        ):
            yield found
        for value in node.values():
            yield from _pod_templates(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pod_templates(value)


def _asking(example: Example) -> tuple[Obj, bool] | None:
    """The example labelled with a queue, asking for topology: as written when a template of
    it asks, else with every pod template preferring one domain of `_LEVEL` (True: the kit
    asked). None when the spec has no pod template to ask on."""
    doc = copy.deepcopy(example.manifest)
    doc.setdefault("metadata", {}).setdefault("labels", {})[LABEL_QUEUE_NAME] = "kit"
    templates = list(_pod_templates(doc.get("spec")))
    if not templates:
        return None
    if any(
        key in ((t.get("metadata") or {}).get("annotations") or {})
        for t in templates
        for key in _ASKS
    ):
        return doc, False
    for t in templates:
        t.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_PREFERRED] = _LEVEL
    return doc, True


def _placed(workload: Obj) -> Obj:
    """The Workload admitted, each podSet that asks for topology given one host a pod
    (Kueue v1beta2's compressed `topologyAssignment`, the hostname level only)."""
    assignments = []
    for s in workload["spec"]["podSets"]:
        assignment: Obj = {"name": s["name"], "count": s["count"], "flavors": {"cpu": "kit"}}
        if s.get("topologyRequest"):
            assignment["topologyAssignment"] = {
                "levels": [_HOST],
                "slices": [
                    {
                        "domainCount": s["count"],
                        "valuesPerLevel": [
                            {
                                "individual": {
                                    "prefix": f"kit-{s['name']}-",
                                    "roots": [str(i) for i in range(s["count"])],
                                }
                            }
                        ],
                        "podCounts": {"universal": 1},
                    }
                ],
            }
        assignments.append(assignment)
    return {
        **workload,
        "metadata": {**workload["metadata"], "uid": "kit-workload"},
        "status": {
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
            "admission": {"clusterQueue": "kit", "podSetAssignments": assignments},
        },
    }


def _kueue_starts(workload: Obj) -> dict[str, int]:
    """Where Kueue's ungater starts counting each podSet's ranks before the pods' own offset:
    0, or for the larger of two podSets of one group the smaller one's size."""
    groups: dict[str, list[Obj]] = {}
    for i, s in enumerate(workload["spec"]["podSets"]):
        group = (s.get("topologyRequest") or {}).get("podSetGroupName") or f"#{i}"
        groups.setdefault(str(group), []).append(s)
    starts = {str(s["name"]): 0 for s in workload["spec"]["podSets"]}
    for members in groups.values():
        if len(members) > 1:
            smaller, larger = members[0], members[1]
            if int(smaller["count"]) > int(larger["count"]):
                smaller, larger = larger, smaller
            starts[str(larger["name"])] = int(smaller["count"])
    return starts


def _rank(where: str, pod: Obj) -> int:
    name = pod["metadata"]["name"]
    value = (pod["metadata"].get("labels") or {}).get(LABEL_RANK)
    if value is None or not str(value).isdigit():
        raise ContractViolation(
            f"{where}: admitted by topology, pod {name} has the label {LABEL_RANK}={value!r},"
            " not a whole number: Kueue cannot place it by rank"
        )
    return int(value)


def _check_pods(where: str, workload: Obj, pods: list[Obj], pod_set: dict[str, str]) -> None:
    """Every pod of a podSet placed by topology gated, labelled and annotated for Kueue, its
    rank what Kueue reads as exactly 0..count-1 within the podSet."""
    requests = {str(s["name"]): s for s in workload["spec"]["podSets"]}
    starts = _kueue_starts(workload)
    name = workload["metadata"]["name"]
    by_set: dict[str, list[Obj]] = {}
    for pod in pods:
        by_set.setdefault(pod_set[pod["metadata"]["name"]], []).append(pod)
    for set_name, members in by_set.items():
        if not (requests[set_name].get("topologyRequest") or {}):
            continue
        offsets = set()
        for pod in members:
            meta = pod["metadata"]
            gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or []]
            missing = [
                what
                for what, ok in (
                    (f"the scheduling gate {GATE}", GATE in gates),
                    (
                        f"the label {LABEL_PODSET}={set_name}",
                        (meta.get("labels") or {}).get(LABEL_PODSET) == set_name,
                    ),
                    (
                        f"the annotation {ANNOTATION_WORKLOAD}={name}",
                        (meta.get("annotations") or {}).get(ANNOTATION_WORKLOAD) == name,
                    ),
                )
                if not ok
            ]
            if missing:
                raise ContractViolation(
                    f"{where}: admitted by topology, pod {meta['name']} lacks {', '.join(missing)}:"
                    " Kueue never places it (the engine sets them after every t9kjobs_mutate_pod:"
                    " a fault of t9k-jobs to report)"
                )
            offsets.add((meta.get("annotations") or {}).get(ANNOTATION_OFFSET, "0"))
        if len(offsets) != 1 or not next(iter(offsets)).isdigit():
            raise ContractViolation(
                f"{where}: the pods of podSet {set_name} carry {ANNOTATION_OFFSET}"
                f" {sorted(offsets)}: Kueue reads one, a whole number, off the first pod"
            )
        offset = starts[set_name] + int(offsets.pop())
        read = sorted(_rank(where, p) - offset for p in members)
        if read != list(range(len(members))):
            raise ContractViolation(
                f"{where}: Kueue reads the ranks of podSet {set_name} ({LABEL_RANK} less"
                f" {offset}) as {read}, not 0..{len(members) - 1}: it places them greedily,"
                " out of rank order"
            )


def pods_carry_topology_ranks(subject: Subject, example: Example) -> None:
    """A job that asks Kueue for topology gets its pods ranked and gated, in its ranks' order.

    Labelled `kueue.x-k8s.io/queue-name`, and asking for topology on its pod templates (as the
    example does, else the kit adds `kueue.x-k8s.io/podset-preferred-topology` to every
    `template` with `spec.containers` in the spec), the job's Workload has a podSet whose
    `topologyRequest` has `podIndexLabel: tensorstack.dev/rank` (the pods keep their
    template's annotations). Admitted with a `topologyAssignment`, every pod of such a podSet
    is created with the scheduling gate `kueue.x-k8s.io/topology`, the label
    `kueue.x-k8s.io/podset`, the annotation `kueue.x-k8s.io/workload` and a rank that Kueue
    reads (less its podSet's offset and `kueue.x-k8s.io/pod-index-offset`) as exactly
    0..count-1 within its podSet. Where the kind declares the ranks its program is told
    (`Lifecycle.distribution`: carriers, or a hostfile's order), they rise with these ranks,
    so that neighbouring ranks share a domain.
    """
    job = subject.job(example)
    if not any(o.get("kind") == "Pod" for o in subject.first_reconcile(job).create):
        return  # a job without pods has nothing to place
    asking = _asking(example)
    if asking is None:
        return  # no pod template in the spec: nothing for a user to ask on
    doc, kit_asked = asking
    where = example.id
    queued = subject.fresh(subject.job(replace(example, manifest=doc)))
    hooks = subject.hooks(queued.kind)
    first = plan(queued, Observed(kueue=_KUEUE), EPOCH, hooks)
    workloads = [o for o in first.create if o.get("kind") == WORKLOAD]
    if not workloads:
        return  # test_jobs_wait_in_queues says why
    workload = workloads[0]
    asked = [s for s in workload["spec"]["podSets"] if s.get("topologyRequest")]
    if not asked:
        said = f"{ANNOTATION_PREFERRED}: {_LEVEL} (added by the kit)" if kit_asked else "theirs"
        raise ContractViolation(
            f"{where}: the pod templates ask Kueue for topology ({said}), but no podSet of the"
            " Workload has a topologyRequest: the pods lose their template's annotations;"
            " build them with t9kjobs.objects.new_pod(job, type, index, template), which"
            " keeps them"
        )
    for s in asked:
        if s["topologyRequest"].get("podIndexLabel") != LABEL_RANK:
            raise ContractViolation(
                f"{where}: podSet {s['name']}'s topologyRequest has podIndexLabel"
                f" {s['topologyRequest'].get('podIndexLabel')!r}, not {LABEL_RANK!r}"
            )
    admitted = _placed(workload)
    waiting = queued.model_copy(update={"status": first.status})
    second = plan(waiting, Observed.of([admitted], kueue=_KUEUE), EPOCH, hooks)
    pods = [o for o in second.create if o.get("kind") == "Pod"]
    pod_set = {p.name: pod_set_name(p.replica_type) for p in build_pods(hooks, queued)}
    _check_pods(where, admitted, pods, pod_set)
    _check_told(subject, example, queued, second.create, pods)


def _check_told(
    subject: Subject, example: Example, job: Job, made: Sequence[Obj], pods: list[Obj]
) -> None:
    """The ranks the kind's program is told rise with the pods' topology ranks."""
    where = example.id
    told = told_ranks(subject, example, job, made)
    if told is None:
        return  # the framework assigns them (or ranks_cover_the_world fails them)
    program, carrier = told
    placed = {
        p["metadata"]["name"]: int(p["metadata"]["labels"][LABEL_RANK])
        for p in pods
        if LABEL_RANK in (p["metadata"].get("labels") or {})
    }
    ordered = sorted((r, n) for n, r in program.items() if n in placed)
    for (rank, name), (next_rank, next_name) in pairwise(ordered):
        if placed[next_name] < placed[name]:
            raise ContractViolation(
                f"{where}: pod {name} is rank {rank} to its program ({carrier}) and pod"
                f" {next_name} rank {next_rank}, but Kueue places them as ranks {placed[name]}"
                f" and {placed[next_name]} ({LABEL_RANK}): the program's neighbours land in"
                f" different domains; {_FIX_ORDER}"
            )
