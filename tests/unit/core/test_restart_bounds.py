"""Every bundled kind restarts a failing replica a bounded number of times, with its defaults.

Each example job of examples/, as written and with every `restartPolicy` and `backoffLimit`
taken out (so the kind's defaults apply), is driven through the engine with every pod failing
again and again (exit 137: retried by `Always`, `OnFailure` and `ExitCode` alike). It must end
`Failed`, within its limits: a kind whose default lets a replica restart for ever (GenericJob's
string form once had no limit) never does.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from t9kjobs.loading import load_job
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.vocabulary import Obj
from tests.repo import REPO
from tests.unit.core.planner.sim import Sim

# More reconciles than any example's limits allow (the largest: backoffLimit 20 in ps.yaml).
MAX_RECONCILES = 200
KILLED = 137


def _examples() -> list[tuple[str, Obj]]:
    found = []
    manager = load_plugins()
    for folder in ("genericjob", "pytorchtrainingjob", "deepspeedjob", "colossalaijob"):
        for path in sorted((REPO / "examples" / folder).glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            run_mode = load_job(doc, manager)[0].spec.lifecycle().run_mode
            if run_mode.debugging or run_mode.paused:
                continue  # pod exits never finish a job in debug mode; a paused job has no pods
            found.append((str(path.relative_to(REPO)), doc))
    return found


def _without_restart_settings(node: Any) -> Any:
    """`node` without `restartPolicy` and `backoffLimit` keys, pod templates left alone."""
    if isinstance(node, dict):
        return {
            k: v if k == "template" else _without_restart_settings(v)
            for k, v in node.items()
            if k not in ("restartPolicy", "backoffLimit")
        }
    if isinstance(node, list):
        return [_without_restart_settings(v) for v in node]
    return node


def _fail_until_finished(doc: Obj, manager: PluginManager) -> tuple[str | None, int]:
    """(phase, reconciles) once every pod kept failing until the job finished, or gave up."""
    doc = copy.deepcopy(doc)
    doc["metadata"].update(namespace="ns", uid="job-uid")
    sim = Sim(doc, manager)
    for step in range(1, MAX_RECONCILES + 1):
        plan = sim.step()
        if plan.status.finished:
            return plan.status.phase, step
        for (kind, name), obj in list(sim.objects.items()):
            if kind == "Pod" and (obj.get("status") or {}).get("phase") != "Failed":
                sim.set(name, "Failed", KILLED)
    return sim.status.get("phase"), MAX_RECONCILES


EXAMPLES = _examples()


@pytest.mark.parametrize("defaults", [False, True], ids=["as-written", "defaults"])
@pytest.mark.parametrize(("where", "doc"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_a_replica_that_keeps_failing_ends_the_job(
    manager: PluginManager, where: str, doc: Obj, defaults: bool
) -> None:
    if defaults:
        doc = {**doc, "spec": _without_restart_settings(doc["spec"])}
    phase, reconciles = _fail_until_finished(doc, manager)
    assert phase == "Failed", (
        f"{where} ({'defaults' if defaults else 'as written'}): still {phase} after"
        f" {reconciles} reconciles of pods failing with exit code {KILLED}"
    )


def test_every_bundled_kind_is_covered() -> None:
    kinds = {doc["kind"] for _, doc in EXAMPLES}
    assert kinds == {"GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"}
