"""Contracts of a feature plugin (one that declares no kind and adds to every kind's pods or
children), and the one contract every plugin keeps about the children it creates.

A feature plugin is checked with the examples of its own folder, jobs of any installed kind:
configured with its options' defaults (as `t9kjobs operator` runs it without the flags), it
declares well-formed options and child kinds, and what it adds to a job is of a kind some
plugin declares (`children_are_of_declared_kinds`, checked for framework plugins too), owned by
the job (`children_carry_owner_labels_and_references`) and built without I/O
(`hooks_do_no_io`).
"""

from __future__ import annotations

import re

from t9kjobs.features import ChildKind, Option
from t9kjobs.kube.resources import CHILD_RESOURCES
from t9kjobs.objects import object_key
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["children_are_of_declared_kinds", "declares_options_and_child_kinds"]

_OPTION_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_PLURAL = re.compile(r"^[a-z][a-z0-9]*$")
_CROSS_CUTTING = ("t9kjobs_build_auxiliary_objects", "t9kjobs_mutate_pod")


def _option_problems(option: object) -> list[str]:
    if not isinstance(option, Option):
        return [f"{option!r} is not a t9kjobs.plugin.Option"]
    problems = []
    if not _OPTION_NAME.fullmatch(option.name):
        problems.append(f"option {option.name!r}: a flag name is lowercase words and dashes")
    if option.choices and not option.flag and option.default not in option.choices:
        problems.append(f"--{option.name}: its default {option.default!r} is not a choice")
    if not option.help.strip():
        problems.append(f"--{option.name}: no help (`t9kjobs operator --help` shows it)")
    return problems


def _child_kind_problems(child: object) -> list[str]:
    if not isinstance(child, ChildKind):
        return [f"{child!r} is not a t9kjobs.plugin.ChildKind"]
    group, _, version = child.api_version.rpartition("/")
    problems = []
    if not group or not version:
        problems.append(f"{child.kind}: apiVersion {child.api_version!r} is not GROUP/VERSION")
    if not _PLURAL.fullmatch(child.plural):
        problems.append(f"{child.kind}: plural {child.plural!r} is not a lowercase resource name")
    if child.key in CHILD_RESOURCES:
        problems.append(f"{child.key} is the engine's own child kind: declare only your own")
    return problems


def declares_options_and_child_kinds(subject: Subject, _: None) -> None:
    """A feature plugin declares well-formed options and the child kinds it creates.

    It declares no kind (`t9kjobs_kinds` empty or absent); `t9kjobs_options` (optional) returns
    the same `Option`s on every call, each a lowercase flag name with help and a default among
    its choices; configured with their defaults, the plugin the manager holds implements a
    cross-cutting hook (`t9kjobs_build_auxiliary_objects` or `t9kjobs_mutate_pod`) or
    declares options to turn one on, and its `t9kjobs_child_kinds` are `ChildKind`s of an API
    group (`GROUP/VERSION`, a lowercase plural), none of the engine's own.
    """
    manager = subject.loaded()
    plugin = subject.plugin
    kinds = getattr(plugin, "t9kjobs_kinds", None)
    if kinds is not None and list(subject.guard.call("t9kjobs_kinds", kinds)):
        raise ContractViolation("declares kinds: the feature contracts are for feature plugins")
    declare = getattr(plugin, "t9kjobs_options", None)
    options = list(subject.guard.call("t9kjobs_options", declare)) if declare else []
    if declare is not None and options != list(subject.guard.call("t9kjobs_options", declare)):
        raise ContractViolation("t9kjobs_options returned different options on a second call")
    for problem in (p for option in options for p in _option_problems(option)):
        raise ContractViolation(problem)
    held = manager.held(subject.name)
    if not options and not any(callable(getattr(held, h, None)) for h in _CROSS_CUTTING):
        raise ContractViolation(
            "implements neither t9kjobs_build_auxiliary_objects nor t9kjobs_mutate_pod: a"
            " feature plugin adds to every kind's pods or children"
        )
    declared = getattr(held, "t9kjobs_child_kinds", None)
    children = list(subject.guard.call("t9kjobs_child_kinds", declared)) if declared else []
    for problem in (p for child in children for p in _child_kind_problems(child)):
        raise ContractViolation(problem)


def children_are_of_declared_kinds(subject: Subject, example: Example) -> None:
    """Every child the first reconcile creates is of a kind the operator knows.

    The engine's own (Pods, Services, ConfigMaps, Secrets, TensorBoards, Workloads) or one a
    configured plugin declares (`t9kjobs_child_kinds`): the operator watches only those, and
    writes an object only where its kind's declaration says (its REST path). Checked with
    every plugin configured with its defaults, on a cluster that serves every kind.
    """
    job = subject.job(example)
    known = {*CHILD_RESOURCES, *subject.loaded().child_kinds()}
    for obj in subject.first_reconcile(job).create:
        kind, name = object_key(obj)
        if kind not in known:
            raise ContractViolation(
                f"{example.id}: {kind} {name} is of a kind no plugin declares"
                " (t9kjobs_child_kinds): the operator would neither watch it nor know where to"
                " write it"
            )
