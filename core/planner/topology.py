"""Kueue's Topology-Aware Scheduling (TAS) for every kind: a job's ranks on the fewest racks,
in rank order (docs/scheduling.md, "Topology-aware placement").

Kueue places a queued job's pods in a `Topology`'s domains (block, rack, host) when its
ResourceFlavor names one; the job's controller, this engine for every kind (third-party ones
too), keeps the part of the protocol Kueue's own integrations get from `jobframework`
(`tas.go`, `podset.go`) and `tas/topology_ungater.go`:

* **The request.** The topology annotations of a replica's pod template
  (`kueue.x-k8s.io/podset-required-topology`, `-preferred-topology`, `-unconstrained-topology`,
  `podset-slice-required-topology` with `podset-slice-size`, `podset-group-name`) become its
  podSet's `topologyRequest`, with `podIndexLabel: tensorstack.dev/rank`. Without a
  podIndexLabel Kueue's ungater hands domains to pods in no particular order; with it, pod of
  rank r gets the r-th slot of the assignment, so neighbouring ranks share a domain.
* **The rank** (`LABEL_RANK`): the pod's place in the order the kind builds its pods, podSet
  by podSet: PyTorch's master then its workers (its node rank), DeepSpeed's and ColossalAI's
  workers in hostfile order, a GenericJob's replica types as listed. Kueue reads a podSet's
  ranks from 0 (from the smaller podSet's size, for the larger of two podSets of one group):
  the annotation `kueue.x-k8s.io/pod-index-offset` on each pod says where the podSet starts
  among the job's ranks, so the label stays the job-wide rank.
* **Admission** (`topology_admitted`). A podSet whose assignment has a `topologyAssignment`
  gets, on every pod, the label `kueue.x-k8s.io/podset`, the annotation
  `kueue.x-k8s.io/workload` and the scheduling gate `kueue.x-k8s.io/topology` (and, with no
  request of its own, `podset-unconstrained-topology: "true"`, as Kueue does for implicit TAS).
  Kueue's ungater then adds the node selector of the pod's domain and lifts the gate: the
  engine compares a pod by the digest of the spec it created it with (`spec_hash`), never by
  the live spec, so it never undoes that. A pod created again (a restart, a replacement after
  a lost node) carries the gate again and the ungater gives it its rank's slot.
* **Bad annotations** are refused before a Workload is made, naming the field
  (`topology_problem`), as Kueue's webhook would refuse the job of a built-in integration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from t9kjobs.objects import DesiredPod
from t9kjobs.validation import is_label_key
from t9kjobs.vocabulary import Obj

__all__ = [
    "ANNOTATION_GROUP",
    "ANNOTATION_OFFSET",
    "ANNOTATION_PREFERRED",
    "ANNOTATION_REQUIRED",
    "ANNOTATION_SLICE_REQUIRED",
    "ANNOTATION_SLICE_SIZE",
    "ANNOTATION_UNCONSTRAINED",
    "ANNOTATION_WORKLOAD",
    "GATE",
    "LABEL_PODSET",
    "LABEL_RANK",
    "TOPOLOGY_PROBLEM",
    "domain_of",
    "ranks",
    "topology_admitted",
    "topology_problem",
    "topology_request",
]

ANNOTATION_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
ANNOTATION_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
ANNOTATION_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
ANNOTATION_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
ANNOTATION_GROUP = "kueue.x-k8s.io/podset-group-name"
ANNOTATION_OFFSET = "kueue.x-k8s.io/pod-index-offset"
ANNOTATION_WORKLOAD = "kueue.x-k8s.io/workload"
LABEL_PODSET = "kueue.x-k8s.io/podset"
GATE = "kueue.x-k8s.io/topology"
# The pod's rank among the job's pods: the podIndexLabel of every podSet that asks for topology.
LABEL_RANK = "tensorstack.dev/rank"
# The reason a job is refused a place in its queue for a bad topology annotation.
TOPOLOGY_PROBLEM = "TopologyRequestInvalid"
# Any of these on a template asks Kueue for topology.
_ASKS = (
    ANNOTATION_REQUIRED,
    ANNOTATION_PREFERRED,
    ANNOTATION_UNCONSTRAINED,
    ANNOTATION_SLICE_REQUIRED,
    ANNOTATION_SLICE_SIZE,
)
_INT = re.compile(r"^[0-9]+$")


def _annotations(pod: DesiredPod) -> Mapping[str, str]:
    return pod.manifest["metadata"].get("annotations") or {}


def topology_request(pod: DesiredPod) -> Obj | None:
    """The podSet's `topologyRequest` that `pod`'s annotations ask for (Kueue's
    `NewPodSetTopologyRequest(...).PodIndexLabel(...).Build()`), None when they ask for none.
    Call `topology_problem` first: the annotations are taken as valid here."""
    said = _annotations(pod)
    if not any(key in said for key in _ASKS):
        return None
    request: Obj = {}
    if ANNOTATION_REQUIRED in said:
        request["required"] = said[ANNOTATION_REQUIRED]
    elif ANNOTATION_PREFERRED in said:
        request["preferred"] = said[ANNOTATION_PREFERRED]
    elif ANNOTATION_UNCONSTRAINED in said:
        request["unconstrained"] = said[ANNOTATION_UNCONSTRAINED].lower() in ("true", "1", "t")
    if ANNOTATION_SLICE_REQUIRED in said and ANNOTATION_SLICE_SIZE in said:
        request["podSetSliceRequiredTopology"] = said[ANNOTATION_SLICE_REQUIRED]
        request["podSetSliceSize"] = int(said[ANNOTATION_SLICE_SIZE])
    request["podIndexLabel"] = LABEL_RANK
    if ANNOTATION_GROUP in said and ("required" in request or "preferred" in request):
        request["podSetGroupName"] = said[ANNOTATION_GROUP]
    return request


def topology_problem(pods: Sequence[DesiredPod]) -> str | None:
    """What Kueue would refuse of the pods' topology annotations (`ValidateTASPodSetRequest`),
    naming the replica type and the annotation; None when all are fine."""
    seen: set[str] = set()
    for pod in pods:
        if pod.replica_type in seen:
            continue
        seen.add(pod.replica_type)
        said = _annotations(pod)
        where = f"replica type {pod.replica_type}: the pod template's annotation"
        kinds = (ANNOTATION_REQUIRED, ANNOTATION_PREFERRED, ANNOTATION_UNCONSTRAINED)
        found = [k for k in kinds if k in said]
        if len(found) > 1:
            return f"replica type {pod.replica_type}: at most one of {', '.join(found)} may be set"
        for key in (ANNOTATION_REQUIRED, ANNOTATION_PREFERRED, ANNOTATION_SLICE_REQUIRED):
            if key in said and not is_label_key(said[key]):
                return f"{where} {key} ({said[key]!r}) must be a node label key (a level)"
        unconstrained = said.get(ANNOTATION_UNCONSTRAINED)
        if unconstrained is not None and unconstrained.lower() not in _BOOLEANS:
            return f"{where} {ANNOTATION_UNCONSTRAINED} ({unconstrained!r}) must be true or false"
        size = said.get(ANNOTATION_SLICE_SIZE)
        if size is not None and (not _INT.match(size) or not 1 <= int(size) < 2**31):
            return f"{where} {ANNOTATION_SLICE_SIZE} ({size!r}) must be a whole number from 1"
        if (ANNOTATION_SLICE_REQUIRED in said) != (size is not None):
            return (
                f"{where}s {ANNOTATION_SLICE_REQUIRED} and {ANNOTATION_SLICE_SIZE} go together:"
                " set both or neither"
            )
        group = said.get(ANNOTATION_GROUP)
        if group is not None:
            if size is not None:
                return f"{where} {ANNOTATION_GROUP} may not be set with {ANNOTATION_SLICE_SIZE}"
            if ANNOTATION_REQUIRED not in said and ANNOTATION_PREFERRED not in said:
                return (
                    f"{where} {ANNOTATION_GROUP} needs {ANNOTATION_REQUIRED} or"
                    f" {ANNOTATION_PREFERRED} beside it"
                )
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", group):
                return f"{where} {ANNOTATION_GROUP} ({group!r}) must be a DNS label"
    return _group_problem(pods)


def _group_problem(pods: Sequence[DesiredPod]) -> str | None:
    """What Kueue refuses of a `podset-group-name` across replica types
    (`ValidatePodSetGroupingTopology`): a group is exactly two replica types, one of them of
    a single pod, asking for the same level the same way."""
    counts: dict[str, int] = {}
    asked: dict[str, tuple[str | None, str | None]] = {}
    groups: dict[str, list[str]] = {}
    for pod in pods:
        counts[pod.replica_type] = counts.get(pod.replica_type, 0) + 1
        said = _annotations(pod)
        group = said.get(ANNOTATION_GROUP)
        if group is None or pod.replica_type in asked:
            continue
        asked[pod.replica_type] = (said.get(ANNOTATION_REQUIRED), said.get(ANNOTATION_PREFERRED))
        groups.setdefault(group, []).append(pod.replica_type)
    for group, types in groups.items():
        named = f"{ANNOTATION_GROUP} {group} (replica types {', '.join(types)})"
        if len(types) != 2:
            return f"{named}: a group is exactly 2 replica types"
        if counts[types[0]] != 1 and counts[types[1]] != 1:
            return f"{named}: one of the 2 replica types must have a single replica"
        if asked[types[0]] != asked[types[1]]:
            return (
                f"{named}: both must ask for the same level with the same annotation"
                f" ({ANNOTATION_REQUIRED} or {ANNOTATION_PREFERRED})"
            )
    return None


_BOOLEANS = ("true", "false", "1", "0", "t", "f")


def ranks(pods: Sequence[DesiredPod], pod_set: Mapping[str, str]) -> dict[str, int]:
    """Each pod's rank among the job's pods (`LABEL_RANK`): podSet by podSet in the order the
    kind lists them, in the kind's order within each. `pod_set`: the pod name's podSet."""
    by_set: dict[str, list[str]] = {}
    for pod in pods:
        by_set.setdefault(pod_set[pod.name], []).append(pod.name)
    out: dict[str, int] = {}
    for names in by_set.values():
        for name in names:
            out[name] = len(out)
    return out


def _kueue_offsets(workload: Obj) -> dict[str, int]:
    """Where Kueue starts counting each podSet's ranks (`topology_ungater.go`): 0, or, of two
    podSets of one group (`podSetGroupName`), the smaller podSet's size for the larger one
    (the first podSet counts as the smaller on a tie), as for a LeaderWorkerSet's leader."""
    requests = {
        str(p.get("name")): p.get("topologyRequest") or {}
        for p in (workload.get("spec") or {}).get("podSets") or []
    }
    assignments = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    groups: dict[str, list[Obj]] = {}
    for i, assignment in enumerate(assignments):
        name = str(assignment.get("name"))
        group = requests.get(name, {}).get("podSetGroupName") or str(i)
        groups.setdefault(str(group), []).append(assignment)
    out: dict[str, int] = {}
    for members in groups.values():
        for member in members:
            out[str(member.get("name"))] = 0
        if len(members) > 1:
            smaller, larger = members[0], members[1]
            if int(smaller.get("count") or 0) > int(larger.get("count") or 0):
                smaller, larger = larger, smaller
            out[str(larger.get("name"))] = int(smaller.get("count") or 0)
    return out


def topology_admitted(
    pods: Sequence[DesiredPod], workload: Obj, pod_set: Mapping[str, str]
) -> None:
    """Give the pods of each podSet that Kueue placed by topology what its ungater needs (the
    module's docstring), in place: the podSet label, the Workload annotation, the gate, and
    with a podIndexLabel the rank label and where the podSet's ranks start."""
    assignments = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    placed = {str(a.get("name")) for a in assignments if a.get("topologyAssignment")}
    if not placed:
        return
    requests = {
        str(p.get("name")): p.get("topologyRequest") or {}
        for p in (workload.get("spec") or {}).get("podSets") or []
    }
    offsets = _kueue_offsets(workload)
    rank_of = ranks(pods, pod_set)
    starts: dict[str, int] = {}
    for pod in pods:
        starts.setdefault(pod_set[pod.name], rank_of[pod.name])
    name = str(workload["metadata"]["name"])
    for pod in pods:
        set_name = pod_set[pod.name]
        if set_name not in placed:
            continue
        meta = pod.manifest["metadata"]
        labels = meta.setdefault("labels", {})
        annotations = meta.setdefault("annotations", {})
        labels[LABEL_PODSET] = set_name
        annotations[ANNOTATION_WORKLOAD] = name
        request = requests.get(set_name, {})
        if not any(k in request for k in ("required", "preferred", "unconstrained")):
            annotations[ANNOTATION_UNCONSTRAINED] = "true"  # Kueue's implicit TAS
        if request.get("podIndexLabel") == LABEL_RANK:
            labels[LABEL_RANK] = str(rank_of[pod.name])
            offset = starts[set_name] - offsets.get(set_name, 0)
            if offset:
                annotations[ANNOTATION_OFFSET] = str(offset)
        spec = pod.manifest["spec"]
        gates = list(spec.get("schedulingGates") or [])
        if not any(g.get("name") == GATE for g in gates):
            gates.append({"name": GATE})
        spec["schedulingGates"] = gates


def domain_of(pod: Obj, levels: Sequence[str]) -> str | None:
    """The topology domain a pod was given (the values of `levels` in its node selector, as
    Kueue's ungater writes them, `/`-joined), None before it is ungated."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    values = [str(selector[level]) for level in levels if level in selector]
    return "/".join(values) if values else None
