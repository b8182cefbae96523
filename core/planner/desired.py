"""The pods and objects a job should have now: the plugin's pods, then run mode, launch command
and cross-cutting mutations applied by the engine, the same way for every kind."""

from __future__ import annotations

import shlex

from t9kjobs.models import Job, Lifecycle, ReplicaDebugSet, ResumeSpec
from t9kjobs.objects import (
    ANNOTATION_LAUNCH_COMMAND,
    ENV_LAUNCH_COMMAND,
    DesiredPod,
    Obj,
    find_container,
    set_env,
)
from t9kjobs.planner.checkpoints import prepare
from t9kjobs.planner.types import EngineHooks

__all__ = ["desired_pods", "harden"]


def _by_type(specs: list[ReplicaDebugSet] | list[ResumeSpec], type_: str) -> object | None:
    return next((s for s in specs if s.type == type_), None)


def desired_pods(
    job: Job, hooks: EngineHooks, life: Lifecycle, resumed: bool, absent_kinds: frozenset[str]
) -> list[DesiredPod]:
    """Every pod of the job in its current run mode (not called while paused).

    Debug mode replaces the training container's command (the replica type's override, else
    the pod's own debug command, else the kind's default) and may drop init containers; the
    command the pod would run outside debug mode is shown on it, to be run by hand.
    After a pause, `resumeSpecs` override command, args and init containers (a launch command
    replaces command and args again: kinds with one refuse them, `GeneratedCommandRunMode`).
    The cross-cutting mutations learn which child kinds the cluster lacks, so that a pod never
    depends on one; they alone set `spec.schedulingGroup` (a plugin's pod loses its own).
    """
    pods = hooks.build_pods(job)
    mode = life.run_mode
    for pod in pods:
        # The engine's environment first: a launcher built from the container sees its names.
        prepare(job, pod)
        container = find_container(pod.manifest, pod.training_container)
        if mode.debugging and mode.debug is not None:
            if container is not None:
                _show_launch_command(pod, container, hooks.build_launch_command(job, pod))
            override = _by_type(mode.debug.replica_specs, pod.replica_type)
            assert override is None or isinstance(override, ReplicaDebugSet)
            command = (
                (override.command if override else None)
                or pod.debug_command
                or list(hooks.info.debug_command)
            )
            if container is not None:
                container["command"] = list(command)
                container.pop("args", None)
            if override is not None and override.skip_init_container:
                pod.manifest["spec"].pop("initContainers", None)
        else:
            # Resume overrides first: a launcher built from the container (torchrun) must see
            # the resumed args.
            if resumed and mode.pause is not None:
                resume = _by_type(mode.pause.resume_specs, pod.replica_type)
                assert resume is None or isinstance(resume, ResumeSpec)
                if resume is not None and container is not None:
                    if resume.command is not None:
                        container["command"] = list(resume.command)
                    if resume.args is not None:
                        container["args"] = list(resume.args)
                if resume is not None and resume.skip_init_container:
                    pod.manifest["spec"].pop("initContainers", None)
            launch = hooks.build_launch_command(job, pod)
            if launch is not None and container is not None:
                container["command"] = list(launch)
                container.pop("args", None)
        # The gang a pod joins is the operator's to say (the `scheduling` feature plugin sets
        # it in `mutate_pod`): one a template named, refused by the kinds' own templates, is
        # dropped here for every kind, so that no pod joins another job's gang.
        pod.manifest["spec"].pop("schedulingGroup", None)
        hooks.mutate_pod(job, pod, absent_kinds)
        harden(pod.manifest)
    return pods


def harden(pod: Obj) -> None:
    """Safe defaults for what a template leaves unsaid, for every kind (docs/security.md).

    * No ServiceAccount token: a training pod has no business with the API server, and a
      token in every rank is a credential for whoever gets a shell in one. A template that
      sets `automountServiceAccountToken` or names a `serviceAccountName` asks for one.
    * The runtime's default seccomp profile, and no privilege escalation (setuid binaries,
      file capabilities) in any container.
    * A container that runs as a normal user (`runAsNonRoot`, or a `runAsUser` other than 0,
      its own or the pod's) drops every capability it does not ask for: it could use none of
      them, and with the defaults above it passes Pod Security "restricted".

    Field by field: a template's own setting of a field wins, and only that field; a
    securityContext that sets other fields (`privileged: false`, `runAsUser`) still gets these
    defaults. A container that is privileged, or adds `CAP_SYS_ADMIN`, escalates by definition:
    the API refuses `allowPrivilegeEscalation: false` beside either, so it is not added there.
    """
    spec = pod["spec"]
    if "serviceAccountName" not in spec:
        spec.setdefault("automountServiceAccountToken", False)
    context = spec.setdefault("securityContext", {})
    if "seccompProfile" not in context:
        context["seccompProfile"] = {"type": "RuntimeDefault"}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        container_context = container.setdefault("securityContext", {})
        if container_context.get("privileged") is True:
            continue  # asks for everything: nothing is added that the API would refuse
        if "allowPrivilegeEscalation" not in container_context and not _adds_sys_admin(
            container_context
        ):
            container_context["allowPrivilegeEscalation"] = False
        if _non_root(context, container_context) and "capabilities" not in container_context:
            container_context["capabilities"] = {"drop": ["ALL"]}


def _adds_sys_admin(container_context: Obj) -> bool:
    """Whether a container adds `CAP_SYS_ADMIN`, which the API refuses beside
    `allowPrivilegeEscalation: false` (it compares the name as written)."""
    capabilities = container_context.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, dict) else None
    return isinstance(added, list) and "CAP_SYS_ADMIN" in added


def _non_root(pod_context: Obj, container_context: Obj) -> bool:
    """Whether a container runs as a normal user: its own settings, else the pod's."""
    for context in (container_context, pod_context):
        user = context.get("runAsUser")
        if user is not None:
            return bool(user != 0)
        if context.get("runAsNonRoot") is not None:
            return bool(context["runAsNonRoot"])
    return False


def _show_launch_command(pod: DesiredPod, container: Obj, launch: list[str] | None) -> None:
    """Put the command a debug-mode pod would run outside debug mode where a user finds it: the
    pod's annotation `batch.tensorstack.dev/launch-command` (shell-quoted) and the same line in
    the training container's `$T9KJOBS_LAUNCH_COMMAND`, so that
    `kubectl exec -it POD -- bash -c 'eval "$T9KJOBS_LAUNCH_COMMAND"'` runs it. A container
    that relies on its image's entrypoint has no command the engine knows: nothing is shown."""
    argv = launch
    if argv is None and container.get("command"):
        argv = [*container["command"], *(container.get("args") or [])]
    if argv is None:
        return
    line = shlex.join(str(a) for a in argv)
    pod.manifest["metadata"].setdefault("annotations", {})[ANNOTATION_LAUNCH_COMMAND] = line
    set_env(container, {ENV_LAUNCH_COMMAND: line})
