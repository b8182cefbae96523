"""A PodDisruptionBudget per job, for jobs of every kind: a node drained for maintenance does
not evict a running job's pods below what it asks (a distributed job that loses one rank to an
eviction loses every rank's progress since its last checkpoint).

A *feature* plugin: it serves no kind of its own, it adds a child to every job. Written only
against the documented API (`t9kjobs.plugin`, docs/plugin-guide.md, "Feature plugins"):

* `t9kjobs_options` declares its one operator option, `--pdb-min-available N|P%` (default
  `100%`: no voluntary eviction of a running job's pods; `0`: no budget at all);
* `t9kjobs_configure` receives its value and returns the configured plugin (`Budgets`), which
  the plugin manager holds in the module's place;
* `Budgets.t9kjobs_child_kinds` declares `policy/v1` PodDisruptionBudgets, so the operator
  watches them and knows where to write them (updated in place when they differ; kept while a
  job is paused, deleted with the job through its ownerReference);
* `Budgets.t9kjobs_build_auxiliary_objects` builds one per job that has pods, selecting them
  by the owner labels the engine puts on every pod of every kind.

Pure: no I/O, the same job gives the same budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from t9kjobs.plugin import (
    ChildKind,
    DesiredPod,
    Job,
    KindInfo,
    Obj,
    Option,
    OptionValue,
    hookimpl,
    owner_labels,
    owner_reference,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "OPTION",
    "Budgets",
    "min_available",
    "t9kjobs_configure",
    "t9kjobs_kinds",
    "t9kjobs_options",
]

API_VERSION = "policy/v1"
KIND = "PodDisruptionBudget"
_PERCENT = re.compile(r"(100|[1-9]?[0-9])%")


def min_available(text: str) -> int | str:
    """`N` pods (N >= 0) or `P%` of them (0-100), as the option's value says it."""
    text = text.strip()
    if _PERCENT.fullmatch(text):
        return text
    if text.isdigit():
        return int(text)
    raise ValueError(f"{text!r} is neither a number of pods nor a percentage (e.g. 2 or 50%)")


OPTION = Option(
    "pdb-min-available",
    "a PodDisruptionBudget per job with pods: how many of them (N, or P%%) a voluntary"
    " eviction (a node drain) must leave running; default 100%%: none is evicted; 0: no budget",
    default="100%",
    metavar="N|P%",
    parse=min_available,
)


class Budgets:
    """The plugin configured with a budget: one PodDisruptionBudget per job with pods."""

    def __init__(self, least: int | str) -> None:
        self.least = least

    @hookimpl
    def t9kjobs_child_kinds(self) -> list[ChildKind]:
        return [ChildKind(API_VERSION, KIND, "poddisruptionbudgets")]

    @hookimpl
    def t9kjobs_build_auxiliary_objects(self, job: Job, pods: Sequence[DesiredPod]) -> list[Obj]:
        if not pods:
            return []
        # Never more than the pods there are: a budget above them would block every drain.
        least = min(self.least, len(pods)) if isinstance(self.least, int) else self.least
        own = owner_labels(job)
        return [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {
                    "name": job.name,
                    "namespace": job.namespace,
                    "labels": dict(own),
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": {"minAvailable": least, "selector": {"matchLabels": dict(own)}},
            }
        ]


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_options() -> Sequence[Option]:
    return [OPTION]


@hookimpl
def t9kjobs_configure(options: Mapping[str, OptionValue]) -> Budgets | None:
    """`0`: the module as registered, which adds nothing."""
    value = options[OPTION.name]
    least = value if isinstance(value, int) else min_available(str(value))
    return None if least in (0, "0%") else Budgets(least)
