"""Plugins configured for a test: what `t9kjobs operator --OPTION ...` does to the plugin
manager (`PluginManager.configure`), undone after the test (a session's manager is shared)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from t9kjobs.features import OptionValue
from t9kjobs.manager import PluginManager

__all__ = ["NO_GANGS", "configured"]

# The child kinds of a cluster that serves neither PodGroup kind (the T9k scheduler's, nor
# kube-scheduler's own, alpha in Kubernetes 1.36): as most clusters are. Under the default
# `--gang-scheduling auto`, a job there gets no PodGroup, and its pods join none.
NO_GANGS = frozenset({"PodGroup", "PodGroup.scheduling.k8s.io"})


@contextmanager
def configured(
    manager: PluginManager, options: Mapping[str, OptionValue]
) -> Iterator[PluginManager]:
    """`manager` with its plugins configured with `options` (by option name, e.g.
    `{"gang-scheduling": "native"}`), and with their defaults again after the block."""
    manager.configure(options)
    try:
        yield manager
    finally:
        manager.configure({})
