"""The live sample: bad jobs the API server admits, submitted to a running operator, each end
`Failed` with a reason and a message (or hold a condition saying why) within 30 s, and a healthy
job beside them succeeds.

The sample is every admitted case that `validate` refuses (the plugins' checks, the documented
exceptions) or whose pods the API server refuses (a GPU count that is not a whole number), spread
over the kinds and capped to keep the tier fast.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.kube.decoding import loads
from t9kjobs.manager import PluginManager
from t9kjobs.testing.harness.process import OperatorProcess
from t9kjobs.testing.harness.simulation import simulate
from tests.fuzz.admission import server_verdicts
from tests.fuzz.generator import BASES, Case, dump, set_at
from tests.fuzz.verdicts import cli_verdict
from tests.waiting import TimedOut, until

SAMPLE = 90
DEADLINE = 30.0
# Pods the API server refuses although the job is admitted: the job must fail, not stall.
POD_REFUSED = ("template=gpu-word", "template=gpu-fraction")


def _sample(corpus: list[Case], manager: PluginManager, admitted: set[str]) -> list[Case]:
    bad = [
        c
        for c in corpus
        if c.batchable
        and c.id in admitted
        and (cli_verdict(c, manager).outcome != "accept" or c.id.endswith(POD_REFUSED))
    ]
    step = max(1, len(bad) // SAMPLE)
    chosen = bad[::step][:SAMPLE]
    return chosen + [c for c in bad if c.id.endswith(POD_REFUSED) and c not in chosen]


def _settled(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    if status.get("phase") == "Failed":
        return any(c.get("message") for c in status.get("conditions") or [])
    return any(
        c.get("type") in ("Degraded", "Failed") and c.get("status") == "True" and c.get("message")
        for c in status.get("conditions") or []
    )


def test_every_admitted_bad_job_ends_with_a_reason_and_a_healthy_one_succeeds(
    cluster: Any,
    operator: OperatorProcess,
    namespace: str,
    corpus: list[Case],
    manager: PluginManager,
    tmp_path: Path,
) -> None:
    admitted = {
        case_id
        for case_id, v in server_verdicts(
            [c for c in corpus if c.batchable], cluster.kubectl_path, cluster.kubeconfig, namespace
        ).items()
        if v.admitted
    }
    sample = _sample(corpus, manager, admitted)
    assert len(sample) >= 50, len(sample)
    healthy = simulate(set_at(BASES["GenericJob"], ("metadata", "name"), "healthy"), seconds=1)
    stream = tmp_path / "jobs.yaml"
    stream.write_bytes(
        b"".join(b"---\n" + c.text for c in sample) + b"---\n" + dump(healthy).encode()
    )
    # A real create may refuse what a dry run admitted (etcd's size limit): kubectl goes on.
    cluster.kubectl("create", "-n", namespace, "-f", str(stream), timeout=300, check=False)
    started = time.monotonic()
    kinds = ",".join(sorted({k.lower() for k in BASES}))

    def jobs() -> dict[str, dict[str, Any]]:
        # The operator's decoder: Python's gives up on the jobs nested 1,000 levels deep.
        found = loads(cluster.kubectl("get", kinds, "-n", namespace, "-o", "json").stdout)
        return {j["metadata"]["name"]: j for j in found["items"]}

    created = jobs()
    names = {c.name: c.id for c in sample if c.name in created}
    assert len(names) >= 0.9 * len(sample) and "healthy" in created, sorted(created)[:5]

    # The promise: a reason within 30 s of submission, for every one of them.
    pending = dict(names)

    def all_settled() -> bool:
        nonlocal pending
        now = jobs()
        pending = {n: i for n, i in pending.items() if not _settled(now.get(n, {}))}
        return not pending

    with contextlib.suppress(TimedOut):  # the assertion below says which
        left = DEADLINE - (time.monotonic() - started)
        until(all_settled, left, interval=1, what="a reason for every job")
    assert not pending, (
        f"no reason within {DEADLINE:.0f}s: {sorted(pending.values())[:10]}; the operator's"
        f" log ends:\n{operator.log_tail()}"
    )
    cluster.poll(
        lambda: (jobs()["healthy"].get("status") or {}).get("phase") == "Succeeded",
        timeout=120,
        message="the healthy job to succeed beside them",
    )
    failed = [j for j in jobs().values() if (j.get("status") or {}).get("phase") == "Failed"]
    reasons = {
        c["reason"] for j in failed for c in j["status"]["conditions"] if c["type"] == "Failed"
    }
    assert {"InvalidSpec", "ChildRejected"} <= reasons, reasons
    assert operator.ready() and not operator.exited()
    tracebacks = [line for line in operator.log_lines() if "Traceback" in json.dumps(line)]
    assert tracebacks == [], yaml.safe_dump(tracebacks[:2])
