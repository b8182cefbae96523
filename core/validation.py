"""Checks that several kinds share, for their `t9kjobs_validate` hooks."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from t9kjobs.kinds import Problem
from t9kjobs.models import RecoveryPolicy, RunMode

__all__ = ["recovery_problems", "run_mode_problems", "ssh_user_problems"]


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
