"""The chart grants `get pods/log` only where the operator reads logs (issue #47).

The right reaches every pod's log in every served namespace (RBAC cannot name the pods a job
will have), and a log may hold what a Secret does. The operator reads logs only for training
progress; with `progress.qps: 0` it reads none, and the chart then grants nothing on logs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from t9kjobs.vocabulary import Obj
from tests.unit.deploy.chart import CLUSTER_WIDE, install_tool, one, render_chart


@pytest.fixture(scope="module")
def render() -> Callable[..., list[Obj]]:
    helm = install_tool("helm")
    return lambda values=None: render_chart(helm, {**CLUSTER_WIDE, **(values or {})})


def log_rights(objects: list[Obj]) -> set[str]:
    return {
        verb
        for rule in one(objects, "ClusterRole")["rules"]
        if "pods/log" in rule["resources"]
        for verb in rule["verbs"]
    }


def test_logs_are_readable_while_progress_is_read(render: Callable[..., list[Obj]]) -> None:
    assert log_rights(render()) == {"get"}
    assert log_rights(render({"progress": {"interval": 30, "qps": 0.5}})) == {"get"}


def test_no_log_right_when_progress_is_not_read(render: Callable[..., list[Obj]]) -> None:
    objects = render({"progress": {"interval": 30, "qps": 0}})
    assert log_rights(objects) == set()
    rules = one(objects, "ClusterRole")["rules"]
    assert any("pods" in r["resources"] for r in rules)  # the rest is as before
