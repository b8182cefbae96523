"""The plugin under conformance test, loaded the way the operator loads it, and job fixtures.

`load_subject` goes through the real engine: `load_plugins()` (the entry-point group
`t9kjobs.plugins`, every installed plugin at once, as `t9kjobs operator` does), and hook callers
from `manager.hooks_for(kind)`; the I/O guard watches every hook call of that manager.
"""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import t9kjobs
from t9kjobs.kinds import KindInfo, ReplicaState
from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import ENTRY_POINT_GROUP, KindHooks, PluginError, PluginManager, load_plugins
from t9kjobs.models import Job
from t9kjobs.objects import DesiredPod, Obj
from t9kjobs.planner import Observed, Plan, plan
from t9kjobs.testing.kit.examples import Example, find_examples
from t9kjobs.testing.kit.noio import IOGuard
from t9kjobs.testing.kit.violation import ContractViolation

if TYPE_CHECKING:
    from t9kjobs.testing.kit.admission import AdmissionTier

__all__ = [
    "EPOCH",
    "JOB_NAMESPACE",
    "JOB_UID",
    "Subject",
    "load_subject",
    "observed_from",
    "replica_states",
]

# Examples carry no uid; a distinctive one shows an owner reference that does not use the job's.
JOB_UID = "0c0ffee0-conformance-job-uid"
# The namespace of an example that names none: not `default`, which a hard-coded one would hit.
JOB_NAMESPACE = "t9kjobs-conformance"
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _package_folders(module_name: str) -> list[Path]:
    """The folder(s) of the package holding the entry-point module: where its templates are."""
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    search: Iterable[str] | None = getattr(module, "__path__", None)
    if search is None and module.__package__:
        search = getattr(sys.modules[module.__package__], "__path__", None)
    if search is None:  # a single-module plugin: it may read nothing but itself
        return [Path(module.__file__)] if module.__file__ else []
    return [Path(p) for p in search]


def _core_templates() -> Path:
    return Path(t9kjobs.__path__[0]) / "templates"


@dataclass
class Subject:
    """One plugin, the manager that loaded it, its kinds and its examples."""

    name: str
    manager: PluginManager | None = None
    plugin: object | None = None
    entry_point: EntryPoint | None = None
    error: str | None = None
    examples: list[Example] = field(default_factory=list)
    folders: tuple[Path, ...] = ()
    guard: IOGuard = field(default_factory=lambda: IOGuard([_core_templates()]))
    # The kit session's API server and the CRDs on it (the admission tier).
    admission: AdmissionTier | None = None

    @property
    def kinds(self) -> dict[str, KindInfo]:
        """The kinds this plugin owns (as the manager routes them)."""
        if self.manager is None:
            return {}
        return {
            k: i for k, i in self.manager.kinds.items() if self.manager.owner_of(k) == self.name
        }

    @property
    def feature(self) -> bool:
        """Whether this is a feature plugin: loaded, and declaring no kind of its own."""
        return self.manager is not None and not self.kinds

    def loaded(self) -> PluginManager:
        if self.manager is None:
            raise ContractViolation(f"plugin {self.name!r} did not load: {self.error}")
        return self.manager

    def tier(self) -> AdmissionTier:
        if self.admission is None:
            raise ContractViolation(
                "no admission tier in this session (the kit's own pytest plugin)"
            )
        return self.admission

    def hooks(self, kind: str) -> KindHooks:
        """The engine's hook callers for the kind (guarded: the guard watches the manager)."""
        return self.loaded().hooks_for(kind)

    def parse(self, example: Example) -> Job:
        """The example as a typed Job (schema checks only), with a uid and a namespace."""
        manifest = copy.deepcopy(example.manifest)
        metadata = manifest.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata.setdefault("namespace", JOB_NAMESPACE)
            metadata["uid"] = JOB_UID
        return parse_job(manifest, self.loaded())

    def job(self, example: Example) -> Job:
        """A valid example as a Job, or a violation (the example is broken, not the contract)."""
        try:
            job = self.parse(example)
        except JobError as exc:
            raise ContractViolation(
                f"{example.id} is not a valid job (see test_example_is_valid): {exc}"
            ) from None
        errors = [p for p in self.hooks(job.kind).validate(job) if p.severity == "error"]
        if errors:
            listed = "; ".join(str(p) for p in errors)
            raise ContractViolation(f"{example.id} is refused by t9kjobs_validate: {listed}")
        return job

    def fresh(self, job: Job) -> Job:
        """The job as first seen by the operator: its kind's empty status."""
        return job.model_copy(update={"status": self.loaded().kind_info(job.kind).status_model()})

    def first_reconcile(self, job: Job) -> Plan:
        """What the operator does for a new job (what `t9kjobs render` prints)."""
        return plan(self.fresh(job), Observed(), EPOCH, self.hooks(job.kind))


def load_subject(
    name: str, folders: Sequence[Path], admission: AdmissionTier | None = None
) -> Subject:
    """Load every installed plugin through the entry points and pick `name` and its examples."""
    subject = Subject(name, folders=tuple(folders), admission=admission)
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        installed = ", ".join(sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)))
        subject.error = (
            f"no entry point named {name!r} in the group {ENTRY_POINT_GROUP!r}"
            f" (installed: {installed or 'none'}); declare it in your pyproject.toml under"
            f' [project.entry-points."{ENTRY_POINT_GROUP}"] and install the distribution'
        )
        return subject
    subject.entry_point = found[0]
    try:
        manager = load_plugins()
    except PluginError as exc:
        subject.error = str(exc)
        return subject
    if name not in {p.name for p in manager.plugins()}:
        subject.error = f"{name!r} was not loaded (is it in T9KJOBS_BLOCK_PLUGINS?)"
        return subject
    subject.manager = manager
    subject.plugin = subject.entry_point.load()
    subject.guard = IOGuard([*_package_folders(subject.entry_point.module), _core_templates()])
    subject.guard.watch(manager)
    # A feature plugin's examples are jobs of any installed kind; a kind's, of its own kinds.
    kinds = subject.kinds or manager.kinds
    subject.examples = [e for e in find_examples(folders) if e.error is not None or e.kind in kinds]
    return subject


def replica_states(
    pods: Sequence[DesiredPod],
    state: str,
    *,
    exit_code: int | None = None,
    final: bool = False,
    only: int | None = None,
    others: str = "Running",
) -> list[ReplicaState]:
    """Every pod in `state` (or only pod number `only`, the others in `others`)."""
    out = []
    for i, pod in enumerate(pods):
        mine = only is None or i == only
        out.append(
            ReplicaState(
                pod.replica_type,
                pod.index,
                pod.name,
                state if mine else others,
                exit_code if mine else None,
                final if mine else False,
            )
        )
    return out


def _pod_status(pod: Obj, phase: str, exit_code: int) -> dict[str, Any]:
    containers = pod["spec"].get("containers") or []
    if phase == "Running":
        state: dict[str, Any] = {"running": {"startedAt": "2000-01-01T00:00:01Z"}}
    else:
        state = {"terminated": {"exitCode": exit_code}}
    return {
        "phase": phase,
        "containerStatuses": [{"name": c.get("name"), "state": state} for c in containers],
    }


def observed_from(created: Sequence[Obj], phase: str | None, exit_code: int = 0) -> Observed:
    """The cluster after the operator created `created`: pods in `phase` (None: pods gone)."""
    objects = []
    for i, obj in enumerate(created):
        if obj["kind"] == "Pod" and phase is None:
            continue
        held = copy.deepcopy(obj)
        held["metadata"].update(uid=f"uid-{i}", resourceVersion="1")
        if held["kind"] == "Pod" and phase is not None:
            held["status"] = _pod_status(held, phase, exit_code)
        objects.append(held)
    return Observed.of(objects)
