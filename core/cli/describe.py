"""`t9kjobs describe KIND/NAME`: what a job is doing and why it failed, in one screen.

The phase and how long the job has been in it; its elapsed time and training progress
(`t9kjobs.cli.progress`); its conditions; per replica type the desired, running, succeeded and
failed replicas and the restarts, with each failed or restarted replica's exit code, reason
and last log lines; the launch command each replica runs (and the hostfile of the kinds that
have one); what the cleanup policy did; the recent Events of the job and its pods. Text fits
80 columns; `-o json` gives the same facts for scripts.

Everything comes from the API server (`t9kjobs.cli.cluster`); the launch commands from the
pods themselves, or rebuilt by the job's plugin, as the operator built them, when a pod is gone.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
from datetime import UTC, datetime
from typing import Any

from t9kjobs.cli.cluster import (
    ClusterReader,
    JobRef,
    add_cluster_arguments,
    deciding_replica,
    event_time,
    replica_id,
    training_container,
)
from t9kjobs.cli.completion import complete_job
from t9kjobs.cli.progress import ANNOTATION_PROGRESS_PATTERN, find_progress
from t9kjobs.kube.transport import ApiError
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.objects import ANNOTATION_LAUNCH_COMMAND, Obj, find_container
from t9kjobs.planner.conditions import parse_time

__all__ = ["add_describe_parser", "describe", "render"]

WIDTH = 80
LOG_LINES = 5  # last log lines shown for a failed or restarted replica
EVENTS = 15  # most recent Events shown
PROGRESS_TAIL = 200  # log lines of the deciding replica searched for progress

# The condition whose lastTransitionTime says since when the job is in each phase.
_PHASE_CONDITION = {
    "Running": "Running",
    "Succeeded": "Completed",
    "Failed": "Failed",
    "Paused": "Paused",
}


def _age(seconds: float) -> str:
    """`45s`, `3m12s`, `2h5m`, `3d4h`: as kubectl shows ages."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def _since(stamp: str | None, now: datetime) -> float | None:
    if not stamp:
        return None
    return (now - parse_time(stamp)).total_seconds()


def _shown_command(argv: list[str]) -> str:
    """A command as a user reads it: a `sh -c SCRIPT` wrapper shows its script's last command
    (what it `exec`s: `deepspeed ...`, `colossalai run ...`, sshd); -o json has it all."""
    if len(argv) >= 3 and argv[-2] == "-c" and argv[0].endswith("sh"):
        lines = [ln.strip() for ln in argv[-1].splitlines()]
        commands = [ln for ln in lines if ln and not ln.startswith("#")]
        if commands:
            return commands[-1].removeprefix("exec ")
    return shlex.join(argv)


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
        self.pods = {p["metadata"]["name"]: p for p in reader.pods(ref)}
        self.desired = reader.desired_pods(self.raw)

    def _training_container(self, pod_name: str) -> str | None:
        return training_container(self.desired, pod_name, self.pods.get(pod_name))

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
            return [], f"no log: {exc}"
        except OSError as exc:
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
                if c.get("type") == condition and c.get("status") == "True"
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
            "created": meta.get("creationTimestamp"),
            "phase": phase,
            "inPhaseSeconds": _since(since or meta.get("creationTimestamp"), self.now),
            "runMode": self.status.get("runMode"),
            "startTime": start,
            "completionTime": end,
            "elapsedSeconds": elapsed,
        }

    def progress(self) -> dict[str, Any] | None:
        ids = [replica_id(self.ref.name, n) for n in self._replica_names()]
        deciding = deciding_replica(ids)
        if deciding is None or self.status.get("phase") != "Running":
            return None
        pod_name = f"{self.ref.name}-{deciding}"
        lines, _ = self._log_tail(pod_name, PROGRESS_TAIL)
        pattern = (self.raw["metadata"].get("annotations") or {}).get(ANNOTATION_PROGRESS_PATTERN)
        try:
            found = find_progress(lines, pattern)
        except ValueError as exc:
            return {"replica": deciding, "error": str(exc)}
        if found is None:
            return None
        return {
            "replica": deciding,
            "line": found.line,
            "done": found.done,
            "total": found.total,
            "percent": found.percent,
        }

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
        return names or sorted(self.desired) or sorted(self.pods)

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
            source = self.pods.get(name) or (
                self.desired[name].manifest if name in self.desired else None
            )
            if source is None:
                continue
            argv = _pod_command(source, self._training_container(name))
            if argv is not None:
                groups.setdefault(tuple(argv), []).append(replica_id(self.ref.name, name))
        return [{"replicas": ids, "command": list(argv)} for argv, ids in groups.items()]

    def hostfile(self) -> dict[str, Any] | None:
        for cm in self.reader.config_maps(self.ref):
            text = (cm.get("data") or {}).get("hostfile")
            if text is not None:
                return {"configMap": cm["metadata"]["name"], "text": text}
        return None

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
        uids = {self.raw["metadata"].get("uid")} | {
            p["metadata"].get("uid") for p in self.pods.values()
        }
        found = self.reader.events(self.ref.namespace, {u for u in uids if u})
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
        "progress": d.progress(),
        "conditions": d.conditions(),
        "replicas": d.replicas(),
        "launchCommands": d.launch_commands(),
        "hostfile": d.hostfile(),
        "cleanup": d.cleanup(),
        "events": d.events(),
    }


# -- text ------------------------------------------------------------------------------------


def _wrap(text: str, indent: str, first: str = "") -> list[str]:
    """`first` then `text`, wrapped to WIDTH, continuation lines at `indent`."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first or indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=True,
    ) or [first.rstrip()]


def _cut(line: str, indent: str) -> str:
    room = WIDTH - len(indent)
    line = line.replace("\t", "    ")
    return indent + (line if len(line) <= room else line[: room - 1] + "…")


def _ago(stamp: str | None, now: datetime) -> str:
    seconds = _since(stamp, now)
    return "-" if seconds is None else _age(seconds)


def _render_header(facts: dict[str, Any], now: datetime) -> list[str]:
    out = [
        f"Name:       {facts['name']}",
        f"Namespace:  {facts['namespace']}",
        f"Kind:       {facts['kind']}",
    ]
    in_phase = facts["inPhaseSeconds"]
    since = f" for {_age(in_phase)}" if in_phase is not None else ""
    mode = f" ({facts['runMode']} mode)" if facts.get("runMode") not in (None, "Immediate") else ""
    out.append(f"Phase:      {facts['phase']}{since}{mode}")
    out.append(f"Created:    {facts['created']} ({_ago(facts['created'], now)} ago)")
    if facts["startTime"]:
        elapsed = _age(facts["elapsedSeconds"] or 0)
        what = "ran" if facts["completionTime"] else "running"
        out.append(f"Started:    {facts['startTime']} ({what} {elapsed})")
    if facts["completionTime"]:
        out.append(f"Finished:   {facts['completionTime']}")
    progress = facts["progress"]
    if progress and progress.get("error"):
        out.append(f"Progress:   ({progress['error']})")
    elif progress:
        share = f"{progress['percent']:.0f}% " if progress.get("percent") is not None else ""
        out.append(_cut(f"{share}{progress['replica']}: {progress['line']}", "Progress:   "))
    return out


def _render_conditions(facts: dict[str, Any], now: datetime) -> list[str]:
    out = ["", "Conditions:"]
    if not facts["conditions"]:
        return [*out, "  (none yet: the operator has not seen the job)"]
    out.append(f"  {'TYPE':<15}{'STATUS':<8}{'REASON':<24}AGE")
    for c in facts["conditions"]:
        age = _ago(c["lastTransitionTime"], now)
        out.append(f"  {c['type']:<15}{c['status']:<8}{c['reason'] or '-':<24}{age}")
        if c["message"] and c["status"] == "True":
            out.extend(_wrap(c["message"], "      "))
    return out


def _render_replicas(facts: dict[str, Any]) -> list[str]:
    out = ["", "Replicas:", f"  {'TYPE':<16}{'DESIRED':>8}{'RUNNING':>8}{'SUCCEEDED':>10}"
           f"{'FAILED':>8}{'RESTARTS':>9}"]  # fmt: skip
    for r in facts["replicas"]:
        out.append(
            f"  {r['type']:<16}{r['desired']:>8}{r['running']:>8}{r['succeeded']:>10}"
            f"{r['failed']:>8}{r['restarts']:>9}"
        )
    for r in facts["replicas"]:
        for t in r["failedOrRestarted"]:
            code = f"exit code {t['exitCode']}" if t.get("exitCode") is not None else "no exit code"
            parts = [t["phase"], code]
            if t.get("reason"):
                parts.append(t["reason"])
            if t.get("container"):
                parts.append(f"container {t['container']}")
            if t["restarts"]:
                parts.append(f"{t['restarts']} restart(s)")
            out.append(f"  {t['replica']}: {', '.join(parts)}")
            if t.get("noLog"):
                out.append(f"    ({t['noLog']})")
            out.extend(_cut(line, "    | ") for line in t["lastLogLines"])
    return out


def _render_launch(facts: dict[str, Any]) -> list[str]:
    out = ["", "Launch commands:"]
    if not facts["launchCommands"]:
        out.append("  (none known: the containers run their images' entrypoints)")
    for group in facts["launchCommands"]:
        who = f"  {', '.join(group['replicas'])}: "
        out.extend(_wrap(_shown_command(group["command"]), "      ", who))
    hostfile = facts["hostfile"]
    if hostfile:
        out.append(f"Hostfile (ConfigMap {hostfile['configMap']}):")
        out.extend(_cut(line, "  ") for line in hostfile["text"].splitlines())
    return out


def _render_cleanup(facts: dict[str, Any]) -> list[str]:
    c = facts["cleanup"]
    policy = c["policy"] or "unknown (the spec does not validate)"
    keeps = f", keeping {', '.join(c['keeps'])}" if c["keeps"] else ""
    if not c["applied"]:
        return ["", f"Cleanup:    policy {policy}{keeps}; applies when the job finishes"]
    deleted = ", ".join(c["deletedReplicas"]) or "nothing"
    text = f"policy {policy}{keeps}; deleted {deleted}; {len(c['remainingPods'])} pod(s) left"
    return ["", *_wrap(text, "            ", "Cleanup:    ")]


def _render_events(facts: dict[str, Any], now: datetime) -> list[str]:
    out = ["", "Events:"]
    if not facts["events"]:
        return [*out, "  (none)"]
    for e in facts["events"]:
        times = f" (x{e['count']})" if e["count"] > 1 else ""
        head = f"  {_ago(e['time'], now):>6}  {e['type']:<8}{e['reason']}{times}  {e['object']}"
        out.append(_cut(head, ""))
        out.extend(_wrap(e["message"], "          "))
    return out


def render(facts: dict[str, Any], now: datetime | None = None) -> str:
    """The text of `describe`: every line at most WIDTH columns."""
    now = now or datetime.now(UTC)
    lines = [
        *_render_header(facts, now),
        *_render_conditions(facts, now),
        *_render_replicas(facts),
        *_render_launch(facts),
        *_render_cleanup(facts),
        *_render_events(facts, now),
    ]
    return "\n".join(lines) + "\n"


def _cmd_describe(args: argparse.Namespace, manager: PluginManager) -> int:
    reader, namespace = ClusterReader.connect(args, manager)
    ref = JobRef.parse(args.job, namespace, manager)
    facts = describe(reader, ref)
    if args.output == "json":
        print(json.dumps(facts, indent=2))
    else:
        sys.stdout.write(render(facts))
    return 0


def add_describe_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "describe",
        help="what a job is doing, why it failed: replicas, exit codes, logs, commands, events",
    )
    job = p.add_argument("job", metavar="KIND/NAME", help="e.g. gj/my-job, pytorchtrainingjob/x")
    job.completer = complete_job  # type: ignore[attr-defined]
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_arguments(p)
    p.set_defaults(func=_cmd_describe)
