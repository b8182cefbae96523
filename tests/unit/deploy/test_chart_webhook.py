"""The chart's admission webhook (#52): on by default, every replica behind its Service, its
configuration the one the tests register (`t9kjobs.testing.harness.webhook`), a certificate
the API server can verify for that Service, `Fail` unless told `Ignore`, and off entirely with
`webhook.enabled: false`."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml
from cryptography import x509

from t9kjobs.controller.webhook import CERT_FILE, KEY_FILE, PATH
from t9kjobs.testing.harness.webhook import webhook_configuration
from t9kjobs.vocabulary import Obj
from tests.unit.deploy.chart import (
    CHART,
    CLUSTER_WIDE,
    NAMESPACE,
    RELEASE,
    by_kind,
    container,
    named,
    one,
    operator_args,
    render_chart,
)


def test_the_configuration_is_the_one_the_tests_register(render: Callable[..., list[Obj]]) -> None:
    (hook,) = one(render(), "ValidatingWebhookConfiguration")["webhooks"]
    (tested,) = webhook_configuration("x", "https://127.0.0.1:1/validate", b"ca")["webhooks"]
    for key in ("name", "rules", "sideEffects", "admissionReviewVersions", "failurePolicy"):
        assert hook[key] == tested[key], key
    assert [c["name"] for c in hook["matchConditions"]] == [
        c["name"] for c in tested["matchConditions"]
    ]
    said = [" ".join(c["expression"].split()) for c in hook["matchConditions"]]
    assert said == [" ".join(c["expression"].split()) for c in tested["matchConditions"]]
    assert hook["failurePolicy"] == "Fail" and 1 <= hook["timeoutSeconds"] <= 30
    assert "namespaceSelector" not in hook  # clusterWide: every namespace


def test_every_replica_serves_it_with_a_certificate_for_its_service(
    render: Callable[..., list[Obj]],
) -> None:
    objects = render()
    hook = one(objects, "ValidatingWebhookConfiguration")["webhooks"][0]
    service = named(objects, "Service", "webhook")
    secret = named(objects, "Secret", "webhook")
    assert hook["clientConfig"]["service"] == {
        "name": service["metadata"]["name"],
        "namespace": NAMESPACE,
        "path": PATH,
        "port": 443,
    }
    pod = one(objects, "Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] == "webhook" and ports["webhook"] == 9443
    args = operator_args(objects)
    assert args.webhook_bind_address == ":9443"
    (mount,) = container(objects)["volumeMounts"]
    assert mount["mountPath"] == args.webhook_cert_dir and mount["readOnly"] is True
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    # The API server verifies the Service's name against the caBundle.
    assert secret["type"] == "kubernetes.io/tls" and {CERT_FILE, KEY_FILE} <= set(secret["data"])
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"][CERT_FILE]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    host = f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert host in names.get_values_for_type(x509.DNSName)


def test_ignore_is_a_choice_and_an_unknown_policy_is_refused(
    render: Callable[..., list[Obj]], helm: Path
) -> None:
    objects = render({"webhook": {"failurePolicy": "Ignore"}})
    assert one(objects, "ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == (
        "Ignore"
    )
    proc = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--values", "-"],
        input=yaml.safe_dump({**CLUSTER_WIDE, "webhook": {"failurePolicy": "Never"}}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "choose Fail or Ignore" in proc.stderr, proc.stderr


def test_watched_namespaces_only_are_judged(helm: Path) -> None:
    objects = render_chart(helm, {"watchNamespaces": ["team-a", "team-b"]})
    hook = one(objects, "ValidatingWebhookConfiguration")["webhooks"][0]
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    ]


def test_disabled_nothing_of_it_is_rendered(render: Callable[..., list[Obj]]) -> None:
    objects = render({"webhook": {"enabled": False}})
    assert not by_kind(objects, "ValidatingWebhookConfiguration")
    assert not by_kind(objects, "Secret")
    assert [s["metadata"]["name"] for s in by_kind(objects, "Service")] == ["t9k-jobs-metrics"]
    assert operator_args(objects).webhook_bind_address == "0"
    assert "volumeMounts" not in container(objects)
    assert "webhook" not in {p["name"] for p in container(objects)["ports"]}
