"""Loads plugins from the `t9kjobs.plugins` entry-point group and routes hooks to them.

Bundled plugins load through the same entry points as third-party ones. A plugin can be blocked
by name (`T9KJOBS_BLOCK_PLUGINS=a,b` or the `blocked` argument). Two plugins declaring the same
kind, or the same option, is a load error naming both: picking one silently would make
behaviour depend on install order.

A plugin with options (`t9kjobs_options`) is configured when it is registered, with their
defaults, and again by `configure` with the command line's values (`t9kjobs_configure`); the
manager holds the configured plugin in its place. So the configuration reaches the planner as
part of the hooks it is given, never through a process global, and `t9kjobs render` sees the
same defaults as the operator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

import pluggy

from t9kjobs.features import ChildKind, Option, OptionValue
from t9kjobs.hooks import FRAMEWORK_HOOKS, PROJECT, JobHooks
from t9kjobs.kinds import FunctionRun, KindInfo, Problem, ReplicaState, Verdict
from t9kjobs.models import Job, JobStatus
from t9kjobs.objects import DesiredPod, Obj

__all__ = [
    "ENTRY_POINT_GROUP",
    "KindHooks",
    "PluginError",
    "PluginInfo",
    "PluginManager",
    "load_plugins",
]

ENTRY_POINT_GROUP = "t9kjobs.plugins"


class PluginError(Exception):
    """A plugin could not be loaded or conflicts with another."""


@dataclass(frozen=True)
class PluginInfo:
    name: str
    distribution: str
    version: str
    kinds: tuple[str, ...]


class KindHooks:
    """The hooks of one kind: framework hooks go to its owner only, cross-cutting ones to all.

    This is the object the pure planner is given; it holds no state but the hook callers.
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        owner: object,
        info: KindInfo,
        child_kinds: Mapping[str, ChildKind],
    ) -> None:
        others = [p for p in pm.get_plugins() if p is not owner]
        self.info = info
        self.child_kinds = child_kinds
        self._framework = {
            name: pm.subset_hook_caller(name, remove_plugins=others) for name in FRAMEWORK_HOOKS
        }
        self._hook = pm.hook

    def validate(self, job: Job) -> list[Problem]:
        return list(self._framework["t9kjobs_validate"](job=job) or [])

    def build_pods(self, job: Job) -> list[DesiredPod]:
        pods = self._framework["t9kjobs_build_pods"](job=job)
        if pods is None:
            raise PluginError(f"the plugin serving {self.info.kind} implements no build_pods")
        return list(pods)

    def build_launch_command(self, job: Job, pod: DesiredPod) -> list[str] | None:
        result: list[str] | None = self._framework["t9kjobs_build_launch_command"](job=job, pod=pod)
        return result

    def compute_status(self, job: Job, replicas: Sequence[ReplicaState]) -> Verdict | None:
        result: Verdict | None = self._framework["t9kjobs_compute_status"](
            job=job, replicas=replicas
        )
        return result

    def update_status(
        self, job: Job, status: JobStatus, children: Mapping[tuple[str, str], Obj]
    ) -> None:
        self._framework["t9kjobs_update_status"](job=job, status=status, children=children)

    @property
    def runs_functions(self) -> bool:
        """Whether the kind's plugin implements `t9kjobs_function_spec`."""
        return bool(self._framework["t9kjobs_function_spec"].get_hookimpls())

    def function_spec(self, run: FunctionRun) -> dict[str, Any] | None:
        """The kind's spec of a job that runs a function; None when the kind runs none."""
        result: dict[str, Any] | None = self._framework["t9kjobs_function_spec"](run=run)
        return result

    def auxiliary_objects(
        self, job: Job, pods: Sequence[DesiredPod], absent_kinds: frozenset[str] = frozenset()
    ) -> list[Obj]:
        own = list(self._framework["t9kjobs_build_objects"](job=job, pods=pods) or [])
        # pluggy returns results last-registered first; reverse for registration order.
        results = self._hook.t9kjobs_build_auxiliary_objects(
            job=job, pods=pods, absent_kinds=absent_kinds
        )
        return own + [obj for result in reversed(results) for obj in result]

    def mutate_pod(
        self, job: Job, pod: DesiredPod, absent_kinds: frozenset[str] = frozenset()
    ) -> None:
        self._hook.t9kjobs_mutate_pod(job=job, pod=pod, absent_kinds=absent_kinds)


class PluginManager:
    """The loaded plugins and the kinds they serve."""

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(JobHooks)
        self._kinds: dict[str, KindInfo] = {}
        self._owners: dict[str, str] = {}
        self._infos: dict[str, PluginInfo] = {}
        self._kind_hooks: dict[str, KindHooks] = {}
        # Each plugin as registered (its options and `t9kjobs_configure` are asked of it), and
        # every declared option by name, with the plugin that declared it.
        self._registered: dict[str, object] = {}
        self._options: dict[str, tuple[str, Option]] = {}

    # -- loading -----------------------------------------------------------------------------

    def register(
        self, plugin: object, name: str, distribution: str = "", version: str = ""
    ) -> None:
        """Register one plugin object or module; its kinds must not be served already."""
        if self._pm.is_blocked(name):
            return
        self._pm.register(plugin, name=name)
        declared: Sequence[KindInfo] = []
        impl = getattr(plugin, "t9kjobs_kinds", None)
        if impl is not None:
            declared = list(impl())
        options = list(getattr(plugin, "t9kjobs_options", list)())
        clash = self._clash(name, declared, options)
        if clash is not None:
            self._pm.unregister(plugin)
            raise PluginError(clash)
        for info in declared:
            self._kinds[info.kind] = info
            self._owners[info.kind] = name
        self._options.update({option.name: (name, option) for option in options})
        self._registered[name] = plugin
        self._infos[name] = PluginInfo(name, distribution, version, tuple(i.kind for i in declared))
        self._configure_plugin(name, {})

    def _clash(
        self, name: str, declared: Sequence[KindInfo], options: Sequence[Option]
    ) -> str | None:
        """Why plugin `name` cannot be registered with its kinds and options: one that another
        plugin already claims; None when none is."""
        for info in declared:
            if info.kind in self._kinds:
                return (
                    f"kind {info.kind} is claimed by two plugins: {self._owners[info.kind]!r} and"
                    f" {name!r}; block one of them (T9KJOBS_BLOCK_PLUGINS={name})"
                )
        for option in options:
            if option.name in self._options:
                return (
                    f"option --{option.name} is declared by two plugins:"
                    f" {self._options[option.name][0]!r} and {name!r}"
                )
        return None

    def _configure_plugin(self, name: str, values: Mapping[str, OptionValue]) -> None:
        """Configure one plugin with `values` (its options' defaults where missing), and hold
        what its `t9kjobs_configure` returns in its place."""
        plugin = self._registered[name]
        configure = getattr(plugin, "t9kjobs_configure", None)
        configured = None
        if configure is not None:
            own = {
                option.name: values.get(option.name, option.default_value())
                for owner, option in self._options.values()
                if owner == name
            }
            try:
                configured = configure(options=own)
            except ValueError as exc:
                raise PluginError(f"plugin {name!r}: {exc}") from exc
        # Registered again whether configured or not: `configure` goes by name, so the hook
        # order stays the plugins' name order (pluggy calls in order of registration).
        self._pm.unregister(name=name)
        self._pm.register(plugin if configured is None else configured, name=name)
        self._kind_hooks.clear()

    def configure(self, values: Mapping[str, OptionValue]) -> None:
        """Configure every plugin with the options' values by name (`Option.name`), their
        defaults where missing; a ValueError of a plugin is a PluginError naming it."""
        unknown = sorted(set(values) - set(self._options))
        if unknown:
            raise PluginError(f"no plugin declares the options {', '.join(unknown)}")
        for name in sorted(self._registered):
            self._configure_plugin(name, values)

    def add_hookcall_monitoring(
        self,
        before: Callable[[str, Sequence[pluggy.HookImpl], Mapping[str, Any]], None],
        after: Callable[[Any, str, Sequence[pluggy.HookImpl], Mapping[str, Any]], None],
    ) -> Callable[[], None]:
        """Call `before` and `after` around every hook call (the conformance kit's I/O guard);
        returns the function that stops it."""
        undo: Callable[[], None] = self._pm.add_hookcall_monitoring(before, after)
        return undo

    def block(self, name: str) -> None:
        self._pm.set_blocked(name)

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Load every plugin of the entry-point group, sorted by name for a stable hook order."""
        eps: Iterable[EntryPoint] = sorted(entry_points(group=group), key=lambda e: e.name)
        for ep in eps:
            if self._pm.is_blocked(ep.name) or ep.name in self._infos:
                continue
            try:
                plugin: ModuleType | Any = ep.load()
            except Exception as exc:  # a broken third-party plugin must name itself
                raise PluginError(f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
            dist = ep.dist
            self.register(
                plugin,
                ep.name,
                distribution=dist.name if dist else "",
                version=dist.version if dist else "",
            )
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from exc

    # -- queries -----------------------------------------------------------------------------

    @property
    def kinds(self) -> dict[str, KindInfo]:
        return dict(self._kinds)

    def options(self) -> list[tuple[str, Option]]:
        """Every declared option, with the name of its plugin, in plugin order."""
        return sorted(self._options.values(), key=lambda item: (item[0], item[1].name))

    def child_kinds(self) -> dict[str, ChildKind]:
        """The child kinds the configured plugins declare, by `ChildKind.key`."""
        found: dict[str, ChildKind] = {}
        for declared in self._pm.hook.t9kjobs_child_kinds():
            for child in declared:
                if found.setdefault(child.key, child) != child:
                    raise PluginError(f"child kind {child.key} is declared twice, differently")
        return found

    def plugins(self) -> list[PluginInfo]:
        return [self._infos[n] for n in sorted(self._infos)]

    def held(self, name: str) -> object:
        """The object serving as plugin `name`: what its `t9kjobs_configure` returned, or the
        plugin as registered."""
        return self._pm.get_plugin(name)

    def owner_of(self, kind: str) -> str:
        return self._owners[kind]

    def kind_info(self, kind: str) -> KindInfo:
        try:
            return self._kinds[kind]
        except KeyError:
            known = ", ".join(sorted(self._kinds)) or "none"
            raise PluginError(f"unknown kind {kind!r} (kinds served: {known})") from None

    def hooks_for(self, kind: str) -> KindHooks:
        """The hook callers for one kind, cached: building a subset caller is not free."""
        hooks = self._kind_hooks.get(kind)
        if hooks is None:
            info = self.kind_info(kind)
            owner = self._pm.get_plugin(self._owners[kind])
            hooks = self._kind_hooks[kind] = KindHooks(self._pm, owner, info, self.child_kinds())
        return hooks


def load_plugins(blocked: Iterable[str] = ()) -> PluginManager:
    """A manager with every installed plugin loaded, less the blocked ones."""
    manager = PluginManager()
    env_blocked = os.environ.get("T9KJOBS_BLOCK_PLUGINS", "")
    for name in [*blocked, *env_blocked.split(",")]:
        if name.strip():
            manager.block(name.strip())
    manager.load_entry_points()
    return manager
