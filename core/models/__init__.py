"""Pydantic models of what every kind shares. Each plugin owns the spec model of its kind.

A module per part of a job: `job` (the job, its spec and metadata), `replica` (a replica type
and its restart policy), `run_mode` (debug, pause, resume), `policies` (cleanup, deadline,
restart budget, scheduling), `recovery` (the recovery rules), `elastic`, `distribution` (what
ranks, world size and addresses mean to a job's program, for the conformance kit), `pod` (the pod
template), `pod_roles` (the templates of pods the operator names, or that run sshd), `ssh` (SSH
keys and sshd), `status`, `bounds` (the limits); `_base` is the base of every model and
`_spellings` the fields with two spellings.

Cross-field rules are declared twice: as CEL (`x-kubernetes-validations`, copied into the CRDs
by `t9kjobs.crds`) for the API server's admission, and as pydantic validators for `t9kjobs
validate`. Transition rules (those reading `oldSelf`) exist only as CEL: they need the stored
object.
"""

from t9kjobs.models._base import ApiModel, drop_nulls, dump
from t9kjobs.models.bounds import (
    INT32_MAX,
    MAX_ARGS,
    MAX_NAME_LENGTH,
    MAX_PODS,
    MAX_REPLICA_TYPES,
    MAX_REPLICAS,
    MAX_RULES,
    NAME_PATTERN,
    check_replica_specs,
)
from t9kjobs.models.checkpoint import CheckpointSpec, checkpoint_of
from t9kjobs.models.distribution import (
    Address,
    Carrier,
    Distribution,
    EnvVar,
    Hostfile,
    LaunchOption,
)
from t9kjobs.models.elastic import ELASTIC_ON, ElasticConfig, not_elastic_rule
from t9kjobs.models.job import (
    API_GROUP,
    API_VERSION,
    MANAGED_BY_MULTIKUEUE,
    MANAGED_BY_RULE,
    MANAGED_BY_T9KJOBS,
    NAME_RULE,
    OBJECT_META_FIELDS,
    Job,
    JobSpec,
    Lifecycle,
    ObjectMeta,
    manager_of,
)
from t9kjobs.models.pod import ContainerShape, PodSpecShape, PodTemplate, PodTemplateShape
from t9kjobs.models.pod_roles import HeadlessPodTemplate, SshPodTemplate
from t9kjobs.models.policies import CleanUpPolicy, RunPolicy, SchedulePolicy, T9kScheduler
from t9kjobs.models.recovery import RecoveryPolicy, RecoveryRule, recovery_of
from t9kjobs.models.replica import (
    RETRYABLE_EXIT_CODES,
    ReplicaSpec,
    ReplicaType,
    RestartPolicy,
    RestartPolicyType,
    RestartRule,
)
from t9kjobs.models.run_mode import (
    Args,
    DebugMode,
    GeneratedCommandRunMode,
    PauseMode,
    ReplicaDebugSet,
    ResumeSpec,
    RunMode,
    RunModeName,
)
from t9kjobs.models.status import (
    FINISHED_PHASES,
    Aggregate,
    CheckpointStatus,
    ContainerStatus,
    DependentStatus,
    JobCondition,
    JobPhase,
    JobStatus,
    ReplicaStatus,
    TaskStatus,
    TrainingProgress,
)

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "ELASTIC_ON",
    "FINISHED_PHASES",
    "INT32_MAX",
    "MANAGED_BY_MULTIKUEUE",
    "MANAGED_BY_RULE",
    "MANAGED_BY_T9KJOBS",
    "MAX_ARGS",
    "MAX_NAME_LENGTH",
    "MAX_PODS",
    "MAX_REPLICAS",
    "MAX_REPLICA_TYPES",
    "MAX_RULES",
    "NAME_PATTERN",
    "NAME_RULE",
    "OBJECT_META_FIELDS",
    "RETRYABLE_EXIT_CODES",
    "Address",
    "Aggregate",
    "ApiModel",
    "Args",
    "Carrier",
    "CheckpointSpec",
    "CheckpointStatus",
    "CleanUpPolicy",
    "ContainerShape",
    "ContainerStatus",
    "DebugMode",
    "DependentStatus",
    "Distribution",
    "ElasticConfig",
    "EnvVar",
    "GeneratedCommandRunMode",
    "HeadlessPodTemplate",
    "Hostfile",
    "Job",
    "JobCondition",
    "JobPhase",
    "JobSpec",
    "JobStatus",
    "LaunchOption",
    "Lifecycle",
    "ObjectMeta",
    "PauseMode",
    "PodSpecShape",
    "PodTemplate",
    "PodTemplateShape",
    "RecoveryPolicy",
    "RecoveryRule",
    "ReplicaDebugSet",
    "ReplicaSpec",
    "ReplicaStatus",
    "ReplicaType",
    "RestartPolicy",
    "RestartPolicyType",
    "RestartRule",
    "ResumeSpec",
    "RunMode",
    "RunModeName",
    "RunPolicy",
    "SchedulePolicy",
    "SshPodTemplate",
    "T9kScheduler",
    "TaskStatus",
    "TrainingProgress",
    "check_replica_specs",
    "checkpoint_of",
    "drop_nulls",
    "dump",
    "manager_of",
    "not_elastic_rule",
    "recovery_of",
]
