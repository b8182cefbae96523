"""Contracts on what a plugin declares: it loads, it names its kinds, their CRDs generate.

The plugin scope (its entry point, its `KindInfo`s and framework hooks) and the kind scope
(the kind's CRD is structural and is what `t9kjobs crds` writes; the kind has valid and invalid
examples). The kind contracts that need the API server are `t9kjobs.testing.kit.admitted`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from t9kjobs.crds import CrdError, crd_filename, crd_for, crd_yaml
from t9kjobs.kinds import KindInfo
from t9kjobs.models import JobSpec, JobStatus
from t9kjobs.testing.kit.structural import structural_problems
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "crd_is_structural",
    "declares_kinds_and_spec_model",
    "has_examples",
    "loads_through_entry_point",
]

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


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
