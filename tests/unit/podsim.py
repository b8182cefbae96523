"""Observed pods for planner tests: what the API server would hold after a plan was applied."""

from __future__ import annotations

import copy
from typing import Any

from t9kjobs.planner import Plan

__all__ = ["apply_plan", "set_phase"]

Obj = dict[str, Any]


def set_phase(pod: Obj, phase: str, exit_code: int | None = None) -> Obj:
    """A copy of `pod` in `phase`; terminated containers carry `exit_code`."""
    pod = copy.deepcopy(pod)
    pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    statuses = []
    for c in pod["spec"].get("containers") or []:
        if phase in ("Succeeded", "Failed"):
            code = 0 if phase == "Succeeded" else (exit_code if exit_code is not None else 1)
            state = {
                "terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
            }
        elif phase == "Running":
            state = {"running": {}}
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        statuses.append({"name": c["name"], "state": state})
    pod["status"] = {"phase": phase, "containerStatuses": statuses}
    return pod


def apply_plan(objects: dict[tuple[str, str], Obj], plan: Plan) -> dict[tuple[str, str], Obj]:
    """The children after `plan` was applied (deletions take effect at once)."""
    out = dict(objects)
    for ref in plan.delete:
        out.pop((ref.kind, ref.name), None)
    for obj in [*plan.update, *plan.create]:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out
