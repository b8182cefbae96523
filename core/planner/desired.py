"""The pods and objects a job should have now: the plugin's pods, then run mode, launch command
and cross-cutting mutations applied by the engine, the same way for every kind."""

from __future__ import annotations

from t9kjobs.models import Job, Lifecycle, ReplicaDebugSet, ResumeSpec
from t9kjobs.objects import DesiredPod, find_container
from t9kjobs.planner.types import EngineHooks

__all__ = ["desired_pods"]


def _by_type(specs: list[ReplicaDebugSet] | list[ResumeSpec], type_: str) -> object | None:
    return next((s for s in specs if s.type == type_), None)


def desired_pods(
    job: Job, hooks: EngineHooks, life: Lifecycle, resumed: bool, absent_kinds: frozenset[str]
) -> list[DesiredPod]:
    """Every pod of the job in its current run mode (not called while paused).

    Debug mode replaces the training container's command (the replica type's override, else
    the pod's own debug command, else the kind's default) and may drop init containers.
    After a pause, `resumeSpecs` override command, args and init containers (a launch command
    replaces command and args again: kinds with one refuse them, `GeneratedCommandRunMode`).
    The cross-cutting mutations learn which child kinds the cluster lacks, so that a pod never
    depends on one.
    """
    pods = hooks.build_pods(job)
    mode = life.run_mode
    for pod in pods:
        container = find_container(pod.manifest, pod.training_container)
        if mode.debugging and mode.debug is not None:
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
        hooks.mutate_pod(job, pod, absent_kinds)
    return pods
