"""The operator's admission webhook on a test cluster: its certificate, and its
ValidatingWebhookConfiguration registered and removed.

A test cluster's API server runs on this machine, so it calls the operator's process at
`https://127.0.0.1:PORT/validate`: the certificate is made here (a CA, and a serving certificate
it signs for 127.0.0.1), and the configuration names the URL and the CA, where the chart names
its Service and the CA of its Secret. The rules, match conditions and failure policy are the
chart's (a unit test holds the two together): a test that registers this configuration tests
what a user installs.

Each configuration has a name of its own (a test module's, a benchmark's), so that modules or
tiers never remove each other's; a configuration left on a cluster whose operator is gone
refuses every job under `Fail`, so whoever registers one removes it (`registered`).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = [
    "PATH",
    "FailurePolicy",
    "match_conditions",
    "register_webhook",
    "registered",
    "remove_webhook",
    "webhook_configuration",
    "write_certificate",
]

# Where the operator serves the webhook (t9kjobs.controller.webhook.PATH; a unit test checks).
PATH = "/validate"
API_GROUP = "batch.tensorstack.dev"
FailurePolicy = Literal["Fail", "Ignore"]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def write_certificate(directory: Path, host: str = "127.0.0.1") -> bytes:
    """`directory/tls.crt` and `tls.key` for `host` (an IP address or a DNS name), signed by a
    CA made for them; the CA's PEM, for the configuration's caBundle. Valid for a day."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("t9k-jobs test webhook CA"))
        .issuer_name(_name("t9k-jobs test webhook CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM)


def match_conditions() -> list[dict[str, str]]:
    """When the API server calls the webhook: on a creation, and on an update that changes the
    spec of a job not being deleted. Removing a finalizer, changing labels or annotations and
    the status subresource (not matched by `resources: ["*"]` either) never wait on it."""
    return [
        {
            "name": "spec-created-or-changed",
            "expression": "request.operation == 'CREATE' || ("
            "!has(object.metadata.deletionTimestamp)"
            " && (!has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec))",
        }
    ]


def webhook_configuration(
    name: str, url: str, ca_bundle: bytes, failure_policy: FailurePolicy = "Fail"
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration `name` calling `url` (with the chart's rules)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "t9k-jobs-tests"}},
        "webhooks": [
            {
                "name": f"jobs.{API_GROUP}",
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_bundle).decode()},
                "rules": [
                    {
                        "apiGroups": [API_GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["*"],
                        "scope": "Namespaced",
                    }
                ],
                "matchConditions": match_conditions(),
                "failurePolicy": failure_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


def _kubectl(kubectl: str | Path, kubeconfig: str | Path, *args: str, stdin: str = "") -> str:
    argv = [str(kubectl), "--kubeconfig", str(kubeconfig), *args]
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def register_webhook(kubectl: str | Path, kubeconfig: str | Path, config: dict[str, Any]) -> None:
    """Create or replace the configuration: the API server calls it from the next request."""
    _kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=json.dumps(config))


def remove_webhook(kubectl: str | Path, kubeconfig: str | Path, name: str) -> None:
    _kubectl(
        kubectl,
        kubeconfig,
        "delete",
        "validatingwebhookconfiguration",
        name,
        "--ignore-not-found",
        "--wait=true",
    )


@contextmanager
def registered(
    kubectl: str | Path, kubeconfig: str | Path, config: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The configuration registered while the block runs, removed after, whatever happens."""
    register_webhook(kubectl, kubeconfig, config)
    try:
        yield config
    finally:
        remove_webhook(kubectl, kubeconfig, config["metadata"]["name"])
