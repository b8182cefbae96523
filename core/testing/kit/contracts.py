"""The contracts of a framework plugin, one check each, run by the conformance kit.

A check raises `ContractViolation` with what was expected and what the plugin did; the first
line of its docstring is the contract, as the kit's report and docs/plugin-guide.md name it.
Checks come in four scopes: the plugin, each kind it declares, each valid example, each
invalid example. Every hook is called through the real engine (`manager.hooks_for`, `plan`)
under the I/O guard.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import yaml

from t9kjobs.crds import CrdError, crd_filename, crd_for, crd_yaml
from t9kjobs.kinds import KindInfo
from t9kjobs.loading import JobError
from t9kjobs.models import FINISHED_PHASES, Job, JobSpec, JobStatus
from t9kjobs.objects import (
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    DesiredPod,
    Obj,
    owner_reference,
    pod_name,
)
from t9kjobs.testing.kit.admission import refusal_names
from t9kjobs.testing.kit.admitted import (
    crd_is_accepted_by_the_api_server,
    dry_run,
    example_is_admitted,
)
from t9kjobs.testing.kit.behaviour import (
    compute_status_waits_for_restarting_replicas,
    pods_follow_restart_policy,
    pods_use_only_declared_objects,
    status_model_is_filled,
    subdomains_have_headless_services,
    training_container_exists,
    validate_checks_run_mode,
)
from t9kjobs.testing.kit.calls import EXIT_CODE as _EXIT_CODE
from t9kjobs.testing.kit.calls import build_pods as _build_pods
from t9kjobs.testing.kit.calls import describe as _describe
from t9kjobs.testing.kit.calls import plan_at
from t9kjobs.testing.kit.calls import status_setup as _status_setup
from t9kjobs.testing.kit.calls import verdict as _verdict
from t9kjobs.testing.kit.examples import REJECTED_AT, Example
from t9kjobs.testing.kit.noio import HookIOError
from t9kjobs.testing.kit.structural import admission_problems, structural_problems
from t9kjobs.testing.kit.subject import Subject, observed_from, replica_states
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "EXAMPLE_CONTRACTS",
    "INVALID_CONTRACTS",
    "KIND_CONTRACTS",
    "PLUGIN_CONTRACTS",
    "VIOLATIONS",
    "Contract",
]

T = TypeVar("T")

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Contract(Generic[T]):
    """A named check over one target: None (the plugin), a kind, or an example."""

    name: str
    check: Callable[[Subject, T], None]

    @property
    def title(self) -> str:
        return (self.check.__doc__ or self.name).strip().splitlines()[0].rstrip(".")

    @property
    def details(self) -> str:
        """The docstring after its first line: what exactly is checked."""
        doc = (self.check.__doc__ or "").strip().split("\n", 1)
        return (
            " ".join(line.strip() for line in doc[1].splitlines()).strip() if len(doc) > 1 else ""
        )


# -- the plugin ------------------------------------------------------------------------------


def loads_through_entry_point(subject: Subject, _: None) -> None:
    """The plugin loads through its entry point in the group `t9kjobs.plugins`.

    Loaded with every other installed plugin by `load_plugins()`, as `t9kjobs operator`,
    `render` and `crds` do; a load error, a kind claimed by two plugins or a hook
    implementation that matches no hookspec fails here.
    """
    manager = subject.loaded()
    info = next(p for p in manager.plugins() if p.name == subject.name)
    if not info.distribution:
        raise ContractViolation(f"{subject.name!r} loaded, but not from an installed distribution")


def declares_kinds_and_spec_model(subject: Subject, _: None) -> None:
    """The plugin declares its kinds, each with a spec model, and the framework hooks.

    `t9kjobs_kinds` returns one or more `KindInfo` (the same on every call): a CamelCase kind,
    a lowercase plural, a spec model derived from `t9kjobs.models.JobSpec` that does not
    silently ignore unknown fields, a status model derived from `JobStatus`, a non-empty debug
    command of strings; the manager routes each kind to this plugin, which implements
    `t9kjobs_build_pods` and `t9kjobs_compute_status`.
    """
    subject.loaded()
    impl = getattr(subject.plugin, "t9kjobs_kinds", None)
    if impl is None:
        raise ContractViolation(
            "implements no t9kjobs_kinds: a framework plugin declares its kinds there"
        )
    first = list(subject.guard.call("t9kjobs_kinds", impl))
    if first != list(subject.guard.call("t9kjobs_kinds", impl)):
        raise ContractViolation("t9kjobs_kinds returned different kinds on a second call")
    if not first:
        raise ContractViolation("declares no kind: the conformance kit checks framework plugins")
    for info in first:
        if not isinstance(info, KindInfo):
            raise ContractViolation(
                f"t9kjobs_kinds returned {info!r}, not a t9kjobs.kinds.KindInfo"
            )
        for problem in _kind_info_problems(info):
            raise ContractViolation(f"{info.kind}: {problem}")
        if subject.kinds.get(info.kind) != info:
            raise ContractViolation(f"{info.kind} is not routed to {subject.name!r}")
    for hook in ("t9kjobs_build_pods", "t9kjobs_compute_status"):
        if not callable(getattr(subject.plugin, hook, None)):
            raise ContractViolation(f"implements no {hook}: every framework plugin must")


def _kind_info_problems(info: KindInfo) -> Iterator[str]:
    if not _KIND.match(info.kind):
        yield f"kind {info.kind!r} must be CamelCase letters and digits"
    if not re.match(r"^[a-z][a-z0-9]*$", info.plural):
        yield f"plural {info.plural!r} must be lowercase letters and digits"
    if not (isinstance(info.spec_model, type) and issubclass(info.spec_model, JobSpec)):
        yield f"spec_model {info.spec_model!r} must derive from t9kjobs.models.JobSpec"
    elif info.spec_model.model_config.get("extra") == "ignore":
        yield "the spec model ignores unknown fields: a misspelt field would vanish silently"
    if not (isinstance(info.status_model, type) and issubclass(info.status_model, JobStatus)):
        yield f"status_model {info.status_model!r} must derive from t9kjobs.models.JobStatus"
    command = info.debug_command
    if not command or not all(isinstance(a, str) for a in command):
        yield f"debug_command {command!r} must be a non-empty tuple of strings"


# -- each kind -------------------------------------------------------------------------------


def crd_is_structural(subject: Subject, kind: str) -> None:
    """The kind's CRD generates, is structural, and is what `t9kjobs crds` writes.

    `t9kjobs.crds.crd_for` turns the spec and status models into a CustomResourceDefinition
    whose schema the API server accepts (every field typed, no `$ref`, nothing typed inside
    `anyOf`, ...), and `t9kjobs crds` writes it as `batch.tensorstack.dev_<plural>.yaml`.
    """
    manager = subject.loaded()
    info = manager.kind_info(kind)
    try:
        crd = crd_for(info)
    except CrdError as exc:
        raise ContractViolation(f"the CRD of {kind} cannot be generated: {exc}") from None
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    problems = structural_problems(schema)
    if problems:
        raise ContractViolation(f"the CRD of {kind} is not structural:\n  " + "\n  ".join(problems))
    # What `t9kjobs crds` writes for the kind (the same functions, without the other kinds).
    text = crd_yaml(crd, manager.owner_of(kind))
    if yaml.safe_load(text.split("\n", 1)[1]) != crd:
        raise ContractViolation(
            f"{crd_filename(info)} as `t9kjobs crds` writes it does not read back"
        )


def has_examples(subject: Subject, kind: str) -> None:
    """The kind has valid and invalid examples, so that every contract is exercised.

    Valid examples are the job manifests under the examples folder(s); invalid ones are those
    under a folder named `invalid`, each with the annotation
    `conformance.t9kjobs.dev/rejected-at` naming the field path(s) it must be rejected at.
    """
    mine = [e for e in subject.examples if e.kind == kind]
    where = ", ".join(str(f) for f in subject.folders) or "no folder (give --t9kjobs-examples)"
    if not any(not e.invalid for e in mine):
        raise ContractViolation(f"no valid example of {kind} under {where}")
    if not any(e.invalid for e in mine):
        raise ContractViolation(
            f"no invalid example of {kind} under {where} (put them in an invalid/ folder)"
        )


# -- each valid example ----------------------------------------------------------------------


def example_is_valid(subject: Subject, example: Example) -> None:
    """The example loads: its spec model and `t9kjobs_validate` accept it, its CRD keeps it.

    Warnings are allowed. The CRD's schema must neither prune a field the example writes (it
    would never reach the plugin) nor refuse one of its values' types.
    """
    if example.error is not None:
        raise ContractViolation(example.error)
    job = subject.job(example)
    info = subject.loaded().kind_info(job.kind)
    schema = crd_for(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = example.manifest.get("spec")
    problems = admission_problems(spec, schema["properties"]["spec"], "spec")
    if problems:
        raise ContractViolation(
            "the CRD would not keep the example as written:\n  " + "\n  ".join(problems)
        )


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else f"{path or '<value>'}: {a!r} then {b!r}"


def _pods_view(pods: Sequence[DesiredPod]) -> list[dict[str, Any]]:
    return [{f.name: copy.deepcopy(getattr(p, f.name)) for f in fields(p)} for p in pods]


def _same_pods(before: list[dict[str, Any]], after: Sequence[DesiredPod], when: str) -> None:
    diff = _first_difference(before, _pods_view(after))
    if diff is not None:
        raise ContractViolation(f"build_pods returned different pods {when}: {diff}")


def _scribble(pod: DesiredPod) -> None:
    """Edit a desired pod as the engine does after build_pods (command, env, labels)."""
    pod.manifest["metadata"].setdefault("labels", {})["conformance.t9kjobs.dev/edited"] = "1"
    for container in pod.manifest["spec"].get("containers") or []:
        container["command"] = ["edited"]
        container.setdefault("env", []).append({"name": "EDITED", "value": "1"})
    pod.extra["edited"] = True


def build_pods_is_deterministic(subject: Subject, example: Example) -> None:
    """`build_pods` is deterministic: the same job gives the same pods, as fresh objects.

    Two equal jobs give equal pods (names, manifests, restart rules, every DesiredPod field),
    also after the engine edited the pods of an earlier call (the plugin must not hand out
    objects it keeps), and the whole first reconcile (`t9kjobs render`) is the same twice.
    """
    first_job, second_job = subject.job(example), subject.job(example)
    hooks = subject.hooks(first_job.kind)
    first = _build_pods(hooks, first_job)
    before = _pods_view(first)
    _same_pods(before, _build_pods(hooks, second_job), "for two equal jobs")
    for pod in first:
        _scribble(pod)
    _same_pods(before, _build_pods(hooks, first_job), "after the engine edited earlier ones")
    once = subject.first_reconcile(first_job).create
    diff = _first_difference(list(once), list(subject.first_reconcile(second_job).create))
    if diff is not None:
        raise ContractViolation(
            f"the first reconcile created different objects for equal jobs: {diff}"
        )


def pods_are_named_by_convention(subject: Subject, example: Example) -> None:
    """Pods are named `<job>-<type>-<index>` (`<job>-<type>` for a single pod of a type).

    Names are unique DNS names (DNS labels when the pod sets a hostname, which must be its
    name), pods are labelled with their replica type and index, and live in the job's
    namespace.
    """
    job = subject.job(example)
    pods = _build_pods(subject.hooks(job.kind), job)
    per_type = Counter(p.replica_type for p in pods)
    for name, count in Counter(p.name for p in pods).items():
        if count > 1:
            raise ContractViolation(f"{count} pods are named {name}")
    for pod in pods:
        _check_pod_name(job, pod, per_type[pod.replica_type])


def _check_pod_name(job: Job, pod: DesiredPod, of_type: int) -> None:
    manifest = pod.manifest
    if manifest.get("kind") != "Pod" or manifest.get("apiVersion") != "v1":
        raise ContractViolation(
            f"{pod.name}: the manifest must be a v1 Pod (use t9kjobs.objects.new_pod)"
        )
    allowed = [pod_name(job.name, pod.replica_type, pod.index)]
    if of_type == 1 and pod.index == 0:
        allowed.append(f"{job.name}-{pod.replica_type}")
    if pod.name not in allowed:
        raise ContractViolation(
            f"pod {pod.name!r} (type {pod.replica_type!r}, index {pod.index}) should be named"
            f" {' or '.join(repr(a) for a in allowed)}"
        )
    if len(pod.name) > 253 or not _DNS_SUBDOMAIN.match(pod.name):
        raise ContractViolation(f"pod name {pod.name!r} is not a DNS subdomain name")
    spec = manifest.get("spec") or {}
    hostname = spec.get("hostname")
    if hostname is not None and (hostname != pod.name or len(pod.name) > 63):
        raise ContractViolation(
            f"{pod.name}: spec.hostname {hostname!r} must be the pod name, <= 63 chars"
        )
    labels = manifest["metadata"].get("labels") or {}
    want = {LABEL_REPLICA_TYPE: pod.replica_type, LABEL_REPLICA_INDEX: str(pod.index)}
    for key, value in want.items():
        if labels.get(key) != value:
            raise ContractViolation(
                f"{pod.name}: label {key} is {labels.get(key)!r}, expected {value!r}"
            )
    if manifest["metadata"].get("namespace") != job.namespace:
        raise ContractViolation(f"{pod.name}: namespace must be the job's ({job.namespace})")


def children_carry_owner_labels_and_references(subject: Subject, example: Example) -> None:
    """Every pod and child object carries the owner labels and the job as controller owner.

    Labels `tensorstack.dev/owner-kind` and `owner-name`, exactly one controller
    ownerReference naming the job (apiVersion, kind, name, uid), the job's namespace: so that
    deleting the job garbage-collects everything. Checked on the pods and objects of the first
    reconcile and on `build_pods` and `build_objects` results.
    """
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    pods = _build_pods(hooks, job)
    objects = [p.manifest for p in pods] + hooks.auxiliary_objects(job, pods)
    for obj in [*objects, *subject.first_reconcile(job).create]:
        _check_owner(job, obj)


def _check_owner(job: Job, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    what = f"{obj.get('kind')} {meta.get('name')}"
    labels = meta.get("labels") or {}
    for key, value in ((LABEL_OWNER_KIND, job.kind), (LABEL_OWNER_NAME, job.name)):
        if labels.get(key) != value:
            raise ContractViolation(
                f"{what}: label {key} is {labels.get(key)!r}, expected {value!r}"
            )
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if len(refs) != 1:
        raise ContractViolation(
            f"{what}: {len(refs)} controller ownerReferences, expected 1 (the job)"
        )
    expected = owner_reference(job)
    wrong = {k: refs[0].get(k) for k, v in expected.items() if refs[0].get(k) != v}
    if wrong:
        raise ContractViolation(
            f"{what}: the controller ownerReference has {wrong}, expected {expected}"
        )
    if meta.get("namespace") != job.namespace:
        raise ContractViolation(
            f"{what}: namespace {meta.get('namespace')!r}, expected {job.namespace!r}"
        )


def launch_command_is_list_of_str(subject: Subject, example: Example) -> None:
    """`build_launch_command` returns a non-empty list of strings, or None.

    A list (not a tuple) of `str` (not numbers or paths), the same on every call, and the pod
    it is given is left as it was (adjusting pods is `t9kjobs_mutate_pod`'s job).
    """
    job = subject.job(example)
    hooks = subject.hooks(job.kind)
    for pod in _build_pods(hooks, job):
        before = copy.deepcopy(pod)
        argv = hooks.build_launch_command(job, pod)
        if argv is None:
            continue
        if type(argv) is not list:
            raise ContractViolation(
                f"{pod.name}: returned a {type(argv).__name__}, not a list: {argv!r}"
            )
        if not argv:
            raise ContractViolation(
                f"{pod.name}: returned an empty list (return None to keep the command)"
            )
        bad = [a for a in argv if not isinstance(a, str)]
        if bad:
            raise ContractViolation(f"{pod.name}: the argv holds non-strings {bad!r}: {argv!r}")
        if pod != before:
            raise ContractViolation(f"{pod.name}: build_launch_command modified the pod")
        if hooks.build_launch_command(job, pod) != argv:
            raise ContractViolation(f"{pod.name}: a second call returned another argv")


def compute_status_no_pods(subject: Subject, example: Example) -> None:
    """`compute_status` gives no verdict while no pod has finished.

    Not when no pod exists yet (every replica `Creating`), nor when all are `Pending` or all
    `Running`; and an empty list of replicas is handled (None or a Verdict, no exception).
    """
    hooks, job, pods = _status_setup(subject, example)
    _verdict(hooks, job, [])
    for state in ("Creating", "Pending", "Running"):
        states = replica_states(pods, state)
        verdict = _verdict(hooks, job, states)
        if verdict is not None:
            raise ContractViolation(
                f"returned {verdict.outcome} ({verdict.reason}) for {_describe(states)}"
            )


def compute_status_all_succeeded(subject: Subject, example: Example) -> None:
    """`compute_status` says Succeeded when every replica succeeded."""
    hooks, job, pods = _status_setup(subject, example)
    states = replica_states(pods, "Succeeded", exit_code=0, final=True)
    verdict = _verdict(hooks, job, states)
    if verdict is None or verdict.outcome != "Succeeded":
        got = "no verdict" if verdict is None else f"{verdict.outcome} ({verdict.message})"
        raise ContractViolation(f"returned {got} for {_describe(states)}")


def compute_status_one_failed(subject: Subject, example: Example) -> None:
    """`compute_status` handles a failed replica: never Succeeded, a Failed names the pod.

    With one replica failed for good and the others running, the verdict is None or Failed,
    and a Failed verdict's message names the pod and its exit code; a replica being restarted
    (`Restarting`) does not fail the job; when every replica failed for good, the job failed.
    """
    hooks, job, pods = _status_setup(subject, example)
    for i, pod in enumerate(pods):
        states = replica_states(pods, "Failed", exit_code=_EXIT_CODE, final=True, only=i)
        verdict = _verdict(hooks, job, states)
        if verdict is not None and verdict.outcome != "Failed":
            raise ContractViolation(f"returned {verdict.outcome} for {_describe(states)}")
        if verdict is not None and (
            pod.name not in verdict.message or str(_EXIT_CODE) not in verdict.message
        ):
            raise ContractViolation(
                f"the Failed verdict's message {verdict.message!r} should name {pod.name} and"
                f" its exit code {_EXIT_CODE}"
            )
        retried = replica_states(pods, "Restarting", exit_code=_EXIT_CODE, only=i)
        verdict = _verdict(hooks, job, retried)
        if verdict is not None and verdict.outcome == "Failed":
            raise ContractViolation(
                f"returned Failed for {_describe(retried)}: a restarting replica"
            )
    states = replica_states(pods, "Failed", exit_code=_EXIT_CODE, final=True)
    verdict = _verdict(hooks, job, states)
    if pods and (verdict is None or verdict.outcome != "Failed"):
        raise ContractViolation(f"returned {verdict and verdict.outcome} for {_describe(states)}")


def compute_status_never_regresses(subject: Subject, example: Example) -> None:
    """A finished job never regresses: its verdict stands, through the engine too.

    `compute_status` judges from the replicas only: asked again about the same replicas, with
    the job already finished, it gives the same verdict. Through the planner: the reconcile
    that finishes the job leaves it Succeeded or Failed (no hook undoes the verdict, e.g.
    `update_status`), and later reconciles, whatever the pods do, change nothing.
    """
    hooks, job, pods = _status_setup(subject, example)
    for state, code in (("Succeeded", 0), ("Failed", _EXIT_CODE)):
        states = replica_states(pods, state, exit_code=code, final=True)
        verdict = _verdict(hooks, job, states)
        if verdict is None:
            continue
        status = job.status.model_copy(update={"phase": verdict.outcome})
        finished = job.model_copy(update={"status": status})
        for again in (finished, job, finished):
            later = _verdict(hooks, again, states)
            if later is None or (later.outcome, later.reason) != (verdict.outcome, verdict.reason):
                got = "no verdict" if later is None else f"{later.outcome} ({later.reason})"
                raise ContractViolation(
                    f"for {_describe(states)} it said {verdict.outcome} ({verdict.reason}), then"
                    f" {got} when asked again (status.phase {again.status.phase})"
                )
    life = job.spec.lifecycle()
    if not (life.run_mode.debugging or life.run_mode.paused):
        _never_regresses_in_engine(subject, job)


def _never_regresses_in_engine(subject: Subject, job: Job) -> None:
    hooks = subject.hooks(job.kind)
    start = subject.first_reconcile(job)
    running = job.model_copy(update={"status": start.status})
    for phase, code in (("Succeeded", 0), ("Failed", _EXIT_CODE)):
        ending = plan_at(hooks, running, observed_from(start.create, phase, code), 60)
        announced = [e.reason for e in ending.events if e.reason in FINISHED_PHASES]
        if not announced:
            continue  # these pods do not finish the job (restart policies): nothing to keep
        status = ending.status
        if status.phase != announced[0]:
            raise ContractViolation(
                f"the reconcile that finished the job ({announced[0]}) left status.phase"
                f" {status.phase!r}: a hook undid the verdict"
            )
        done = running.model_copy(update={"status": status})
        for later_phase in ("Running", "Failed", "Succeeded", None):
            later = plan_at(hooks, done, observed_from(start.create, later_phase, 1), 120)
            if later.status != status or later.create or later.update:
                raise ContractViolation(
                    f"a {status.phase} job changed when its pods were"
                    f" {later_phase or 'gone'}: phase {later.status.phase}, created"
                    f" {len(later.create)}, updated {len(later.update)} objects"
                )


def hooks_do_no_io(subject: Subject, example: Example) -> None:
    """Hooks do no I/O: no file opened outside the plugin's templates, no socket, no process.

    Every hook runs for the example (validate, build_pods, launch commands, mutate_pod,
    build_objects, compute_status, update_status, through whole reconciles) while opening a
    file other than one under the plugin's package folder or core's templates (for reading),
    connecting or resolving, or starting a process raises; an error a hook caught still counts.
    """
    subject.guard.violations.clear()
    try:
        job = subject.job(example)
        hooks = subject.hooks(job.kind)
        start = subject.first_reconcile(job)
        running = job.model_copy(update={"status": start.status})
        for phase in ("Running", "Succeeded", "Failed"):
            plan_at(hooks, running, observed_from(start.create, phase, _EXIT_CODE), 60)
    except Exception:
        if not subject.guard.violations:
            raise
    if subject.guard.violations:
        raise ContractViolation("\n".join(dict.fromkeys(subject.guard.violations)))


# -- each invalid example --------------------------------------------------------------------


def invalid_example_is_rejected(subject: Subject, example: Example) -> None:
    """An invalid example is rejected at the field path it names: at admission or by validate.

    Submitted to the API server (`kubectl create --dry-run=server`, the admission tier) it is
    refused with a message naming each path listed in its annotation
    `conformance.t9kjobs.dev/rejected-at`, or the spec model or `t9kjobs_validate` rejects it
    (an error, not a warning) with a problem at each such path (what `t9kjobs validate`
    prints). An example both admitted and accepted by `validate` would run.
    """
    if example.error is not None:
        raise ContractViolation(example.error)
    expected = example.expected_paths
    if not expected:
        raise ContractViolation(
            f"{example.id} names no expected field path: add the annotation {REJECTED_AT}:"
            " <path>[,<path>...] to its metadata"
        )
    try:
        job = subject.parse(example)
    except JobError as exc:
        problems = exc.problems
    else:
        found = subject.hooks(job.kind).validate(job)
        problems = [p for p in found if p.severity == "error"]
    paths = {p.path for p in problems}
    missing = [p for p in expected if p not in paths]
    if problems and not missing and all(p.path for p in problems):
        return
    if not problems:
        by_validate = f"{example.id} was accepted; it should be rejected at {', '.join(expected)}"
    else:
        listed = "\n  ".join(str(p) for p in problems)
        by_validate = (
            f"{example.id} was rejected, but not at {', '.join(missing)}; the problems:\n  {listed}"
        )
    try:
        answer = dry_run(subject, example)
    except ContractViolation as exc:
        raise ContractViolation(f"{by_validate}\nand at admission: {exc}") from None
    unnamed = refusal_names(answer, expected)
    if not unnamed:
        return
    if answer.admitted:
        by_server = (
            "the API server admits it too (`kubectl apply` would create the job): reject it in"
            " t9kjobs_validate or by a rule of the spec model (its CRD), at the path it names"
        )
    else:
        by_server = (
            f"the API server refuses it, but not at {', '.join(unnamed)}:\n  {answer.message}"
        )
    raise ContractViolation(f"{by_validate}\n{by_server}")


# What a broken contract raises: reported as the contract and the message, without a traceback.
VIOLATIONS: tuple[type[Exception], ...] = (ContractViolation, HookIOError)

PLUGIN_CONTRACTS: list[Contract[None]] = [
    Contract("loads_through_entry_point", loads_through_entry_point),
    Contract("declares_kinds_and_spec_model", declares_kinds_and_spec_model),
]
KIND_CONTRACTS: list[Contract[str]] = [
    Contract("crd_is_structural", crd_is_structural),
    Contract("crd_is_accepted_by_the_api_server", crd_is_accepted_by_the_api_server),
    Contract("has_examples", has_examples),
    Contract("status_model_is_filled", status_model_is_filled),
]
EXAMPLE_CONTRACTS: list[Contract[Example]] = [
    Contract("example_is_valid", example_is_valid),
    Contract("example_is_admitted", example_is_admitted),
    Contract("build_pods_is_deterministic", build_pods_is_deterministic),
    Contract("pods_are_named_by_convention", pods_are_named_by_convention),
    Contract(
        "children_carry_owner_labels_and_references", children_carry_owner_labels_and_references
    ),
    Contract("launch_command_is_list_of_str", launch_command_is_list_of_str),
    Contract("compute_status_no_pods", compute_status_no_pods),
    Contract("compute_status_all_succeeded", compute_status_all_succeeded),
    Contract("compute_status_one_failed", compute_status_one_failed),
    Contract("compute_status_never_regresses", compute_status_never_regresses),
    Contract("hooks_do_no_io", hooks_do_no_io),
    Contract(
        "compute_status_waits_for_restarting_replicas",
        compute_status_waits_for_restarting_replicas,
    ),
    Contract("subdomains_have_headless_services", subdomains_have_headless_services),
    Contract("pods_use_only_declared_objects", pods_use_only_declared_objects),
    Contract("training_container_exists", training_container_exists),
    Contract("validate_checks_run_mode", validate_checks_run_mode),
    Contract("pods_follow_restart_policy", pods_follow_restart_policy),
]
INVALID_CONTRACTS: list[Contract[Example]] = [
    Contract("invalid_example_is_rejected", invalid_example_is_rejected),
]
