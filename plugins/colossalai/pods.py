"""The pods of a ColossalAIJob: N workers running sshd, and one launcher running `colossalai run`.

Workers are `<job>-worker-<i>`, the launcher `<job>-launcher`; all of them are reachable as
`<pod>.<job>` through the job's headless Service. The launcher is the ssh client and the workers
the servers: both mount the job's SSH Secret at `ssh.authMountPath`, the launcher the client key,
`known_hosts` and config, the workers the host key and `authorized_keys` (`t9kjobs.ssh`); the
launcher also mounts the hostfile ConfigMap at `/t9k/hostfile`.

Without a launcher container in the spec, one is derived from the worker container: the same
image (and pull policy, pull secrets), working directory, environment and security context, so
that it runs as the same user (whose `~/.ssh` is `authMountPath`) from the directory the workers
will `cd` to, and the pod template's labels and annotations; no resources, volumes, command or
probes: it only drives ssh sessions.
"""

from __future__ import annotations

import copy

from t9kjobs.plugin import (
    KNOWN_HOSTS,
    DesiredPod,
    Job,
    Obj,
    host_key_alias,
    mount_ssh,
    new_pod,
    pod_host,
    pod_name,
    start_sshd_script,
    training_container,
    wait_for_sshd_script,
)
from t9kjobs.plugins.colossalai.launch import (
    HOSTFILE_PATH,
    colossalai_run_argv,
    launcher_script,
)
from t9kjobs.plugins.colossalai.spec import (
    LAUNCHER,
    WORKER,
    ColossalAIJobSpec,
    ColossalAIReplicaSpec,
)

__all__ = [
    "HOSTFILE_KEY",
    "build_pods",
    "hostfile_name",
    "launcher_command",
    "launcher_name",
    "launcher_template",
    "worker_command",
    "worker_hosts",
]

HOSTFILE_KEY = "hostfile"
_HOSTFILE_VOLUME = "t9k-hostfile"
# Container fields the derived launcher copies from the worker container, and pod fields.
_COPIED_CONTAINER_FIELDS = (
    "image",
    "imagePullPolicy",
    "workingDir",
    "env",
    "envFrom",
    "securityContext",
)
_COPIED_POD_FIELDS = ("imagePullSecrets", "securityContext")


def launcher_name(job: Job) -> str:
    return f"{job.name}-launcher"


def hostfile_name(job: Job) -> str:
    return f"{job.name}-hostfile"


def worker_hosts(job: Job, spec: ColossalAIJobSpec) -> list[str]:
    """The workers' DNS names through the headless Service, worker 0 first."""
    return [pod_host(job, pod_name(job.name, WORKER, i)) for i in range(spec.worker.replicas)]


def _container_name(template: Obj, preferred: str) -> str | None:
    found = training_container(template, preferred)
    return None if found is None else found[1].get("name")


def _derived_container(worker_template: Obj) -> Obj:
    found = training_container(worker_template, WORKER)
    worker = found[1] if found is not None else {}
    container: Obj = {"name": LAUNCHER}
    for key in _COPIED_CONTAINER_FIELDS:
        if key in worker:
            container[key] = copy.deepcopy(worker[key])
    return container


def launcher_template(spec: ColossalAIJobSpec) -> Obj:
    """The launcher's pod template: its own, with a container derived when it has none."""
    own = spec.replica_spec(LAUNCHER)
    template = copy.deepcopy(own.template) if own is not None else {}
    pod_spec: Obj = template.setdefault("spec", {})
    if not pod_spec.get("containers"):
        worker_spec: Obj = spec.worker.template.get("spec") or {}
        pod_spec["containers"] = [_derived_container(spec.worker.template)]
        for key in _COPIED_POD_FIELDS:
            if key in worker_spec and key not in pod_spec:
                pod_spec[key] = copy.deepcopy(worker_spec[key])
        # The worker template's labels and annotations too (policy, sidecar and simulator
        # annotations address the job's pods as a whole); the launcher's own win.
        worker_meta: Obj = spec.worker.template.get("metadata") or {}
        meta: Obj = template.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            if worker_meta.get(key):
                meta[key] = {**copy.deepcopy(worker_meta[key]), **(meta.get(key) or {})}
    return template


def _mount_hostfile(pod: Obj, job: Job, container: str) -> None:
    spec = pod["spec"]
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != _HOSTFILE_VOLUME]
    volumes.append({"name": _HOSTFILE_VOLUME, "configMap": {"name": hostfile_name(job)}})
    spec["volumes"] = volumes
    for c in spec["containers"]:
        if c.get("name") == container:
            mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") != _HOSTFILE_VOLUME]
            # subPath: the file alone, so nothing else under /t9k (a PVC at /t9k/mnt) is hidden.
            mounts.append(
                {
                    "name": _HOSTFILE_VOLUME,
                    "mountPath": HOSTFILE_PATH,
                    "subPath": HOSTFILE_KEY,
                    "readOnly": True,
                }
            )
            c["volumeMounts"] = mounts


def worker_command(spec: ColossalAIJobSpec) -> list[str]:
    """sshd in the foreground, trusting the job's key: a worker's whole program."""
    return [
        "/bin/bash",
        "-c",
        start_sshd_script(spec.ssh.sshd_path, spec.ssh.auth_mount_path, spec.ssh.port),
    ]


def launcher_command(job: Job, spec: ColossalAIJobSpec) -> list[str]:
    """Wait (bounded) for every worker's sshd, then `colossalai run` on all of them."""
    hosts = worker_hosts(job, spec)
    argv = colossalai_run_argv(
        hosts=hosts,
        proc_per_worker=spec.torch_config.proc_per_worker,
        extra_args=spec.torch_config.extra_args,
        script=spec.torch_config.script,
        ssh_port=spec.ssh.port,
    )
    wait = wait_for_sshd_script(hosts, spec.ssh.auth_mount_path, port=spec.ssh.port)
    known_hosts = f"{spec.ssh.auth_mount_path.rstrip('/')}/{KNOWN_HOSTS}"
    script = launcher_script(
        wait, argv, len(hosts), known_hosts=known_hosts, alias=host_key_alias(job)
    )
    return ["/bin/bash", "-c", script]


def _desired(
    job: Job,
    replica: ColossalAIReplicaSpec | None,
    replica_type: str,
    index: int,
    template: Obj,
    name: str | None = None,
) -> DesiredPod:
    spec = job.spec_as(ColossalAIJobSpec)
    manifest = new_pod(job, replica_type, index, template, subdomain=job.name, name=name)
    container = _container_name(template, replica_type)
    if container is not None:
        # The workers serve ssh, the launcher is their one client: only it has the client key.
        launcher = replica_type == LAUNCHER
        mount_ssh(
            manifest,
            job,
            [container],
            spec.ssh.auth_mount_path,
            server=not launcher,
            client=launcher,
        )
    if replica_type == LAUNCHER and container is not None:
        _mount_hostfile(manifest, job, container)
    # A launcher left out of the spec restarts as the spec's default would: OnFailure, limit 0.
    restart = (replica or ColossalAIReplicaSpec(type=LAUNCHER)).restart_rule()
    return DesiredPod(
        replica_type=replica_type,
        index=index,
        restart=restart,
        manifest=manifest,
        training_container=container,
        # Debug mode keeps sshd on the workers: from the launcher, run colossalai run by hand.
        debug_command=worker_command(spec) if replica_type == WORKER else None,
        # A changed worker count changes the hostfile: a running launcher would miss it.
        recreate_on_change=replica_type == LAUNCHER,
    )


def build_pods(job: Job) -> list[DesiredPod]:
    """The launcher, then workers 0..N-1."""
    spec = job.spec_as(ColossalAIJobSpec)
    launcher = _desired(
        job,
        spec.replica_spec(LAUNCHER),
        LAUNCHER,
        0,
        launcher_template(spec),
        name=launcher_name(job),
    )
    workers = [
        _desired(job, spec.worker, WORKER, i, spec.worker.template)
        for i in range(spec.worker.replicas)
    ]
    return [launcher, *workers]
