"""What a plugin declares to the operator beside its kinds: its options and the child kinds it
creates (the optional hooks `t9kjobs_options`, `t9kjobs_configure`, `t9kjobs_child_kinds`),
and how the engine reads a gang object among them (`GangFormat`).

Why declarations, and not code in core: a feature plugin (one that adds to every kind's pods or
children, like the bundled `scheduling` and `networkpolicy`) needs an operator option and
children of a kind the engine does not know. Declared here, core derives the rest, for a
third-party plugin as for a bundled one: the command-line flag `--NAME` of `t9kjobs operator`
and `t9kjobs render` (one parser, one default), the value the plugin is configured with, the
informer that watches the kind (only when the configured plugin declares it), the REST path
its objects are written to, and what the planner does with them (updated, or replaced; kept,
or deleted while the job has no pods), and, for a kind that places pods together (a PodGroup),
how the engine reads it: its size, its members, why it waits. pytest's `pytest_addoption` and
`pytest_configure` are the model: an optional hook added in a minor version breaks no plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from t9kjobs.objects import child_kind
from t9kjobs.vocabulary import Obj

__all__ = ["ChildKind", "GangFormat", "Option", "OptionValue"]

# What an option's value is, as a plugin's `t9kjobs_configure` receives it: a flag's bool, a
# value's parsed form (a str unless `parse` says otherwise), a repeatable option's tuple.
OptionValue = object


@dataclass(frozen=True)
class Option:
    """An operator option a plugin declares (`t9kjobs_options`).

    `name` is the flag without its dashes (`network-policy`: `--network-policy`) and the key of
    the values `t9kjobs_configure` receives; two plugins declaring one name is a load error.
    `helm` names the value of the chart (`deploy/helm/t9k-jobs`) that sets the flag, where it
    has one (`networkPolicy.jobs.enabled`): documentation for the chart's users, and what the
    chart's tests check against. Kinds of option:

    * `flag`: `--NAME` alone, True when given (the default False);
    * `repeatable`: `--NAME V` any number of times, each `V` parsed (and with
      `comma_separated`, first split at commas), a tuple of every value in order;
    * otherwise one value, `default` when not given, one of `choices` when they are set.

    `parse` turns a value's text into what the plugin reads (a ValueError is a usage error that
    names the flag): checked when the command line is parsed, before the operator starts.
    """

    name: str
    help: str
    default: str | int | float = ""
    flag: bool = False
    repeatable: bool = False
    comma_separated: bool = False
    choices: tuple[str, ...] = ()
    metavar: str = ""
    helm: str = ""
    parse: Callable[[str], OptionValue] | None = None

    @property
    def flag_name(self) -> str:
        return f"--{self.name}"

    @property
    def dest(self) -> str:
        """The attribute of argparse's namespace (`network_policy`)."""
        return self.name.replace("-", "_")

    def default_value(self) -> OptionValue:
        """What the plugin is configured with when the option is not given."""
        if self.flag:
            return False
        if self.repeatable:
            return ()
        return self.default


@dataclass(frozen=True, repr=False)
class GangFormat:
    """How the engine reads a gang object of a plugin's child kind (`ChildKind.gang`): one that
    asks a scheduler to place the job's pods together (a PodGroup). Its format is the
    plugin's; what the engine does with a gang is the engine's, for every plugin alike:

    * the job's `Scheduled` condition (False, reason `Unschedulable`) while a gang cannot be
      placed, with `waiting`'s words and its pods' own `PodScheduled` conditions;
    * a gang that can never be complete (some live members wait to be placed, and the live
      members are fewer than `size`): the `Scheduled` condition says `GangIncomplete`, and, the
      bound later, its waiting members are placed again on their own (with `leave`), or the job
      fails with reason `GangIncomplete` (without);
    * a restart's replacement joins its gang only while enough members are live to make it
      up; otherwise it is placed on its own (with `leave`).

    Each function is pure (it reads the objects it is given: no I/O, no global, no change but
    `leave`'s) and is called while a plan is made. `group` is the object as the cluster holds
    it, or as the job wants it; `pod` is one of the job's pods as the operator's cache keeps it
    (its metadata, `spec.nodeName` and `spec.schedulingGroup`, its phase and its containers'
    states: `t9kjobs.kube.slimming`), so membership is read from those.

    * `size(group)`: how many members the scheduler places at once; None when the object
      does not say (the engine then judges nothing of the gang).
    * `member(group, pod)`: whether the scheduler counts `pod` a member of `group`. None (the
      default): every pod of the job is.
    * `waiting(group)`: what the object says of why the scheduler cannot place the gang now
      (its own condition's message), None while it says nothing. None (the default): it
      never says.
    * `leave(pod)`: takes a pod about to be created out of the gang, in place (its manifest,
      as the plugins built it), so that the scheduler places it on its own. None (the
      default): the scheduler places no member of such a gang on its own.
    """

    size: Callable[[Obj], int | None]
    member: Callable[[Obj, Obj], bool] | None = None
    waiting: Callable[[Obj], str | None] | None = None
    leave: Callable[[Obj], None] | None = None

    def counts(self, group: Obj, pod: Obj) -> bool:
        """Whether `pod` is a member of `group` (`member`; every pod without it)."""
        return self.member is None or self.member(group, pod)

    def says(self, group: Obj) -> str | None:
        """Why `group` says it cannot be placed now (`waiting`); None while it says nothing."""
        return None if self.waiting is None else self.waiting(group)

    def __repr__(self) -> str:
        # The functions by name, not by address: the same on every run (the generated guide).
        def named(fn: Callable[..., object] | None) -> str:
            return "None" if fn is None else getattr(fn, "__qualname__", repr(fn))

        fields = ("size", "member", "waiting", "leave")
        return f"GangFormat({', '.join(f'{f}={named(getattr(self, f))}' for f in fields)})"


@dataclass(frozen=True)
class ChildKind:
    """A child kind a plugin creates (`t9kjobs_child_kinds`), and how the engine treats it.

    The operator watches it (with the right to) only while the configured plugin declares it,
    and writes its objects to `/apis/<group>/<version>/namespaces/<ns>/<plural>`. A kind whose
    API the cluster does not serve is reported absent to the hooks (`absent_kinds`, spelled as
    `key`) and its objects are left out (`Degraded`). An object is compared with what the
    cluster holds by its `spec` (or `data`), labels and annotations; one that differs is:

    * updated in place, or with `replaced` (its spec is immutable, e.g. kube-scheduler's
      PodGroup), deleted and created again by the next reconcile;
    * with `without_pods` False (objects that place or guard pods: PodGroups, disruption
      budgets), deleted while the job has no pods to run (paused, finished, waiting in a
      queue), created again with them; otherwise kept until the job goes (its ownerReference).

    `gang`: for a kind whose objects place the job's pods together (a PodGroup), how the
    engine reads one (`GangFormat`); None for any other kind.
    """

    api_version: str  # "policy/v1"
    kind: str  # "PodDisruptionBudget"
    plural: str  # "poddisruptionbudgets"
    replaced: bool = False
    without_pods: bool = True
    gang: GangFormat | None = None

    @property
    def key(self) -> str:
        """The kind as the engine keys a job's children (`t9kjobs.objects.child_kind`)."""
        return child_kind(self.api_version, self.kind)
