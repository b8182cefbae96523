"""The envelope every kind shares: apiVersion, kind, metadata, a typed spec and the status.

A plugin owns the spec model of its kind; `JobSpec` is the base it derives from. The engine reads
the lifecycle settings through `JobSpec.lifecycle()`, so kinds that spell them differently (the
GenericJob's top-level `cleanUpPolicy`, ColossalAIJob's `runPolicy.cleanUpWorkers`) override one
method instead of teaching the engine about each kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from t9kjobs.models._base import ApiModel
from t9kjobs.models.bounds import MAX_NAME_LENGTH, NAME_PATTERN
from t9kjobs.models.checkpoint import CheckpointSpec
from t9kjobs.models.distribution import Distribution
from t9kjobs.models.pod import DNS_LABEL
from t9kjobs.models.policies import CleanUpPolicy, RunPolicy, SchedulePolicy
from t9kjobs.models.recovery import RecoveryPolicy
from t9kjobs.models.run_mode import RunMode
from t9kjobs.models.status import JobStatus

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "MANAGED_BY_MULTIKUEUE",
    "MANAGED_BY_RULE",
    "MANAGED_BY_T9KJOBS",
    "NAME_RULE",
    "OBJECT_META_FIELDS",
    "Job",
    "JobSpec",
    "Lifecycle",
    "ObjectMeta",
    "manager_of",
]

API_GROUP = "batch.tensorstack.dev"
API_VERSION = f"{API_GROUP}/v1beta1"

SpecT = TypeVar("SpecT", bound="JobSpec")

# `spec.managedBy`, as Kubernetes' Job has it (k8s.io/kubernetes pkg/apis/batch/validation:
# a domain-prefixed path, `IsDomainPrefixedPath`, of at most 63 characters, immutable): the
# controller that manages the job. Unset or this operator's own value: this operator; any
# other: that controller, and the operator leaves the job alone (`t9kjobs.planner.elsewhere`).
MANAGED_BY_T9KJOBS = f"{API_GROUP}/t9k-jobs"
# Kueue's MultiKueue (kueue.x-k8s.io/v1beta2 `MultiKueueControllerName`): the job is
# dispatched to a worker cluster, and this operator only makes its Workload.
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
MAX_MANAGED_BY_LENGTH = 63
# A DNS subdomain, a slash, and an HTTP path's characters (RFC 3986), as apimachinery's
# `IsDomainPrefixedPath` reads it.
_DOMAIN_PREFIXED_PATH = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$"
)
# Immutable, set or not, as `ValidateImmutableField` holds a Job's: a transition rule, so CEL
# alone (the CRD's root, where both specs are read; a rule on the field itself would not run
# when it is added or removed).
MANAGED_BY_RULE = {
    "rule": "has(self.spec.managedBy) == has(oldSelf.spec.managedBy)"
    " && (!has(self.spec.managedBy) || self.spec.managedBy == oldSelf.spec.managedBy)",
    "message": "spec.managedBy is immutable: it can be set only when the job is created",
    "fieldPath": ".spec.managedBy",
    "reason": "FieldValueInvalid",
}


@dataclass(frozen=True)
class Lifecycle:
    """The settings the engine needs from any spec, in one normal form."""

    run_mode: RunMode
    backoff_limit: int | None
    active_deadline_seconds: int | None
    clean_up_policy: CleanUpPolicy
    # Replica types whose pods the cleanup never deletes (ColossalAIJob keeps its launcher).
    clean_up_keeps: frozenset[str] = frozenset()
    scheduler: SchedulePolicy | None = None
    # The fewest pods the job can run with (elastic jobs: their minimum); None: all of its pods.
    # Gang scheduling asks for this many pods at once (the PodGroup's minMember), and a job
    # left with fewer live pods than this, a replica lost for good, fails
    # (the conformance kit's compute_status_fails_on_lost_replicas).
    min_available: int | None = None
    # The user's own rules decide which lost replicas fail the job (GenericJob's failureRules),
    # not `min_available`.
    failure_rules: bool = False
    # What the job means to its program, for the conformance kit: how ranks, world size and
    # peers' addresses reach it (`t9kjobs.models.distribution`); `Distribution()`, no carrier:
    # the framework or the user's program assigns them. None: not declared, which kit v4 (0.3)
    # fails (ranks_cover_the_world); the operator never reads it.
    distribution: Distribution | None = None
    # The replica whose success alone finishes the job, as (type, index): a launcher, a master;
    # "all": the job succeeds when every replica has; "rules": the user's own success rules
    # decide (GenericJob's successRules). None: not declared, which kit v4 (0.3) fails. The kit
    # pairs outcomes against it (compute_status_pairs_outcomes): another replica still
    # running, restarting or lost for good beside one's success.
    finished_by: tuple[str, int] | Literal["all", "rules"] | None = None
    # Replica types the job may lose for good without failing (an evaluator): a declaration by
    # type, where `min_available` counts pods of any type.
    may_lose: frozenset[str] = frozenset()
    # Replica types whose loss for good the finisher's success outweighs: beside the
    # `finished_by` replica Succeeded, one of these failed for good leaves the job Succeeded
    # (a launcher that exits 0 only when every rank did; PyTorch's master, judged first).
    # A replica of any other type, unless in `may_lose`, lost for good fails the job even
    # beside the finisher's success (the default: a verdict that fails on any replica lost for
    # good, as `replicas_lost` before the finisher's success). Before the finisher succeeded,
    # a loss the job cannot spare fails it either way (compute_status_fails_on_lost_replicas).
    finisher_outweighs: frozenset[str] = frozenset()


class JobSpec(ApiModel):
    """Base class of every kind's spec model.

    `recoveryPolicy` is the engine's, not a kind's: every kind has it (`t9kjobs.models.recovery`).
    """

    recovery_policy: RecoveryPolicy | None = Field(
        default=None,
        description="How the engine recovers from a replica's failure: ordered rules (exit"
        " codes, pod conditions, reasons) with the actions RestartReplica, FailJob and Ignore,"
        " and the infrastructure budget. Absent: each replica's restartPolicy decides, every"
        " restart charged to the user's budget.",
    )
    managed_by: str | None = Field(
        default=None,
        max_length=MAX_MANAGED_BY_LENGTH,
        # The CRD's pattern; `_managed_by` says what is wrong in words.
        json_schema_extra={"pattern": _DOMAIN_PREFIXED_PATH},
        description="The controller that manages the job, a domain-prefixed path (at most 63"
        f" characters, immutable). Unset or `{MANAGED_BY_T9KJOBS}`: this operator. Any other"
        " value: that controller, and this operator creates nothing for the job and never"
        f" writes its status; `{MANAGED_BY_MULTIKUEUE}` (Kueue's MultiKueue, on its manager"
        " cluster): it makes the job's Workload alone, for MultiKueue to dispatch the job to a"
        " worker cluster.",
    )
    checkpoint: CheckpointSpec | None = Field(
        default=None,
        description="Where the program saves checkpoints: the engine gives every pod the"
        " folder, the stop grace and the newest checkpoint reported (T9KJOBS_RESUME_FROM), and"
        " a terminationGracePeriodSeconds of at least gracePeriodSeconds.",
    )

    @field_validator("managed_by")
    @classmethod
    def _managed_by(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(_DOMAIN_PREFIXED_PATH, value):
            raise ValueError(
                f"{value!r} is not a domain-prefixed path (a DNS subdomain, a slash and a path,"
                ' such as "acme.io/foo"), as a Kubernetes Job\'s managedBy must be'
            )
        return value

    def lifecycle(self) -> Lifecycle:
        run_policy = getattr(self, "run_policy", None)
        if not isinstance(run_policy, RunPolicy):
            run_policy = RunPolicy()
        run_mode = getattr(self, "run_mode", None)
        scheduler = getattr(self, "scheduler", None)
        return Lifecycle(
            run_mode=run_mode if isinstance(run_mode, RunMode) else RunMode(),
            backoff_limit=run_policy.backoff_limit,
            active_deadline_seconds=run_policy.active_deadline_seconds,
            clean_up_policy=run_policy.clean_up_policy,
            scheduler=scheduler if isinstance(scheduler, SchedulePolicy) else None,
        )


def manager_of(spec: object) -> str | None:
    """The controller that manages a job of this spec (a `JobSpec`, or a manifest's spec as
    JSON) when it is not this operator; None when it is this operator's."""
    value = spec.get("managedBy") if isinstance(spec, dict) else getattr(spec, "managed_by", None)
    if not isinstance(value, str) or value in ("", MANAGED_BY_T9KJOBS):
        return None
    return value


# The fields of Kubernetes' ObjectMeta: anything else under metadata is an unknown field.
OBJECT_META_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)

# The name rule at the root of every CRD (CEL reads metadata.name there), as ObjectMeta has it.
NAME_RULE = {
    "rule": f"self.metadata.name.size() <= {MAX_NAME_LENGTH}"
    f" && self.metadata.name.matches('{NAME_PATTERN}')",
    "message": f"a job name must be a lowercase DNS label of at most {MAX_NAME_LENGTH} characters"
    " starting with a letter: it names the job's pods and Services",
    "reason": "FieldValueInvalid",
}


# Kubernetes' syntax of label keys (an optional DNS-subdomain prefix and a name) and values.
_QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
MAX_ANNOTATIONS_BYTES = 256 * 1024  # Kubernetes' TotalAnnotationSizeLimitB
_RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[-+]\d{2}:\d{2})$"
QualifiedName = Annotated[str, Field(max_length=316, pattern=_QUALIFIED_NAME)]
LabelValue = Annotated[str, Field(max_length=63, pattern=_LABEL_VALUE)]
Timestamp = Annotated[str, Field(pattern=_RFC3339)]


class OwnerReference(BaseModel):
    """An owner of the job, as the API server requires one to be written."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    api_version: str = Field(min_length=1, alias="apiVersion")
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    uid: str = Field(min_length=1)
    controller: bool | None = None
    block_owner_deletion: bool | None = Field(default=None, alias="blockOwnerDeletion")


class ObjectMeta(BaseModel):
    """The part of metadata the engine reads, and the types the API server holds the rest to;
    everything else is kept as given."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=NAME_PATTERN,
        description="Pods are named <job>-<type>-<index> and the headless Service after the job.",
    )
    namespace: str = Field(default="default", max_length=63, pattern=DNS_LABEL)
    uid: str = "<job-uid>"
    labels: dict[QualifiedName, LabelValue] = Field(default_factory=dict)
    annotations: dict[QualifiedName, str] = Field(default_factory=dict)
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    generate_name: str | None = Field(default=None, alias="generateName")
    finalizers: list[QualifiedName] | None = None
    owner_references: list[OwnerReference] | None = Field(default=None, alias="ownerReferences")
    creation_timestamp: Timestamp | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: Timestamp | None = Field(default=None, alias="deletionTimestamp")
    deletion_grace_period_seconds: int | None = Field(
        default=None, alias="deletionGracePeriodSeconds"
    )

    @field_validator("annotations")
    @classmethod
    def _annotations_size(cls, annotations: dict[str, str]) -> dict[str, str]:
        size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS_BYTES:
            raise ValueError(
                f"annotations take {size} bytes; the API server takes at most"
                f" {MAX_ANNOTATIONS_BYTES} (keys and values together)"
            )
        return annotations


class Job(BaseModel):
    """A job of any kind, its spec parsed by the model of the plugin that owns the kind."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    api_version: str = Field(default=API_VERSION, description="`apiVersion` of the manifest.")
    kind: str = Field(description="The kind, e.g. `MPIJob`: which plugin answers its hooks.")
    metadata: ObjectMeta = Field(description="Name, namespace, uid, labels, annotations.")
    spec: JobSpec = Field(description="The spec, an instance of the kind's spec model.")
    status: JobStatus = Field(
        default_factory=JobStatus,
        description="The status as last written, an instance of the kind's status model.",
    )
    raw: dict[str, Any] = Field(
        default_factory=dict,
        repr=False,
        description="The manifest as received, for what the models do not cover.",
    )

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    def spec_as(self, model: type[SpecT]) -> SpecT:
        """The spec, typed as `model`; a plugin calls this on the kinds it owns."""
        if not isinstance(self.spec, model):
            raise TypeError(f"{self.kind} spec is {type(self.spec).__name__}, not {model.__name__}")
        return self.spec
