"""GenericJob: any replica types, per-replica Services, `$(...)` variables, finish rules."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from t9kjobs.plugin import (
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    DesiredPod,
    FunctionRun,
    Job,
    KindInfo,
    Obj,
    Problem,
    ReplicaState,
    RestartRule,
    Verdict,
    hookimpl,
    new_pod,
    pod_name,
    recovery_problems,
    run_mode_problems,
    service,
)
from t9kjobs.plugins.generic.spec import FinishRule, GenericJobSpec, ServicePort
from t9kjobs.plugins.generic.substitution import Variables, substitute, unresolved

KIND = "GenericJob"
# The port the workers of a function job (`t9kjobs_function_spec`) meet at: torch's default.
FUNCTION_PORT = 29500


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return [
        KindInfo(
            kind=KIND,
            spec_model=GenericJobSpec,
            plural="genericjobs",
            short_names=("gj",),
            description="A general-purpose job: any replica types, finish rules, services.",
        )
    ]


def _variables(job: Job, spec: GenericJobSpec, replica_type: str, rank: int) -> Variables:
    ports = (
        {p.name: p.port for p in spec.service.ports if p.name is not None}
        if spec.service is not None
        else None
    )
    return Variables(
        replica_type=replica_type,
        rank=rank,
        replicas={s.type: s.replicas for s in spec.replica_specs},
        job_name=job.name,
        ports=ports,
    )


def _texts(template: Obj) -> list[tuple[str, str]]:
    """(field path within the template, text) of every command, arg and env value."""
    out = []
    spec = template.get("spec") or {}
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            for key in ("command", "args"):
                for j, text in enumerate(c.get(key) or []):
                    out.append((f"spec.{group}[{i}].{key}[{j}]", str(text)))
            for j, env in enumerate(c.get("env") or []):
                if "value" in env:
                    out.append((f"spec.{group}[{i}].env[{j}].value", str(env["value"])))
    return out


def _substituted(template: Obj, v: Variables) -> Obj:
    template = copy.deepcopy(template)
    for group in ("initContainers", "containers"):
        for c in (template.get("spec") or {}).get(group) or []:
            for key in ("command", "args"):
                if c.get(key):
                    c[key] = [substitute(str(t), v) for t in c[key]]
            for env in c.get("env") or []:
                if "value" in env:
                    env["value"] = substitute(str(env["value"]), v)
    return template


def _rule_problems(rules: list[FinishRule], field: str, sizes: dict[str, int]) -> list[Problem]:
    out = []
    for i, rule in enumerate(rules):
        if not rule:
            out.append(Problem(f"spec.{field}[{i}]", "a rule must name at least one replica type"))
        for rtype, indices in rule.items():
            if rtype not in sizes:
                out.append(
                    Problem(f"spec.{field}[{i}].{rtype}", f"no replica type {rtype!r} in the job")
                )
                continue
            for j, index in enumerate(indices):
                if not 0 <= index < sizes[rtype]:
                    out.append(
                        Problem(
                            f"spec.{field}[{i}].{rtype}[{j}]",
                            f"index {index} is out of range: {rtype} has {sizes[rtype]} replicas",
                        )
                    )
    return out


def _port_problems(ports: list[ServicePort]) -> list[Problem]:
    """What the API server would refuse in a Service with these ports (the CRD's rules too)."""
    out = []
    if len(ports) > 1:
        out += [
            Problem(f"spec.service.ports[{i}].name", "required when there is more than one port")
            for i, p in enumerate(ports)
            if p.name is None
        ]
    names = [p.name for p in ports if p.name is not None]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(Problem("spec.service.ports", f"port name {dup!r} is repeated"))
    seen: set[tuple[int, str]] = set()
    for i, p in enumerate(ports):
        if (p.port, p.protocol) in seen:
            out.append(
                Problem(f"spec.service.ports[{i}]", f"port {p.port}/{p.protocol} is repeated")
            )
        seen.add((p.port, p.protocol))
    return out


@hookimpl
def t9kjobs_validate(job: Job) -> list[Problem]:
    spec = job.spec_as(GenericJobSpec)
    sizes = {s.type: s.replicas for s in spec.replica_specs}
    problems = _rule_problems(spec.success_rules, "successRules", sizes)
    problems += _rule_problems(spec.failure_rules, "failureRules", sizes)
    for i, rs in enumerate(spec.replica_specs):
        if not (rs.template.get("spec") or {}).get("containers"):
            problems.append(
                Problem(
                    f"spec.replicaSpecs[{i}].template.spec.containers", "at least one container"
                )
            )
        v = _variables(job, spec, rs.type, 0)
        for path, text in _texts(rs.template):
            for var in unresolved(text, v):
                hint = (
                    " (the job has no spec.service)"
                    if "service" in var and not spec.service
                    else ""
                )
                problems.append(
                    Problem(
                        f"spec.replicaSpecs[{i}].template.{path}",
                        f"cannot resolve {var}{hint}",
                    )
                )
    if spec.service is not None:
        problems += _port_problems(spec.service.ports)
    problems += run_mode_problems(spec.run_mode, sizes)
    problems += recovery_problems(spec.recovery_policy, sizes)
    return problems


@hookimpl
def t9kjobs_build_pods(job: Job) -> list[DesiredPod]:
    spec = job.spec_as(GenericJobSpec)
    pods = []
    for rs in spec.replica_specs:
        for rank in range(rs.replicas):
            template = _substituted(rs.template, _variables(job, spec, rs.type, rank))
            pods.append(
                DesiredPod(
                    replica_type=rs.type,
                    index=rank,
                    restart=RestartRule.of(rs.restart_policy),
                    manifest=new_pod(job, rs.type, rank, template),
                )
            )
    return pods


@hookimpl
def t9kjobs_build_launch_command() -> None:
    return None  # a GenericJob runs its containers' own commands


@hookimpl
def t9kjobs_build_objects(job: Job, pods: Sequence[DesiredPod]) -> list[Obj]:
    spec = job.spec_as(GenericJobSpec)
    if spec.service is None or not spec.service.ports:
        return []
    ports = []
    for p in spec.service.ports:
        port: Obj = {"name": p.name} if p.name is not None else {}
        port.update(port=p.port, targetPort=p.target_port or p.port, protocol=p.protocol)
        if p.app_protocol is not None:
            port["appProtocol"] = p.app_protocol
        ports.append(port)
    # Headless, as Kubeflow's per-replica Services: `$(service.<type>[<rank>].host)` resolves
    # to the pod itself, which needs no kube-proxy and no readiness. Only a port mapped to
    # another targetPort needs a ClusterIP (and kube-proxy) to be translated.
    headless = all(port["targetPort"] == port["port"] for port in ports)
    return [
        service(
            job,
            pod_name(job.name, pod.replica_type, pod.index),
            {LABEL_REPLICA_TYPE: pod.replica_type, LABEL_REPLICA_INDEX: str(pod.index)},
            ports,
            headless=headless,
        )
        for pod in pods
    ]


def _rule_holds(rule: FinishRule, states: dict[tuple[str, int], ReplicaState], ok: str) -> bool:
    wanted = [(t, i) for t, indices in rule.items() for i in indices]
    if not wanted:
        return False
    for key in wanted:
        state = states.get(key)
        if state is None:
            return False
        if ok == "succeeded" and not state.succeeded:
            return False
        if ok == "failed" and not state.failed_for_good:
            return False
    return True


@hookimpl
def t9kjobs_compute_status(job: Job, replicas: Sequence[ReplicaState]) -> Verdict | None:
    spec = job.spec_as(GenericJobSpec)
    by_key = {(r.replica_type, r.index): r for r in replicas}
    failed = [r for r in replicas if r.failed_for_good]
    for i, rule in enumerate(spec.failure_rules):
        if _rule_holds(rule, by_key, "failed"):
            return Verdict(
                "Failed", "FailureRuleMatched", _failed_message(failed, f"failureRules[{i}]")
            )
    if not spec.failure_rules and failed:
        return Verdict("Failed", "ReplicaFailed", _failed_message(failed, None))
    for i, rule in enumerate(spec.success_rules):
        if _rule_holds(rule, by_key, "succeeded"):
            return Verdict("Succeeded", "SuccessRuleMatched", f"successRules[{i}] is fulfilled")
    if not spec.success_rules and replicas and all(r.succeeded for r in replicas):
        return Verdict("Succeeded", "AllSucceeded", "all replicas succeeded")
    if replicas and all(r.final for r in replicas):
        return Verdict(
            "Failed",
            "NoRuleMatched",
            "every replica finished but no success or failure rule is fulfilled",
        )
    return None


def _failed_message(failed: list[ReplicaState], rule: str | None) -> str:
    return "; ".join(r.failure for r in failed) + (f" ({rule} is fulfilled)" if rule else "")


@hookimpl
def t9kjobs_function_spec(run: FunctionRun) -> dict[str, Any]:
    """`nodes` workers, one process each, with torch's env:// variables (RANK, WORLD_SIZE,
    MASTER_ADDR at worker-0, MASTER_PORT); nothing is initialised for the function. Succeeds
    when worker-0 does, fails when any worker fails."""
    if run.procs_per_node != 1:
        raise ValueError(
            f"a GenericJob pod runs one process; procs_per_node={run.procs_per_node}: use"
            " nodes instead, or a PyTorchTrainingJob (torchrun starts several)"
        )
    env = {
        **run.env,
        "RANK": "$(rank)",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": str(run.nodes),
        "MASTER_ADDR": "$(service.worker[0].host)",
        "MASTER_PORT": "$(service.port[torch])",
    }
    container: dict[str, Any] = {
        "name": "worker",
        "image": run.image,
        "command": list(run.command),
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    if run.resources:
        container["resources"] = dict(run.resources)
    return {
        "successRules": [{"worker": [0]}],
        "failureRules": [{"worker": [i]} for i in range(run.nodes)],
        "service": {"ports": [{"name": "torch", "port": FUNCTION_PORT}]},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": run.nodes,
                "restartPolicy": {"policy": "Never"},
                "template": {"spec": {"containers": [container]}},
            }
        ],
    }
