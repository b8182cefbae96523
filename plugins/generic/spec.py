"""The GenericJob spec, per the GenericJob API reference (every field)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, JsonValue, field_validator

from t9kjobs.plugin import (
    MAX_PODS,
    MAX_REPLICA_TYPES,
    MAX_REPLICAS,
    MAX_RULES,
    ApiModel,
    CleanUpPolicy,
    Distribution,
    JobSpec,
    Lifecycle,
    ReplicaSpec,
    RunMode,
    SchedulePolicy,
    check_replica_specs,
    drop_nulls,
)

__all__ = [
    "MAX_REPLICA_TYPES",
    "MAX_SERVICE_PORTS",
    "FinishRule",
    "GenericJobSpec",
    "ServiceOption",
    "ServicePort",
]

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

# An EndpointSlice holds at most 100 ports, so a Service with more cannot be served.
MAX_SERVICE_PORTS = 100
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A qualified name, as Kubernetes checks appProtocol: an optional DNS-subdomain prefix and `/`.
_QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def _optional_name(pattern: str, max_length: int, description: str) -> Any:
    return Field(default=None, pattern=pattern, max_length=max_length, description=description)


class ServicePort(ApiModel):
    """A port of the per-replica Services: what a Service port takes, but `nodePort`."""

    name: str | None = _optional_name(
        _DNS_LABEL,
        63,
        "Port name, for `$(service.port[<name>])`; required when there is more than one port.",
    )
    port: int = Field(ge=1, le=65535, description="Port the Service serves.")
    target_port: int | str | None = Field(default=None, description="Container port; = port.")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(
        default="TCP", description="TCP (default), UDP or SCTP."
    )
    app_protocol: str | None = _optional_name(
        _QUALIFIED_NAME,
        317,  # a DNS subdomain (253), `/`, a name (63)
        "The application protocol (`http`, `kubernetes.io/h2c`, `example.com/x`), as a"
        " Service port's appProtocol.",
    )


# As the API server checks a Service's ports: names when there are several, each name and each
# port/protocol once. Quadratic in the ports, which `MAX_SERVICE_PORTS` bounds.
_PORT_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.ports) || self.ports.size() <= 1 || self.ports.all(p, has(p.name))",
        "message": "every port needs a name when there is more than one",
        "fieldPath": ".ports",
    },
    {
        "rule": "!has(self.ports) || self.ports.all(p, !has(p.name)"
        " || self.ports.exists_one(q, has(q.name) && q.name == p.name))",
        "message": "port names must be unique",
        "fieldPath": ".ports",
    },
    {
        "rule": "!has(self.ports) || self.ports.all(p, self.ports.exists_one(q,"
        " q.port == p.port && q.protocol == p.protocol))",
        "message": "each port and protocol may appear only once",
        "fieldPath": ".ports",
    },
]


class ServiceOption(ApiModel):
    """Create one Service per replica, named `<job>-<type>-<index>`, with these ports."""

    model_config = ApiModel.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _PORT_RULES}
    )

    ports: list[ServicePort] = Field(
        default_factory=list,
        max_length=MAX_SERVICE_PORTS,
        description=f"Ports of the Services, at most {MAX_SERVICE_PORTS}.",
    )


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
        check_replica_specs([s.type for s in specs], [s.replicas for s in specs])
        return specs

    def lifecycle(self) -> Lifecycle:
        return Lifecycle(
            run_mode=self.run_mode or RunMode(),
            backoff_limit=None,  # GenericJob limits restarts per replica only
            active_deadline_seconds=None,
            clean_up_policy=self.clean_up_policy,
            scheduler=self.scheduler,
            failure_rules=bool(self.failure_rules),
            # The operator tells the program no rank and no address: the user's own env and
            # substitutions do (`$(rank)`, `$(service.master[0].host)`), as the user writes them.
            distribution=Distribution(),
            # Without success rules the job succeeds when every replica has; with them, the
            # user's rules decide. Failures are judged first: a replica lost for good fails the
            # job whatever succeeded (unless failureRules say otherwise).
            finished_by="rules" if self.success_rules else "all",
        )
