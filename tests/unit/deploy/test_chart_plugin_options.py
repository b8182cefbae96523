"""The chart and the options the bundled plugins declare (`t9kjobs_options`): each option that
names a chart value (`Option.helm`) has that value in values.yaml, with the option's default,
and the deployment template passes the option's flag; set, the value reaches the operator as
the plugin parses it. The chart's value names are the users' and stay; the flags are derived
from the plugins' declarations."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from t9kjobs.manager import PluginManager
from tests.unit.deploy.chart import CHART, CLUSTER_WIDE, install_tool, operator_args, render_chart


def _value(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        assert isinstance(node, dict) and key in node, f"values.yaml has no {path}"
        node = node[key]
    return node


def _declared(manager: PluginManager) -> list[Any]:
    return [option for _, option in manager.options() if option.helm]


def test_every_declared_chart_value_exists_with_the_options_default(
    manager: PluginManager,
) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    template = (CHART / "templates" / "deployment.yaml").read_text()
    declared = _declared(manager)
    assert {o.name for o in declared} >= {
        "gang-scheduling",
        "network-policy",
        "network-policy-allow-namespace",
        "network-policy-allow-pods",
    }
    for option in declared:
        default = _value(values, option.helm)
        expected = [] if option.repeatable else option.default_value()
        assert default == expected, f"{option.helm}: {default!r}, --{option.name}: {expected!r}"
        assert f"- {option.flag_name}" in template, f"the chart never passes {option.flag_name}"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"gangScheduling": "native"}, {"gang_scheduling": "native"}),
        (
            {"networkPolicy": {"jobs": {"enabled": True, "allowNamespaces": ["mon"]}}},
            {"network_policy": True, "network_policy_allow_namespace": ["mon"]},
        ),
    ],
)
def test_a_chart_value_reaches_the_plugin_as_its_option(
    values: dict[str, Any], expected: dict[str, Any]
) -> None:
    args = operator_args(render_chart(install_tool("helm"), {**CLUSTER_WIDE, **values}))
    assert {k: getattr(args, k) for k in expected} == expected
