"""Checks that several kinds share, for their `t9kjobs_validate` hooks, and the checks of
Kubernetes names and labels that plugins' options share (`t9kjobs_options`: a value the API
server would refuse in every job's objects is refused when the command line is parsed)."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from t9kjobs.kinds import Problem
from t9kjobs.models import RecoveryPolicy, RunMode

__all__ = [
    "is_dns_subdomain",
    "is_label_key",
    "is_label_value",
    "is_namespace_name",
    "parse_labels",
    "recovery_problems",
    "run_mode_problems",
    "ssh_user_problems",
]

# RFC 1123 labels (a namespace's name), label values and label keys, as the API server checks
# them.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_namespace_name(name: str) -> bool:
    return bool(_DNS_LABEL.fullmatch(name))


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(name))


def is_label_value(value: str) -> bool:
    return bool(_LABEL_VALUE.fullmatch(value))


def is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and not is_dns_subdomain(prefix):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`a=b,c=d` as sorted (key, value) pairs; ValueError naming what is wrong."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise ValueError(f"{item.strip()!r} is not KEY=VALUE")
        if not is_label_key(key):
            raise ValueError(f"{key!r} is not a label key")
        if not is_label_value(value):
            raise ValueError(f"{value!r} (label {key}) is not a label value")
        pairs[key] = value
    return tuple(sorted(pairs.items()))


def run_mode_problems(run_mode: RunMode | None, replica_types: Collection[str]) -> list[Problem]:
    """Debug and resume overrides must name replica types the job has."""
    if run_mode is None:
        return []
    named: list[tuple[str, str]] = []
    if run_mode.debug is not None:
        named += [
            (f"debug.replicaSpecs[{i}]", s.type) for i, s in enumerate(run_mode.debug.replica_specs)
        ]
    if run_mode.pause is not None:
        named += [
            (f"pause.resumeSpecs[{i}]", s.type) for i, s in enumerate(run_mode.pause.resume_specs)
        ]
    known = ", ".join(sorted(replica_types))
    return [
        Problem(
            f"spec.runMode.{path}.type", f"no replica type {type_!r} in the job (it has: {known})"
        )
        for path, type_ in named
        if type_ not in replica_types
    ]


def recovery_problems(
    policy: RecoveryPolicy | None, replica_types: Collection[str]
) -> list[Problem]:
    """The recovery rules' `replicaTypes` must name replica types the job has: a rule for a
    type it has not would never match, and say nothing (the CRD cannot know a kind's types)."""
    if policy is None:
        return []
    known = ", ".join(sorted(replica_types))
    return [
        Problem(
            f"spec.recoveryPolicy.rules[{i}].replicaTypes[{j}]",
            f"no replica type {type_!r} in the job (it has: {known})",
        )
        for i, rule in enumerate(policy.rules)
        for j, type_ in enumerate(rule.replica_types or ())
        if type_ not in replica_types
    ]


def _runs_as_normal_user(pod_spec: dict[str, Any], container: dict[str, Any]) -> bool:
    for context in (container.get("securityContext") or {}, pod_spec.get("securityContext") or {}):
        if context.get("runAsUser") is not None:
            return bool(context["runAsUser"] != 0)
        if context.get("runAsNonRoot") is not None:
            return bool(context["runAsNonRoot"])
    return False


def ssh_user_problems(template: dict[str, Any], path: str, port: int) -> list[Problem]:
    """Problems of a template whose pods run sshd or ssh with the job's keys as a normal user.

    The keys are mounted read-only as root's files (0600): a normal user reads them only
    through the pod's `fsGroup` (the files are then the group's, 0640), and its sshd cannot
    listen on a port below 1024. `path` is the template's field path (`spec.worker.template`).
    """
    pod_spec: dict[str, Any] = template.get("spec") or {}
    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    if not any(_runs_as_normal_user(pod_spec, c) for c in containers):
        return []
    problems = []
    if (pod_spec.get("securityContext") or {}).get("fsGroup") is None:
        problems.append(
            Problem(
                f"{path}.spec.securityContext.fsGroup",
                "the pods run as a normal user, who can read the job's SSH keys (mounted"
                " read-only, root's 0600 files) only through the pod's fsGroup: set it, e.g. to"
                " the user's group",
            )
        )
    if port < 1024:
        problems.append(
            Problem(
                "spec.ssh.port",
                f"the pods run as a normal user, whose sshd cannot listen on port {port}:"
                " choose one above 1023 (and spec.ssh.authMountPath the user's ~/.ssh)",
            )
        )
    return problems
