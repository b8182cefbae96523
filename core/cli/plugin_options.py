"""The plugins' options on the command line: each declared `Option` (`t9kjobs_options`) as the
flag `--NAME` of the commands that plan jobs (`t9kjobs operator`, `t9kjobs render`), so that
both parse it alike and share its default, and the values they parsed, by option name, for
`PluginManager.configure`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from t9kjobs.features import Option, OptionValue
from t9kjobs.manager import PluginError, PluginManager

__all__ = ["add_plugin_options", "configure_plugins", "plugin_option_values"]


def _value_type(option: Option) -> Callable[[str], Any] | None:
    """argparse's `type` of the option: its `parse`, a ValueError turned into a usage error
    that names the flag (argparse adds it); split at commas first where it says so."""
    parse = option.parse

    def one(text: str) -> Any:
        try:
            return parse(text) if parse is not None else text
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    if option.comma_separated:
        return lambda text: [one(item.strip()) for item in text.split(",") if item.strip()]
    return one if parse is not None else None


def add_plugin_options(parser: argparse.ArgumentParser, manager: PluginManager) -> None:
    """Add every declared option to `parser`, a group per plugin."""
    groups: dict[str, Any] = {}
    for plugin, option in manager.options():
        group = groups.get(plugin)
        if group is None:
            group = groups[plugin] = parser.add_argument_group(f"options of plugin {plugin}")
        kwargs: dict[str, Any] = {"dest": option.dest, "help": option.help}
        if option.flag:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = _value_type(option)
            kwargs["metavar"] = option.metavar or None
            if option.choices:
                kwargs["choices"] = option.choices
            if option.repeatable:
                kwargs["action"] = "extend" if option.comma_separated else "append"
                kwargs["default"] = []
            else:
                kwargs["default"] = option.default
        try:
            group.add_argument(option.flag_name, **kwargs)
        except argparse.ArgumentError as exc:
            raise PluginError(f"plugin {plugin!r}: {exc}") from None


def plugin_option_values(
    args: argparse.Namespace, manager: PluginManager
) -> dict[str, OptionValue]:
    """The parsed values of every declared option, by option name (repeatable ones as tuples)."""
    values: dict[str, OptionValue] = {}
    for _, option in manager.options():
        value: Any = getattr(args, option.dest, option.default_value())
        values[option.name] = tuple(value) if option.repeatable else value
    return values


def configure_plugins(args: argparse.Namespace, manager: PluginManager, command: str) -> str | None:
    """Configure the plugins with the command line's values; why they refuse them, if they do
    (`t9kjobs <command>: plugin ...`: a usage error)."""
    try:
        manager.configure(plugin_option_values(args, manager))
    except PluginError as exc:
        return f"t9kjobs {command}: {exc}"
    return None
