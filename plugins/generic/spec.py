"""The GenericJob spec, per the GenericJob API reference (every field)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator

from t9kjobs.models import (
    MAX_PODS,
    MAX_PORTS,
    MAX_REPLICA_TYPES,
    MAX_REPLICAS,
    MAX_RULES,
    ApiModel,
    CleanUpPolicy,
    JobSpec,
    Lifecycle,
    ReplicaSpec,
    RunMode,
    SchedulePolicy,
    drop_nulls,
)

__all__ = ["MAX_REPLICA_TYPES", "FinishRule", "GenericJobSpec", "ServiceOption", "ServicePort"]

# `{replica type: [indices]}`: the rule holds when every listed replica is in the rule's state.
FinishRule = Annotated[
    dict[
        str,
        Annotated[
            list[Annotated[int, Field(ge=0, le=MAX_REPLICAS)]], Field(max_length=MAX_REPLICAS)
        ],
    ],
    BeforeValidator(drop_nulls),  # a null entry is absent, as the API server prunes it
]
_RULES = Annotated[list[FinishRule], Field(max_length=MAX_RULES)]
_PORT_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ServicePort(ApiModel):
    """A port of the per-replica Services."""

    name: str = Field(pattern=_PORT_NAME, max_length=15, description="Port name.")
    port: int = Field(ge=1, le=65535, description="Port the Service serves.")
    target_port: (
        Annotated[int, Field(ge=1, le=65535)]
        | Annotated[str, Field(max_length=15, pattern=_PORT_NAME)]
        | None
    ) = Field(default=None, description="Container port: a number or a port name; = port.")
    protocol: Literal["TCP", "UDP", "SCTP"] | None = Field(
        default=None, description="TCP (default), UDP or SCTP."
    )


class ServiceOption(ApiModel):
    """Create one Service per replica, named `<job>-<type>-<index>`, with these ports."""

    ports: list[ServicePort] = Field(
        default_factory=list,
        max_length=MAX_PORTS,
        description="Ports of the Services; each name and each port number once.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(p, self.exists_one(q, q.port == p.port))",
                    "message": "port numbers must be unique: each port may appear only once",
                },
                {
                    "rule": "self.all(p, self.exists_one(q, q.name == p.name))",
                    "message": "port names must be unique: each name may appear only once",
                },
            ]
        },
    )

    @field_validator("ports")
    @classmethod
    def _unique_ports(cls, ports: list[ServicePort]) -> list[ServicePort]:
        numbers = [str(p.port) for p in ports]
        names = [p.name for p in ports]
        for what, values in (("numbers", numbers), ("names", names)):
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"port {what} must be unique; repeated: {', '.join(repeated)}")
        return ports


class GenericJobSpec(JobSpec):
    """A general-purpose job: any replica types, success and failure decided by rules."""

    success_rules: _RULES = Field(
        default_factory=list,
        description="The job succeeds when every replica named by any one rule succeeded."
        " Without rules: when every replica succeeded.",
    )
    failure_rules: _RULES = Field(
        default_factory=list,
        description="The job fails when every replica named by any one rule failed for good."
        " Without rules: when any replica failed for good.",
    )
    service: ServiceOption | None = Field(
        default=None, description="Per-replica Services; none are created when unset."
    )
    run_mode: RunMode | None = Field(default=None, description="Immediate (default), debug, pause.")
    clean_up_policy: CleanUpPolicy = Field(
        default="None",
        description="Pods deleted when the job finishes: All, Unfinished (still pending or"
        " running) or None (default).",
    )
    scheduler: SchedulePolicy | None = Field(default=None, description="Scheduler of the pods.")
    replica_specs: list[ReplicaSpec] = Field(
        min_length=1,
        max_length=MAX_REPLICA_TYPES,
        description="The replica types of the job: at least one, at most"
        f" {MAX_REPLICA_TYPES}, each type once.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, self.exists_one(y, y.type == x.type))",
                    "message": "replica types must be unique: each type may appear only once"
                    " in replicaSpecs",
                },
                {
                    "rule": f"self.map(x, has(x.replicas) ? x.replicas : 1).sum() <= {MAX_PODS}",
                    "message": f"a job has at most {MAX_PODS} replicas in all",
                },
            ]
        },
    )

    @field_validator("replica_specs")
    @classmethod
    def _unique_types(cls, specs: list[ReplicaSpec]) -> list[ReplicaSpec]:
        types = [s.type for s in specs]
        dupes = sorted({t for t in types if types.count(t) > 1})
        if dupes:
            raise ValueError(f"replica types must be unique; repeated: {', '.join(dupes)}")
        total = sum(s.replicas for s in specs)
        if total > MAX_PODS:
            raise ValueError(f"a job has at most {MAX_PODS} replicas in all, this one {total}")
        return specs

    def lifecycle(self) -> Lifecycle:
        return Lifecycle(
            run_mode=self.run_mode or RunMode(),
            backoff_limit=None,  # GenericJob limits restarts per replica only
            active_deadline_seconds=None,
            clean_up_policy=self.clean_up_policy,
            scheduler=self.scheduler,
        )
