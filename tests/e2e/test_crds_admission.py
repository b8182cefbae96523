"""`t9kjobs validate` and the generated CRDs agree, on a real API server (hack/cluster).

The same manifests go to both: every example in examples/ is accepted by both (and nothing in
it is pruned by the server), and each invalid manifest below is refused by both. Server-side
dry runs (`kubectl apply --dry-run=server`) check admission without creating anything; the
transition rules (immutable elastic bounds, resumeSpecs frozen while paused) and the scale
subresource need a stored object and create real ones in the test's namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9kjobs.cli.main import main
from t9kjobs.crds import crds
from t9kjobs.manager import PluginManager, load_plugins
from t9kjobs.models import API_VERSION
from tests.repo import REPO

pytestmark = pytest.mark.e2e

FIELD_MANAGER = "t9kjobs-crds-e2e"
CONTAINER = {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
TEMPLATE = {"spec": {"containers": [CONTAINER]}}


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return load_plugins()


@pytest.fixture(scope="module")
def installed(cluster: Any, manager: PluginManager) -> PluginManager:
    """The CRDs generated from the models now (not `crds/`, which may lag), installed."""
    stream = "".join(text for _, text in crds(manager))
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        "-",
        input=stream,
    )
    for doc in yaml.safe_load_all(stream):
        name = doc["metadata"]["name"]
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
        crd = json.loads(cluster.kubectl("get", f"crd/{name}", "-o", "json").stdout)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("NonStructuralSchema") != "True", f"{name}: {crd['status']}"
    # The API server swaps in a new schema shortly after the CRD update: wait until an alias
    # spelling (pruned by an older schema) survives.
    probe = generic_job("probe", scheduler={"t9kScheduler": {"Queue": "q"}})

    def alias_kept() -> bool:
        proc = dry_run(cluster, "default", probe)
        return proc.returncode == 0 and '"Queue"' in proc.stdout

    cluster.poll(alias_kept, timeout=60, message="the new CRD schemas to be served")
    return manager


# -- manifests ---------------------------------------------------------------------------------


def manifest_of(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def generic_job(name: str, **spec: Any) -> dict[str, Any]:
    body = {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": TEMPLATE}]}
    return manifest_of("GenericJob", name, {**body, **spec})


def deepspeed_job(name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "config": {"run": {"python": ["train.py"]}},
        "worker": {"replicas": 2, "template": TEMPLATE},
    }
    return manifest_of("DeepSpeedJob", name, {**body, **spec})


def colossalai_job(name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "torchConfig": {"script": ["train.py"]},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": TEMPLATE}],
    }
    return manifest_of("ColossalAIJob", name, {**body, **spec})


def paused(**resume: Any) -> dict[str, Any]:
    return {"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", **resume}]}}


# (case id, manifest, text both refusals must contain: validate's stderr, then the server's)
INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "deepspeed-python-and-module",
        deepspeed_job("bad", config={"run": {"python": ["a.py"], "module": ["b"]}}),
        "exactly one of python, module and exec",
        "exactly one of python, module and exec",
    ),
    (
        "deepspeed-python-and-Module-alias",
        deepspeed_job("bad", config={"run": {"python": ["a.py"], "Module": ["b"]}}),
        "exactly one of python, module and exec",
        "exactly one of python, module and exec",
    ),
    (
        "managed-by-not-a-domain-prefixed-path",
        generic_job("bad", managedBy="multikueue"),
        "spec.managedBy: 'multikueue' is not a domain-prefixed path",
        "spec.managedBy: Invalid value",
    ),
    (
        "managed-by-over-63",
        generic_job("bad", managedBy="acme.io/" + "x" * 60),
        "spec.managedBy: must have at most 63 characters",
        "spec.managedBy: Too long",
    ),
    (
        "priority-101",
        generic_job("bad", scheduler={"t9kScheduler": {"queue": "q", "priority": 101}}),
        "spec.scheduler.t9kScheduler.priority: must be <= 100",
        "spec.scheduler.t9kScheduler.priority: Invalid value: 101",
    ),
    (
        "min-replicas-above-max",
        deepspeed_job("bad", elastic={"enabled": True, "minReplicas": 4, "maxReplicas": 2}),
        "minReplicas (4) must be <= maxReplicas (2)",
        "minReplicas must be <= maxReplicas",
    ),
    (
        "expected-replicas-above-max",
        deepspeed_job(
            "bad",
            elastic={"enable": True, "minReplicas": 1, "maxReplicas": 2, "expectedReplicas": 3},
        ),
        "expectedReplicas (3) must be <= maxReplicas (2)",
        "expectedReplicas must be <= maxReplicas",
    ),
    (
        "restart-policy-string",
        generic_job("bad", replicaSpecs=[{"type": "w", "restartPolicy": "Sometimes"}]),
        "spec.replicaSpecs[0].restartPolicy: must be one of `Always`",
        'spec.replicaSpecs[0].restartPolicy: Invalid value: "Sometimes"',
    ),
    (
        "restart-policy-object",
        generic_job("bad", replicaSpecs=[{"type": "w", "restartPolicy": {"policy": "Sometimes"}}]),
        "spec.replicaSpecs[0].restartPolicy.policy: must be one of `Always`",
        'spec.replicaSpecs[0].restartPolicy.policy: Unsupported value: "Sometimes"',
    ),
    (
        "restart-policy-negative-limit",
        generic_job(
            "bad", replicaSpecs=[{"type": "w", "restartPolicy": {"policy": "Never", "limit": -1}}]
        ),
        "spec.replicaSpecs[0].restartPolicy.limit: must be >= 0",
        "spec.replicaSpecs[0].restartPolicy.limit: Invalid value: -1",
    ),
    (
        "restart-policy-object-unknown-key",
        generic_job(
            "bad", replicaSpecs=[{"type": "w", "restartPolicy": {"policy": "Never", "retries": 1}}]
        ),
        "spec.replicaSpecs[0].restartPolicy.retries: unknown field",
        "spec.replicaSpecs[0].restartPolicy: Too many: 3",
    ),
    (
        # kubectl asks for strict field validation: the server refuses what it would prune.
        "unknown-field",
        generic_job("bad", restartPolicy="Never"),
        "spec.restartPolicy: unknown field",
        'unknown field "spec.restartPolicy"',
    ),
    (
        "duplicate-replica-types",
        generic_job("bad", replicaSpecs=[{"type": "w"}, {"type": "w"}]),
        "replica types must be unique",
        "replica types must be unique",
    ),
    (
        "clean-up-policy",
        generic_job("bad", cleanUpPolicy="Sometimes"),
        "spec.cleanUpPolicy: must be one of `All`",
        'spec.cleanUpPolicy: Unsupported value: "Sometimes"',
    ),
    (
        "enabled-and-enable",
        generic_job("bad", runMode={"debug": {"enabled": True, "enable": True}}),
        "set only one of `enabled` or `enable`",
        "set only one of `enabled` or `enable`",
    ),
    (
        "deepspeed-resume-command",
        deepspeed_job("bad", runMode=paused(command=["python", "resume.py"])),
        "spec.runMode.pause.resumeSpecs[0].command: `command` cannot be set on resume",
        "spec.runMode.pause.resumeSpecs[0].command: Forbidden: `command` cannot be set on resume",
    ),
    (
        "colossalai-resume-args",
        colossalai_job("bad", runMode=paused(args=["--resume"])),
        "spec.runMode.pause.resumeSpecs[0].args: `args` cannot be set on resume",
        "spec.runMode.pause.resumeSpecs[0].args: Forbidden: `args` cannot be set on resume",
    ),
    (
        "service-ports-unnamed",
        generic_job("bad", service={"ports": [{"port": 80}, {"port": 81}]}),
        "spec.service.ports[0].name: required when there is more than one port",
        "every port needs a name when there is more than one",
    ),
    (
        "service-ports-same-port",
        generic_job(
            "bad", service={"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}
        ),
        "spec.service.ports[1]: port 80/TCP is repeated",
        "each port and protocol may appear only once",
    ),
    (
        "queue-missing",
        generic_job("bad", scheduler={"t9kScheduler": {"priority": 1}}),
        "spec.scheduler.t9kScheduler.queue: required field is missing",
        "spec.scheduler.t9kScheduler.queue: Required value",
    ),
]


def dry_run(cluster: Any, namespace: str, manifest: dict[str, Any]) -> Any:
    return cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        "-",
        input=json.dumps(manifest),
        check=False,
    )


def validate(tmp_path: Path, manifest: dict[str, Any], capsys: Any) -> tuple[int, str]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    rc = main(["validate", str(path)])
    return rc, capsys.readouterr().err


def subset_problems(given: Any, stored: Any, path: str = "spec") -> Iterator[str]:
    """Where `stored` lost or changed what `given` holds (defaults may add fields)."""
    if isinstance(given, dict):
        if not isinstance(stored, dict):
            yield f"{path}: became {stored!r}"
            return
        for key, value in given.items():
            if key not in stored:
                yield f"{path}.{key}: pruned"
            else:
                yield from subset_problems(value, stored[key], f"{path}.{key}")
    elif isinstance(given, list):
        if not isinstance(stored, list) or len(stored) != len(given):
            yield f"{path}: became {stored!r}"
            return
        for i, (a, b) in enumerate(zip(given, stored, strict=True)):
            yield from subset_problems(a, b, f"{path}[{i}]")
    elif given != stored:
        yield f"{path}: {given!r} became {stored!r}"


def examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((REPO / "examples").rglob("*.yaml")):
        parts = path.relative_to(REPO / "examples").parts
        if "invalid" in parts:
            continue  # refused on purpose: the conformance kit's invalid examples
        if parts[0] == "plugin-template":
            continue  # a separate distribution: `make conformance` installs and checks it
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and doc.get("apiVersion") == API_VERSION:
                found.append((f"{path.relative_to(REPO)}[{i}]", doc))
    return found


# -- the tests ---------------------------------------------------------------------------------


def test_every_kind_has_an_established_crd(cluster: Any, installed: PluginManager) -> None:
    out = cluster.kubectl("api-resources", "--api-group=batch.tensorstack.dev", "-o", "name")
    resources = set(out.stdout.split())
    for info in installed.kinds.values():
        assert f"{info.plural}.batch.tensorstack.dev" in resources


@pytest.mark.parametrize(("where", "manifest"), examples(), ids=[w for w, _ in examples()])
def test_examples_are_accepted_by_both_and_nothing_is_pruned(
    cluster: Any,
    installed: PluginManager,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
    manifest: dict[str, Any],
) -> None:
    assert manifest["kind"] in installed.kinds, f"no installed plugin serves {manifest['kind']}"
    rc, err = validate(tmp_path, manifest, capsys)
    assert rc == 0, f"t9kjobs validate refused {where}:\n{err}"
    proc = dry_run(cluster, namespace, manifest)
    assert proc.returncode == 0, f"the API server refused {where}:\n{proc.stderr}"
    stored = json.loads(proc.stdout)
    assert list(subset_problems(manifest["spec"], stored["spec"])) == []


@pytest.mark.parametrize(
    ("manifest", "validate_says", "server_says"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_manifests_are_refused_by_both(
    cluster: Any,
    installed: PluginManager,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    manifest: dict[str, Any],
    validate_says: str,
    server_says: str,
) -> None:
    assert manifest["kind"] in installed.kinds, f"no installed plugin serves {manifest['kind']}"
    rc, err = validate(tmp_path, manifest, capsys)
    assert rc == 1 and validate_says in err, err
    proc = dry_run(cluster, namespace, manifest)
    assert proc.returncode != 0, f"the API server accepted it:\n{proc.stdout}"
    assert server_says in proc.stderr, proc.stderr


def test_alias_spellings_are_stored_as_written(
    cluster: Any, installed: PluginManager, namespace: str
) -> None:
    manifest = deepspeed_job(
        "aliases",
        config={"run": {"Exec": ["./train"]}},
        elastic={"enable": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 2},
        scheduler={"t9kScheduler": {"Queue": "default", "priority": 5}},
        runMode={"debug": {"enable": True}},
    )
    proc = dry_run(cluster, namespace, manifest)
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)["spec"]
    assert list(subset_problems(manifest["spec"], stored)) == []
    # No default was added under the canonical spelling next to the alias the user wrote.
    assert "enabled" not in stored["elastic"] and "enabled" not in stored["runMode"]["debug"]
    # Defaults of other fields are filled in, as `kubectl get -o yaml` then shows them.
    assert stored["worker"]["restartPolicy"] == "OnFailure"
    assert stored["config"]["localRank"] is True
    # No default: the operator derives it from the GPUs and shows it in status.slotsPerWorker.
    assert "slotsPerWorker" not in stored["config"]


def test_service_ports_as_a_service_takes_them(
    cluster: Any,
    installed: PluginManager,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One unnamed port, appProtocol, a 63-character name, one port number for two protocols."""
    for ports in (
        [{"port": 8080, "appProtocol": "kubernetes.io/h2c"}],
        [{"name": "d" * 63, "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53}],
    ):
        manifest = generic_job("ports", service={"ports": ports})
        rc, err = validate(tmp_path, manifest, capsys)
        assert rc == 0, err
        proc = dry_run(cluster, namespace, manifest)
        assert proc.returncode == 0, proc.stderr
        stored = json.loads(proc.stdout)["spec"]
        assert list(subset_problems(manifest["spec"], stored)) == []


def _apply(cluster: Any, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def _patch(cluster: Any, namespace: str, kind: str, name: str, patch: dict[str, Any]) -> Any:
    return cluster.kubectl(
        "patch",
        "-n",
        namespace,
        kind.lower(),
        name,
        "--type=merge",
        "-p",
        json.dumps(patch),
        check=False,
    )


def test_elastic_bounds_are_immutable_and_scale_stays_within_them(
    cluster: Any, installed: PluginManager, namespace: str
) -> None:
    assert "DeepSpeedJob" in installed.kinds
    elastic = {"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 2}
    _apply(cluster, namespace, deepspeed_job("elastic", elastic=elastic))
    for field in ("minReplicas", "maxReplicas"):
        proc = _patch(
            cluster, namespace, "DeepSpeedJob", "elastic", {"spec": {"elastic": {field: 3}}}
        )
        assert proc.returncode != 0
        assert f"spec.elastic.{field}: Forbidden: {field} cannot be changed" in proc.stderr
    # expectedReplicas may change: it is the scale subresource's target.
    cluster.kubectl("scale", "-n", namespace, "deepspeedjob/elastic", "--replicas=4")
    stored = json.loads(
        cluster.kubectl("get", "-n", namespace, "deepspeedjob/elastic", "-o", "json").stdout
    )
    assert stored["spec"]["elastic"]["expectedReplicas"] == 4
    proc = cluster.kubectl(
        "scale", "-n", namespace, "deepspeedjob/elastic", "--replicas=5", check=False
    )
    assert proc.returncode != 0
    assert "expectedReplicas must be <= maxReplicas" in proc.stderr
    scale = json.loads(
        cluster.kubectl(
            "get",
            "--raw",
            f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/deepspeedjobs/elastic/scale",
        ).stdout
    )
    assert scale["spec"]["replicas"] == 4


def test_resume_specs_cannot_change_while_paused(
    cluster: Any, installed: PluginManager, namespace: str
) -> None:
    resume = [{"type": "worker", "command": ["python", "resume.py"]}]
    _apply(
        cluster,
        namespace,
        generic_job("paused", runMode={"pause": {"enable": True, "resumeSpecs": resume}}),
    )
    changed = [{"type": "worker", "command": ["python", "other.py"]}]
    proc = _patch(
        cluster,
        namespace,
        "GenericJob",
        "paused",
        {"spec": {"runMode": {"pause": {"resumeSpecs": changed}}}},
    )
    assert proc.returncode != 0
    assert "spec.runMode.pause.resumeSpecs: Forbidden: resumeSpecs cannot be changed" in (
        proc.stderr
    )
    # Un-pausing with the recorded resumeSpecs is fine; once running they may change again.
    unpause = {"spec": {"runMode": {"pause": {"enable": False}}}}
    assert _patch(cluster, namespace, "GenericJob", "paused", unpause).returncode == 0
    again = {"spec": {"runMode": {"pause": {"resumeSpecs": changed}}}}
    assert _patch(cluster, namespace, "GenericJob", "paused", again).returncode == 0


def test_category_columns_and_explain(
    cluster: Any, installed: PluginManager, namespace: str
) -> None:
    _apply(cluster, namespace, generic_job("listed"))
    out = cluster.kubectl("get", "t9k", "-n", namespace).stdout
    assert "genericjob.batch.tensorstack.dev/listed" in out
    header = cluster.kubectl("get", "gj", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "REASON", "AGE"]
    wide = cluster.kubectl("get", "gj", "-n", namespace, "-o", "wide").stdout.splitlines()[0]
    assert wide.split()[6:] == ["INFRA", "MODE", "PROGRESS", "QUEUE", "STARTED", "FINISHED"]
    # Enum values and defaults are in the descriptions kubectl explain prints.
    policy = " ".join(
        cluster.kubectl("explain", "genericjob.spec.replicaSpecs.restartPolicy").stdout.split()
    )
    assert "One of: Always, OnFailure, Never, ExitCode. Defaults to OnFailure." in policy
    assert "<no value>" not in policy
    # `kubectl explain` documents every field of a kind's spec, DeepSpeedJob's config here.
    kind = "DeepSpeedJob" if "DeepSpeedJob" in installed.kinds else "GenericJob"
    path = "spec.config" if kind == "DeepSpeedJob" else "spec.runMode"
    explained = " ".join(cluster.kubectl("explain", f"{kind.lower()}.{path}").stdout.split())
    crd = yaml.safe_load(next(t for n, t in crds(installed) if kind.lower() in n))
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node["properties"][part]
    for name, prop in node["properties"].items():
        assert f" {name} <" in explained, f"{name} missing from kubectl explain"
        assert " ".join(prop["description"].split()[:5]) in explained, name
