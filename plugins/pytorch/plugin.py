"""PyTorchTrainingJob: replicas that meet at the master through a headless Service, optionally
launched by torchrun, elastic, with a TensorBoard. The env contract is in docs/pytorch.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from t9kjobs.plugin import (
    GPU_RESOURCE,
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
    find_container,
    gpu_count,
    headless_service,
    hookimpl,
    new_pod,
    recovery_problems,
    run_mode_problems,
    set_env,
    tensorboard_objects,
    tensorboard_status,
    training_container,
)
from t9kjobs.plugins.pytorch.spec import (
    PyTorchTrainingJobSpec,
    PyTorchTrainingJobStatus,
    TorchrunConfig,
)
from t9kjobs.plugins.pytorch.topology import (
    RESERVED_ENV,
    TRAINING_CONTAINER,
    pod_env,
    replica_counts,
    topology,
)
from t9kjobs.plugins.pytorch.torchrun import GENERATED_OPTIONS, option_name, torchrun_command

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

KIND = "PyTorchTrainingJob"


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return [
        KindInfo(
            kind=KIND,
            spec_model=PyTorchTrainingJobSpec,
            plural="pytorchtrainingjobs",
            short_names=("ptj",),
            status_model=PyTorchTrainingJobStatus,
            scale_spec_path="spec.elastic.expectedReplicas",
            description="Distributed PyTorch training: DDP or torchrun, elastic, TensorBoard.",
        )
    ]


def _torchrun(spec: PyTorchTrainingJobSpec) -> TorchrunConfig | None:
    config = spec.torchrun_config
    return config if config is not None and config.enabled else None


def _container_problems(
    spec: PyTorchTrainingJobSpec, i: int, torchrun: TorchrunConfig | None
) -> list[Problem]:
    base = f"spec.replicaSpecs[{i}].template.spec.containers"
    found = training_container(spec.replica_specs[i].template, TRAINING_CONTAINER)
    if found is None:
        return [Problem(base, "at least one container")]
    j, container = found
    path = f"{base}[{j}]"
    out = [
        Problem(
            f"{path}.env[{k}]",
            f"{env.get('name')} is set by the operator on the training container; remove it",
        )
        for k, env in enumerate(container.get("env") or [])
        if env.get("name") in RESERVED_ENV
    ]
    if torchrun is None:
        return out
    if container.get("command"):
        out.append(
            Problem(
                f"{path}.command",
                "ignored: with spec.torchrunConfig.enabled the container runs"
                " `torchrun <options> <args...>`",
                "warning",
            )
        )
    if not container.get("args"):
        out.append(
            Problem(
                f"{path}.args",
                "torchrun needs the training script (and its arguments) in args:"
                " the command is ignored with spec.torchrunConfig.enabled",
            )
        )
    if torchrun.proc_per_node == "gpu" and gpu_count(container) is None:
        out.append(
            Problem(
                f"{path}.resources.limits",
                f"spec.torchrunConfig.procPerNode is 'gpu' but the training container sets no"
                f" positive whole-number {GPU_RESOURCE} limit or request",
            )
        )
    return out


@hookimpl
def t9kjobs_validate(job: Job) -> list[Problem]:
    spec = job.spec_as(PyTorchTrainingJobSpec)
    torchrun = _torchrun(spec)
    problems: list[Problem] = []
    for i in range(len(spec.replica_specs)):
        problems += _container_problems(spec, i, torchrun)
    if sum(replica_counts(spec).values()) == 0:
        problems.append(Problem("spec.replicaSpecs", "the job has no replicas"))
    if torchrun is not None:
        for k, option in enumerate(torchrun.extra_options):
            name = option_name(option)
            if name in GENERATED_OPTIONS:
                problems.append(
                    Problem(
                        f"spec.torchrunConfig.extraOptions[{k}]",
                        f"overrides the generated --{name}",
                        "warning",
                    )
                )
    if spec.elastic is not None and spec.elastic.enabled and torchrun is None:
        problems.append(
            Problem(
                "spec.elastic.enabled",
                "elastic training without spec.torchrunConfig.enabled: the pods scale, but the"
                " training program must handle membership changes itself (e.g. run torchrun,"
                " which reads the PET_* variables)",
                "warning",
            )
        )
    problems += run_mode_problems(spec.run_mode, [rs.type for rs in spec.replica_specs])
    problems += recovery_problems(spec.recovery_policy, [rs.type for rs in spec.replica_specs])
    return problems


@hookimpl
def t9kjobs_build_pods(job: Job) -> list[DesiredPod]:
    spec = job.spec_as(PyTorchTrainingJobSpec)
    by_type = {rs.type: rs for rs in spec.replica_specs}
    top = topology(job, spec)
    pods = []
    for node in top.nodes:
        rs = by_type[node.replica_type]
        subdomain = job.name if top.named(node) else None
        manifest = new_pod(job, rs.type, node.index, rs.template, subdomain=subdomain)
        found = training_container(manifest, TRAINING_CONTAINER)
        if found is not None:
            set_env(found[1], pod_env(top, node))
        pods.append(
            DesiredPod(
                replica_type=rs.type,
                index=node.index,
                restart=RestartRule.of(rs.restart_policy),  # bounded by backoffLimit
                manifest=manifest,
                training_container=found[1].get("name") if found is not None else None,
            )
        )
    return pods


@hookimpl
def t9kjobs_build_launch_command(job: Job, pod: DesiredPod) -> list[str] | None:
    spec = job.spec_as(PyTorchTrainingJobSpec)
    torchrun = _torchrun(spec)
    container = find_container(pod.manifest, pod.training_container)
    if torchrun is None or container is None:
        return None  # each pod runs its container's own command, one process
    top = topology(job, spec)
    node = top.node(pod.replica_type, pod.index)
    return torchrun_command(top, node, torchrun, [str(a) for a in container.get("args") or []])


@hookimpl
def t9kjobs_build_objects(job: Job) -> list[Obj]:
    spec = job.spec_as(PyTorchTrainingJobSpec)
    top = topology(job, spec)
    master = top.master
    if master is None or top.dynamic_rendezvous:
        service = headless_service(job)  # every pod named (Topology.named)
    else:
        service = headless_service(job, replica=(master.replica_type, master.index))
    return [service, *tensorboard_objects(job, spec.tensorboard_spec)]


@hookimpl
def t9kjobs_update_status(
    job: Job, status: JobStatus, children: Mapping[tuple[str, str], Obj]
) -> None:
    """`status.tensorboard`: whether the job's TensorBoard exists and is ready."""
    spec = job.spec_as(PyTorchTrainingJobSpec)
    if spec.tensorboard_spec is not None and isinstance(status, PyTorchTrainingJobStatus):
        status.tensorboard = tensorboard_status(job, children)


@hookimpl
def t9kjobs_compute_status(job: Job, replicas: Sequence[ReplicaState]) -> Verdict | None:
    """Succeeded when the master succeeded for good; Failed when any replica failed for good
    (a dead rank hangs the collective anyway). The master's success is judged first: its exit
    0 means training finished, whatever a straggler did afterwards."""
    spec = job.spec_as(PyTorchTrainingJobSpec)
    master = topology(job, spec).master
    for r in replicas:
        if master is not None and r.name == master.name and r.succeeded and r.final:
            return Verdict("Succeeded", "MasterSucceeded", f"{r.name} succeeded", (r,))
    failed = [r for r in replicas if r.failed_for_good]
    if failed:
        message = "; ".join(r.failure for r in failed)
        return Verdict("Failed", "ReplicaFailed", message, tuple(failed))
    return None


@hookimpl
def t9kjobs_function_spec(run: FunctionRun) -> dict[str, Any]:
    """torchrun on a master and `nodes - 1` workers, `procs_per_node` processes each, running
    the function's command as it is (`--no_python`); the runner joins torch.distributed."""
    container: dict[str, Any] = {
        "name": TRAINING_CONTAINER,
        "image": run.image,
        "args": list(run.command),
        "env": [
            {"name": k, "value": v}
            for k, v in {**run.env, "T9KJOBS_FUNCTION_DISTRIBUTED": "torch"}.items()
        ],
    }
    if run.resources:
        container["resources"] = dict(run.resources)
    template = {"spec": {"containers": [container]}}
    replicas: list[dict[str, Any]] = [
        {"type": "master", "replicas": 1, "restartPolicy": "Never", "template": template}
    ]
    if run.nodes > 1:
        replicas.append(
            {
                "type": "worker",
                "replicas": run.nodes - 1,
                "restartPolicy": "Never",
                "template": template,
            }
        )
    return {
        "torchrunConfig": {
            "enabled": True,
            "procPerNode": str(run.procs_per_node),
            "extraOptions": ["--no_python"],
        },
        "replicaSpecs": replicas,
    }
