"""One verdict: `t9kjobs validate` and the API server's admission agree on the whole corpus, case
by case, both ways (#52).

Every case goes to the API server as a user submits it (`kubectl create --dry-run=server`, the
CRDs generated from the models installed, and the operator's admission webhook registered as
the chart registers it, under `Fail`: a dry run calls it, its side effects being none), batched
several hundred to a kubectl call. Where the two disagree, the case must be one of the
documented exceptions (tests/fuzz/verdicts.py, docs/api.md), each with its reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.testing.harness.process import OperatorProcess
from tests.fuzz.admission import server_verdicts
from tests.fuzz.generator import Case
from tests.fuzz.verdicts import ADMISSION_ONLY, EXCEPTIONS, VALIDATE_ONLY, agreement, cli_verdict

# The module's operator serves the admission webhook, and the API server fails closed on it.
WEBHOOK = "Fail"


def test_validate_and_admission_agree(
    cluster: Any,
    operator: OperatorProcess,
    namespace: str,
    corpus: list[Case],
    manager: PluginManager,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served = server_verdicts(corpus, cluster.kubectl_path, cluster.kubeconfig, namespace)
    verdicts = {case.id: cli_verdict(case, manager) for case in corpus}
    found: dict[str, list[str]] = {}
    for case_id, verdict in verdicts.items():
        found.setdefault(agreement(verdict, served[case_id].admitted), []).append(case_id)
    with capsys.disabled():
        counts = {k: len(v) for k, v in sorted(found.items())}
        print(f"\n[fuzz] {len(corpus)} cases, validate vs admission: {counts}")
    disagreements = [
        f"{case_id}: validate {verdicts[case_id].outcome} {list(verdicts[case_id].problems)[:2]},"
        f" the API server {'admits' if served[case_id].admitted else 'refuses'}"
        f" {served[case_id].message[-300:]}"
        for case_id in found.get(VALIDATE_ONLY, []) + found.get(ADMISSION_ONLY, [])
    ]
    assert not disagreements, "\n".join(disagreements[:30])
    # Each documented exception occurs, or it would be dead documentation.
    for name, _, _ in EXCEPTIONS:
        assert found.get(name), f"exception never seen: {name}"
    # The plugins' checks are judged at admission: the webhook refused what they refuse.
    semantic = [i for i, v in verdicts.items() if v.outcome == "semantic"]
    assert semantic and all(not served[i].admitted for i in semantic)
    webhook = [i for i in semantic if "denied the request" in served[i].message]
    assert webhook, [served[i].message for i in semantic[:3]]
    assert len(found.get("agree", [])) > 0.95 * len(corpus)
    assert not operator.exited()
