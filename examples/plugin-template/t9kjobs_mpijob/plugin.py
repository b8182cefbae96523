"""MPIJob hooks: pods `<job>-launcher` and `<job>-worker-<i>`, a hostfile, `mpirun` over ssh.
Pure: no I/O but reading our templates; `ssh_secret` leaves the keys to the operator."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from t9kjobs.plugin import (
    DesiredPod,
    Job,
    KindInfo,
    Obj,
    Problem,
    ReplicaState,
    RestartRule,
    Verdict,
    config_map,
    headless_service,
    hookimpl,
    mount_ssh,
    new_pod,
    pod_host,
    pod_name,
    render_template,
    run_mode_problems,
    ssh_secret,
    start_sshd_script,
    training_container,
    wait_for_sshd_script,
)

from t9kjobs_mpijob.spec import MPIJobSpec

__all__ = [
    "t9kjobs_build_launch_command",
    "t9kjobs_build_objects",
    "t9kjobs_build_pods",
    "t9kjobs_compute_status",
    "t9kjobs_kinds",
    "t9kjobs_validate",
]

KIND = "MPIJob"
HOSTFILE = "/etc/mpi/hostfile"
_PACKAGE = "t9kjobs_mpijob"  # where render_template finds templates/


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return [
        KindInfo(
            kind=KIND,
            spec_model=MPIJobSpec,
            plural="mpijobs",
            short_names=("mpij",),
            scale_spec_path="worker.replicas",  # `kubectl scale mpijob/x --replicas=4`
            description="An MPI job: a launcher runs mpirun over ssh on its workers.",
        )
    ]


@hookimpl
def t9kjobs_validate(job: Job) -> list[Problem]:
    spec = job.spec_as(MPIJobSpec)
    problems = [
        Problem(f"spec.{role}.template.spec.containers", "at least one container")
        for role, replica in (("launcher", spec.launcher), ("worker", spec.worker))
        if not (replica.template.get("spec") or {}).get("containers")
    ]
    return problems + run_mode_problems(spec.run_mode, ("launcher", "worker"))


def _hosts(job: Job) -> list[str]:
    """The workers' DNS names through the job's headless Service."""
    workers = job.spec_as(MPIJobSpec).worker.replicas
    return [pod_host(job, pod_name(job.name, "worker", i)) for i in range(workers)]


def _pod(job: Job, role: str, index: int, name: str | None = None) -> DesiredPod:
    spec = job.spec_as(MPIJobSpec)
    replica = spec.launcher if role == "launcher" else spec.worker
    manifest = new_pod(job, role, index, replica.template, subdomain=job.name, name=name)
    found = training_container(manifest)  # the template's first container runs mpirun
    container = found[1] if found is not None else None
    names = [container["name"]] if container is not None else []
    # The launcher is the ssh client, the workers the servers: each mounts its own files only
    # (the client key only in the launcher, the host key only where sshd runs).
    launcher = role == "launcher"
    mount_ssh(manifest, job, names, server=not launcher, client=launcher)
    if role == "launcher" and container is not None:
        manifest["spec"].setdefault("volumes", []).append(
            {"name": "hostfile", "configMap": {"name": f"{job.name}-hostfile"}}
        )
        container.setdefault("volumeMounts", []).append(
            {"name": "hostfile", "mountPath": HOSTFILE, "subPath": "hostfile"}
        )
    return DesiredPod(
        replica_type=role,
        index=index,
        restart=RestartRule.of(replica.restart_policy),  # bounded by runPolicy.backoffLimit
        manifest=manifest,
        training_container=names[0] if names else None,
        debug_command=_sshd() if role == "worker" else None,  # debug: workers keep sshd
        stop_when_finished=role == "worker",  # sshd never exits: stop it with the job
        recreate_on_change=role == "launcher",  # a new worker count means a new hostfile
    )


@hookimpl
def t9kjobs_build_pods(job: Job) -> list[DesiredPod]:
    workers = job.spec_as(MPIJobSpec).worker.replicas
    launcher = _pod(job, "launcher", 0, name=f"{job.name}-launcher")
    return [launcher, *(_pod(job, "worker", i) for i in range(workers))]


def _sshd() -> list[str]:
    return ["/bin/bash", "-c", start_sshd_script()]


@hookimpl
def t9kjobs_build_launch_command(job: Job, pod: DesiredPod) -> list[str]:
    if pod.replica_type == "worker":
        return _sshd()
    spec = job.spec_as(MPIJobSpec)
    ranks = spec.worker.replicas * spec.slots_per_worker
    argv = ["mpirun", "--hostfile", HOSTFILE, "-np", str(ranks), *spec.mpirun_args, *spec.program]
    script = render_template(
        _PACKAGE,
        "launcher.sh.j2",
        wait_for_workers=wait_for_sshd_script(_hosts(job)),
        command=shlex.join(argv),
    )
    return ["/bin/bash", "-c", script]


@hookimpl
def t9kjobs_build_objects(job: Job) -> list[Obj]:
    slots = job.spec_as(MPIJobSpec).slots_per_worker
    hostfile = render_template(_PACKAGE, "hostfile.j2", hosts=_hosts(job), slots=slots)
    return [
        ssh_secret(job),
        config_map(job, f"{job.name}-hostfile", {"hostfile": hostfile}),
        headless_service(job),
    ]


@hookimpl
def t9kjobs_compute_status(replicas: Sequence[ReplicaState]) -> Verdict | None:
    """The launcher's exit decides; a worker lost for good fails the job (a rank is lost)."""
    for r in replicas:
        if r.replica_type == "launcher" and r.succeeded and r.final:
            return Verdict("Succeeded", "LauncherSucceeded", f"{r.name} succeeded", (r,))
    failed = [r for r in replicas if r.failed_for_good]
    if failed:
        message = "; ".join(r.failure for r in failed)
        return Verdict("Failed", "ReplicaFailed", message, tuple(failed))
    return None
