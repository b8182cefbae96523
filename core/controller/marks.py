"""Children the operator made itself: a mark that only it can write.

A controller ownerReference is no proof of anything: whoever may create a Secret (or a pod)
in a namespace may write one that names a job's uid as its controller. A job that has not
made its Secret yet (queued by Kueue, paused) would have taken such a Secret, planted under
its name, for its own and mounted it in every worker: root ssh into another user's workers.

So every object the operator writes for a job carries an annotation `ANNOTATION_MARK`: an
HMAC-SHA256, under a key only the operator holds, of the object's kind, namespace and name,
the uid of the job it belongs to and, for a pod, its incarnation (the restart it replaces
for; `ANNOTATION_INCARNATION`). A child counts as the job's own only when its mark is the one
the operator would write (`Marks.owner`); anything else under a child's name is a conflict,
as an object of another job is (`t9kjobs.controller.ownership`). The key never leaves the
operator's namespace: a Secret `KEY_SECRET` there, made by the first replica that starts
(each replica reads the same one, so a failover trusts what the previous leader made).

Why a mark and not a list of the uids the operator created: a list must be written where
users cannot (the job's status), one write a child more; the mark costs nothing but an
annotation and a hash of a few bytes on each cache update. Why not the key fingerprints of
the SSH Secret: the operator never reads a Secret's data (threat 8), and pods, ConfigMaps and
Services need the same proof.

Objects made before the key existed (by an operator of an earlier version) carry no mark:
one created before the key Secret was is trusted on its ownerReference as before, since its
creationTimestamp is the API server's, which no user can write. A mark copied from an object
the operator made proves only that same object's name for that same job and incarnation:
docs/security.md, "Not stopped", says what that leaves.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from datetime import datetime

from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.kube.transport import ApiError, Transport
from t9kjobs.objects import ANNOTATION_INCARNATION
from t9kjobs.planner.conditions import parse_time
from t9kjobs.vocabulary import Obj

__all__ = ["ANNOTATION_MARK", "KEY_SECRET", "Marks", "load_marks"]

log = logging.getLogger("t9kjobs.operator")

ANNOTATION_MARK = "batch.tensorstack.dev/made-by"
KEY_SECRET = "t9k-jobs-ownership-key"
_KEY_FIELD = "key"


def _claimed(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


class Marks:
    """Marks objects for the job that controls them, and tells which marks are true."""

    def __init__(self, key: bytes, since: datetime | None = None) -> None:
        """`key`: the secret of the marks; `since`: when it was made (objects created before
        then carry no mark and are trusted on their ownerReference)."""
        self._key = key
        self._since = since

    def _mark(self, obj: Obj, uid: str) -> str:
        meta = obj["metadata"]
        incarnation = (meta.get("annotations") or {}).get(ANNOTATION_INCARNATION, "")
        fields = (obj.get("kind", ""), meta.get("namespace", ""), meta["name"], uid, incarnation)
        digest = hmac.new(self._key, "\0".join(fields).encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def mark(self, obj: Obj, namespace: str) -> Obj:
        """`obj` (to be written into `namespace`) with its mark; unchanged without a
        controller."""
        uid = _claimed(obj)
        if uid is None:
            return obj
        meta = {**obj["metadata"], "namespace": namespace}
        value = self._mark({**obj, "metadata": meta}, uid)
        annotations = {**(obj["metadata"].get("annotations") or {}), ANNOTATION_MARK: value}
        return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}

    def owner(self, obj: Obj) -> str | None:
        """The uid of the job `obj` belongs to: its controller's, when the operator made it
        for that job (its mark is true, or it predates the key); None otherwise."""
        uid = _claimed(obj)
        if uid is None:
            return None
        meta = obj["metadata"]
        given = (meta.get("annotations") or {}).get(ANNOTATION_MARK)
        if given is None:
            return uid if self._predates(meta.get("creationTimestamp")) else None
        return uid if hmac.compare_digest(str(given), self._mark(obj, uid)) else None

    def _predates(self, created: object) -> bool:
        if self._since is None or not isinstance(created, str):
            return False
        try:
            return parse_time(created) < self._since
        except ValueError:
            return False


def load_marks(api: Transport, namespace: str) -> Marks:
    """The operator's marks, with the key of the Secret `KEY_SECRET` in `namespace`: made
    there when missing (by whichever replica comes first; the others read it)."""
    path = CHILD_RESOURCES["Secret"].path(namespace, KEY_SECRET)
    for _ in range(3):
        try:
            found = api.request("GET", path)
        except ApiError as exc:
            if exc.status != 404:
                raise
        else:
            return _from_secret(found)
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": KEY_SECRET,
                "labels": {"app.kubernetes.io/part-of": "t9k-jobs"},
                "annotations": {
                    "batch.tensorstack.dev/purpose": (
                        "the key of the marks on what the t9k-jobs operator creates "
                        "(docs/security.md); a new one trusts what was made before it unmarked"
                    )
                },
            },
            "type": "Opaque",
            "data": {_KEY_FIELD: base64.b64encode(secrets.token_bytes(32)).decode()},
        }
        try:
            made = api.request("POST", CHILD_RESOURCES["Secret"].path(namespace), body=body)
        except ApiError as exc:
            if exc.status != 409:  # another replica made it first: read theirs
                raise
            continue
        log.info("made the ownership key %s/%s", namespace, KEY_SECRET)
        return _from_secret(made)
    raise RuntimeError(f"the ownership key {namespace}/{KEY_SECRET} could not be read or made")


def _from_secret(secret: Obj) -> Marks:
    raw = (secret.get("data") or {}).get(_KEY_FIELD)
    if not raw:
        raise RuntimeError(f"the Secret {KEY_SECRET} has no {_KEY_FIELD!r}")
    key = base64.b64decode(raw)
    if len(key) < 16:
        raise RuntimeError(f"the Secret {KEY_SECRET}: its {_KEY_FIELD!r} is under 16 bytes")
    created = secret["metadata"].get("creationTimestamp")
    return Marks(key, parse_time(created) if isinstance(created, str) else None)
