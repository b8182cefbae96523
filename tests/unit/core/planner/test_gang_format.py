"""The engine reads a gang only as the plugin that declares its kind says (`ChildKind.gang`, a
`GangFormat`): a third-party gang object, in a format core has never seen, gets the same
`Scheduled` condition, `GangIncomplete` and placement alone as the bundled PodGroups."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from t9kjobs.features import ChildKind, GangFormat
from t9kjobs.hooks import hookimpl
from t9kjobs.objects import DesiredPod, owner_reference
from t9kjobs.planner import Plan
from t9kjobs.planner.gangs import GANG_INCOMPLETE_SECONDS
from t9kjobs.vocabulary import Obj
from tests.unit.core.planner.sim import Sim
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

LABEL = "example.com/quorum"
W0, W1, W2 = (f"tiny-worker-{i}" for i in range(3))


def _size(group: Obj) -> int | None:
    quorum = group["spec"].get("quorum")
    return quorum if isinstance(quorum, int) else None


def _member(group: Obj, pod: Obj) -> bool:
    return (pod["metadata"].get("labels") or {}).get(LABEL) == group["metadata"]["name"]


def _waiting(group: Obj) -> str | None:
    said = (group.get("status") or {}).get("blocked")
    return str(said) if said else None


def _leave(pod: Obj) -> None:
    pod["metadata"]["labels"].pop(LABEL, None)


class QuorumPlugin:
    """A feature plugin whose gang object is a `Quorum` of `example.com`: its size in
    `spec.quorum`, its members labelled with its name, its word in `status.blocked`."""

    def __init__(self, separable: bool) -> None:
        leave = _leave if separable else None
        self.kind = ChildKind(
            "example.com/v1",
            "Quorum",
            "quorums",
            without_pods=False,
            gang=GangFormat(_size, member=_member, waiting=_waiting, leave=leave),
        )

    @hookimpl
    def t9kjobs_child_kinds(self) -> list[ChildKind]:
        return [self.kind]

    @hookimpl
    def t9kjobs_build_auxiliary_objects(self, job: Any, pods: Sequence[DesiredPod]) -> list[Obj]:
        meta = {"name": job.name, "namespace": job.namespace}
        return [
            {
                "apiVersion": "example.com/v1",
                "kind": "Quorum",
                "metadata": {**meta, "ownerReferences": [owner_reference(job)]},
                "spec": {"quorum": len(pods)},
            }
        ]

    @hookimpl
    def t9kjobs_mutate_pod(self, job: Any, pod: DesiredPod) -> None:
        meta = pod.manifest["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), LABEL: job.name}


def _sim(separable: bool = True) -> Sim:
    manager = tiny_manager()
    manager.register(QuorumPlugin(separable), "quorum")
    return Sim(tiny_job(replicas=3), manager)


def _placed(sim: Sim, name: str) -> None:
    sim.set(name, "Running")
    sim.pod(name)["spec"]["nodeName"] = "node-0"


def _scheduled(p: Plan) -> tuple[str, str, str]:
    c = p.status.condition("Scheduled")
    assert c is not None
    return c.status, c.reason, c.message


def test_a_gang_says_why_it_waits_in_its_own_format() -> None:
    sim = _sim()
    p = sim.step()
    assert next(o["kind"] for o in p.create) == "Quorum"  # before the pods it places
    assert all(sim.pod(n)["metadata"]["labels"][LABEL] == "tiny" for n in (W0, W1, W2))
    sim.objects[("Quorum", "tiny")]["status"] = {"blocked": "no room for 3 pods at once"}
    p = sim.step()
    assert _scheduled(p) == (
        "False",
        "Unschedulable",
        "Quorum tiny (3 pods at once) cannot be placed: no room for 3 pods at once",
    )
    for name in (W0, W1, W2):
        _placed(sim, name)
    assert _scheduled(sim.step())[:2] == ("True", "Scheduled")


def _stranded(separable: bool) -> Sim:
    """worker-0 waits unplaced in the gang of 3 while workers 1 and 2 ended for good."""
    sim = _sim(separable)
    sim.step()
    for name in (W0, W1, W2):
        _placed(sim, name)
    sim.step()
    sim.set(W0, "Pending")
    del sim.pod(W0)["spec"]["nodeName"]
    sim.set(W1, "Succeeded")
    sim.set(W2, "Succeeded")
    return sim


def test_a_stranded_member_of_a_gang_it_can_leave_is_placed_again_alone() -> None:
    sim = _stranded(separable=True)
    p = sim.step()
    assert _scheduled(p) == (
        "False",
        "GangIncomplete",
        f"Quorum tiny (3 pods at once) can never be placed: 1 live member(s), the others"
        f" ended; {W0} wait(s) for the rest of the gang",
    )
    sim.now += timedelta(seconds=GANG_INCOMPLETE_SECONDS)
    p = sim.step()
    assert [(d.kind, d.name) for d in p.delete] == [("Pod", W0)]
    p = sim.step()  # created again, out of the gang: `leave` took its label off
    [pod] = [o for o in p.create if o["kind"] == "Pod"]
    assert pod["metadata"]["name"] == W0
    assert LABEL not in pod["metadata"]["labels"]


def test_a_stranded_gang_none_can_leave_fails_the_job() -> None:
    sim = _stranded(separable=False)
    assert _scheduled(sim.step())[:2] == ("False", "GangIncomplete")
    sim.now += timedelta(seconds=GANG_INCOMPLETE_SECONDS)
    p = sim.step()
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "GangIncomplete"
    assert "its scheduler places none of them on its own" in failed.message


@pytest.mark.parametrize("labelled", [True, False])
def test_a_pod_that_names_no_gang_is_no_member(labelled: bool) -> None:
    """Membership is the format's: a live pod without the label does not make up the gang."""
    sim = _stranded(separable=True)
    for name in (W1, W2):
        _placed(sim, name)
    if not labelled:
        del sim.pod(W1)["metadata"]["labels"][LABEL]
    said = sim.step().status.condition("Scheduled")
    # 3 live members of 3: the scheduler's to place; 2 of 3: never
    assert (said is not None and said.reason == "GangIncomplete") == (not labelled)
