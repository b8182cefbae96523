"""The plugin manager and the plugins' options (`t9kjobs_options`, `t9kjobs_configure`,
`t9kjobs_child_kinds`): a plugin is configured with its defaults when registered, again with
the command line's values, and the manager holds what it returns; conflicts and refusals are
load or usage errors that name the plugin."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from t9kjobs.cli.main import _parser, main
from t9kjobs.features import ChildKind, Option, OptionValue
from t9kjobs.hooks import hookimpl
from t9kjobs.manager import PluginError, PluginManager


class Configured:
    def __init__(self, level: str) -> None:
        self.level = level

    @hookimpl
    def t9kjobs_child_kinds(self) -> list[ChildKind]:
        return [ChildKind("example.com/v1", "Widget", "widgets", replaced=True)]


class Feature:
    """A feature plugin with one option, configured into `Configured` unless it is `off`."""

    @hookimpl
    def t9kjobs_options(self) -> list[Option]:
        return [
            Option("widget-level", "how much widget", default="low", choices=("low", "high", "off"))
        ]

    @hookimpl
    def t9kjobs_configure(self, options: Mapping[str, OptionValue]) -> Configured | None:
        level = str(options["widget-level"])
        return None if level == "off" else Configured(level)


def _manager() -> PluginManager:
    manager = PluginManager()
    manager.register(Feature(), "widgets")
    return manager


def test_registered_means_configured_with_the_defaults_then_with_the_values() -> None:
    manager = _manager()
    held = manager.held("widgets")
    assert isinstance(held, Configured) and held.level == "low"
    assert manager.child_kinds()["Widget"].replaced
    manager.configure({"widget-level": "high"})
    held = manager.held("widgets")
    assert isinstance(held, Configured) and held.level == "high"
    manager.configure({"widget-level": "off"})  # None: the plugin as registered, no kind
    assert isinstance(manager.held("widgets"), Feature)
    assert manager.child_kinds() == {}


def test_two_plugins_declaring_one_option_is_a_load_error() -> None:
    manager = _manager()
    with pytest.raises(PluginError, match="option --widget-level is declared by two plugins"):
        manager.register(Feature(), "gadgets")
    assert manager.held("gadgets") is None  # not registered: its hooks are never called


def test_an_unknown_option_and_a_refusal_name_what_is_wrong() -> None:
    manager = _manager()
    with pytest.raises(PluginError, match="no plugin declares the options nope"):
        manager.configure({"nope": 1})

    class Refusing(Feature):
        @hookimpl
        def t9kjobs_configure(self, options: Mapping[str, OptionValue]) -> Configured | None:
            raise ValueError("--widget-level high needs a license")

    refusing = PluginManager()
    with pytest.raises(PluginError, match="plugin 'widgets': --widget-level high needs"):
        refusing.register(Refusing(), "widgets")


def test_the_flag_is_derived_for_operator_and_render_alike() -> None:
    parser = _parser(manager=_manager())
    for command in (["operator"], ["render", "job.yaml"]):
        assert parser.parse_args([*command]).widget_level == "low"
        assert parser.parse_args([*command, "--widget-level=high"]).widget_level == "high"


def test_a_plugin_refusing_its_values_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["operator", "--network-policy-allow-namespace=monitoring"])
    assert code == 2
    err = capsys.readouterr().err
    assert "t9kjobs operator: plugin 'networkpolicy': --network-policy-allow-namespace" in err
    assert "need --network-policy" in err
