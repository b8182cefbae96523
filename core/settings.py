"""Operator-wide settings that feature plugins read, set once by the command that runs the engine.

`t9kjobs operator --network-policy ... --gang-scheduling ...` turns its options into a
`Settings` and calls `configure` before it loads a job; the bundled `networkpolicy` and
`scheduling` feature plugins read `current()` when they build a job's children, and the engine
reads its Kueue policy (`KueuePolicy`, `t9kjobs.planner.queueing`). Nothing else writes them.

Why a setting object in core, and not another way to reach the plugin:

* the hooks take a job and its pods: an option of the operator is not part of a job, and a new
  hook argument would change the contract of every plugin, third-party ones too, for one
  feature;
* core never imports a plugin (the layer rules of `.importlinter`), so the operator cannot
  call into the plugin to configure it: the plugin reads core instead;
* an environment variable read when the plugin loads would be read before the command line is
  parsed (plugins load before the sub-command runs), and would be a second, untyped spelling
  of the option; a frozen value here is checked once, when the command line is parsed, and a
  test sets it with `configured(...)` and gets the previous one back.

The planner stays pure in practice: the settings never change while an operator runs, so a
job and its children give the same plan every time, as before. Without `configure` every
setting is off, which is what `t9kjobs render` and the plugins' unit tests see.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, get_args

__all__ = [
    "GANG_MODES",
    "GangMode",
    "KueuePolicy",
    "NetworkPolicySettings",
    "Settings",
    "configure",
    "configured",
    "current",
    "parse_labels",
]

# RFC 1123 labels (a namespace's name), label values and label keys, as the API server checks
# them: a policy the API server refuses would fail every job (ChildRejected), so a bad value is
# refused when the operator's command line is parsed instead.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`a=b,c=d` as sorted (key, value) pairs; ValueError naming what is wrong."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise ValueError(f"{item.strip()!r} is not KEY=VALUE")
        if not _label_key(key):
            raise ValueError(f"{key!r} is not a label key")
        if not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f"{value!r} (label {key}) is not a label value")
        pairs[key] = value
    return tuple(sorted(pairs.items()))


@dataclass(frozen=True)
class NetworkPolicySettings:
    """A NetworkPolicy per job (the `networkpolicy` feature plugin): with `enabled`, each job
    owns one selecting its pods, which admits ingress from the job's own pods only, plus:

    * `allow_namespaces`: every pod of these namespaces (e.g. the monitoring namespace that
      scrapes the jobs' metrics);
    * `allow_pods`: pods of the job's own namespace that carry all the labels of one entry
      (e.g. a notebook or a TensorBoard beside the jobs), one peer per entry; never a pod of
      a job (the plugin's `NOT_A_REPLICA`), whatever labels its template gives it.
    """

    enabled: bool = False
    allow_namespaces: tuple[str, ...] = ()
    allow_pods: tuple[tuple[tuple[str, str], ...], ...] = ()

    def __post_init__(self) -> None:
        for name in self.allow_namespaces:
            if not _DNS_LABEL.fullmatch(name):
                raise ValueError(f"{name!r} is not a namespace name")
        for labels in self.allow_pods:
            if not labels:
                raise ValueError("an allowed pod selector needs at least one label")
            for key, value in labels:
                if not _label_key(key) or not _LABEL_VALUE.fullmatch(value):
                    raise ValueError(f"{key}={value} is not a label")

    @classmethod
    def of(
        cls, enabled: bool, namespaces: Sequence[str] = (), pods: Sequence[str] = ()
    ) -> NetworkPolicySettings:
        """From command-line values: namespaces and `KEY=VALUE[,KEY=VALUE]` selectors, each
        possibly repeated or comma-separated (namespaces); sorted, without duplicates."""
        names = sorted({n.strip() for value in namespaces for n in value.split(",") if n.strip()})
        selectors = sorted({parse_labels(value) for value in pods})
        return cls(enabled, tuple(names), tuple(selectors))


# How a job's pods are placed together (the `scheduling` feature plugin, docs/scheduling.md):
# * auto: a job that sets spec.scheduler.t9kScheduler gets a T9k PodGroup (when the cluster
#   serves it, or serves no gang API at all: then Degraded, as always), every other job a
#   PodGroup of kube-scheduler's own (scheduling.k8s.io/v1alpha2) when the cluster serves it;
# * native: every job a kube-scheduler PodGroup when served, t9kScheduler ignored;
# * t9k: only jobs that set t9kScheduler, a T9k PodGroup;
# * none: no PodGroup, pods placed one by one.
GangMode = Literal["auto", "native", "t9k", "none"]
GANG_MODES: tuple[GangMode, ...] = get_args(GangMode)


@dataclass(frozen=True)
class KueuePolicy:
    """What the cluster administrator makes of Kueue for every job, read by the engine
    (`t9kjobs.planner.queueing`, docs/scheduling.md; `t9kjobs operator --kueue-*`):

    * `require_all` / `require_namespaces`: a job must wait in a Kueue queue in every
      namespace, or in these (Kueue's `manageJobsWithoutQueueName` and its
      `managedJobsNamespaceSelector`). A job there that names no queue goes to the LocalQueue
      `default_queue` of its namespace where one of that name exists (as Kueue's
      LocalQueueDefaulting does with the LocalQueue `default`), and is refused otherwise: no
      pod, its `Admitted` condition and a Warning Event say so;
    * `resource_claim_templates`: Kueue counts the devices of a pod's ResourceClaimTemplates
      (its DynamicResourceAllocation feature gate is on, and its deviceClassMappings name the
      DeviceClasses the jobs use). Without it a queued job whose pods have a
      `resourceClaimTemplateName` is refused: Kueue would admit it without counting them.
    """

    require_all: bool = False
    require_namespaces: tuple[str, ...] = ()
    default_queue: str = ""
    resource_claim_templates: bool = False

    def __post_init__(self) -> None:
        for name in self.require_namespaces:
            if not _DNS_LABEL.fullmatch(name):
                raise ValueError(f"{name!r} is not a namespace name")
        queue = self.default_queue
        if queue and (len(queue) > 63 or not _DNS_SUBDOMAIN.fullmatch(queue)):
            # It is a label's value too (kueue.x-k8s.io/queue-name): at most 63 characters.
            raise ValueError(f"{queue!r} is not a LocalQueue name")
        if queue and not self.requires_some():
            raise ValueError("a default queue needs namespaces that require a queue")

    @classmethod
    def of(
        cls, require: Sequence[str] = (), default_queue: str = "", claim_templates: bool = False
    ) -> KueuePolicy:
        """From command-line values: `all`, or namespaces (repeated or comma-separated)."""
        names = {n.strip() for value in require for n in value.split(",") if n.strip()}
        every = "all" in names
        return cls(
            require_all=every,
            require_namespaces=() if every else tuple(sorted(names)),
            default_queue=default_queue.strip(),
            resource_claim_templates=claim_templates,
        )

    def requires_some(self) -> bool:
        return self.require_all or bool(self.require_namespaces)

    def requires_queue(self, namespace: str) -> bool:
        """Whether a job of `namespace` must wait in a Kueue queue."""
        return self.require_all or namespace in self.require_namespaces


@dataclass(frozen=True)
class Settings:
    network_policy: NetworkPolicySettings = field(default_factory=NetworkPolicySettings)
    # `t9k` unless configured: what `t9kjobs render` and plugins' unit tests see, as before
    # kube-scheduler had gangs; the operator's default is `auto` (--gang-scheduling).
    gang_scheduling: GangMode = "t9k"
    # Queueing made mandatory, and what Kueue is known to count (KueuePolicy): read by the
    # engine itself, not a plugin; nothing required unless configured.
    kueue: KueuePolicy = field(default_factory=KueuePolicy)


_current = Settings()


def current() -> Settings:
    """The settings the engine runs with (all off until `configure`)."""
    return _current


def configure(settings: Settings) -> None:
    """Set the settings of this process: once, before the first job is planned."""
    global _current
    _current = settings


@contextmanager
def configured(settings: Settings) -> Iterator[Settings]:
    """`settings` for the duration of a `with` block (tests), the previous ones after it."""
    before = current()
    configure(settings)
    try:
        yield settings
    finally:
        configure(before)
