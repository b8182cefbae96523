"""ColossalAIJob: a launcher runs `colossalai run` over ssh on N sshd workers; the job follows it.

The launcher's success completes the job and its failure for good (past its own restart policy)
fails it. A worker that fails is reported (ReplicaFailure) and recreated within its own policy,
but a failed pod never rejoins a running attempt (ColossalAI launches each node once), so a
worker failed for good does not decide anything by itself: the launcher's `colossalai run`
fails with it, and the launcher's policy decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from t9kjobs.plugin import (
    DesiredPod,
    Job,
    KindInfo,
    Obj,
    Problem,
    ReplicaState,
    Verdict,
    config_map,
    headless_service,
    hookimpl,
    recovery_problems,
    replicas_lost,
    run_mode_problems,
    ssh_secret,
    ssh_user_problems,
    training_container,
)
from t9kjobs.plugins.colossalai.launch import HOSTFILE_PATH, hostfile, torchrun_options
from t9kjobs.plugins.colossalai.pods import (
    HOSTFILE_KEY,
    build_pods,
    hostfile_name,
    launcher_command,
    launcher_template,
    worker_command,
    worker_hosts,
)
from t9kjobs.plugins.colossalai.spec import LAUNCHER, WORKER, ColossalAIJobSpec

__all__ = [
    "KIND",
    "t9kjobs_build_launch_command",
    "t9kjobs_build_objects",
    "t9kjobs_build_pods",
    "t9kjobs_compute_status",
    "t9kjobs_kinds",
    "t9kjobs_validate",
]

KIND = "ColossalAIJob"


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return [
        KindInfo(
            kind=KIND,
            spec_model=ColossalAIJobSpec,
            plural="colossalaijobs",
            short_names=("caij",),
            description="A ColossalAI training job: a launcher runs `colossalai run` over ssh"
            " on its workers.",
        )
    ]


def _template_problems(
    spec: ColossalAIJobSpec, index: int, replica_type: str, reserved: dict[str, str]
) -> list[Problem]:
    """Problems of one replica spec's template: its training container and reserved paths."""
    where = f"spec.replicaSpecs[{index}].template.spec.containers"
    template = spec.replica_specs[index].template
    found = training_container(template, replica_type)
    if found is None:
        if replica_type == WORKER:
            return [Problem(where, "the worker template needs at least one container")]
        return []  # the launcher's container is derived from the worker's
    position, container = found
    containers = (template.get("spec") or {}).get("containers") or []
    names = [c.get("name") for c in containers]
    path = f"{where}[{position}]"
    problems = []
    if len(containers) > 1 and replica_type not in names:
        problems.append(
            Problem(
                where,
                f"no container is named {replica_type!r}: the first one"
                f" ({names[0]!r}) is the {replica_type}'s",
                "warning",
            )
        )
    runs = "sshd" if replica_type == WORKER else "the launch script (colossalai run)"
    for key in ("command", "args"):
        if container.get(key):
            problems.append(
                Problem(
                    f"{path}.{key}",
                    f"ignored: the {replica_type} runs {runs}; the training script is"
                    " spec.torchConfig.script",
                    "warning",
                )
            )
    for j, mount in enumerate(container.get("volumeMounts") or []):
        what = reserved.get(str(mount.get("mountPath", "")).rstrip("/"))
        if what is not None:
            problems.append(Problem(f"{path}.volumeMounts[{j}].mountPath", f"reserved for {what}"))
    return problems


def _working_dir_problem(spec: ColossalAIJobSpec) -> list[Problem]:
    """colossalai run `cd`s each worker to the launcher's working directory."""
    launcher = spec.replica_spec(LAUNCHER)
    if launcher is None:
        return []  # derived with the worker's working directory
    index = spec.replica_specs.index(launcher)
    own = training_container(launcher.template, LAUNCHER)
    worker = training_container(spec.worker.template, WORKER)
    if own is None or worker is None or own[1].get("workingDir") == worker[1].get("workingDir"):
        return []
    position, worker_dir = own[0], worker[1].get("workingDir")
    return [
        Problem(
            f"spec.replicaSpecs[{index}].template.spec.containers[{position}].workingDir",
            f"differs from the worker's ({worker_dir or 'the image default'}):"
            " colossalai run starts the script on every worker from the launcher's working"
            " directory",
            "warning",
        )
    ]


@hookimpl
def t9kjobs_validate(job: Job) -> list[Problem]:
    spec = job.spec_as(ColossalAIJobSpec)
    ssh_dir = spec.ssh.auth_mount_path.rstrip("/")
    problems = []
    for i, rs in enumerate(spec.replica_specs):
        reserved = {ssh_dir: "the job's SSH key (spec.ssh.authMountPath)"}
        if rs.type == LAUNCHER:
            reserved[HOSTFILE_PATH] = "the hostfile"
        problems += _template_problems(spec, i, rs.type, reserved)
    problems += _working_dir_problem(spec)
    problems += run_mode_problems(spec.run_mode, (LAUNCHER, WORKER))
    problems += recovery_problems(spec.recovery_policy, (LAUNCHER, WORKER))
    for i, rs in enumerate(spec.replica_specs):
        template = launcher_template(spec) if rs.type == LAUNCHER else rs.template
        where = f"spec.replicaSpecs[{i}].template"
        problems += ssh_user_problems(template, where, spec.ssh.port)
    try:  # options read in pairs: beyond what a CEL rule can say
        torchrun_options(spec.torch_config.extra_args)
    except ValueError as exc:
        problems.append(Problem("spec.torchConfig.extraArgs", str(exc)))
    return problems


@hookimpl
def t9kjobs_build_pods(job: Job) -> list[DesiredPod]:
    return build_pods(job)


@hookimpl
def t9kjobs_build_launch_command(job: Job, pod: DesiredPod) -> list[str]:
    spec = job.spec_as(ColossalAIJobSpec)
    if pod.replica_type == WORKER:
        return worker_command(spec)
    return launcher_command(job, spec)


@hookimpl
def t9kjobs_build_objects(job: Job) -> list[Obj]:
    spec = job.spec_as(ColossalAIJobSpec)
    return [
        ssh_secret(job, spec.ssh.auth_mount_path, spec.ssh.port),
        config_map(job, hostfile_name(job), {HOSTFILE_KEY: hostfile(worker_hosts(job, spec))}),
        headless_service(job),
    ]


@hookimpl
def t9kjobs_compute_status(replicas: Sequence[ReplicaState]) -> Verdict | None:
    """The launcher's exit decides, and a worker failed for good fails the job: no attempt of
    the launcher can run without it (docs/colossalai.md, Status)."""
    launcher = next((r for r in replicas if r.replica_type == LAUNCHER), None)
    if launcher is None:
        return None
    if launcher.succeeded and launcher.final:
        return Verdict("Succeeded", "LauncherSucceeded", f"{launcher.name} succeeded", (launcher,))
    if launcher.failed_for_good:
        after = f" after {launcher.restarts} restart(s)" if launcher.restarts else ""
        return Verdict("Failed", "LauncherFailed", launcher.failure + after, (launcher,))
    return replicas_lost(replicas)
