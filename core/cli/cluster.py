"""What the cluster commands (`describe`, `logs`, completion) share: their arguments, and the
connection to the cluster they name. What they read is the client's (`t9kjobs.client`), so
the CLI and the Python client say the same things."""

from __future__ import annotations

import argparse

from t9kjobs.client.client import Client
from t9kjobs.client.errors import ClientError
from t9kjobs.client.reader import ClusterReader
from t9kjobs.manager import PluginManager

__all__ = ["CliError", "add_cluster_arguments", "connect"]


class CliError(ClientError):
    """A user-facing failure of a cluster command: one line, exit 1."""


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", help="the job's namespace (default: the context's)")
    p.add_argument("--kubeconfig", help="path of a kubeconfig file")


def connect(args: argparse.Namespace, manager: PluginManager) -> tuple[ClusterReader, str]:
    """The reader and the namespace `args` name (else the kubeconfig context's): the client's
    connection, so that both find the cluster the same way."""
    client = Client(kubeconfig=args.kubeconfig, namespace=args.namespace, plugins=manager)
    return client.reader, client.namespace
