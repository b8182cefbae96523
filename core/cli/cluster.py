"""What the cluster commands (`describe`, `logs`, completion) share: their arguments, and the
connection to the cluster they name. What they read is the client's (`t9kjobs.client`), so
the CLI and the Python client say the same things."""

from __future__ import annotations

import argparse

from t9kjobs.client.errors import ClientError
from t9kjobs.client.reader import ClusterReader
from t9kjobs.kube.transport import Transport, default_namespace, load_configuration
from t9kjobs.manager import PluginManager

__all__ = ["CliError", "add_cluster_arguments", "connect"]


class CliError(ClientError):
    """A user-facing failure of a cluster command: one line, exit 1."""


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", help="the job's namespace (default: the context's)")
    p.add_argument("--kubeconfig", help="path of a kubeconfig file")


def connect(args: argparse.Namespace, manager: PluginManager) -> tuple[ClusterReader, str]:
    """The reader and the namespace `args` name (else the kubeconfig context's)."""
    try:
        cfg = load_configuration(args.kubeconfig)
        namespace = args.namespace or default_namespace(args.kubeconfig)
    except Exception as exc:  # no kubeconfig, a broken one, not in a cluster
        raise CliError(f"no cluster to talk to: {exc}") from None
    return ClusterReader(Transport(cfg, qps=0), manager), namespace
