"""What the planner's steps share about a job's children, so that no step imports another's
helpers: a pod's state, how a child is deleted, and whether an object holds what was wanted.
"""

from __future__ import annotations

from typing import Any

from t9kjobs.planner.types import ObjectRef
from t9kjobs.vocabulary import Obj

__all__ = ["deletion", "pod_state", "subset"]


def pod_state(pod: Obj | None) -> str:
    if pod is None:
        return "Creating"
    if pod["metadata"].get("deletionTimestamp"):
        return "Deleted"
    return str((pod.get("status") or {}).get("phase") or "Pending")


def deletion(obj: Obj, *, force: str | None = None) -> ObjectRef:
    """How to delete a child: by its uid, and at once for a pod whose containers all exited
    or, `force` (why), for one whose node is lost (`t9kjobs.planner.nodes`: no kubelet will
    stop it, so a graceful deletion would never end)."""
    meta = obj["metadata"]
    pod = obj["kind"] == "Pod"
    exited = pod and (force is not None or pod_state(obj) in ("Succeeded", "Failed"))
    return ObjectRef(
        str(obj.get("apiVersion", "v1")),
        str(obj["kind"]),
        meta["name"],
        meta.get("uid"),
        0 if exited else None,
        force if pod else None,
    )


def subset(want: Any, have: Any) -> bool:
    """Whether `have` holds everything of `want` (the API server adds defaults to what the
    operator wrote: those do not make a difference)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)
