"""The PyTorchTrainingJob spec and status, per the PyTorchTrainingJob user reference (every field).

Where T9k's documents spell a field two ways, both are accepted: `enable` for
`torchrunConfig.enabled` (the user reference and older T9k guides), and `procPerNode` as a
number or a string (the reference types it as a string, `"4"` or `"gpu"`).

Cross-field rules are declared twice on purpose: as CEL (`x-kubernetes-validations`) for the API
server's admission, and as pydantic validators for `t9kjobs validate`, so both agree.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any

from pydantic import AliasChoices, ConfigDict, Field, JsonValue, field_validator

from t9kjobs.plugin import (
    ELASTIC_ON,
    INT32_MAX,
    MAX_ARGS,
    MAX_PODS,
    Address,
    ApiModel,
    Distribution,
    ElasticConfig,
    EnvVar,
    HeadlessPodTemplate,
    JobSpec,
    LaunchOption,
    Lifecycle,
    ReplicaSpec,
    ReplicaType,
    RestartPolicyType,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    TensorBoardJobStatus,
    check_replica_specs,
    not_elastic_rule,
    tensorboard_spec_field,
)

__all__ = [
    "MASTER_PORT",
    "MASTER_TYPE",
    "PyTorchReplicaSpec",
    "PyTorchTrainingJobSpec",
    "PyTorchTrainingJobStatus",
    "TorchrunConfig",
]

# The replica type whose pod is rank 0 and decides the job's success.
MASTER_TYPE = "master"
# Port of the master's rendezvous / process-group store. T9k documents no default; 23456 is
# Kubeflow PyTorchJob's, so scripts written for either operator find the same port.
MASTER_PORT = 23456

_PROCS = re.compile(r"^[1-9][0-9]*$")
# procPerNode: a number, or a string holding one (or `gpu`).
_Procs = Annotated[int, Field(le=INT32_MAX)] | Annotated[str, Field(max_length=10)]

_TORCHRUN_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.procPerNode) || (type(self.procPerNode) == string"
        " ? self.procPerNode.matches('^(gpu|[1-9][0-9]*)$') : self.procPerNode >= 1)",
        "message": "procPerNode must be a positive number or 'gpu'",
    }
]

_SPEC_RULES: list[JsonValue] = [
    {
        "rule": "self.replicaSpecs.all(a, self.replicaSpecs.exists_one(b, b.type == a.type))",
        "message": "replica types must be unique",
    },
    {
        "rule": "self.replicaSpecs.all(r, r.type != 'master' || !has(r.replicas)"
        " || r.replicas == 1)",
        "message": "the master replica type must have exactly 1 replica",
    },
    {
        "rule": f"self.replicaSpecs.map(r, has(r.replicas) ? r.replicas : 1).sum() <= {MAX_PODS}",
        "message": f"a job has at most {MAX_PODS} replicas in all",
        "fieldPath": ".replicaSpecs",
    },
    {
        "rule": f"!has(self.elastic) || !({ELASTIC_ON}) || (has(self.elastic.minReplicas)"
        " && has(self.elastic.maxReplicas))",
        "message": "elastic training needs elastic.minReplicas and elastic.maxReplicas",
    },
    not_elastic_rule("PyTorchTrainingJob"),
]


class PyTorchReplicaSpec(ReplicaSpec):
    """One type of replica: `master`, `worker`, or any other name (`node`, `ps`)."""

    type: ReplicaType = Field(
        description="Replica type: `master` (rank 0, exactly 1 replica), `worker`, or any other"
        " name of lowercase letters and digits, a letter first (`node`, `ps`). It becomes part"
        " of pod names."
    )
    restart_policy: RestartPolicyType = Field(
        default="Never",
        description="Always, OnFailure, Never or ExitCode (retry exit codes 130, 137, 143, 138)."
        " Defaults to Never. Overrides the template's restartPolicy.",
    )
    template: HeadlessPodTemplate = Field(
        default_factory=dict,
        description="The pod template of this replica type; the operator sets restartPolicy"
        " Never. It may not set hostname or subdomain (the operator sets them: the job's"
        " headless Service).",
    )
    scaling_weight: int = Field(
        default=1,
        ge=1,
        le=INT32_MAX,
        description="In elastic mode, the share of spec.elastic.expectedReplicas this type gets,"
        " relative to the other non-master types (largest remainder). Defaults to 1.",
    )


class TorchrunConfig(ApiModel):
    """Launch the training container as `torchrun <generated options> <args...>`."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _TORCHRUN_RULES}
    )

    enabled: bool = Field(
        default=False,
        validation_alias=AliasChoices("enabled", "enable"),
        serialization_alias="enabled",
        description="Run the training container through torchrun; its command is then ignored"
        " and its args are the script and the script's arguments. `enable` is accepted as an"
        " alias.",
    )
    max_restarts: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="torchrun --max_restarts: restarts of the worker group inside a pod before"
        " the pod fails. Unset: torchrun's default (0), or 3 when elastic (a scale makes a peer's"
        " rank fail before its agent sees the new node, which torchrun counts as a failure).",
    )
    proc_per_node: _Procs = Field(
        default="1",
        description="Processes per pod (torchrun --nproc_per_node): a positive number, or `gpu`"
        " for the nvidia.com/gpu limit (else request) of the training container. Defaults to 1.",
    )
    rdzv_backend: str = Field(
        default="c10d",
        min_length=1,
        description="torchrun --rdzv_backend: c10d (default, built into torch), etcd or etcd-v2.",
    )
    extra_options: list[str] = Field(
        default_factory=list,
        max_length=MAX_ARGS,
        description="More torchrun options, appended after the generated ones (so they win).",
    )

    @field_validator("proc_per_node")
    @classmethod
    def _procs(cls, value: int | str) -> int | str:
        ok = value >= 1 if isinstance(value, int) else value == "gpu" or bool(_PROCS.match(value))
        if not ok:
            raise ValueError(f"procPerNode must be a positive number or 'gpu', got {value!r}")
        return value

    def fixed_procs(self) -> int | None:
        """Processes per pod when procPerNode is a number; None for `gpu`."""
        return None if self.proc_per_node == "gpu" else int(self.proc_per_node)


class PyTorchTrainingJobSpec(JobSpec):
    """Distributed PyTorch training: replicas that find each other through MASTER_ADDR."""

    model_config = JobSpec.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _SPEC_RULES}
    )

    replica_specs: list[PyTorchReplicaSpec] = Field(
        min_length=1,
        description="The replica types of the job. The master is the `master` replica, else"
        " index 0 of the first type listed.",
    )
    torchrun_config: TorchrunConfig | None = Field(
        default=None, description="Launch training through torchrun (torch.distributed.run)."
    )
    elastic: ElasticConfig | None = Field(
        default=None,
        description="Elastic training: expectedReplicas, clamped to [minReplicas, maxReplicas],"
        " is the number of non-master pods and may change while the job runs.",
    )
    run_mode: RunMode | None = Field(default=None, description="Immediate (default), debug, pause.")
    run_policy: RunPolicy | None = Field(
        default=None, description="Cleanup, deadline and restart budget."
    )
    scheduler: SchedulePolicy | None = Field(
        default=None, description="Scheduler of the pods; the cluster's default when unset."
    )
    tensorboard_spec: dict[str, Any] | None = tensorboard_spec_field()

    def lifecycle(self) -> Lifecycle:
        """The shared settings; elastic jobs run with as few as minReplicas pods plus the master
        (minReplicas does not count the `master` replica, which never scales)."""
        life = replace(
            super().lifecycle(),
            distribution=self._distribution(),
            finished_by=(self._rank_zero_type(), 0),
            # The master's exit 0 means training finished, whatever a straggler did afterwards
            # (docs/pytorch.md, "Status": judged before failures).
            finisher_outweighs=frozenset(rs.type for rs in self.replica_specs),
        )
        elastic = self.elastic
        if elastic is None or not elastic.enabled or elastic.min_replicas is None:
            return life
        masters = sum(1 for rs in self.replica_specs if rs.type == MASTER_TYPE)
        return replace(life, min_available=elastic.min_replicas + masters)

    def _rank_zero_type(self) -> str:
        """The master type's pod is rank 0 (and decides the job); without one, the first listed
        type's first pod."""
        types = [rs.type for rs in self.replica_specs]
        return MASTER_TYPE if MASTER_TYPE in types else types[0]

    def _distribution(self) -> Distribution:
        """Node ranks and the node count in PET_NODE_RANK / PET_NNODES (and torchrun's
        --node_rank / --nnodes), every pod a node; the master's address in MASTER_ADDR,
        PET_MASTER_ADDR and the rendezvous endpoint. An elastic job's rendezvous numbers the
        nodes itself."""
        torchrun = self.torchrun_config is not None and self.torchrun_config.enabled
        options = torchrun and (self.elastic is None or not self.elastic.enabled)
        return Distribution(
            unit="node",
            ranks=(EnvVar("PET_NODE_RANK"), *((LaunchOption("--node_rank"),) if options else ())),
            world_size=(EnvVar("PET_NNODES"), *((LaunchOption("--nnodes"),) if torchrun else ())),
            addresses=(
                Address(EnvVar("MASTER_ADDR"), EnvVar("MASTER_PORT")),
                Address(EnvVar("PET_MASTER_ADDR"), EnvVar("PET_MASTER_PORT")),
                Address(EnvVar("PET_RDZV_ENDPOINT")),
                Address(LaunchOption("--rdzv_endpoint")),
            ),
            ports=(MASTER_PORT,),
        )

    @field_validator("replica_specs")
    @classmethod
    def _replica_types(cls, specs: list[PyTorchReplicaSpec]) -> list[PyTorchReplicaSpec]:
        check_replica_specs([s.type for s in specs], [s.replicas for s in specs])
        for i, s in enumerate(specs):
            if s.type == MASTER_TYPE and s.replicas != 1:
                raise ValueError(
                    f"replicaSpecs[{i}].replicas is {s.replicas}: the master replica type must"
                    " have exactly 1 replica"
                )
        return specs

    @field_validator("elastic")
    @classmethod
    def _elastic_range(cls, elastic: ElasticConfig | None) -> ElasticConfig | None:
        # ElasticConfig checks min <= expected <= max itself; torchrun needs both bounds.
        unbounded = elastic is not None and None in (elastic.min_replicas, elastic.max_replicas)
        if elastic is not None and elastic.enabled and unbounded:
            raise ValueError("elastic training needs minReplicas and maxReplicas")
        return elastic


class PyTorchTrainingJobStatus(TensorBoardJobStatus):
    """The shared job status plus the TensorBoard's."""
