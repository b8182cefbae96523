"""Deliberately broken plugins, one per mistake the conformance kit's contracts must catch.

Each is source appended to the good plugin of tests/unit/core/testing/test_conformance.py (`GOOD_PLUGIN`,
kind `ConfJob`), redefining what the mistake breaks; names it uses (`hookimpl`, `ConfJobSpec`,
`judge`, `build_pods`, ...) are the good plugin's. Each mistake comes from a plugin written
from the guide alone, and each `FIXED_*` is the remedy the kit's message names.
"""

from __future__ import annotations

__all__ = [
    "ADMISSION_ONLY_RULE",
    "BARE_POD_COORDINATOR",
    "COORDINATOR_WITHOUT_SERVICE",
    "FIXED_OUTWEIGHS",
    "FIXED_STATUS",
    "FIXED_SUBDOMAIN",
    "HOSTS_WITHOUT_SUBDOMAIN",
    "INVALID_EXAMPLE_ADMITTED",
    "JAX_LIKE",
    "LOST_REPLICA_IGNORED",
    "MANGLES_USER_COMMAND",
    "MAY_LOSE_WORKERS",
    "MOUNTS_UNDECLARED_SECRET",
    "OURS_ALONE",
    "OUT_OF_THE_GANG",
    "RANKS_FROM_ONE",
    "RESTARTING_COUNTS_AS_DONE",
    "RESTART_POLICY_IGNORED",
    "RUN_MODE_PROBLEMS_DROPPED",
    "SCRIPT_THAT_DOES_NOT_PARSE",
    "SPACE_JOINED_ARGUMENTS",
    "STATUS_NEVER_FILLED",
    "SUBDOMAIN_WITHOUT_SERVICE",
    "UNCOMPILABLE_CEL_RULE",
    "UNDECLARED",
    "UNKNOWN_TRAINING_CONTAINER",
    "UNRESOLVABLE_HOST",
    "WORKER_ZERO_DECIDES",
    "WORKER_ZERO_FINISHES",
    "WORLD_SIZE_SHORT",
    "with_spec_rule",
]

# Succeeded once nothing runs: a replica being restarted is neither running nor failed for good.
RESTARTING_COUNTS_AS_DONE = """
@hookimpl
def t9kjobs_compute_status(replicas):
    found = judge(replicas)
    if found is not None:
        return found
    if replicas and not any(r.state in ("Creating", "Pending", "Running") for r in replicas):
        return Verdict("Succeeded", "NoneRunning", "no replica is running")
    return None
"""

# Pods on the job's subdomain, but no headless Service of that name (and no hostfile naming
# them, which host_names_resolve would refuse as well).
SUBDOMAIN_WITHOUT_SERVICE = """
@hookimpl
def t9kjobs_build_objects(job, pods):
    return [config_map(job, f"{job.name}-hosts", {"hosts": ""})]
"""
FIXED_SUBDOMAIN = (
    SUBDOMAIN_WITHOUT_SERVICE
    + """
@hookimpl
def t9kjobs_build_objects(job, pods):
    return [config_map(job, f"{job.name}-hosts", {"hosts": ""}), headless_service(job)]
"""
)

# A hostfile naming `<pod>.<job>-workers`: a Service the job does not have.
UNRESOLVABLE_HOST = """
@hookimpl
def t9kjobs_build_objects(job, pods):
    hosts = [f"{p.name}.{job.name}-workers" for p in pods]
    text = render_template(__package__, "hosts.j2", hosts=hosts)
    return [config_map(job, f"{job.name}-hosts", {"hosts": text}), headless_service(job)]
"""

# Pods without the subdomain their hostfile names (`new_pod(..., subdomain=)` left out).
HOSTS_WITHOUT_SUBDOMAIN = """
@hookimpl
def t9kjobs_build_pods(job):
    spec = job.spec_as(ConfJobSpec)
    return [
        DesiredPod(rs.type, i, RestartRule.of(rs.restart_policy),
                   new_pod(job, rs.type, i, rs.template))
        for rs in spec.replica_specs for i in range(rs.replicas)
    ]
"""

# The container's arguments joined with " ".join into a shell line: a quote in one breaks it.
SPACE_JOINED_ARGUMENTS = """
@hookimpl
def t9kjobs_build_launch_command(job, pod):
    container = pod.manifest["spec"]["containers"][0]
    return ["/bin/bash", "-c", "exec " + " ".join(container.get("args") or ["true"])]
"""

# A script that does not parse (an unclosed `if`).
SCRIPT_THAT_DOES_NOT_PARSE = """
@hookimpl
def t9kjobs_build_launch_command(job, pod):
    return ["sh", "-c", "if [ -f /etc/hosts ]; then echo ok"]
"""

# The user's sidecar command flattened into a line of the plugin's own with " ".join: the
# user's `sh -c "while true; ..."` loses its quoting (the kit judges what the plugin made of it).
MANGLES_USER_COMMAND = """
@hookimpl
def t9kjobs_build_pods(job):
    pods = build_pods(job)
    for pod in pods:
        for container in pod.manifest["spec"]["containers"][1:]:
            line = " ".join(container.get("command") or [])
            container["command"] = ["/bin/sh", "-c", "exec " + line]
    return pods
"""

# Only the first replica's failure counts: another lost for good leaves the job Running.
LOST_REPLICA_IGNORED = """
@hookimpl
def t9kjobs_compute_status(replicas):
    return judge([r for r in replicas if r.index == 0 or not r.failed_for_good])
"""

# Pods that mount a Secret named after the job, which the plugin never returns as a child: the
# name is whoever creates it first's.
MOUNTS_UNDECLARED_SECRET = """
@hookimpl
def t9kjobs_build_pods(job):
    pods = build_pods(job)
    for pod in pods:
        pod.manifest["spec"].setdefault("volumes", []).append(
            {"name": "keys", "secret": {"secretName": f"{job.name}-keys"}}
        )
    return pods
"""

# A training container named as the plugin's own examples name it, not as the user's template.
UNKNOWN_TRAINING_CONTAINER = """
@hookimpl
def t9kjobs_build_pods(job):
    return [
        DesiredPod(p.replica_type, p.index, p.restart, p.manifest, training_container="trainer")
        for p in build_pods(job)
    ]
"""

# validate checks the containers, but leaves out the shared run-mode checks.
RUN_MODE_PROBLEMS_DROPPED = """
@hookimpl
def t9kjobs_validate(job):
    spec = job.spec_as(ConfJobSpec)
    return [
        Problem(f"spec.replicaSpecs[{i}].template.spec.containers", "at least one container")
        for i, rs in enumerate(spec.replica_specs)
        if not (rs.template.get("spec") or {}).get("containers")
    ]
"""

# Every pod restarted on failure, whatever its replica's restartPolicy says.
RESTART_POLICY_IGNORED = """
@hookimpl
def t9kjobs_build_pods(job):
    return [
        DesiredPod(p.replica_type, p.index, RestartRule(policy="OnFailure"), p.manifest)
        for p in build_pods(job)
    ]
"""

# Pods taken out of their job's gang by the plugin's own pod mutation (a "clean-up" of fields
# it does not know).
OUT_OF_THE_GANG = """
@hookimpl(trylast=True)
def t9kjobs_mutate_pod(job, pod):
    pod.manifest["spec"].pop("schedulingGroup", None)
"""

# A status model with a field of its own that no hook fills.
STATUS_NEVER_FILLED = """
from t9kjobs.models import JobStatus


class ConfJobStatus(JobStatus):
    hosts: list[str] | None = Field(default=None, description="The hostfile's hosts.")


@hookimpl
def t9kjobs_kinds():
    return [KindInfo(kind="ConfJob", spec_model=ConfJobSpec, plural="confjobs",
                     status_model=ConfJobStatus)]
"""
FIXED_STATUS = (
    STATUS_NEVER_FILLED
    + """

@hookimpl
def t9kjobs_update_status(job, status):
    status.hosts = [p.name for p in build_pods(job)]
"""
)


def with_spec_rule(rule: str, message: str, field_path: str = "") -> str:
    """The spec model with one more CEL rule (`x-kubernetes-validations`) on `spec`."""
    extra = f', "fieldPath": {field_path!r}' if field_path else ""
    return f"""
from pydantic import ConfigDict


class ConfJobSpec(ConfJobSpec):
    model_config = ConfJobSpec.model_config | ConfigDict(json_schema_extra={{
        "x-kubernetes-validations": [{{"rule": {rule!r}, "message": {message!r}{extra}}}]
    }})
"""


# A CEL rule naming a field the spec does not have: the API server refuses the CRD.
UNCOMPILABLE_CEL_RULE = with_spec_rule(
    "self.replicaSpecs.all(r, r.replicas <= self.maxReplicas)",
    "at most maxReplicas replicas of each type",
)

# validate no longer checks containers, and the CRD has no rule about them either: the invalid
# example (a replica without containers) is admitted by the API server and would run.
INVALID_EXAMPLE_ADMITTED = """
@hookimpl
def t9kjobs_validate(job):
    spec = job.spec_as(ConfJobSpec)
    return run_mode_problems(spec.run_mode, [rs.type for rs in spec.replica_specs])
"""

# Not broken: a rule only the API server checks (validate does not), and an invalid example
# that it refuses, at the path the example names.
ADMISSION_ONLY_RULE = with_spec_rule(
    "self.replicaSpecs.all(r, r.replicas <= 4)", "at most 4 replicas of each type", ".replicaSpecs"
)


# Not broken: the good plugin as a JAX-like kind that declares what its program is told (every
# worker gets the coordinator `<worker-0>.<job>:6666`, its process id and the process count).
# The copies below break one of them each, as a JAXJob plugin written from the docs did.
JAX_LIKE = """
from dataclasses import replace

from t9kjobs.plugin import Address, Distribution, EnvVar


class ConfJobSpec(ConfJobSpec):
    def lifecycle(self):
        return replace(super().lifecycle(), distribution=Distribution(
            unit="process",
            ranks=(EnvVar("JAX_PROCESS_ID"),),
            world_size=(EnvVar("JAX_NUM_PROCESSES"),),
            addresses=(Address(EnvVar("JAX_COORDINATOR_ADDRESS")),),
            ports=(6666,),
        ))


def coordinator(job, pods):
    return f"{pod_host(job, pods[0].name)}:6666"


def process_id(pods, i):
    return i


def process_count(pods):
    return len(pods)


@hookimpl
def t9kjobs_build_pods(job):
    pods = build_pods(job)
    for i, pod in enumerate(pods):
        pod.manifest["spec"]["containers"][0].setdefault("env", []).extend([
            {"name": "JAX_COORDINATOR_ADDRESS", "value": coordinator(job, pods)},
            {"name": "JAX_PROCESS_ID", "value": str(process_id(pods, i))},
            {"name": "JAX_NUM_PROCESSES", "value": str(process_count(pods))},
        ])
    return pods
"""
RANKS_FROM_ONE = (
    JAX_LIKE
    + """
def process_id(pods, i):
    return i + 1
"""
)
WORLD_SIZE_SHORT = (
    JAX_LIKE
    + """
def process_count(pods):
    return len(pods) - 1
"""
)
COORDINATOR_WITHOUT_SERVICE = (
    JAX_LIKE
    + """
def coordinator(job, pods):
    return f"{job.name}-coordinator:6666"
"""
)
BARE_POD_COORDINATOR = (
    JAX_LIKE
    + """
def coordinator(job, pods):
    return f"{pods[0].name}:6666"
"""
)

# A 0.2 plugin: it declares nothing of what its job means (kit v4 requires it).
UNDECLARED = """
from dataclasses import replace


class ConfJobSpec(ConfJobSpec):
    def lifecycle(self):
        return replace(super().lifecycle(), distribution=None, finished_by=None)
"""

# The kind declares worker-0 the finisher and nothing about a lost worker beside its success:
# the loss beats the success (an XGBoostJob's master succeeded beside a worker lost for good).
WORKER_ZERO_FINISHES = """
from dataclasses import replace


class ConfJobSpec(ConfJobSpec):
    def lifecycle(self):
        return replace(super().lifecycle(), finished_by=("worker", 0))
"""
# The remedy the kit names when worker-0's success does mean the work is done.
FIXED_OUTWEIGHS = """
class ConfJobSpec(ConfJobSpec):
    def lifecycle(self):
        return replace(super().lifecycle(), finisher_outweighs=frozenset({"worker"}))
"""

# The kind declares it may lose its workers (as a TFJob its evaluator), but its verdict still
# fails the job on any replica lost for good.
MAY_LOSE_WORKERS = """
from dataclasses import replace


class ConfJobSpec(ConfJobSpec):
    def lifecycle(self):
        return replace(super().lifecycle(), finished_by="all", may_lose=frozenset({"worker"}))
"""

# worker-0's success makes the job Succeeded, whatever the other workers do.
WORKER_ZERO_DECIDES = """
@hookimpl
def t9kjobs_compute_status(replicas):
    for r in replicas:
        if r.index == 0 and r.succeeded:
            return Verdict("Succeeded", "WorkerSucceeded", f"{r.name} succeeded")
    return judge(replicas)
"""

# A kind that knows no controller but its own: another controller's job (MultiKueue's, on
# its manager cluster) is refused, so it cannot be dispatched; a model that dropped the field
# instead would have the operator run it beside the worker's copy.
OURS_ALONE = """
from typing import Literal


class ConfJobSpec(ConfJobSpec):
    managed_by: Literal["batch.tensorstack.dev/t9k-jobs"] | None = None
"""
