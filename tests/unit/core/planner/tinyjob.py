"""A minimal kind for testing the engine on its own: replica types with a RunPolicy, success when
every replica succeeded, failure when one failed for good. Registered by hand, not installed.

Its `restartPolicy` takes both forms: the object form `{policy, limit}` limits restarts per
replica, the string form only by `runPolicy.backoffLimit`, so both engine budgets are tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo, ReplicaState, Verdict
from t9kjobs.manager import PluginManager
from t9kjobs.models import JobSpec, ReplicaSpec, RestartRule, RunMode, RunPolicy
from t9kjobs.objects import DesiredPod, new_pod

KIND = "TinyJob"


class TinyJobSpec(JobSpec):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: RunMode | None = None
    replica_specs: list[ReplicaSpec]


def _restart_rule(spec: ReplicaSpec) -> RestartRule:
    """The object form with its limit; the string form bounded by backoffLimit alone, as the
    string-only kinds read it (PyTorchTrainingJob, DeepSpeedJob): the engine sees both."""
    if isinstance(spec.restart_policy, str):
        return RestartRule(policy=spec.restart_policy)
    return RestartRule.of(spec.restart_policy)


class TinyPlugin:
    @hookimpl
    def t9kjobs_kinds(self) -> list[KindInfo]:
        return [KindInfo(kind=KIND, spec_model=TinyJobSpec, plural="tinyjobs")]

    @hookimpl
    def t9kjobs_validate(self) -> list[Any]:
        return []

    @hookimpl
    def t9kjobs_build_pods(self, job: Any) -> list[DesiredPod]:
        spec = job.spec_as(TinyJobSpec)
        return [
            DesiredPod(rs.type, i, _restart_rule(rs), new_pod(job, rs.type, i, rs.template))
            for rs in spec.replica_specs
            for i in range(rs.replicas)
        ]

    @hookimpl
    def t9kjobs_build_launch_command(self) -> None:
        return None

    @hookimpl
    def t9kjobs_build_objects(self) -> list[Any]:
        return []

    @hookimpl
    def t9kjobs_compute_status(self, replicas: Sequence[ReplicaState]) -> Verdict | None:
        failed = [r for r in replicas if r.failed_for_good]
        if failed:
            r = failed[0]
            return Verdict(
                "Failed", "ReplicaFailed", f"{r.name} failed with exit code {r.exit_code}"
            )
        if replicas and all(r.succeeded for r in replicas):
            return Verdict("Succeeded", "AllSucceeded", "all replicas succeeded")
        return None


def tiny_manager() -> PluginManager:
    manager = PluginManager()
    manager.register(TinyPlugin(), "tiny")
    return manager


def tiny_job(
    replicas: int = 2,
    restart: Any = "OnFailure",
    run_policy: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": KIND,
        "metadata": {"name": "tiny", "namespace": "ns", "uid": "job-uid"},
        "spec": {
            "runPolicy": run_policy or {},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": replicas,
                    "restartPolicy": restart,
                    "template": {
                        "spec": {
                            "initContainers": [{"name": "init", "image": "busybox"}],
                            "containers": [
                                {"name": "main", "image": "busybox", "command": ["train"]}
                            ],
                        }
                    },
                }
            ],
            **spec,
        },
    }
