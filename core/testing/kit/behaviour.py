"""Behavioural contracts: mistakes a plugin makes that no type check and no single hook shows.

Each was met by a plugin author in a real run or on a real cluster: a job declared Succeeded
while the replica it waits for was being restarted; pods naming a `subdomain` no headless
Service serves (their DNS names never resolve); a training container the pod does not have (the
engine reads exit codes from, and launches in, another container); the shared run-mode checks
dropped from `validate`; a replica's `restartPolicy` ignored; a kind's status fields never
filled. Each check says what to fix.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from t9kjobs.loading import JobError
from t9kjobs.models import Job, JobStatus, RestartPolicy, RunMode
from t9kjobs.objects import Obj
from t9kjobs.testing.kit.calls import (
    EXIT_CODE,
    build_pods,
    describe,
    plan_at,
    status_setup,
    verdict,
)
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.subject import Subject, observed_from, replica_states
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "compute_status_waits_for_restarting_replicas",
    "pods_follow_restart_policy",
    "pods_use_only_declared_objects",
    "status_model_is_filled",
    "subdomains_have_headless_services",
    "training_container_exists",
    "validate_checks_run_mode",
]

# A replica type no job has, for the run-mode check.
_NO_SUCH_TYPE = "conformance-no-such-type"


def compute_status_waits_for_restarting_replicas(subject: Subject, example: Example) -> None:
    """No Succeeded while a replica the job waits for is restarting: it has not finished.

    For each replica, the others having succeeded: when `compute_status` gives no Succeeded
    verdict while that replica runs (the job waits for it), it must not give one while the
    replica is `Restarting` (its pod failed and is being replaced, `final` False) either.
    """
    hooks, job, pods = status_setup(subject, example)
    for i, pod in enumerate(pods):
        running = replica_states(pods, "Running", only=i, others="Succeeded")
        waits = verdict(hooks, job, running)
        if waits is not None and waits.outcome == "Succeeded":
            continue  # this replica does not decide the job's success
        restarting = replica_states(
            pods, "Restarting", exit_code=EXIT_CODE, only=i, others="Succeeded"
        )
        found = verdict(hooks, job, restarting)
        if found is not None and found.outcome == "Succeeded":
            raise ContractViolation(
                f"returned Succeeded ({found.reason}) for {describe(restarting)}, but no"
                f" verdict while {pod.name} was Running: a Restarting replica (its pod failed"
                f" with exit code {EXIT_CODE} and is being replaced) has not finished; judge it"
                " as a running one (ReplicaState.state 'Restarting', final False), e.g. count"
                " only ReplicaState.succeeded as done"
            )


def subdomains_have_headless_services(subject: Subject, example: Example) -> None:
    """Every pod's `subdomain` is a headless Service of the job that selects the pod.

    A pod with `spec.subdomain` S is reachable as `<pod>.S` only when the job also creates a
    Service named S with `clusterIP: None` whose selector matches the pod's labels
    (`t9kjobs.objects.headless_service(job)` from `t9kjobs_build_objects`); checked on the
    objects of the first reconcile.
    """
    job = subject.job(example)
    created = subject.first_reconcile(job).create
    services = {o["metadata"]["name"]: o for o in created if o.get("kind") == "Service"}
    for pod in (o for o in created if o.get("kind") == "Pod"):
        subdomain = (pod.get("spec") or {}).get("subdomain")
        if subdomain:
            _check_subdomain(pod, subdomain, services.get(subdomain))


def _check_subdomain(pod: Obj, subdomain: str, service: Obj | None) -> None:
    name = pod["metadata"]["name"]
    fix = "return t9kjobs.objects.headless_service(job) from t9kjobs_build_objects"
    if service is None:
        raise ContractViolation(
            f"pod {name} sets spec.subdomain {subdomain!r}, but the job creates no Service"
            f" {subdomain!r}: its DNS name {name}.{subdomain} never resolves; {fix}"
        )
    spec = service.get("spec") or {}
    if spec.get("clusterIP") != "None":
        raise ContractViolation(
            f"Service {subdomain} (pod {name}'s subdomain) is not headless (clusterIP"
            f" {spec.get('clusterIP')!r}, expected 'None'): {fix}"
        )
    labels = pod["metadata"].get("labels") or {}
    selector = spec.get("selector") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        raise ContractViolation(
            f"the headless Service {subdomain} selects {selector}, which pod {name} (labels"
            f" {labels}) does not match: its DNS name would not resolve; {fix}"
        )


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _used(pod: Obj) -> Iterator[tuple[str, str, str]]:
    """(kind, name, where) of every Secret and ConfigMap a pod uses by name: its volumes
    (projected ones too), `envFrom` and `valueFrom` (its subdomain's Service is
    `subdomains_have_headless_services`')."""
    spec = pod.get("spec") or {}
    for volume in spec.get("volumes") or []:
        where = f"volume {volume.get('name')}"
        sources = [volume, *((volume.get("projected") or {}).get("sources") or [])]
        for source in sources:
            if "secret" in source:
                secret = source["secret"] or {}
                yield "Secret", str(secret.get("secretName") or secret.get("name")), where
            if "configMap" in source:
                yield "ConfigMap", str((source["configMap"] or {}).get("name")), where
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        where = f"container {container.get('name')}"
        for source in container.get("envFrom") or []:
            if "secretRef" in source:
                yield "Secret", str(source["secretRef"].get("name")), f"{where} envFrom"
            if "configMapRef" in source:
                yield "ConfigMap", str(source["configMapRef"].get("name")), f"{where} envFrom"
        for env in container.get("env") or []:
            ref = env.get("valueFrom") or {}
            if "secretKeyRef" in ref:
                yield "Secret", str(ref["secretKeyRef"].get("name")), f"{where} env {env['name']}"
            if "configMapKeyRef" in ref:
                name = str(ref["configMapKeyRef"].get("name"))
                yield "ConfigMap", name, f"{where} env {env['name']}"


def pods_use_only_declared_objects(subject: Subject, example: Example) -> None:
    """Every object a pod uses by name is the job's own child, or named by the user's spec.

    The engine creates no pod of a job while an object of the job's is held by something the
    job does not control (ownership before use: a Secret planted under the name a plugin's
    pods mount would otherwise hand its keys to the job). It knows those objects from
    `t9kjobs_build_objects` and `t9kjobs_build_auxiliary_objects`: a plugin whose pods mount a
    Secret or ConfigMap, or take a subdomain, that it does not return there leaves that name to
    whoever creates it first. Names the user wrote in the job's spec are the user's choice.
    """
    job = subject.job(example)
    created = subject.first_reconcile(job).create
    declared = {(o["kind"], o["metadata"]["name"]) for o in created if o.get("kind") != "Pod"}
    written = set(_strings(example.manifest.get("spec")))
    for pod in (o for o in created if o.get("kind") == "Pod"):
        for kind, name, where in _used(pod):
            if (kind, name) in declared or name in written:
                continue
            raise ContractViolation(
                f"pod {pod['metadata']['name']} uses {kind} {name!r} ({where}), which the job"
                " neither creates nor names in its spec: return it from t9kjobs_build_objects"
                " (built with t9kjobs.objects, owned by the job), so that no pod is created"
                " while an object the job does not control holds its name"
            )


def training_container_exists(subject: Subject, example: Example) -> None:
    """A pod's `training_container` names one of its containers.

    The engine reads the replica's exit code from that container, gives it the launch command
    and, in debug mode, the debug command; a name the pod does not have silently means the
    first container. Take the name from the template (a container the plugin looks up by name
    in the user's template, else the first one).
    """
    job = subject.job(example)
    for pod in build_pods(subject.hooks(job.kind), job):
        wanted = pod.training_container
        names = [c.get("name") for c in pod.manifest["spec"].get("containers") or []]
        if wanted is not None and wanted not in names:
            raise ContractViolation(
                f"{pod.name}: DesiredPod.training_container is {wanted!r}, but the pod's"
                f" containers are {names}: name a container of the replica's template"
            )


def _field_path(model: BaseModel, name: str) -> str:
    info = type(model).model_fields[name]
    return info.serialization_alias or info.alias or name


def _run_mode_path(job: Job) -> str | None:
    """The spec field holding the run mode (`runMode`), if the kind has one."""
    for name in type(job.spec).model_fields:
        if isinstance(getattr(job.spec, name), RunMode) or name == "run_mode":
            return _field_path(job.spec, name)
    return None


def _with_spec(example: Example, key: str, value: Any) -> Example:
    manifest = copy.deepcopy(example.manifest)
    manifest.setdefault("spec", {})[key] = value
    return Example(example.id, example.path, manifest)


def validate_checks_run_mode(subject: Subject, example: Example) -> None:
    """`validate` refuses a debug or pause mode naming a replica type the job lacks.

    For a kind with `spec.runMode`: `debug.replicaSpecs[].type` and `pause.resumeSpecs[].type`
    must name replica types of the job; the spec model or `t9kjobs_validate` must report the
    one that does not (with `t9kjobs.validation.run_mode_problems(spec.run_mode, types)`).
    """
    job = subject.job(example)
    key = _run_mode_path(job)
    if key is None:
        return
    modes = (
        ("debug", "replicaSpecs", {"debug": {"enabled": True, "replicaSpecs": []}}),
        ("pause", "resumeSpecs", {"pause": {"enabled": True, "resumeSpecs": []}}),
    )
    for mode, items, run_mode in modes:
        run_mode[mode][items] = [{"type": _NO_SUCH_TYPE}]
        path = f"spec.{key}.{mode}.{items}[0].type"
        try:
            broken = subject.parse(_with_spec(example, key, run_mode))
        except JobError as exc:
            problems = exc.problems
        else:
            problems = [
                p for p in subject.hooks(job.kind).validate(broken) if p.severity == "error"
            ]
        if not any(p.path == path for p in problems):
            raise ContractViolation(
                f"{path}: {_NO_SUCH_TYPE!r} names no replica type of the job, and validate"
                f" says nothing about it (problems: {[str(p) for p in problems] or 'none'}):"
                " add t9kjobs.validation.run_mode_problems(spec.run_mode, <the job's replica"
                " types>) to what t9kjobs_validate returns"
            )


def _replica_specs(value: Any, path: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    """Every model in the spec with a `restart_policy` field, with its manifest path."""
    if isinstance(value, BaseModel):
        if "restart_policy" in type(value).model_fields:
            yield path, value
        for name in type(value).model_fields:
            yield from _replica_specs(getattr(value, name), [*path, _field_path(value, name)])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _replica_specs(item, [*path, i])


def _set(manifest: dict[str, Any], path: list[str | int], key: str, value: Any) -> None:
    node: Any = manifest["spec"]
    for step in path:
        node = node[step]
    node[key] = value


def pods_follow_restart_policy(subject: Subject, example: Example) -> None:
    """Pods follow their replica's `restartPolicy`.

    For each replica spec with a `restartPolicy` (and pods), the kit sets another policy (Never
    or Always) in the example: the `DesiredPod.restart` of the pods of that replica type must
    take it (`RestartRule.of(replica.restart_policy)`), else the engine restarts them by a rule
    the user did not write.
    """
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    for path, replica in _replica_specs(job.spec, []):
        current = replica.restart_policy
        policy = current.policy if isinstance(current, RestartPolicy) else current
        other = "Always" if policy == "Never" else "Never"
        manifest = copy.deepcopy(example.manifest)
        try:
            _set(manifest, path, _field_path(replica, "restart_policy"), other)
            changed = subject.parse(Example(example.id, example.path, manifest))
        except (JobError, KeyError, IndexError, TypeError):
            continue  # the kind does not take this policy here: nothing to follow
        if any(p.severity == "error" for p in hooks.validate(changed)):
            continue
        replica_type = getattr(replica, "type", None)
        pods = [
            p
            for p in build_pods(hooks, changed)
            if replica_type is None or p.replica_type == replica_type
        ]
        if pods and not any(p.restart.policy == other for p in pods):
            where = "spec" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path)
            where += f".{_field_path(replica, 'restart_policy')}"
            rules = sorted({f"{p.name}: {p.restart.policy}" for p in pods})
            raise ContractViolation(
                f"with {where}: {other}, the pods of that replica keep another restart policy"
                f" ({', '.join(rules)}): build DesiredPod.restart from the replica's"
                " restartPolicy (t9kjobs.models.RestartRule.of(replica.restart_policy))"
            )


def _own_fields(status_model: type[JobStatus]) -> list[str]:
    return [n for n in status_model.model_fields if n not in JobStatus.model_fields]


def status_model_is_filled(subject: Subject, kind: str) -> None:
    """A kind's own status fields are filled by `t9kjobs_update_status`.

    When the kind's `status_model` adds fields to `JobStatus`, some reconcile of its valid
    examples (the first, and one with every pod running) must set one of them: a field
    declared in the CRD and never written is a promise the status does not keep.
    """
    info = subject.loaded().kind_info(kind)
    own = _own_fields(info.status_model)
    if not own:
        return
    model = info.status_model.__name__
    if not callable(getattr(subject.plugin, "t9kjobs_update_status", None)):
        raise ContractViolation(
            f"{model} declares {', '.join(own)}, but the plugin implements no"
            " t9kjobs_update_status to fill them"
        )
    hooks = subject.hooks(kind)
    default = info.status_model()
    for example in subject.examples:
        if example.invalid or example.kind != kind or example.error is not None:
            continue
        job = subject.job(example)
        start = subject.first_reconcile(job)
        running = job.model_copy(update={"status": start.status})
        later = plan_at(hooks, running, observed_from(start.create, "Running"), 60)
        for status in (start.status, later.status):
            if any(getattr(status, n) != getattr(default, n) for n in own):
                return
    raise ContractViolation(
        f"{model} declares {', '.join(own)}, but no reconcile of the examples of {kind} sets"
        " any of them: fill them in t9kjobs_update_status (or add an example that uses them)"
    )
