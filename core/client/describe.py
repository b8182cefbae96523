"""The facts `t9kjobs describe` shows (and `Client.describe` returns), gathered from the API
server, as JSON-ready data.

Kept apart from their text (`t9kjobs.cli.describe_text`) so that `-o json`, the client and the
80-column text say the same things: this module reads the job, its pods, their logs,
ConfigMaps and Events (`t9kjobs.client.reader`), and the launch commands from the pods
themselves or, when a pod is gone, as the job's plugin builds them; it formats nothing. The
training progress is the job's `status.progress`, which the operator reads from the deciding
replica's log (`t9kjobs.progress`).
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import Any

from t9kjobs.client.dispatch import NotDispatchedYet, NotHere, dispatched_to
from t9kjobs.client.reader import (
    UNREACHABLE,
    ClusterReader,
    JobRef,
    event_time,
    training_container,
    uid_of,
)
from t9kjobs.kube.transport import ApiError
from t9kjobs.models import Job, manager_of
from t9kjobs.objects import ANNOTATION_LAUNCH_COMMAND, DesiredPod, Obj, find_container, replica_id
from t9kjobs.planner.conditions import parse_time
from t9kjobs.planner.topology import ANNOTATION_WORKLOAD, GATE, LABEL_PODSET, LABEL_RANK, domain_of

__all__ = ["EVENTS", "LOG_LINES", "RECOVERIES", "describe", "seconds_since"]

LOG_LINES = 5  # last log lines shown for a failed or restarted replica
RECOVERIES = 5  # newest restarts shown (status.restartHistory)
EVENTS = 15  # most recent Events shown

# The condition (and its status) whose lastTransitionTime says since when the job is in each
# phase: a job Kueue evicted is Queued since its Admitted condition turned False, not since it
# was created.
_PHASE_CONDITION = {
    "Running": ("Running", "True"),
    "Succeeded": ("Completed", "True"),
    "Failed": ("Failed", "True"),
    "Paused": ("Paused", "True"),
    "Queued": ("Admitted", "False"),
}


def seconds_since(stamp: str | None, now: datetime) -> float | None:
    """Seconds from the API server time `stamp` to `now`; None without a stamp."""
    if not stamp:
        return None
    return (now - parse_time(stamp)).total_seconds()


def _pod_command(pod: Obj, container: str | None) -> list[str] | None:
    annotations = pod["metadata"].get("annotations") or {}
    if ANNOTATION_LAUNCH_COMMAND in annotations:  # debug mode: what it would run
        return shlex.split(annotations[ANNOTATION_LAUNCH_COMMAND])
    found = find_container(pod, container)
    if found is None or not found.get("command"):
        return None
    return [str(a) for a in [*found["command"], *(found.get("args") or [])]]


def _terminated(pod: Obj | None, container: str | None) -> dict[str, Any]:
    """Exit code and reason of the pod's container (the training one when it ended)."""
    if pod is None:
        return {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ordered = sorted(statuses, key=lambda cs: cs.get("name") != container)
    for cs in ordered:
        state = cs.get("state") or {}
        done = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if done:
            return {
                "container": cs.get("name"),
                "exitCode": done.get("exitCode"),
                "reason": done.get("reason"),
            }
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "ContainerCreating"):
            return {"container": cs.get("name"), "reason": waiting.get("reason")}
    return {}


class _Describer:
    def __init__(self, reader: ClusterReader, ref: JobRef, now: datetime) -> None:
        self.reader = reader
        self.ref = ref
        self.now = now
        self.raw = reader.job(ref)
        self.status: Obj = self.raw.get("status") or {}
        self.job: Job | None = reader.parsed(self.raw)
        self.uid = uid_of(self.raw)
        self.pods = {p["metadata"]["name"]: p for p in reader.pods(ref, self.uid)}
        self.built: dict[str, DesiredPod] | None = None

    def _training_container(self, pod_name: str) -> str | None:
        pod = self.pods.get(pod_name)
        return training_container(pod) if pod is not None else None

    def _log_tail(self, pod_name: str, lines: int) -> tuple[list[str], str | None]:
        """The last lines of the pod's training container, or why there are none."""
        if pod_name not in self.pods:
            return [], "the pod is gone, and its log with it"
        try:
            got = self.reader.log_lines(
                self.ref.namespace, pod_name, self._training_container(pod_name), tail=lines
            )
            return [line.partition(" ")[2] for line in got], None
        except ApiError as exc:
            if self.reader.on_simulated_node(self.pods[pod_name]):
                return [], "no log: the pod runs on a simulated (KWOK) node, which keeps no logs"
            return [], f"no log: {exc}"
        except UNREACHABLE as exc:
            return [], f"no log: {exc}"

    # -- the parts -----------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        meta = self.raw["metadata"]
        phase = self.status.get("phase") or "Pending"
        condition = _PHASE_CONDITION.get(phase)
        since = next(
            (
                c.get("lastTransitionTime")
                for c in self.status.get("conditions") or []
                if (c.get("type"), c.get("status")) == condition
            ),
            None,
        )
        start, end = self.status.get("startTime"), self.status.get("completionTime")
        elapsed = None
        if start:
            stop = parse_time(end) if end else self.now
            elapsed = (stop - parse_time(start)).total_seconds()
        return {
            "kind": self.ref.info.kind,
            "name": self.ref.name,
            "namespace": self.ref.namespace,
            # Another controller's job (spec.managedBy): None when it is this operator's.
            "managedBy": manager_of(self.raw.get("spec") or {}),
            "created": meta.get("creationTimestamp"),
            "phase": phase,
            "inPhaseSeconds": seconds_since(since or meta.get("creationTimestamp"), self.now),
            "runMode": self.status.get("runMode"),
            "startTime": start,
            "completionTime": end,
            "elapsedSeconds": elapsed,
        }

    def dispatch(self) -> dict[str, Any] | None:
        """Where MultiKueue runs the job (`t9kjobs.client.dispatch`): its worker cluster, the
        manager Workload's `status.clusterName`, or why there is none yet; None for a job
        MultiKueue does not manage."""
        try:
            cluster = dispatched_to(self.reader, self.ref, self.raw)
        except NotDispatchedYet as exc:
            return {"workerCluster": None, "message": f"not dispatched yet: {exc}"}
        except NotHere as exc:
            return {"workerCluster": None, "message": str(exc)}
        if cluster is None:
            return None
        return {
            "workerCluster": cluster,
            "message": f"{cluster} (dispatched by MultiKueue: its pods, logs and Events are there)",
        }

    def progress(self) -> dict[str, Any] | None:
        progress = self.status.get("progress")
        return dict(progress) if isinstance(progress, dict) and progress else None

    def recoveries(self) -> list[dict[str, Any]]:
        """The newest restarts the engine performed (`status.restartHistory`), with the time
        each took to recover (None while it is under way)."""
        out = []
        for e in (self.status.get("restartHistory") or [])[-RECOVERIES:]:
            began, recovered = e.get("failureTime") or e.get("time"), e.get("recoveredTime")
            took = None
            if began and recovered:
                took = (parse_time(recovered) - parse_time(began)).total_seconds()
            out.append(
                {
                    "time": e.get("time"),
                    "replica": replica_id(self.ref.name, str(e.get("replica") or "")),
                    "action": e.get("action"),
                    "reason": e.get("reason"),
                    "exitCode": e.get("exitCode"),
                    "node": e.get("node"),
                    "rule": e.get("rule"),
                    "budget": e.get("budget"),
                    "recoverySeconds": took,
                    "stepsLost": e.get("stepsLost"),
                    "message": e.get("message"),
                }
            )
        return out

    def conditions(self) -> list[dict[str, Any]]:
        return [
            {
                "type": c.get("type"),
                "status": c.get("status"),
                "reason": c.get("reason"),
                "message": c.get("message"),
                "lastTransitionTime": c.get("lastTransitionTime"),
            }
            for c in self.status.get("conditions") or []
        ]

    def _replica_names(self) -> list[str]:
        names = [r["name"] for t in self.status.get("tasks") or [] for r in t.get("replicas") or []]
        return names or sorted(self.pods) or sorted(self._built())

    def replicas(self) -> list[dict[str, Any]]:
        out = []
        for task in self.status.get("tasks") or []:
            replicas = task.get("replicas") or []
            phases = [r.get("phase") for r in replicas]
            troubled = []
            for r in replicas:
                restarts = int(r.get("restartCount") or 0)
                if r.get("phase") != "Failed" and not restarts:
                    continue
                name = r["name"]
                container = self._training_container(name)
                ended = _terminated(self.pods.get(name), container)
                if not ended:
                    ended = next(
                        (
                            {"container": c["name"], "exitCode": c["exitCode"]}
                            | {"reason": c.get("reason")}
                            for c in r.get("containers") or []
                            if c.get("exitCode") is not None
                        ),
                        {},
                    )
                lines, why = self._log_tail(name, LOG_LINES)
                troubled.append(
                    {
                        "replica": replica_id(self.ref.name, name),
                        "pod": name,
                        "phase": r.get("phase"),
                        "restarts": restarts,
                        **ended,
                        "lastLogLines": lines,
                        **({"noLog": why} if why else {}),
                    }
                )
            out.append(
                {
                    "type": task.get("type"),
                    "desired": len(replicas),
                    "running": phases.count("Running"),
                    "succeeded": phases.count("Succeeded"),
                    "failed": phases.count("Failed"),
                    "restarts": int(task.get("restartCount") or 0),
                    "failedOrRestarted": troubled,
                }
            )
        return out

    def launch_commands(self) -> list[dict[str, Any]]:
        """Each distinct command, with the replicas that run it (the live pod's, else the one
        the plugin builds)."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for name in self._replica_names():
            pod = self.pods.get(name)
            built = self._built().get(name) if pod is None else None
            if pod is not None:
                argv = _pod_command(pod, training_container(pod))
            elif built is not None:
                argv = _pod_command(built.manifest, built.training_container)
            else:
                continue
            if argv is not None:
                groups.setdefault(tuple(argv), []).append(replica_id(self.ref.name, name))
        return [{"replicas": ids, "command": list(argv)} for argv, ids in groups.items()]

    def _built(self) -> dict[str, DesiredPod]:
        """What the plugin builds, asked only for a replica without a pod, once."""
        if self.built is None:
            self.built = self.reader.built_pods(self.raw)
        return self.built

    def hostfile(self) -> dict[str, Any] | None:
        for cm in self.reader.config_maps(self.ref, self.uid):
            text = (cm.get("data") or {}).get("hostfile")
            if text is not None:
                return {"configMap": cm["metadata"]["name"], "text": text}
        return None

    def placement(self) -> list[dict[str, Any]]:
        """Where Kueue's Topology-Aware Scheduling put each pod it placed (docs/scheduling.md,
        "Topology-aware placement"), by rank: its node and its domain (the Topology's level
        values, `/`-joined), or that it still waits at Kueue's gate."""
        placed = [
            p
            for p in self.pods.values()
            if ANNOTATION_WORKLOAD in (p["metadata"].get("annotations") or {})
        ]
        if not placed:
            return []
        workload = placed[0]["metadata"]["annotations"][ANNOTATION_WORKLOAD]
        levels = self.reader.topology_levels(self.ref.namespace, workload)

        def rank(pod: Obj) -> tuple[int, str]:
            said = (pod["metadata"].get("labels") or {}).get(LABEL_RANK, "")
            return (int(said) if said.isdigit() else -1, pod["metadata"]["name"])

        out = []
        for pod in sorted(placed, key=rank):
            labels = pod["metadata"].get("labels") or {}
            gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or []]
            node = pod["spec"].get("nodeName")
            of_set = levels.get(labels.get(LABEL_PODSET, ""), [])
            # The node's own labels name every level; the pod's node selector, where the node
            # cannot be read, those Kueue's ungater wrote (the hostname alone, often).
            node_labels = self.reader.node_labels(node) if node and of_set else None
            if node_labels is not None and all(level in node_labels for level in of_set):
                domain: str | None = "/".join(node_labels[level] for level in of_set)
            else:
                domain = domain_of(pod, of_set)
            out.append(
                {
                    "pod": pod["metadata"]["name"],
                    "rank": labels.get(LABEL_RANK),
                    "node": node,
                    "domain": domain,
                    "gated": GATE in gates,
                }
            )
        return out

    def cleanup(self) -> dict[str, Any]:
        policy = keeps = None
        if self.job is not None:
            life = self.job.spec.lifecycle()
            policy, keeps = life.clean_up_policy, sorted(life.clean_up_keeps)
        finished = self.status.get("phase") in ("Succeeded", "Failed")
        # A finished job's replicas keep the phase they ended in (Deleted only for those the
        # cleanup stopped while they ran): the cleanup's work is the pods that are gone.
        deleted = [
            replica_id(self.ref.name, r["name"])
            for t in self.status.get("tasks") or []
            for r in t.get("replicas") or []
            if finished and r["name"] not in self.pods
        ]
        return {
            "policy": policy,
            "keeps": keeps or [],
            "applied": finished,
            "deletedReplicas": deleted,
            "remainingPods": sorted(self.pods),
        }

    def events(self) -> list[dict[str, Any]]:
        found = self.reader.job_events(self.raw, list(self.pods.values()))
        return [
            {
                "time": event_time(e),
                "type": e.get("type"),
                "reason": e.get("reason"),
                "object": f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}",
                "message": (e.get("message") or "").strip(),
                "count": e.get("count") or 1,
            }
            for e in found[-EVENTS:]
        ]


def describe(reader: ClusterReader, ref: JobRef, now: datetime | None = None) -> dict[str, Any]:
    """Every fact `describe` shows, as JSON-ready data."""
    d = _Describer(reader, ref, now or datetime.now(UTC))
    return {
        **d.header(),
        "dispatch": d.dispatch(),
        "progress": d.progress(),
        "conditions": d.conditions(),
        "replicas": d.replicas(),
        "placement": d.placement(),
        "recoveries": d.recoveries(),
        "launchCommands": d.launch_commands(),
        "hostfile": d.hostfile(),
        "cleanup": d.cleanup(),
        "events": d.events(),
    }
