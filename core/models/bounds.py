"""The bounds of sizes and counts a job may ask for, enforced at admission and by the models.

Without them one field could make the operator build millions of pods in memory (`replicas:
2147483648` took it from 247 MB to 1.7 GB in 20 s) or make a CEL rule too costly for the API
server. docs/api.md lists them; they are generous for any real training job.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "INT32_MAX",
    "MAX_ARGS",
    "MAX_NAME_LENGTH",
    "MAX_PODS",
    "MAX_REPLICAS",
    "MAX_REPLICA_TYPES",
    "MAX_RULES",
    "NAME_PATTERN",
    "check_replica_specs",
]

# Pods of one replica type, and of one job in all (elastic jobs: their maxReplicas, plus the
# replicas that do not scale, such as a PyTorch master).
MAX_REPLICAS = 1000
MAX_PODS = 1000
# Replica types of a job; also the bound of the lists CEL rules iterate (their cost).
MAX_REPLICA_TYPES = 32
# Items of an argument list (command, args, script, launcher options).
MAX_ARGS = 1024
# Success and failure rules of a GenericJob.
MAX_RULES = 32
# Counts with no natural bound (restarts, seconds, slots): Kubernetes' int32.
INT32_MAX = 2**31 - 1

# A job's name: pods are `<job>-<type>-<index>` (a DNS label, 63 characters at most, leaves 52
# for the job with the shortest type and index) and the job's headless Service is named after
# it, so it must be a DNS-1035 label: lowercase, starting with a letter.
MAX_NAME_LENGTH = 52
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


def check_replica_specs(types: Sequence[str], replicas: Sequence[int]) -> None:
    """The checks every kind's list of replica specs shares, as the model's ValueError (what
    the CRD's CEL rules also say at admission): each type once, MAX_PODS replicas in all."""
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise ValueError(f"replica types must be unique; repeated: {', '.join(dupes)}")
    total = sum(replicas)
    if total > MAX_PODS:
        raise ValueError(f"a job has at most {MAX_PODS} replicas in all, this one {total}")
