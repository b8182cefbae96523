"""The request budget: what a job of a small burst may cost the API server, in requests.

The scale benchmark measures what a job costs, but only when someone runs it; a request added
to every job (a read, a status write, a child) shows there weeks later, mixed with everything
else that changed (issue #50: wave 3 grew a job from 7.9 to 11.1 requests and nobody saw it
land). The guard, `tests/e2e/test_request_budget.py` (in `make test`), runs a small burst on
the e2e tier's KWOK cluster, takes the operator's own request counters
(`t9kjobs_api_requests_total`, by verb and resource) before and after, and compares the
requests per job with the figures recorded in `request_budget.json`: a line that grows past
its figure, or a request the file does not name, fails the test.

Counts, never times: the counts of a burst do not depend on how busy the machine is, but for
two status writes the clock decides (`t9kjobs.planner.plan`, "When the status is written"): a
new job's first status written Pending because its pods did not run within
`FOLDED_STATUS_SECONDS` of their creation (a busy machine), and the write after the verdict
that records the replicas that ended after it. The guard watches the jobs, finds those writes
in what each job's status said (`timing_writes`) and leaves them out of the status writes it
compares; everything else, and every other request, is compared exactly. What it does not
allow is checked too: a job that writes Pending before its fold ran out, or more than once
after its verdict.

When a cost grows on purpose, record the new figures (and say why in docs/benchmarks.md):
`T9KJOBS_RECORD_REQUEST_BUDGET=1 pytest tests/e2e/test_request_budget.py` writes the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from t9kjobs.planner.plan import FOLDED_STATUS_SECONDS

__all__ = [
    "BUDGET_FILE",
    "RECORD_ENV",
    "Budget",
    "grown",
    "message",
    "per_job",
    "recorded",
    "timing_writes",
    "write",
    "written_statuses",
]

BUDGET_FILE = Path(__file__).with_name("request_budget.json")
RECORD_ENV = "T9KJOBS_RECORD_REQUEST_BUDGET"

HOW_TO_UPDATE = (
    f"if the growth is on purpose, record the new figures: {RECORD_ENV}=1 pytest"
    " tests/e2e/test_request_budget.py (it rewrites bench/request_budget.json), and say why in"
    " docs/benchmarks.md; otherwise find the request that was added"
)

Budget = dict[str, float]


def per_job(before: Mapping[str, float], after: Mapping[str, float], jobs: int) -> Budget:
    """Requests per job by "VERB resource" between two scrapes, up to 2 decimals (rounded up,
    so that a figure recorded from it is never under what was measured)."""
    out: Budget = {}
    for key in sorted(set(before) | set(after)):
        delta = after.get(key, 0.0) - before.get(key, 0.0)
        if delta > 0:
            out[key] = math.ceil(round(delta / jobs * 100, 6)) / 100
    return out


def grown(measured: Mapping[str, float], budget: Mapping[str, float]) -> list[str]:
    """One line per request that grew past its figure (a request not in `budget` has 0)."""
    lines = []
    for key, value in sorted(measured.items()):
        allowed = budget.get(key, 0.0)
        if value > allowed + 1e-9:
            lines.append(f"{key}: {value:.2f} a job, recorded {allowed:.2f}")
    return lines


def written_statuses(events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, list[Any]]:
    """Each job's statuses, in the order a watch of the jobs saw them written (a change of
    the status; a change of the rest of the job is not a status write)."""
    out: dict[str, list[Any]] = {}
    for kind, job in events:
        if kind == "DELETED":
            continue
        name = str(job["metadata"]["name"])
        status = job.get("status") or {}
        seen = out.setdefault(name, [])
        if status and (not seen or seen[-1] != status):
            seen.append(status)
    return out


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def timing_writes(statuses: Sequence[Mapping[str, Any]]) -> tuple[int, list[str]]:
    """Of one job's written statuses, how many the clock decided (module docstring), and what
    breaks the rules those writes keep to."""
    count, broken = 0, []
    first = statuses[0] if statuses else {}
    if first.get("phase") == "Pending":
        conditions = first.get("conditions") or []
        initialized: Mapping[str, Any] = next(
            (c for c in conditions if c.get("type") == "Initialized"), {}
        )
        start = _time(first.get("startTime"))
        written = _time(initialized.get("lastTransitionTime"))
        # Both in whole seconds: the fold's 3 s can show as 2.
        ran_out = (
            start is not None
            and written is not None
            and (written - start).total_seconds() >= FOLDED_STATUS_SECONDS - 1
        )
        # Pending with more to say (why its pods wait) is written at once, by design.
        says_more = len(conditions) > 1 or bool(first.get("reason"))
        if ran_out or says_more:
            count += 1
        else:
            broken.append(f"Pending written before the fold ran out: {dict(first)}")
    verdict = next(
        (i for i, s in enumerate(statuses) if s.get("phase") in ("Succeeded", "Failed")), None
    )
    after = len(statuses) - 1 - verdict if verdict is not None else 0
    count += min(after, 1)
    if after > 1:
        broken.append(f"{after} writes after the verdict, not one")
    return count, broken


def recorded(path: Path = BUDGET_FILE) -> dict[str, Any]:
    """The file as recorded: `burst` (what was run) and `requests_per_job`."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def message(lines: list[str], measured: Mapping[str, float]) -> str:
    shown = "\n".join(f"  {k}: {v:.2f}" for k, v in sorted(measured.items()))
    return (
        "requests per job grew past bench/request_budget.json:\n  "
        + "\n  ".join(lines)
        + f"\nmeasured:\n{shown}\n{HOW_TO_UPDATE}"
    )


def write(path: Path, burst: Mapping[str, Any], measured: Mapping[str, float]) -> None:
    data = {
        "about": "requests per job of the burst of tests/e2e/test_request_budget.py, by verb"
        " and resource; status writes without those the clock decides (bench/request_budget.py)",
        "burst": dict(burst),
        "requests_per_job": dict(sorted(measured.items())),
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
