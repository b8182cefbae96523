"""What the tests of the client's feedback (its bar, its rendering, its timeouts) share: a job as
the API server would hold it, and a reader that answers from a script instead of a cluster."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import yaml

from t9kjobs.kube.transport import ApiError
from tests.repo import REPO

EXAMPLE = REPO / "examples/genericjob/mlp-cpu.yaml"


def stored(status: dict[str, Any], name: str = "mlp", namespace: str = "team-a") -> dict[str, Any]:
    """The GenericJob example as the API server holds it, with `status`."""
    doc = dict(yaml.safe_load(EXAMPLE.read_text()))
    doc["metadata"] = {"name": name, "namespace": namespace, "uid": "job-uid"}
    doc["status"] = copy.deepcopy(status)
    return doc


class ScriptedReader:
    """A `ClusterReader` whose job is each of `statuses` in turn (the last one for ever after),
    with no Event and at most one pod (whose container never starts, unless it has a log): what the client sees of a job that never starts, or of one
    whose status a test writes."""

    def __init__(
        self,
        *statuses: dict[str, Any],
        pod: dict[str, Any] | None = None,
        log: list[str] | None = None,
    ) -> None:
        self.statuses = list(statuses)
        self.reads = 0
        self.the_pod = pod  # the one pod there is, whatever its name
        self.log = log  # its log's lines (timestamp, space, text); None: its container waits

    def job(self, ref: Any) -> dict[str, Any]:
        status = self.statuses[min(self.reads, len(self.statuses) - 1)]
        self.reads += 1
        return stored(status, ref.name, ref.namespace)

    def pods(self, ref: Any, uid: str) -> list[dict[str, Any]]:
        return []

    def pod(self, namespace: str, name: str, uid: str | None = None) -> dict[str, Any] | None:
        return self.the_pod

    def on_simulated_node(self, pod: dict[str, Any] | None) -> bool:
        return False

    def parsed(self, raw: dict[str, Any]) -> None:
        return None

    def job_events(self, raw: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    def log_lines(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        """The pod's log; the kubelet's answer for a container that has not started."""
        if self.log is None:
            raise ApiError(400, {"message": "container trainer is waiting to start"})
        return iter(self.log)
