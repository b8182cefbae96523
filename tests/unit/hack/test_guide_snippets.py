"""The code the plugin guide shows runs as shown: its `replicaSpecs` form builds pods."""

from __future__ import annotations

import re
import types
from typing import Any

from t9kjobs.crds import crds
from t9kjobs.kinds import KindInfo
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.testing.fixtures import job_from_yaml
from tests.repo import REPO

GUIDE = REPO / "docs" / "plugin-guide.md"


def _snippet(after: str) -> str:
    text = GUIDE.read_text()
    start = text.index(after)
    found = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert found is not None, f"no python block after {after!r}"
    return found.group(1)


def test_the_replica_specs_form_builds_a_pod_per_replica_with_its_restart_rule() -> None:
    code: dict[str, Any] = {}
    source = _snippet("**A kind with a `replicaSpecs` list.**")
    exec(compile(source, str(GUIDE), "exec", dont_inherit=True), code)  # as a module would run it
    spec = code["MyJobSpec"]
    plugin = types.ModuleType("myjob")  # a plugin is a module of hook implementations

    @code["hookimpl"]
    def t9kjobs_kinds() -> list[KindInfo]:
        return [KindInfo(kind="MyJob", spec_model=spec, plural="myjobs")]

    plugin.t9kjobs_kinds = t9kjobs_kinds  # type: ignore[attr-defined]
    plugin.t9kjobs_build_pods = code["t9kjobs_build_pods"]  # type: ignore[attr-defined]
    manager = PluginManager()
    manager.register(plugin, "myjob")
    container = {"name": "main", "image": "busybox"}
    job = parse_job(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "MyJob",
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {
                "replicaSpecs": [
                    {"type": "master", "template": {"spec": {"containers": [container]}}},
                    {
                        "type": "worker",
                        "replicas": 2,
                        "restartPolicy": {"policy": "ExitCode", "limit": 2},
                        "template": {"spec": {"containers": [container]}},
                    },
                ]
            },
        },
        manager,
    )
    pods = manager.hooks_for("MyJob").build_pods(job)
    assert [(p.name, p.restart.policy, p.restart.limit) for p in pods] == [
        ("x-master-0", "OnFailure", None),
        ("x-worker-0", "ExitCode", 2),
        ("x-worker-1", "ExitCode", 2),
    ]
    assert {p.manifest["spec"]["subdomain"] for p in pods} == {"x"}
    [(_, crd)] = [f for f in crds(manager) if "myjobs" in f[0]]
    assert "replica types must be unique" in crd


def test_the_environment_snippet_tells_each_worker_its_rank_and_keeps_the_users_env() -> None:
    code: dict[str, Any] = {}
    source = _snippet("**Telling a pod its rank: its environment.**")
    exec(compile(source, str(GUIDE), "exec", dont_inherit=True), code)  # as a module would run it
    job = job_from_yaml(
        """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: jax, namespace: ns}
spec:
  replicaSpecs:
    - type: worker
      template: {spec: {containers: [{name: main, image: busybox}]}}
"""
    )
    user = {"name": "JAX_PROCESS_ID", "value": "9"}  # the user's own, replaced
    template = {
        "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}, user]}]}
    }
    pods = [code["worker"](job, i, 2, template) for i in range(2)]
    assert [p.name for p in pods] == ["jax-worker-0", "jax-worker-1"]
    [env] = [p.manifest["spec"]["containers"][0]["env"] for p in pods[1:]]
    assert env == [
        {"name": "A", "value": "1"},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "jax-worker-0.jax:6666"},
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
        {"name": "JAX_PROCESS_ID", "value": "1"},
    ]
    assert template["spec"]["containers"][0]["env"][1] == user  # the template is not edited
    assert pods[0].manifest["spec"]["subdomain"] == "jax"
    assert pods[0].training_container == "main"
