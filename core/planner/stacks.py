"""The Python stacks of a Stalled job's ranks, kept in its ConfigMap `<job>-stacks`.

Why from the logs: every rank's `t9kjobs.progress.report()` re-arms
`faulthandler.dump_traceback_later(T9KJOBS_STALL_SECONDS)`, so a rank that stops reporting
dumps every thread's stack to its stderr, even one blocked in NCCL or gloo holding the GIL. No
privilege, no `pods/exec`, no signal: design 48 §4 says why not `py-spy` or SIGUSR1. The
operator only has to read what the ranks wrote before it stops them.

The order, one plan after the other (the planner stays pure: the logs are read by the progress
reader's thread and handed over as `Observed.stacks`):

1. The Stalled verdict (`t9kjobs.planner.stall`) with `stall.captureStacks`: the plan asks for
   the logs of the job's running pods (`Plan.capture_stacks`, `MAX_STACK_PODS` at most) and
   holds the action of the rule matching `Stalled`: a restart deletes the pods, and their
   logs with them.
2. The answer: the plan writes the ConfigMap (one key per pod: its last dump, or why there is
   none; `MAX_STACK_BYTES` a key, `MAX_STACKS_BYTES` in all), annotated with the time the job
   became Stalled, so a later stall writes it again.
3. The ConfigMap of this stall seen: the rule's action. Without an answer for
   `STACKS_WAIT_SECONDS` (the logs cannot be read), the action is taken anyway.

The ConfigMap is the job's child like its hostfile (owned, marked, kept until the job is
deleted); no pod template may name a ConfigMap ending in `-stacks`
(`t9kjobs.models.pod_refs`): it could only be another job's.

A pod's log is the tenant's text: `last_dump` reads it with RE2 (`t9kjobs.progress.linear`),
as the progress lines are read, so a line made to be slow to match (64 KiB of one, at most)
costs time linear in its length, and the progress reader's thread lets the GIL go meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from t9kjobs.models import Job, JobStatus
from t9kjobs.models.recovery import StallDetection
from t9kjobs.objects import DesiredPod, config_map, replica_id
from t9kjobs.planner.conditions import parse_time, rfc3339
from t9kjobs.planner.stall import Stall
from t9kjobs.planner.types import Observed, ProgressSource, Stacks
from t9kjobs.progress import linear
from t9kjobs.vocabulary import Obj

__all__ = [
    "ANNOTATION_STALLED_AT",
    "MAX_STACKS_BYTES",
    "MAX_STACK_BYTES",
    "MAX_STACK_PODS",
    "STACKS_SUFFIX",
    "STACKS_WAIT_SECONDS",
    "StackCapture",
    "capture",
    "last_dump",
    "stacks_config_map",
    "stacks_name",
]

STACKS_SUFFIX = "-stacks"
# How long a rule's action waits for the stacks before it is taken without them.
STACKS_WAIT_SECONDS = 60.0
# The pods whose logs one stall reads, and what the ConfigMap keeps: a key (a pod), in all
# (a ConfigMap holds 1 MiB at most; the operator's cache holds it too).
MAX_STACK_PODS = 32
MAX_STACK_BYTES = 64 * 1024
MAX_STACKS_BYTES = 512 * 1024
# Kept for the notes of the pods past the bound (`MAX_STACK_PODS` short lines).
_NOTE_ROOM = 4096
# When the job became Stalled (the condition's lastTransitionTime): which stall the stacks are of.
ANNOTATION_STALLED_AT = "batch.tensorstack.dev/stalled-at"

# faulthandler's dump: `Timeout (0:10:00)!`, then per thread a header and its frames, threads
# separated by a blank line. A launcher's log carries remote ranks' stderr behind a prefix
# (pdsh's `worker-0: `): the text before `Timeout` is the block's prefix. RE2's syntax (its `\d`
# and `\s` are ASCII's, as faulthandler writes), compiled by `linear` on first use.
_TIMEOUT = r"Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!\s*$"
_THREAD = r"(?:Current thread|Thread) 0x[0-9a-fA-F]+\b"
_BLOCK_LINE = rf"{_THREAD}|  (?:File \"|<|\.\.\.)|\s*$"


def stacks_name(job_name: str) -> str:
    return f"{job_name}{STACKS_SUFFIX}"


def last_dump(text: str, limit: int = MAX_STACK_BYTES) -> str | None:
    """The last faulthandler dump of a log, of each prefix (each remote rank of a launcher's
    log), in the order they end; None when there is none. Cut to `limit` bytes."""
    timeout, thread, block_line = linear(_TIMEOUT), linear(_THREAD), linear(_BLOCK_LINE)
    lines = text.splitlines()
    blocks: dict[str, tuple[int, list[str]]] = {}
    for i, line in enumerate(lines):
        found = timeout.search(line)
        if found is None:
            continue
        prefix = line[: found.start()]
        block = [line]
        for later in lines[i + 1 :]:
            if not later.startswith(prefix):
                continue  # another rank's line, interleaved
            if block_line.match(later, len(prefix)) is None:
                break
            block.append(later)
        while block and not block[-1][len(prefix) :].strip():
            block.pop()
        if any(thread.match(b, len(prefix)) for b in block[1:]):
            blocks.pop(prefix, None)
            blocks[prefix] = (i, block)
    if not blocks:
        return None
    return _cut("\n".join("\n".join(b) for _, b in blocks.values()) + "\n", limit)


def _cut(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes: its first whole lines (the dump's first thread
    is the one that hung), and a line saying it was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    note = f"... cut at {limit} bytes\n"
    kept = data[: limit - len(note.encode())].decode(errors="ignore")
    return kept[: kept.rfind("\n") + 1] + note


def stacks_config_map(job: Job, stacks: Stacks, stalled_at: str) -> Obj:
    """The ConfigMap `<job>-stacks`: each pod's dump (or why none), in the bounds."""
    data: dict[str, str] = {}
    left = MAX_STACKS_BYTES
    for pod, text in sorted(stacks.dumps.items())[:MAX_STACK_PODS]:
        if left - _NOTE_ROOM < 1024:  # no room left for a dump worth reading
            value = f"not kept: the ConfigMap holds {MAX_STACKS_BYTES} bytes at most\n"
        else:
            value = _cut(text, min(MAX_STACK_BYTES, left - _NOTE_ROOM))
        data[pod] = value
        left -= len(value.encode())
    obj = config_map(job, stacks_name(job.name), data)
    obj["metadata"]["annotations"] = {ANNOTATION_STALLED_AT: stalled_at}
    return obj


@dataclass(frozen=True)
class StackCapture:
    """What a plan does about the stacks: `ask` the logs of these pods; keep or write the
    ConfigMap `config_map` (a wanted child: None, the job has none); `hold` the action of the
    rule matching `Stalled`, and look again within `requeue` seconds."""

    ask: tuple[ProgressSource, ...] = ()
    config_map: Obj | None = None
    hold: bool = False
    requeue: float | None = None


def _wanted(stall: object) -> bool:
    return isinstance(stall, StallDetection) and stall.enabled and stall.capture_stacks


def capture(
    job: Job,
    before: JobStatus,
    verdict: Stall | None,
    observed: Observed,
    pods: tuple[DesiredPod, ...] | list[DesiredPod],
    pods_by_name: Mapping[str, Obj],
    now: datetime,
) -> StackCapture:
    """This plan's step of the order of the module docstring. `before`: the status as
    stored (when the job became Stalled); `pods`: the pods the job wants, `pods_by_name` the
    ones it has."""
    name = stacks_name(job.name)
    existing = observed.get("ConfigMap", name)
    recovery = getattr(job.spec, "recovery_policy", None)
    if verdict is None or not _wanted(getattr(recovery, "stall", None)):
        return StackCapture(config_map=existing)
    if ("ConfigMap", name) in observed.conflicts:
        return StackCapture()  # another's object holds the name: no stacks, no wait
    condition = before.condition("Stalled")
    stalled = condition is not None and condition.status == "True"
    since = (
        parse_time(condition.last_transition_time)
        if stalled and condition is not None and condition.last_transition_time
        else now
    )
    stalled_at = rfc3339(since)
    annotations = (existing or {}).get("metadata", {}).get("annotations") or {}
    if existing is not None and annotations.get(ANNOTATION_STALLED_AT) == stalled_at:
        return StackCapture(config_map=existing)  # kept: the action goes ahead
    answer = observed.stacks
    if answer is not None and answer.taken_at >= since.replace(microsecond=0):
        return StackCapture(
            config_map=stacks_config_map(job, answer, stalled_at), hold=True, requeue=1.0
        )
    waited = (now - since).total_seconds()
    hold = waited < STACKS_WAIT_SECONDS
    return StackCapture(
        ask=_sources(job.name, pods, pods_by_name),
        config_map=existing,
        hold=hold,
        requeue=max(1.0, STACKS_WAIT_SECONDS - waited) if hold else None,
    )


def _sources(
    job_name: str, pods: tuple[DesiredPod, ...] | list[DesiredPod], pods_by_name: Mapping[str, Obj]
) -> tuple[ProgressSource, ...]:
    """The training containers of the job's running pods, `MAX_STACK_PODS` at most."""
    found: list[ProgressSource] = []
    for desired in sorted(pods, key=lambda d: d.name):
        pod = pods_by_name.get(desired.name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") != "Running" or not pod["metadata"].get("uid"):
            continue
        uid = str(pod["metadata"]["uid"])
        replica = replica_id(job_name, desired.name)
        found.append(ProgressSource(desired.name, uid, desired.training_container, replica))
    return tuple(found[:MAX_STACK_PODS])
