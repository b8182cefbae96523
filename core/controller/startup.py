"""What can stop `t9kjobs operator` from starting, said in one line with what to do.

No configuration, a kubeconfig that cannot be read or used, a probe, metrics or webhook address
that is taken or malformed, a webhook certificate that cannot be read, an API server that cannot
be reached or refuses the credentials: each is a `StartupError` whose message names the problem
and the fix; the command prints it and exits 2.
"""

from __future__ import annotations

import errno
import os
import ssl
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from kubernetes import client as k8s_client
from prometheus_client import CollectorRegistry

from t9kjobs.controller.server import serve
from t9kjobs.controller.webhook import CERT_FILE, KEY_FILE, WebhookServer, serve_webhook
from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.manager import PluginManager

__all__ = ["StartupError", "configuration", "listen", "listen_webhook", "preflight"]


class StartupError(Exception):
    """The operator cannot start; the message says what is wrong and what to do."""


def configuration(kubeconfig: str | None) -> k8s_client.Configuration:
    """The client configuration (`load_configuration`), or a StartupError saying why not."""
    source = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    if kubeconfig and not os.path.isfile(kubeconfig):
        raise StartupError(
            f"the kubeconfig {kubeconfig} does not exist or is not a file; pass an existing"
            " one with --kubeconfig"
        )
    try:
        return load_configuration(kubeconfig)
    except Exception as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if "Service host/port is not set" in detail:
            raise StartupError(
                "no Kubernetes configuration: no kubeconfig (--kubeconfig, $KUBECONFIG,"
                " ~/.kube/config) and not running in a pod; pass --kubeconfig FILE or set"
                " KUBECONFIG"
            ) from None
        raise StartupError(
            f"cannot use the kubeconfig {source}: {detail[:300]}; check the file, or pass"
            " another with --kubeconfig"
        ) from None


def listen(
    address: str,
    flag: str,
    registry: CollectorRegistry | None,
    ready: Callable[[], bool],
    healthy: Callable[[], bool],
) -> ThreadingHTTPServer | None:
    """`serve` the endpoint, or a StartupError naming the flag to change."""
    try:
        return serve(address, registry, ready, healthy)
    except ValueError:
        raise StartupError(
            f"{flag} {address!r} is not an address: write host:port or :port (port 0 disables"
            " the endpoint)"
        ) from None
    except OSError as exc:
        what = "is in use" if exc.errno == errno.EADDRINUSE else f"fails: {exc.strerror or exc}"
        raise StartupError(
            f"cannot listen on {address} ({flag}): the address {what}; choose another with"
            f" {flag} (port 0 disables the endpoint)"
        ) from None


def listen_webhook(address: str, cert_dir: str, manager: PluginManager) -> WebhookServer | None:
    """`serve_webhook`, or a StartupError naming the flag to change: a replica that was asked
    to serve admission and cannot must not look healthy while the API server's calls fail."""
    try:
        return serve_webhook(address, cert_dir, manager)
    except ValueError:
        raise StartupError(
            f"--webhook-bind-address {address!r} is not an address: write host:port or :port"
            " (port 0 disables the webhook)"
        ) from None
    except ssl.SSLError as exc:
        raise StartupError(
            f"the webhook's certificate and key in {cert_dir} cannot be used: {exc}; give"
            f" --webhook-cert-dir a directory whose {CERT_FILE} and {KEY_FILE} match"
        ) from None
    except FileNotFoundError:
        raise StartupError(
            f"no {CERT_FILE} and {KEY_FILE} in {cert_dir!r} (--webhook-cert-dir): the webhook"
            " serves HTTPS only; mount its TLS Secret there, or disable it with"
            " --webhook-bind-address 0"
        ) from None
    except OSError as exc:
        what = "is in use" if exc.errno == errno.EADDRINUSE else f"fails: {exc.strerror or exc}"
        raise StartupError(
            f"cannot serve the webhook on {address} (--webhook-bind-address): {what}; choose"
            " another address (port 0 disables the webhook)"
        ) from None


def preflight(transport: Transport, server: str) -> None:
    """One request to the API server, so that a wrong address or credentials stop the start."""
    try:
        transport.request("GET", "/version", timeout=15)
    except ApiError as exc:
        if exc.status in (401, 403):
            raise StartupError(
                f"the API server at {server} refused the operator's credentials ({exc}); check"
                " the kubeconfig's user, or the service account and its RBAC"
            ) from None
        raise StartupError(f"the API server at {server} answered {exc}") from None
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise StartupError(
            f"cannot reach the API server at {server}: {detail}; check that the cluster runs"
            " and the kubeconfig's server address"
        ) from None
