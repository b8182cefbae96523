"""What worker-0 runs: the `deepspeed` command line, the env file and the shell around them.

Every worker runs sshd with the job's key; worker-0 also runs the launcher, which reaches the
workers through pdsh/ssh. The launcher must not race its workers, so worker-0 first waits
(bounded) until every worker's sshd answers. User strings are quoted with `shlex.quote`; the
scripts are jinja templates in `templates/`.
"""

from __future__ import annotations

import shlex

from t9kjobs.plugin import (
    Job,
    Obj,
    engine_env_names,
    gpu_count,
    pod_host,
    pod_name,
    render_template,
    start_sshd_script,
    training_container,
    wait_for_sshd_script,
)
from t9kjobs.plugins.deepspeed.spec import DeepSpeedJobSpec

__all__ = [
    "ENV_FILE",
    "HOSTFILE_PATH",
    "REPLICA_TYPE",
    "SSHD_WAIT_SECONDS",
    "SSH_DIR",
    "deepspeed_argv",
    "env_file_path",
    "env_file_script",
    "env_names",
    "hostfile_text",
    "launcher_command",
    "slots_per_worker",
    "ssh_dir",
    "sshd_command",
    "user_container",
    "worker0_debug_command",
    "worker_hosts",
]

_PACKAGE = "t9kjobs.plugins.deepspeed"
REPLICA_TYPE = "worker"
HOSTFILE_PATH = "/t9k/hostfile"
SSH_DIR = "/root/.ssh"  # the default of spec.ssh.authMountPath
# DeepSpeed reads `.deepspeed_env` from the launching user's home (then from the working
# directory); the launcher runs as root, whose home holds the job's ssh config too.
ENV_FILE = "/root/.deepspeed_env"
# Long enough for workers still pulling a large image; a worker that never answers makes
# worker-0 exit 1 naming it, and the restart policy decides what follows.
SSHD_WAIT_SECONDS = 600


def worker_hosts(job: Job, count: int) -> list[str]:
    """`<job>-worker-<i>.<job>`: resolvable through the job's headless Service before readiness."""
    return [pod_host(job, pod_name(job.name, REPLICA_TYPE, i)) for i in range(count)]


def user_container(spec: DeepSpeedJobSpec) -> Obj | None:
    """The training container as the user wrote it (the worker template's first)."""
    found = training_container(spec.worker.template)
    return found[1] if found is not None else None


def slots_per_worker(spec: DeepSpeedJobSpec) -> int:
    """`config.slotsPerWorker`, else the training container's GPU count, else 1 (no GPUs
    still runs one process)."""
    if spec.config.slots_per_worker is not None:
        return spec.config.slots_per_worker
    container = user_container(spec)
    gpus = gpu_count(container) if container is not None else None
    return gpus or 1


def hostfile_text(hosts: list[str], slots: int) -> str:
    """DeepSpeed's MPI-style hostfile: `<host> slots=<n>` a line."""
    return render_template(_PACKAGE, "hostfile.j2", hosts=hosts, slots=slots)


def deepspeed_argv(job: Job, spec: DeepSpeedJobSpec) -> list[str]:
    """The `deepspeed` command line built from `spec.config` (customCommand aside)."""
    config = spec.config
    argv = ["deepspeed", f"--hostfile={HOSTFILE_PATH}"]
    if not config.local_rank:
        argv.append("--no_local_rank")
    if config.autotune is not None:
        argv.append(f"--autotuning={config.autotune}")
    if spec.elastic is not None and spec.elastic.enabled:
        count = spec.worker_count()
        argv += [
            "--elastic_training",
            f"--min_elastic_nodes={spec.elastic.min_replicas or 1}",
            f"--max_elastic_nodes={spec.elastic.max_replicas or count}",
            # DeepSpeed refuses elastic training without an explicit master address.
            f"--master_addr={worker_hosts(job, 1)[0]}",
        ]
    run = config.run
    program: list[str] = []
    if run is not None and run.module is not None:
        argv.append("--module")
        program = run.module
    elif run is not None and run.exec is not None:
        argv.append("--no_python")
        program = run.exec
    elif run is not None and run.python is not None:
        program = run.python
    return argv + list(config.other_args) + list(program)


def env_names(container: Obj | None) -> list[str]:
    """The names of a container's `env` entries, each once, in order of first appearance."""
    names: list[str] = []
    for entry in (container or {}).get("env") or []:
        name = str(entry.get("name", ""))
        if name and name not in names:
            names.append(name)
    return names


def ssh_dir(spec: DeepSpeedJobSpec) -> str:
    """Where the job's SSH files are mounted: `spec.ssh.authMountPath`, /root/.ssh unless set."""
    return spec.ssh.auth_mount_path.rstrip("/")


def env_file_path(spec: DeepSpeedJobSpec) -> str:
    """`.deepspeed_env` in the user's home (the folder of `ssh.authMountPath`): /root's unless
    the pods run as another user, where DeepSpeed's launcher reads it from (`~`)."""
    return f"{spec.ssh.home.rstrip('/')}/.deepspeed_env"


def env_file_script(names: list[str], path: str = ENV_FILE) -> str:
    """Shell that writes `path` (`VAR=VAL` a line) from the pod's environment at start-up.

    Values are read from the environment, never copied into an object: a `valueFrom` Secret
    value stays in the pod, and the kubelet has already expanded `$(VAR)` references. Unset
    variables (an optional reference that is missing) are left out; a value holding a newline
    stops the pod with a message naming the variable. `names` must be shell identifiers.
    """
    return render_template(_PACKAGE, "env_file.sh.j2", names=names, path=shlex.quote(path))


def _env_file(spec: DeepSpeedJobSpec, container: Obj | None) -> str:
    """The env file's script: the template's names (unless `disableCustomEnv`), and the
    engine's own (`t9kjobs.objects.engine_env_names`: the checkpoint to resume from...), which
    the ranks need whatever the user's choice."""
    names = [] if spec.disable_custom_env else env_names(container)
    names += [n for n in engine_env_names(spec) if n not in names]
    if not names:
        return ""
    return env_file_script(names, env_file_path(spec)).rstrip("\n")


def _sshd(spec: DeepSpeedJobSpec) -> str:
    return start_sshd_script(mount_path=ssh_dir(spec), port=spec.ssh.port)


def sshd_command(spec: DeepSpeedJobSpec) -> list[str]:
    """What every worker but worker-0 runs: sshd in the foreground with the job's key."""
    return ["/bin/bash", "-c", _sshd(spec)]


def launcher_command(job: Job, spec: DeepSpeedJobSpec, container: Obj | None) -> list[str]:
    """Worker-0's argv: sshd in the background, wait for all workers, env file, launch.

    The host list of the wait step changes with the worker count, so worker-0's spec does too
    (it is recreated on change, and relaunches on the rewritten hostfile).
    """
    hosts = worker_hosts(job, spec.worker_count())
    if spec.config.custom_command is not None:
        launch = shlex.join(["/bin/bash", "-c", spec.config.custom_command])
    else:
        launch = shlex.join(deepspeed_argv(job, spec))
    script = render_template(
        _PACKAGE,
        "launcher.sh.j2",
        start_sshd=shlex.quote(_sshd(spec)),
        wait_for_sshd=wait_for_sshd_script(
            hosts, mount_path=ssh_dir(spec), timeout=SSHD_WAIT_SECONDS, port=spec.ssh.port
        ).rstrip("\n"),
        env_file=_env_file(spec, container),
        workers=len(hosts),
        launch=launch,
    )
    return ["/bin/bash", "-c", script]


def worker0_debug_command(spec: DeepSpeedJobSpec, container: Obj | None) -> list[str]:
    """Worker-0 in debug mode: the env file, then sshd, so `deepspeed` can be run by hand."""
    script = render_template(
        _PACKAGE,
        "debug_worker0.sh.j2",
        env_file=_env_file(spec, container),
        start_sshd=_sshd(spec).rstrip("\n"),
        hostfile=HOSTFILE_PATH,
    )
    return ["/bin/bash", "-c", script]
