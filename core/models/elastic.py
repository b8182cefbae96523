"""Elastic training: the worker count may change at run time, within bounds.

`ElasticConfig` with its cross-field rules, declared twice: as CEL (`x-kubernetes-validations`)
for the API server's admission and as a pydantic validator for `t9kjobs validate`; the rules
reading `oldSelf` (immutable bounds; no scaling of a job that is not elastic,
`not_elastic_rule`) exist only as CEL: they need the stored object.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, JsonValue, model_validator

from t9kjobs.models._spellings import _OneSpelling, enabled_field
from t9kjobs.models.bounds import MAX_REPLICAS

__all__ = ["ELASTIC_ON", "ElasticConfig", "not_elastic_rule"]


_ELASTIC_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.minReplicas) || !has(self.maxReplicas)"
        " || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must be <= maxReplicas",
        "fieldPath": ".minReplicas",
    },
    {
        "rule": "!has(self.expectedReplicas) || !has(self.minReplicas)"
        " || self.minReplicas <= self.expectedReplicas",
        "message": "expectedReplicas must be >= minReplicas",
        "fieldPath": ".expectedReplicas",
    },
    {
        "rule": "!has(self.expectedReplicas) || !has(self.maxReplicas)"
        " || self.expectedReplicas <= self.maxReplicas",
        "message": "expectedReplicas must be <= maxReplicas",
        "fieldPath": ".expectedReplicas",
    },
    {
        "rule": "has(self.minReplicas) == has(oldSelf.minReplicas)"
        " && (!has(self.minReplicas) || self.minReplicas == oldSelf.minReplicas)",
        "message": "minReplicas cannot be changed once the job is created",
        "fieldPath": ".minReplicas",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "has(self.maxReplicas) == has(oldSelf.maxReplicas)"
        " && (!has(self.maxReplicas) || self.maxReplicas == oldSelf.maxReplicas)",
        "message": "maxReplicas cannot be changed once the job is created",
        "fieldPath": ".maxReplicas",
        "reason": "FieldValueForbidden",
    },
]


# `spec.elastic.enabled` in either spelling, read at the spec: the CRD keeps both as
# properties, without a default.
ELASTIC_ON = (
    "(has(self.elastic.enabled) && self.elastic.enabled)"
    " || (has(self.elastic.enable) && self.elastic.enable)"
)


def not_elastic_rule(kind: str) -> JsonValue:
    """The spec's transition rule refusing a change of `elastic.expectedReplicas` (what `kubectl
    scale` writes through the scale subresource) while the job is not elastic: the operator
    would ignore it, and `kubectl scale` would say "scaled"."""
    return {
        "rule": f"!has(self.elastic) || !has(self.elastic.expectedReplicas) || ({ELASTIC_ON})"
        " || (has(oldSelf.elastic) && has(oldSelf.elastic.expectedReplicas)"
        " && oldSelf.elastic.expectedReplicas == self.elastic.expectedReplicas)",
        "message": f"this {kind} is not elastic (spec.elastic.enabled is not true), so its"
        " replicas cannot be scaled: kubectl scale and spec.elastic.expectedReplicas only"
        " resize elastic jobs",
        "fieldPath": ".elastic.expectedReplicas",
        "reason": "FieldValueForbidden",
    }


class ElasticConfig(_OneSpelling):
    """Elastic training: the worker count may change at run time within [min, max]."""

    model_config = _OneSpelling.model_config | ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _ELASTIC_RULES}
    )

    enabled: bool = enabled_field("Whether to enable elastic training.")
    min_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLICAS,
        description="Minimum number of replicas; immutable once created.",
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLICAS,
        description="Maximum number of replicas; immutable once created.",
    )
    expected_replicas: int | None = Field(
        default=None,
        ge=0,
        le=MAX_REPLICAS,
        description="Desired number of replicas, within [minReplicas, maxReplicas]; may change"
        " at run time (it is the target of the scale subresource: `kubectl scale`).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ElasticConfig:
        low, high, want = self.min_replicas, self.max_replicas, self.expected_replicas
        if low is not None and high is not None and low > high:
            raise ValueError(f"minReplicas ({low}) must be <= maxReplicas ({high})")
        if want is not None and low is not None and want < low:
            raise ValueError(f"expectedReplicas ({want}) must be >= minReplicas ({low})")
        if want is not None and high is not None and want > high:
            raise ValueError(f"expectedReplicas ({want}) must be <= maxReplicas ({high})")
        return self

    def replicas(self, default: int) -> int:
        """The replica count: `expectedReplicas` (else `default`) clamped to [min, max]."""
        n = self.expected_replicas if self.expected_replicas is not None else default
        if self.min_replicas is not None:
            n = max(n, self.min_replicas)
        if self.max_replicas is not None:
            n = min(n, self.max_replicas)
        return n
