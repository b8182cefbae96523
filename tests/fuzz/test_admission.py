"""One verdict: `t9kjobs validate` and the API server's admission agree on the whole corpus.

Every case goes to the API server as a user submits it (`kubectl create --dry-run=server`, the
CRDs generated from the models now installed), batched several hundred to a kubectl call. Where
the two disagree, the case must be one of the documented exceptions (tests/fuzz/verdicts.py,
docs/api.md) or a refusal by the plugins' checks, which the operator applies as well.
"""

from __future__ import annotations

from typing import Any

import pytest

from t9kjobs.manager import PluginManager
from t9kjobs.testing.harness.crds import install_crds
from tests.fuzz.admission import server_verdicts
from tests.fuzz.generator import Case
from tests.fuzz.verdicts import EXCEPTIONS, agreement, cli_verdict


@pytest.fixture(scope="module")
def installed(cluster: Any) -> None:
    install_crds(cluster.kubectl_path, cluster.kubeconfig)


def test_validate_and_admission_agree(
    cluster: Any,
    installed: None,
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
        for case_id in found.get("disagree", [])
    ]
    assert not disagreements, "\n".join(disagreements[:30])
    # Each documented exception occurs, or it would be dead documentation.
    for name, _ in EXCEPTIONS:
        assert found.get(name), f"exception never seen: {name}"
    assert len(found.get("agree", [])) > 0.9 * len(corpus)
