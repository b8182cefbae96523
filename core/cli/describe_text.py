"""The text of `t9kjobs describe`: the facts of `t9kjobs.cli.describe_facts` in 80 columns.

Apart from the gathering so that the layout (column widths, wrapping, ages as kubectl shows
them, a shell wrapper shown as the command it runs) can be read, and tested, without a cluster:
`render` takes the facts as data.
"""

from __future__ import annotations

import shlex
import textwrap
from datetime import UTC, datetime
from typing import Any

from t9kjobs.client.describe import seconds_since
from t9kjobs.models import MANAGED_BY_MULTIKUEUE

__all__ = ["WIDTH", "render"]

WIDTH = 80


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


def _shown_command(argv: list[str]) -> str:
    """A command as a user reads it: a `sh -c SCRIPT` wrapper shows its script's last command
    (what it `exec`s: `deepspeed ...`, `colossalai run ...`, sshd); -o json has it all."""
    if len(argv) >= 3 and argv[-2] == "-c" and argv[0].endswith("sh"):
        lines = [ln.strip() for ln in argv[-1].splitlines()]
        commands = [ln for ln in lines if ln and not ln.startswith("#")]
        if commands:
            return commands[-1].removeprefix("exec ")
    return shlex.join(argv)


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
    seconds = seconds_since(stamp, now)
    return "-" if seconds is None else _age(seconds)


def _render_header(facts: dict[str, Any], now: datetime) -> list[str]:
    out = [
        f"Name:       {facts['name']}",
        f"Namespace:  {facts['namespace']}",
        f"Kind:       {facts['kind']}",
    ]
    manager = facts.get("managedBy")
    if manager:
        out += _wrap(_managed(manager), " " * 12, "Managed by: ")
    dispatch = facts.get("dispatch")
    if dispatch:
        out += _wrap(dispatch["message"], " " * 12, "Worker:     ")
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
    if facts["progress"]:
        out.append(_cut(progress_text(facts["progress"], now), "Progress:   "))
    return out


def _managed(manager: str) -> str:
    """What `spec.managedBy` means for this operator (`t9kjobs.planner.elsewhere`)."""
    if manager == MANAGED_BY_MULTIKUEUE:
        return (
            f"{manager}; this operator makes its Workload alone, and its status until"
            " MultiKueue dispatches it: the job runs on a worker cluster, and its status is"
            " then the worker's"
        )
    return f"{manager}; this operator does nothing with it"


def progress_text(progress: dict[str, Any], now: datetime) -> str:
    """`40% (step 120/300), about 3m left; loss=0.41 (master-0, 20s ago)`."""
    step, total = progress.get("step"), progress.get("totalSteps")
    steps = f"step {step}/{total}" if total is not None else f"step {step}"
    percent = progress.get("percent")
    text = f"{percent:g}% ({steps})" if percent is not None else steps
    left = progress.get("remainingSeconds")
    if left is not None:
        text += ", done" if left == 0 and percent == 100 else f", about {_age(left)} left"
    metrics = progress.get("metrics") or {}
    if metrics:
        text += "; " + " ".join(f"{k}={v:g}" for k, v in metrics.items())
    stamp = progress.get("lastUpdateTime")
    who = progress.get("replica") or "?"
    return text + (f" ({who}, {_ago(stamp, now)} ago)" if stamp else f" ({who})")


def _render_conditions(facts: dict[str, Any], now: datetime) -> list[str]:
    out = ["", "Conditions:"]
    if not facts["conditions"]:
        return [*out, "  (none yet: the operator has not seen the job)"]
    out.append(f"  {'TYPE':<15}{'STATUS':<8}{'REASON':<24}AGE")
    for c in facts["conditions"]:
        age = _ago(c["lastTransitionTime"], now)
        out.append(f"  {c['type']:<15}{c['status']:<8}{c['reason'] or '-':<24}{age}")
        if c["message"] and (c["status"] == "True" or (c["type"], c["status"]) in _SAID_FALSE):
            out.extend(_wrap(c["message"], "      "))
    return out


# Conditions whose message says what is wrong when they are False, not True: a gang that
# cannot be placed, a job that waits in a Kueue queue (docs/scheduling.md).
_SAID_FALSE = {("Scheduled", "False"), ("Admitted", "False")}


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


def _render_placement(facts: dict[str, Any]) -> list[str]:
    """Each pod Kueue placed by topology, by rank (nothing for a job placed otherwise)."""
    found = facts.get("placement") or []
    if not found:
        return []
    out = ["", "Placement (Kueue topology):", f"  {'RANK':<6}{'POD':<28}{'NODE':<20}DOMAIN"]
    for p in found:
        where = "(at Kueue's gate)" if p["gated"] else p["domain"] or "-"
        node = p["node"] or "-"
        out.append(_cut(f"  {p['rank'] or '-':<6}{p['pod']:<27.27} {node:<19.19} {where}", ""))
    return out


def _render_recoveries(facts: dict[str, Any], now: datetime) -> list[str]:
    """The newest restarts (`status.restartHistory`); nothing for a job that had none."""
    found = facts.get("recoveries") or []
    if not found:
        return []
    out = ["", "Recoveries:", f"  {'AGE':>6}  {'REPLICA':<12}{'ACTION':<15}{'REASON':<10}"
           f"{'RULE':<14}{'BUDGET':<7}{'TOOK':>5} {'LOST':>5}"]  # fmt: skip
    for r in found:
        took = "-" if r["recoverySeconds"] is None else _age(r["recoverySeconds"])
        lost = "-" if r["stepsLost"] is None else str(r["stepsLost"])
        budget = {"Infrastructure": "Infra"}.get(r["budget"], r["budget"] or "-")
        line = (
            f"  {_ago(r['time'], now):>6}  {r['replica']:<11.11} {r['action']:<14.14} "
            f"{r['reason']:<9.9} {r['rule'] or '-':<13.13} {budget:<6.6} {took:>5} {lost:>5}"
        )
        out.append(_cut(line, ""))
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
        *_render_placement(facts),
        *_render_recoveries(facts, now),
        *_render_launch(facts),
        *_render_cleanup(facts),
        *_render_events(facts, now),
    ]
    return "\n".join(lines) + "\n"
