"""The admission webhook answers as `t9kjobs validate` does (#52): the same refusals in the same
words, warnings as admission warnings, a third party's kind by its own plugin, what is not ours
let through; over TLS, each connection's
handshake in its own thread; and an operator that cannot serve it says why and exits 2."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.controller import webhook
from t9kjobs.controller.startup import StartupError, listen_webhook
from t9kjobs.controller.webhook import WebhookServer, review, serve_webhook
from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import Problem
from t9kjobs.loading import judge
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.testing.harness import webhook as harness_webhook
from t9kjobs.testing.harness.process import free_port
from t9kjobs.testing.harness.webhook import write_certificate
from tests.unit.core.planner.tinyjob import TinyJobSpec, TinyPlugin, tiny_job

EXAMPLES = Path(__file__).parents[4] / "examples"


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return load_plugins()


def _example(path: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / path).read_text())


def _review(obj: Any, operation: str = "CREATE", uid: str = "u-1") -> bytes:
    request = {"uid": uid, "operation": operation, "object": obj, "name": "x"}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "request": request}).encode()


def test_a_valid_job_is_allowed_and_the_uid_echoed(manager: PluginManager) -> None:
    answer = review(_review(_example("genericjob/mlp-cpu.yaml")), manager)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"] == {"uid": "u-1", "allowed": True}


def test_a_refusal_is_validates_own_in_the_same_words(manager: PluginManager) -> None:
    job = _example("genericjob/invalid/rule-names-unknown-type.yaml")
    response = review(_review(job, "UPDATE"), manager)["response"]
    errors = judge(job, manager).errors
    assert errors and response["allowed"] is False
    assert response["status"]["code"] == 422 and response["status"]["reason"] == "Invalid"
    message = response["status"]["message"]
    assert message.startswith('GenericJob.batch.tensorstack.dev "unknown-rule-type" is invalid')
    assert all(str(p) in message for p in errors), message
    assert "spec.successRules[0].chief" in message


def test_warnings_go_back_as_admission_warnings(manager: PluginManager) -> None:
    job = {**_example("genericjob/mlp-cpu.yaml"), "status": {"phase": "Running"}}
    response = review(_review(job), manager)["response"]
    assert response["allowed"] is True
    said = [f"{w.path}: {w.message}" for w in judge(job, manager).warnings]
    assert said and response["warnings"] == said
    assert response["warnings"][0].startswith("status: ignored: the API server drops")


def test_a_job_nested_too_deep_is_refused_with_its_path_not_a_crash(
    manager: PluginManager,
) -> None:
    job = _example("genericjob/mlp-cpu.yaml")
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"x": "DEEP"}
    deep = "[" * 3000 + '"x"' + "]" * 3000  # deeper than Python's JSON decoder goes
    body = _review(job, uid="d").replace(b'"DEEP"', deep.encode())
    response = review(body, manager)["response"]
    assert response["allowed"] is False and response["uid"] == "d"
    assert "spec.replicaSpecs[0].template" in response["status"]["message"]
    assert "nested deeper than 100 levels" in response["status"]["message"]


def test_what_is_not_ours_to_judge_is_let_through(manager: PluginManager) -> None:
    other = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "NoSuchJob", "spec": 1}
    assert review(_review(other), manager)["response"]["allowed"] is True
    bad = _example("genericjob/invalid/rule-names-unknown-type.yaml")
    assert review(_review(bad, "DELETE"), manager)["response"]["allowed"] is True


def test_a_body_that_is_not_a_review_is_refused_with_a_reason(manager: PluginManager) -> None:
    for body in (b"not json", b"[]", b'{"request": 3}'):
        response = review(body, manager)["response"]
        assert response["allowed"] is False and response["status"]["code"] == 400, body
    response = review(_review(None), manager)["response"]
    assert response == {
        "uid": "u-1",
        "allowed": False,
        "status": {
            "code": 400,
            "reason": "BadRequest",
            "message": "the admission request carries no object",
        },
    }


def test_a_plugin_check_that_raises_refuses_the_job_and_names_its_kind(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(job: Any, manager: Any) -> list[Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr("t9kjobs.loading.check_job", broken)
    response = review(_review(_example("genericjob/mlp-cpu.yaml")), manager)["response"]
    assert response["allowed"] is False
    assert (
        "spec: internal error in the checks of GenericJob: RuntimeError('boom')"
        in (response["status"]["message"])
    )


def test_the_harness_registers_the_path_the_operator_serves() -> None:
    assert harness_webhook.PATH == webhook.PATH


# -- over TLS -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    directory = tmp_path_factory.mktemp("certs")
    return directory, write_certificate(directory)


@pytest.fixture
def served(certificate: tuple[Path, bytes], manager: PluginManager) -> Iterator[WebhookServer]:
    server = serve_webhook(f"127.0.0.1:{free_port()}", str(certificate[0]), manager)
    assert server is not None
    yield server
    server.shutdown()
    server.server_close()


def _post(server: WebhookServer, ca: bytes, body: bytes, path: str = webhook.PATH) -> Any:
    context = ssl.create_default_context(cadata=ca.decode())
    port = server.server_address[1]
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return json.loads(answer.read())


def test_over_tls_with_the_ca_a_silent_client_blocking_no_one(
    served: WebhookServer, certificate: tuple[Path, bytes]
) -> None:
    port = served.server_address[1]
    with socket.create_connection(("127.0.0.1", port)):  # connects, never handshakes
        job = _example("genericjob/invalid/rule-names-unknown-type.yaml")
        answer = _post(served, certificate[1], _review(job))
    assert answer["response"]["allowed"] is False
    assert "spec.successRules[0].chief" in answer["response"]["status"]["message"]
    with pytest.raises(urllib.error.HTTPError) as elsewhere:
        _post(served, certificate[1], _review(job), path="/other")
    assert elsewhere.value.code == 404


def test_port_0_is_off_and_each_reason_it_cannot_serve_is_a_startup_error(
    certificate: tuple[Path, bytes], manager: PluginManager, tmp_path: Path
) -> None:
    assert serve_webhook("0", "", manager) is None
    cases = [
        ("nonsense", str(certificate[0]), "is not an address"),
        (f"127.0.0.1:{free_port()}", str(tmp_path), "no tls.crt and tls.key"),
    ]
    mismatched = tmp_path / "mismatched"
    write_certificate(mismatched)
    (mismatched / "tls.key").write_bytes((certificate[0] / "tls.key").read_bytes())
    cases.append((f"127.0.0.1:{free_port()}", str(mismatched), "cannot be used"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cases.append((f"127.0.0.1:{taken.getsockname()[1]}", str(certificate[0]), "is in use"))
        for address, cert_dir, said in cases:
            with pytest.raises(StartupError, match=said):
                listen_webhook(address, cert_dir, manager)


def test_a_renewed_certificate_is_served_without_a_restart(
    manager: PluginManager, tmp_path: Path
) -> None:
    old_ca = write_certificate(tmp_path)
    server = serve_webhook(f"127.0.0.1:{free_port()}", str(tmp_path), manager)
    assert server is not None
    try:
        job = _example("genericjob/mlp-cpu.yaml")
        assert _post(server, old_ca, _review(job))["response"]["allowed"] is True
        new_ca = write_certificate(tmp_path)  # as the kubelet renews a mounted Secret
        assert _post(server, new_ca, _review(job))["response"]["allowed"] is True
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            _post(server, old_ca, _review(job))
    finally:
        server.shutdown()
        server.server_close()


class _Picky(TinyPlugin):
    """A third party's kind with a check of its own: at most 3 workers."""

    @hookimpl
    def t9kjobs_validate(self, job: Any) -> list[Problem]:
        count = sum(rs.replicas for rs in job.spec_as(TinyJobSpec).replica_specs)
        return (
            [Problem("spec.replicaSpecs", f"{count} workers; TinyJob takes 3")] if count > 3 else []
        )


def test_a_third_party_kind_is_judged_by_its_own_plugin() -> None:
    picky = PluginManager()
    picky.register(_Picky(), "picky")
    response = review(_review(tiny_job(replicas=5)), picky)["response"]
    assert response["allowed"] is False
    assert "spec.replicaSpecs: 5 workers; TinyJob takes 3" in response["status"]["message"]
    assert review(_review(tiny_job(replicas=2)), picky)["response"]["allowed"] is True
