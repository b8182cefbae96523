"""The chart's lost-node detection (`lostNodes.seconds`): the operator's `--lost-node-seconds`,
and `nodes list, watch` (read through an informer, never `get`) in a ClusterRole of their own, bound cluster-wide even where the
operator serves some namespaces only (nodes belong to none); no right on nodes with 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from t9kjobs.vocabulary import Obj
from tests.unit.deploy.chart import CLUSTER_WIDE, operator_args, render_chart


def _node_rights(objects: list[Obj]) -> dict[str, set[str]]:
    """Every right on nodes the rendered ClusterRoles grant, by ClusterRole name."""
    return {
        o["metadata"]["name"]: {
            v for r in o["rules"] if "nodes" in r["resources"] for v in r["verbs"]
        }
        for o in objects
        if o["kind"] == "ClusterRole" and any("nodes" in r["resources"] for r in o["rules"])
    }


@pytest.mark.parametrize("values", [CLUSTER_WIDE, {"watchNamespaces": ["team-a"]}])
def test_nodes_are_read_by_default_through_a_cluster_wide_binding(helm: Path, values: Obj) -> None:
    objects = render_chart(helm, values)
    assert operator_args(objects).lost_node_seconds == 60
    rights = _node_rights(objects)
    assert rights == {"t9k-jobs-node-reader": {"list", "watch"}}
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == "t9k-jobs-node-reader"
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "t9k-jobs", "namespace": "t9k-system"}
    ]


def test_a_bound_reaches_the_operator_and_zero_grants_nothing_on_nodes(helm: Path) -> None:
    objects = render_chart(helm, {**CLUSTER_WIDE, "lostNodes": {"seconds": 10}})
    assert operator_args(objects).lost_node_seconds == 10
    objects = render_chart(helm, {**CLUSTER_WIDE, "lostNodes": {"seconds": 0}})
    assert operator_args(objects).lost_node_seconds == 0
    assert _node_rights(objects) == {}
    assert not [o for o in objects if o["metadata"]["name"].endswith("-node-reader")]
