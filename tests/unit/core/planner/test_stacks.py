"""A Stalled job's stacks (`t9kjobs.planner.stacks`, docs/lifecycle.md "Hung jobs"): the last
faulthandler dump of a log, the ConfigMap's bounds, and the order: the plan asks for the
stacks, writes them into `<job>-stacks`, and only then takes the rule's action, or takes it
without them 60 s after the job became Stalled."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from t9kjobs.loading import parse_job
from t9kjobs.planner import ProgressSource, Reading, Stacks
from t9kjobs.planner.stacks import (
    ANNOTATION_STALLED_AT,
    MAX_STACK_BYTES,
    MAX_STACKS_BYTES,
    last_dump,
    stacks_config_map,
)
from t9kjobs.progress import Report
from tests.unit.conftest import NOW
from tests.unit.core.planner.sim import ReadSim
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager

W0 = "tiny-worker-0"
CM = ("ConfigMap", "tiny-stacks")

DUMP = """Timeout (0:00:20)!
Thread 0x00007f1 (most recent call first):
  File "/app/mlp.py", line 88 in hang
  File "/app/mlp.py", line 120 in main

Thread 0x00007f2 (most recent call first):
  <no Python frame>
"""


def test_the_last_dump_of_a_log_is_kept_and_nothing_around_it() -> None:
    older = DUMP.replace("line 88", "line 11")
    log = f"step 1\n{older}step 2\nT9KJOBS_PROGRESS step=40\n{DUMP}[rank0] after\n"
    assert last_dump(log) == DUMP
    assert last_dump("step 1\nstep 2\n") is None
    assert last_dump("Timeout (0:00:20)!\nnot a thread\n") is None  # no thread: no dump


def test_a_launchers_log_keeps_the_last_dump_of_each_remote_rank() -> None:
    """pdsh prefixes each worker's lines with its host, and their lines interleave."""
    w0 = [f"worker-0: {line}" for line in DUMP.splitlines()]
    w1 = [f"worker-1: {line}" for line in DUMP.replace("0x00007f1", "0x00007f9").splitlines()]
    mixed = [line for pair in zip(w0, w1, strict=True) for line in pair]
    found = last_dump("\n".join(["launcher: started", *mixed, "worker-0: done?"]))
    assert found is not None
    assert found.splitlines() == [*w0[:-1], *w0[-1:], *w1]
    assert "worker-0: done?" not in found


@pytest.mark.parametrize(
    "hostile",
    [
        "Timeout (" + "0" * 65536,  # a header whose numbers never end
        "Timeout (0:00:20)!" + " " * 65536 + "x",  # its end, far away, not an end
        "Timeout (0:00:20)!" * 3640,  # a header again and again: one prefix, 64 KiB long
        "Thread 0x" + "f" * 65536 + "_",  # a thread whose address never ends in a word's end
        "  File " + "<" * 65536,
        " " * 65536,
    ],
    ids=["digits", "spaces", "headers", "address", "frame", "blank"],
)
def test_a_hostile_line_of_64_kib_costs_a_linear_read(hostile: str) -> None:
    """A pod's log is the tenant's: lines of 64 KiB (`STACK_LIMIT_BYTES`) made to be slow to
    match are read by RE2 (`t9kjobs.progress.linear`), in time linear in their length, and the
    dump around them is still found as it is."""
    assert last_dump(hostile) is None
    assert last_dump(f"{hostile}\n{DUMP}") == DUMP
    assert last_dump(f"{DUMP}{hostile}\n") == DUMP


def test_only_the_digits_faulthandler_writes_make_a_header() -> None:
    """RE2's `\\d` is ASCII's (Python's `re` took any Unicode digit): a header in other
    digits is no faulthandler dump."""
    arabic = DUMP.replace("0:00:20", "\u0660:\u0660\u0660:\u0662\u0660")
    assert last_dump(arabic) is None
    assert last_dump(DUMP) == DUMP


def test_a_dump_is_cut_to_its_bound_at_a_line() -> None:
    frames = "".join(f'  File "/app/deep.py", line {i} in f{i}\n' for i in range(5000))
    found = last_dump(f"Timeout (1:00:00)!\nThread 0x1 (most recent call first):\n{frames}")
    assert found is not None
    assert len(found.encode()) <= MAX_STACK_BYTES
    assert found.startswith("Timeout (1:00:00)!\nThread 0x1")
    assert found.endswith(f"... cut at {MAX_STACK_BYTES} bytes\n")


def test_the_config_map_is_the_jobs_own_and_bounded() -> None:
    job = parse_job(tiny_job(replicas=1), tiny_manager())
    big = ("x" * 99 + "\n") * (2 * MAX_STACK_BYTES // 100)
    dumps = {f"tiny-worker-{i}": big for i in range(40)}
    cm = stacks_config_map(job, Stacks(NOW, dumps), "2026-01-01T12:00:00Z")
    meta = cm["metadata"]
    assert (meta["name"], meta["annotations"]) == (
        "tiny-stacks",
        {ANNOTATION_STALLED_AT: "2026-01-01T12:00:00Z"},
    )
    assert meta["ownerReferences"][0]["name"] == "tiny"
    assert len(cm["data"]) == 32  # MAX_STACK_PODS
    sizes = [len(v.encode()) for v in cm["data"].values()]
    assert max(sizes) <= MAX_STACK_BYTES and sum(sizes) <= MAX_STACKS_BYTES
    kept = [k for k, v in cm["data"].items() if not v.startswith("not kept: the ConfigMap")]
    assert kept == sorted(dumps)[:8]  # the first 7 whole, the 8th in what is left
    assert cm["data"]["tiny-worker-0"].endswith(f"... cut at {MAX_STACK_BYTES} bytes\n")


def _reading(printed: float, seen: float, read: float) -> Reading:
    return Reading(
        Report(100, 1000, marked=True),
        NOW + timedelta(seconds=printed),
        "worker-0",
        NOW + timedelta(seconds=seen),
        NOW + timedelta(seconds=read),
    )


def _stalled(capture: bool = True) -> ReadSim:
    """A one-worker job whose rule restarts it when Stalled, judged Stalled at NOW."""
    policy: dict[str, Any] = {
        "stall": {"floorSeconds": 20, "factor": 3, "captureStacks": capture},
        "rules": [{"onReasons": ["Stalled"], "action": "RestartReplica"}],
    }
    sim = ReadSim(tiny_job(replicas=1, restart="Never", recoveryPolicy=policy))
    sim.step()
    sim.set(W0, "Running")
    sim.pod(W0)["metadata"]["creationTimestamp"] = "2026-01-01T11:00:00Z"
    sim.step()
    sim.reading = _reading(-30, -25, 0)
    return sim


def test_the_action_waits_for_the_stacks_then_they_are_kept_then_it_is_taken() -> None:
    sim = _stalled()
    p = sim.step()
    stalled = p.status.condition("Stalled")
    assert stalled is not None and stalled.status == "True"
    assert p.delete == ()  # held: the restart would delete the pod and its log
    assert p.capture_stacks == (ProgressSource(W0, f"uid-{W0}", None, "worker-0"),)
    [event] = [e for e in p.events if e.reason == "Stalled"]
    assert event.message.endswith("; the ranks' stacks go to ConfigMap tiny-stacks")
    assert p.requeue_after is not None and p.requeue_after <= 60
    sim.now = NOW + timedelta(seconds=5)
    assert sim.step().delete == ()  # still asked for, not answered
    sim.stacks = Stacks(NOW + timedelta(seconds=2), {W0: DUMP})
    sim.now = NOW + timedelta(seconds=8)
    p = sim.step()
    [cm] = [o for o in p.create if o["kind"] == "ConfigMap"]
    assert cm["data"] == {W0: DUMP} and p.delete == () and p.capture_stacks == ()
    assert cm["metadata"]["annotations"][ANNOTATION_STALLED_AT] == "2026-01-01T12:00:00Z"
    sim.now = NOW + timedelta(seconds=9)
    p = sim.step()  # the ConfigMap of this stall is there: the rule acts
    assert [d.name for d in p.delete] == [W0]
    assert sim.objects[CM]["data"] == {W0: DUMP}  # and it is kept, not deleted
    sim.now = NOW + timedelta(seconds=30)
    sim.step()
    assert CM in sim.objects


def test_without_an_answer_the_action_is_taken_60_s_after_the_verdict() -> None:
    sim = _stalled()
    assert sim.step().delete == ()
    sim.now = NOW + timedelta(seconds=59)
    assert sim.step().delete == ()
    sim.now = NOW + timedelta(seconds=60)
    p = sim.step()
    assert [d.name for d in p.delete] == [W0] and CM not in sim.objects


def test_stacks_read_before_the_stall_are_not_its_stacks() -> None:
    sim = _stalled()
    sim.stacks = Stacks(NOW - timedelta(seconds=120), {W0: DUMP})  # an earlier stall's
    p = sim.step()
    assert p.create == () and p.capture_stacks != ()


def test_a_later_stall_writes_the_config_map_again() -> None:
    sim = _stalled()
    sim.step()
    sim.stacks = Stacks(NOW + timedelta(seconds=1), {W0: DUMP})
    sim.step()
    old = sim.objects[CM]
    # The job became Stalled again later (the condition's new transition), same stacks text.
    sim.manifest["status"]["conditions"] = [
        c | {"lastTransitionTime": "2026-01-01T13:00:00Z"} if c["type"] == "Stalled" else c
        for c in sim.manifest["status"]["conditions"]
    ]
    sim.now = NOW + timedelta(hours=1, seconds=5)
    sim.stacks = Stacks(NOW + timedelta(hours=1, seconds=1), {W0: DUMP})
    p = sim.step()
    [cm] = p.update
    assert cm["metadata"]["annotations"][ANNOTATION_STALLED_AT] == "2026-01-01T13:00:00Z"
    assert cm["data"] == old["data"] and p.delete == ()


def test_capture_stacks_false_acts_at_once_and_asks_nothing() -> None:
    sim = _stalled(capture=False)
    p = sim.step()
    assert [d.name for d in p.delete] == [W0] and p.capture_stacks == ()
    [event] = [e for e in p.events if e.reason == "Stalled"]
    assert "ConfigMap" not in event.message


def test_another_objects_config_map_of_that_name_costs_the_stacks_not_the_restart() -> None:
    sim = _stalled()
    sim.conflicts = {CM: "ConfigMap tiny-stacks is controlled by someone else"}
    p = sim.step()
    assert [d.name for d in p.delete] == [W0] and p.capture_stacks == ()
    sim.now = NOW + timedelta(seconds=30)
    p = sim.step()  # the replacement is created: the name holds no pod back
    assert [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"] == [W0]
    initialized = p.status.condition("Initialized")
    assert initialized is not None and initialized.status == "True"
