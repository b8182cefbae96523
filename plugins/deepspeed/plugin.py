"""DeepSpeedJob: N workers that trust one SSH key; worker-0 waits for them, then runs `deepspeed`.

Topology: pods `<job>-worker-<i>` with hostname/subdomain on the job's headless Service, so
`<job>-worker-<i>.<job>` resolves before readiness; those names fill the hostfile
(`/t9k/hostfile`, a ConfigMap). Every worker runs sshd with the job's host key, trusting the job's
client key (a Secret mounted at `/root/.ssh`, `t9kjobs.ssh`); worker-0 alone has the client key
and launches, the other workers run only sshd. The job follows worker-0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t9kjobs.plugin import (
    DesiredPod,
    FunctionRun,
    Job,
    JobStatus,
    KindInfo,
    Obj,
    Problem,
    ReplicaState,
    RestartRule,
    Verdict,
    config_map,
    find_container,
    headless_service,
    hookimpl,
    mount_ssh,
    new_pod,
    replicas_lost,
    set_env,
    ssh_secret,
)
from t9kjobs.plugins.deepspeed.checks import HOSTFILE_VOLUME, deepspeed_problems
from t9kjobs.plugins.deepspeed.launch import (
    HOSTFILE_PATH,
    REPLICA_TYPE,
    hostfile_text,
    launcher_command,
    slots_per_worker,
    ssh_dir,
    sshd_command,
    user_container,
    worker0_debug_command,
    worker_hosts,
)
from t9kjobs.plugins.deepspeed.spec import DeepSpeedJobSpec, DeepSpeedJobStatus

__all__ = [
    "KIND",
    "t9kjobs_build_launch_command",
    "t9kjobs_build_objects",
    "t9kjobs_build_pods",
    "t9kjobs_compute_status",
    "t9kjobs_function_spec",
    "t9kjobs_kinds",
    "t9kjobs_update_status",
    "t9kjobs_validate",
]

KIND = "DeepSpeedJob"
_HOSTFILE_KEY = "hostfile"


def _hostfile_name(job: Job) -> str:
    return f"{job.name}-hostfile"


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return [
        KindInfo(
            kind=KIND,
            spec_model=DeepSpeedJobSpec,
            status_model=DeepSpeedJobStatus,
            plural="deepspeedjobs",
            short_names=("dsj",),
            # Documented default; worker pods override it with the full sshd start script
            # (host keys, privilege separation dir), which a bare `sshd -D` lacks.
            debug_command=("/usr/sbin/sshd", "-D"),
            scale_spec_path="spec.elastic.expectedReplicas",
            description="A DeepSpeed job: workers reached over ssh, launched from worker-0.",
        )
    ]


@hookimpl
def t9kjobs_validate(job: Job) -> list[Problem]:
    return deepspeed_problems(job.spec_as(DeepSpeedJobSpec))


def _mount_hostfile(pod: Obj, job: Job, container_name: str | None) -> None:
    """The hostfile as a single read-only file at /t9k/hostfile.

    A subPath mount rather than a ConfigMap directory at /t9k: users commonly mount their own
    volumes under /t9k (e.g. /t9k/mnt), which a read-only volume at /t9k would break. A subPath
    file does not follow ConfigMap updates; worker-0, the only reader, is recreated when the
    worker count (hence the hostfile) changes.
    """
    spec = pod["spec"]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {
            "name": HOSTFILE_VOLUME,
            "configMap": {"name": _hostfile_name(job), "defaultMode": 0o444},
        },
    ]
    container = find_container(pod, container_name)
    if container is not None:
        container["volumeMounts"] = [
            *(container.get("volumeMounts") or []),
            {
                "name": HOSTFILE_VOLUME,
                "mountPath": HOSTFILE_PATH,
                "subPath": _HOSTFILE_KEY,
                "readOnly": True,
            },
        ]


@hookimpl
def t9kjobs_build_pods(job: Job) -> list[DesiredPod]:
    spec = job.spec_as(DeepSpeedJobSpec)
    count = spec.worker_count()
    restart = RestartRule.of(spec.worker.restart_policy)  # bounded by backoffLimit
    written = user_container(spec)
    pods = []
    for index in range(count):
        manifest = new_pod(job, REPLICA_TYPE, index, spec.worker.template, subdomain=job.name)
        container = find_container(manifest)
        name = str(container["name"]) if container is not None and "name" in container else None
        launcher = index == 0
        if name is not None:
            # Every worker serves ssh; worker-0 also launches, the only one with the client key.
            mount_ssh(manifest, job, [name], ssh_dir(spec), server=True, client=launcher)
        _mount_hostfile(manifest, job, name)
        if launcher and container is not None:
            # Makes the worker count part of worker-0's spec in every run mode.
            set_env(container, {"T9K_NUM_WORKERS": str(count)})
        pods.append(
            DesiredPod(
                replica_type=REPLICA_TYPE,
                index=index,
                restart=restart,
                manifest=manifest,
                training_container=name,
                debug_command=(
                    worker0_debug_command(spec, written) if launcher else sshd_command(spec)
                ),
                recreate_on_change=launcher,
                # sshd-only workers never exit: they end with worker-0, whatever the policy.
                stop_when_finished=not launcher,
            )
        )
    return pods


@hookimpl
def t9kjobs_build_launch_command(job: Job, pod: DesiredPod) -> list[str]:
    spec = job.spec_as(DeepSpeedJobSpec)
    if pod.index != 0:
        return sshd_command(spec)
    return launcher_command(job, spec, user_container(spec))


@hookimpl
def t9kjobs_build_objects(job: Job) -> list[Obj]:
    spec = job.spec_as(DeepSpeedJobSpec)
    hosts = worker_hosts(job, spec.worker_count())
    text = hostfile_text(hosts, slots_per_worker(spec))
    return [
        ssh_secret(job, ssh_dir(spec), spec.ssh.port),
        config_map(job, _hostfile_name(job), {_HOSTFILE_KEY: text}),
        headless_service(job),
    ]


@hookimpl
def t9kjobs_compute_status(job: Job, replicas: Sequence[ReplicaState]) -> Verdict | None:
    """Success follows worker-0, the launcher; so does failure, and another worker failed for
    good fails the job too, unless an elastic job still has `minReplicas` workers.

    Workers run sshd: one failed for good is a host gone, and pdsh's ssh session to it may
    wait for ever instead of failing the launcher (docs/architecture.md).
    """
    launcher = next((r for r in replicas if r.replica_type == REPLICA_TYPE and r.index == 0), None)
    if launcher is None:
        return None
    if launcher.succeeded and launcher.final:
        return Verdict("Succeeded", "LauncherSucceeded", f"{launcher.name} succeeded", (launcher,))
    if launcher.failed_for_good:
        return Verdict("Failed", "LauncherFailed", launcher.failure, (launcher,))
    return replicas_lost(replicas, job.spec.lifecycle().min_available)


@hookimpl
def t9kjobs_update_status(job: Job, status: JobStatus) -> None:
    """`status.slotsPerWorker`: the slots the hostfile gives each worker (the default is the
    GPU count, so the user can see what it came to)."""
    if isinstance(status, DeepSpeedJobStatus):
        status.slots_per_worker = slots_per_worker(job.spec_as(DeepSpeedJobSpec))


@hookimpl
def t9kjobs_function_spec(run: FunctionRun) -> dict[str, Any]:
    """`nodes` workers with `procs_per_node` slots each; the deepspeed launcher on worker-0
    starts the function's command on every slot (`run.exec`, no --local_rank: the runner reads
    LOCAL_RANK), and the runner calls `deepspeed.init_distributed` first."""
    container: dict[str, Any] = {
        "name": "worker",
        "image": run.image,
        "env": [
            {"name": k, "value": v}
            for k, v in {**run.env, "T9KJOBS_FUNCTION_DISTRIBUTED": "deepspeed"}.items()
        ],
    }
    if run.resources:
        container["resources"] = dict(run.resources)
    return {
        "config": {
            "slotsPerWorker": run.procs_per_node,
            "localRank": False,
            "run": {"exec": list(run.command)},
        },
        "worker": {
            "replicas": run.nodes,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        },
    }
