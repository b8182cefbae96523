"""Gangs that buy nothing are not made: a job's pods placed one by one where no partial
placement can hold what another job waits for.

A gang exists so that two jobs never each hold part of what the other needs and wait for ever
(`t9kjobs.plugins.scheduling`). It costs every job its group's whole life, paid mostly by
kube-scheduler (1.36): the PodGroup created, its finalizer written, its status patched, each
member's nominated node patched while it waits at the gang's Permit, the group deleted; at
500 jobs of 4 pods, 0.66x the whole run of the same jobs without (docs/benchmarks.md, "Under
gangs"). It buys something only where a placed pod holds something scarce. So a gang whose
members can leave it (`GangFormat.leave`: kube-scheduler's) is left out, and its pods placed
on their own, when:

* it counts one pod (a job of one pod, an elastic minimum of one): its scheduler places that
  pod as any other;
* or no pod of the job reserves anything (`reserves`: no container, init container or pod asks
  for a resource, a device claim or a host port) and its namespace gives none by default (a
  LimitRange's `default` or `defaultRequest`: `Observed.default_requests`, True wherever the
  operator cannot tell). Such pods hold nothing a node could run out of but a pod's slot.

A gang the cluster already holds is kept whatever the rule says now (a job an older operator
placed as a gang, a namespace whose defaults changed since): its pending members name it, and
would wait for ever for a group that is gone. The T9k scheduler's gang, which places by the
group's label, is always kept: its pods cannot leave it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from t9kjobs.objects import DesiredPod, object_key
from t9kjobs.planner.types import Observed
from t9kjobs.vocabulary import Obj

__all__ = ["reserves", "without_idle_gangs"]

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


# A quantity of nothing, in any of Kubernetes' spellings: 0, 0.0, 0m, 0Gi, 0e3. Unambiguous
# (the zeros after the point only after a point), so a long value costs linear time: the
# template is the user's, and `0*\.?0*` took 4 s on 20,000 zeros (quadratic backtracking).
_ZERO = re.compile(r"\+?0*(?:\.0*)?(?:[eE][+-]?\d+|[numkMGTPE]i?)?")
# Longer than any quantity of nothing anyone writes: taken as an amount, without reading it.
_MAX_ZERO_LENGTH = 32


def _zero(quantity: object) -> bool:
    text = str(quantity).strip()
    return len(text) <= _MAX_ZERO_LENGTH and _ZERO.fullmatch(text) is not None


def _nonzero(quantities: object) -> bool:
    """Whether a requests or limits map asks for any amount: a quantity other than zero."""
    if not isinstance(quantities, dict):
        return False
    return any(not _zero(q) for q in quantities.values())


def _asks(resources: object) -> bool:
    if not isinstance(resources, dict):
        return False
    return _nonzero(resources.get("requests")) or _nonzero(resources.get("limits"))


def reserves(pod: Obj) -> bool:
    """Whether a pod's manifest holds something a node can run out of once placed: requests or
    limits of any container (a limit alone is also its request) or of the pod
    (`spec.resources`), a device claim (`spec.resourceClaims`), or a host port."""
    spec = pod.get("spec") or {}
    if _asks(spec.get("resources")) or spec.get("resourceClaims"):
        return True
    for key in _CONTAINER_LISTS:
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            ports = container.get("ports") or []
            if _asks(container.get("resources")) or any(
                isinstance(p, dict) and p.get("hostPort") for p in ports
            ):
                return True
    return False


def without_idle_gangs(
    aux: Sequence[Obj], pods: Sequence[DesiredPod], observed: Observed
) -> list[Obj]:
    """`aux` without the gangs that buy nothing (see the module), and `pods` taken out of them
    (in place: `GangFormat.leave`, before their spec hash is taken)."""
    reserving = observed.default_requests or any(reserves(p.manifest) for p in pods)
    idle = [
        (group, gang)
        for group, gang in observed.gangs(aux)
        if gang.leave is not None
        and observed.get(*object_key(group)) is None
        and (gang.size(group) == 1 or not reserving)
    ]
    if not idle:
        return list(aux)
    for pod in pods:
        for _, gang in idle:
            assert gang.leave is not None  # kept above
            gang.leave(pod.manifest)
    dropped = {id(group) for group, _ in idle}
    return [o for o in aux if id(o) not in dropped]
