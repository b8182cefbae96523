"""From a manifest file or dict to a typed Job, with every problem named by field path.

Errors are collected, never raised as tracebacks at users: `JobError.problems` lists
`spec.replicaSpecs[0].replicas: must be >= 0`-style lines. Files are read as kubectl reads them
(`t9kjobs.kubeyaml`), and a manifest is held to the CRD schema's typing exactly: no lax
coercion (`"1"` is not an integer, `true` is not a string), a null field is an absent one, as
the API server prunes it. A manifest nested deeper than `MAX_DEPTH` is refused before anything
walks it: no pod template needs that many levels, and the operator must not recurse into one.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator
from functools import lru_cache
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from t9kjobs.crds import openapi_schema
from t9kjobs.kinds import KindInfo, Problem
from t9kjobs.kubeyaml import Unreadable, YamlProblem, documents
from t9kjobs.manager import PluginManager
from t9kjobs.messages import did_you_mean, path_of, problems_from_validation_error
from t9kjobs.models import API_VERSION, OBJECT_META_FIELDS, Job, JobSpec, ObjectMeta
from t9kjobs.objects import ENGINE_ENV, engine_env_names
from t9kjobs.planner.desired import desired_pods
from t9kjobs.planner.queueing import LABEL_QUEUE_NAME, queue_problems
from t9kjobs.planner.topology import topology_problem
from t9kjobs.progress import ANNOTATION_PROGRESS_PATTERN, pattern_problem

__all__ = [
    "MAX_DEPTH",
    "MAX_OBJECT_BYTES",
    "JobError",
    "Judgement",
    "ParsedJobs",
    "Unreadable",
    "check_job",
    "depth_problem",
    "judge",
    "load_documents",
    "load_job",
    "parse_job",
    "problems_from_validation_error",
    "spec_schema",
    "submitted",
]

# Levels of nesting a manifest may have (the job itself is level 1). A pod template needs about
# 15; the API server would take 10,000 inside a template, which the operator must then walk.
MAX_DEPTH = 100

_TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")
# What etcd stores of one object (its --max-request-bytes default): 1.5 MiB.
MAX_OBJECT_BYTES = 1536 * 1024


class JobError(Exception):
    """A manifest that is not a valid job; `problems` says why, field by field."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def _kind_of(value: Any) -> str:
    return {list: "a list", str: "a string", type(None): "null"}.get(type(value), "a scalar")


def load_documents(data: bytes | str, source: str = "<input>") -> list[dict[str, Any]]:
    """The non-empty documents of a file, as kubectl reads them. A problem of the text is a
    JobError located `<source>:<line>:<column>`; bytes that are not text are `Unreadable`."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        docs = documents(raw)
    except YamlProblem as exc:
        where = f"{source}:{exc.line}:{exc.column}"
        message = exc.message if "nested" in exc.message else f"malformed YAML: {exc.message}"
        raise JobError([Problem(where, message)]) from None
    problems = [
        Problem(
            f"{source}:{doc.line}:{doc.column}",
            "a job must be a mapping (apiVersion, kind, metadata, spec),"
            f" got {_kind_of(doc.value)}",
        )
        for doc in docs
        if not isinstance(doc.value, dict)
    ]
    if problems:
        raise JobError(problems)
    if not docs:
        raise JobError([Problem(f"{source}:1:1", "no job in the file")])
    return [doc.value for doc in docs]


def depth_problem(manifest: Any, limit: int = MAX_DEPTH) -> Problem | None:
    """The first place `manifest` nests deeper than `limit` levels, found without recursion."""
    if not _deeper_than(manifest, limit):
        return None  # the walk below spells every path: only for a manifest too deep
    work: list[tuple[Any, int, str]] = [(manifest, 1, "")]
    while work:
        value, depth, path = work.pop()
        if not isinstance(value, dict | list):
            continue
        if depth > limit:
            # A long path is cut between two of its parts: `spec.x[0][0]...`.
            cut = path[:80]
            shown = path if len(path) <= 80 else cut[: max(cut.rfind("["), cut.rfind("."))] + "..."
            return Problem(shown or "spec", f"nested deeper than {limit} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            sub = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)
            work.append((item, depth + 1, sub))
    return None


def _deeper_than(manifest: Any, limit: int) -> bool:
    """Whether a mapping or list of `manifest` sits deeper than `limit` levels."""
    work: list[tuple[Any, int]] = [(manifest, 1)] if isinstance(manifest, dict | list) else []
    while work:
        value, depth = work.pop()
        if depth > limit:
            return True
        items = value.values() if isinstance(value, dict) else value
        work.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return False


def _iter_meta_problems(manifest: dict[str, Any], manager: PluginManager) -> Iterator[Problem]:
    for key in manifest:
        if key not in _TOP_LEVEL:
            yield Problem(path_of("", [key]), "unknown field" + did_you_mean(key, _TOP_LEVEL))
    api_version = manifest.get("apiVersion")
    if api_version != API_VERSION:
        yield Problem("apiVersion", f"must be {API_VERSION!r}, got {api_version!r}")
    kind = manifest.get("kind")
    if kind is None or kind == "":
        yield Problem("kind", "required field is missing")
    elif not isinstance(kind, str):
        yield Problem("kind", f"must be a string, got {_kind_of(kind)}")
    elif kind not in manager.kinds:
        known = ", ".join(sorted(manager.kinds)) or "none"
        hint = did_you_mean(kind, manager.kinds)
        yield Problem("kind", f"unknown kind {kind!r}{hint}; the installed plugins serve: {known}")
    if not isinstance(manifest.get("spec"), dict):
        yield Problem("spec", "required field is missing or not a mapping")


def _metadata(manifest: dict[str, Any], problems: list[Problem]) -> ObjectMeta | None:
    given = manifest.get("metadata")
    if given is None:
        given = {}
    if not isinstance(given, dict):
        problems.append(Problem("metadata", f"must be a mapping, got {_kind_of(given)}"))
        return None
    for key in given:
        if key not in OBJECT_META_FIELDS:
            hint = did_you_mean(key, OBJECT_META_FIELDS)
            problems.append(Problem(path_of("metadata", [key]), "unknown field" + hint))
    generated = given.get("generateName")
    if given.get("name") is None and isinstance(generated, str):
        # Named by the API server: the prefix and five random characters.
        given = {**given, "name": generated + "xxxxx"}
    try:
        return ObjectMeta.model_validate(given, strict=True)
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, "metadata", given))
        return None


@lru_cache(maxsize=64)
def spec_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The CRD schema of a spec model (cached): the names an unknown field may have meant."""
    return openapi_schema(model)


def parse_job(manifest: dict[str, Any], manager: PluginManager) -> Job:
    """A typed Job from a manifest, or a JobError listing every schema problem found."""
    return _parse(manifest, manager, None)[0]


class _ParsedSpec(NamedTuple):
    """What validating a manifest's `spec` gave: the model, or the problems that stopped it."""

    model: JobSpec | None
    problems: list[Problem]


def _parse_spec(manifest: dict[str, Any], info: KindInfo) -> _ParsedSpec:
    try:
        # By the wire names only: a snake_case spelling would pass here, then be pruned by the
        # API server. Strict: the API server coerces no type into another.
        spec = info.spec_model.model_validate(
            manifest["spec"], by_alias=True, by_name=False, strict=True
        )
    except ValidationError as exc:
        problems = problems_from_validation_error(
            exc, "spec", manifest["spec"], spec_schema(info.spec_model)
        )
        return _ParsedSpec(None, problems)
    return _ParsedSpec(spec, [])


def _parse(
    manifest: dict[str, Any], manager: PluginManager, known: _ParsedSpec | None
) -> tuple[Job, _ParsedSpec]:
    """`parse_job`, and what its spec gave; `known`: what this very spec gave before (its
    depth checked then, its problems the same), so that it is neither walked nor validated again
    (`ParsedJobs`). The rest of the manifest, its status too, is read afresh."""
    rest = manifest if known is None else {k: v for k, v in manifest.items() if k != "spec"}
    too_deep = depth_problem(rest)
    if too_deep is not None:
        raise JobError([too_deep])
    problems = list(_iter_meta_problems(manifest, manager))
    meta = _metadata(manifest, problems)
    if any(p.path in ("kind", "spec") for p in problems):
        raise JobError(problems)
    info = manager.kind_info(str(manifest["kind"]))
    parsed = _parse_spec(manifest, info) if known is None else known
    problems.extend(parsed.problems)
    status = None
    try:
        status = info.status_model.model_validate(manifest.get("status") or {})
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, "status", manifest.get("status")))
    if problems or meta is None or parsed.model is None or status is None:
        raise JobError(problems)
    job = Job(
        api_version=str(manifest["apiVersion"]),
        kind=str(manifest["kind"]),
        metadata=meta,
        spec=parsed.model,
        status=status,
        raw=manifest,
    )
    return job, parsed


def check_job(job: Job, manager: PluginManager) -> list[Problem]:
    """The owning plugin's semantic checks, and the job's progress pattern's (one RE2 reads:
    `t9kjobs.progress.pattern_problem`): errors and warnings, with field paths."""
    found = manager.hooks_for(job.kind).validate(job)
    pattern = job.metadata.annotations.get(ANNOTATION_PROGRESS_PATTERN)
    problem = pattern_problem(pattern) if pattern else None
    if problem is not None:
        path = path_of("metadata.annotations", [ANNOTATION_PROGRESS_PATTERN])
        found = [Problem(path, problem), *found]
    # A job that asks for a queue: what Kueue can never count (`queue_problems`).
    reserved = _engine_env_problems(job.spec, job.raw.get("spec"))
    return [*found, *queue_problems(job), *_topology_problems(job, manager), *reserved]


class _Remembered(NamedTuple):
    unversioned: dict[str, Any]  # the manifest parsed, but its status and resourceVersion
    spec: _ParsedSpec
    checked: list[Problem]  # what check_job found


def _unversioned(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest but for what every status write changes: the status and resourceVersion."""
    meta = manifest.get("metadata")
    out = {k: v for k, v in manifest.items() if k != "status"}
    if isinstance(meta, dict) and "resourceVersion" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return out


class ParsedJobs:
    """`parse_job` and `check_job` of the operator's jobs, done once a version of their spec.

    A reconcile reads its job from the cache at every change of one of its pods, and validating
    the whole spec (pydantic) and the plugin's checks at each were a tenth of the operator's
    CPU (issue #50). Both read the spec and the metadata, never the status: the status changes
    at every write, and the spec only with a new generation. So a job is remembered with the
    manifest it was parsed from but for its status and resourceVersion; while that part is
    equal (the metadata's labels and annotations too), the spec's model and check_job's
    problems are reused. The metadata and the status are parsed afresh at every load: the
    status a plan reads is always the one just read. One entry a job, dropped by `forget`
    (the operator forgets a deleted job) or replaced when the job changes.
    """

    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager
        self._jobs: dict[Hashable, _Remembered] = {}

    def load(self, key: Hashable, manifest: dict[str, Any]) -> tuple[Job, list[Problem]]:
        """The job `key` from its manifest and every problem check_job finds in it (errors
        too: the caller refuses them); a JobError when it does not parse, and whatever a
        plugin's check raises, as `parse_job` and `check_job` do."""
        unversioned = _unversioned(manifest)
        known = self._jobs.get(key)
        if known is not None and known.unversioned == unversioned:
            job, _ = _parse(manifest, self.manager, known.spec)
            return job, list(known.checked)
        self._jobs.pop(key, None)  # a job that changed, or a parse that fails: nothing kept
        job, spec = _parse(manifest, self.manager, None)
        checked = check_job(job, self.manager)
        self._jobs[key] = _Remembered(unversioned, spec, checked)
        return job, list(checked)

    def forget(self, key: Hashable) -> None:
        """A job gone: nothing of it is kept."""
        self._jobs.pop(key, None)

    def __len__(self) -> int:
        return len(self._jobs)


def _topology_problems(job: Job, manager: PluginManager) -> list[Problem]:
    """What Kueue would refuse of a queued job's topology annotations, judged on the pods its
    plugin builds, as the operator judges them before it makes the Workload
    (`t9kjobs.planner.topology.topology_problem`): one verdict, at admission too (#52)."""
    if not (job.metadata.labels or {}).get(LABEL_QUEUE_NAME):
        return []
    hooks = manager.hooks_for(job.kind)
    try:
        pods = desired_pods(job, hooks, job.spec.lifecycle(), False, frozenset())
    except Exception:  # a plugin that cannot build this job: the operator says so itself
        return []
    problem = topology_problem(pods)
    if problem is None:
        return []
    return [Problem("spec", f"{problem}: Kueue would not queue the job (docs/scheduling.md)")]


def _engine_env_problems(spec: object, raw_spec: Any, path: str = "spec") -> list[Problem]:
    """A warning for each env entry of a container that names what the engine sets in every pod
    of a job with `checkpoint` or stall detection (`t9kjobs.objects.ENGINE_ENV`): the engine's
    value wins (docs/lifecycle.md, "Checkpoints")."""
    if not engine_env_names(spec):
        return []
    found: list[Problem] = []
    if isinstance(raw_spec, dict):
        for key, value in raw_spec.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for i, container in enumerate(value):
                    env = container.get("env") if isinstance(container, dict) else None
                    for j, entry in enumerate(env if isinstance(env, list) else []):
                        if isinstance(entry, dict) and entry.get("name") in ENGINE_ENV:
                            found.append(
                                Problem(
                                    f"{path}.{key}[{i}].env[{j}]",
                                    f"ignored: the engine sets {entry['name']} in every pod",
                                    severity="warning",
                                )
                            )
            else:
                found += _engine_env_problems(spec, value, f"{path}.{key}")
    elif isinstance(raw_spec, list):
        for i, item in enumerate(raw_spec):
            found += _engine_env_problems(spec, item, f"{path}[{i}]")
    return found


def load_job(manifest: dict[str, Any], manager: PluginManager) -> tuple[Job, list[Problem]]:
    """parse_job then check_job: the job and its warnings, or a JobError with every error."""
    job = parse_job(manifest, manager)
    found = check_job(job, manager)
    if any(p.severity == "error" for p in found):
        raise JobError(found)
    return job, found


def submitted(manifest: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """A manifest as the API server takes it on submission: without a status (it drops one;
    the operator writes the status), and a warning when there was one. A manifest larger
    than etcd stores is a JobError."""
    if depth_problem(manifest) is not None:
        return manifest, []  # parse_job refuses it, before anything walks it
    size = len(json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_OBJECT_BYTES:
        biggest = max(manifest, key=lambda k: len(json.dumps(manifest[k])), default="spec")
        raise JobError(
            [
                Problem(
                    path_of("", [str(biggest)]),
                    f"the job takes {size} bytes as JSON; the API server stores at most"
                    f" {MAX_OBJECT_BYTES} (etcd's limit)",
                )
            ]
        )
    if "status" not in manifest:
        return manifest, []
    dropped = {k: v for k, v in manifest.items() if k != "status"}
    note = "ignored: the API server drops a submitted status; the operator writes it"
    return dropped, [Problem("status", note, "warning")]


class Judgement(NamedTuple):
    """A submitted job's verdict: the typed job when it is valid, its errors, its warnings."""

    job: Job | None
    errors: list[Problem]
    warnings: list[Problem]


def judge(manifest: dict[str, Any], manager: PluginManager) -> Judgement:
    """The one verdict on a submitted job, every problem with its field path.

    `t9kjobs validate` and the admission webhook (`t9kjobs.controller.webhook`) both call this,
    so a job refused by one is refused by the other in the same words; the operator applies the
    same `parse_job` and `check_job` to the stored job. A plugin's check that raises is an error
    naming the kind, never a traceback: a job whose checks crash is not admitted."""
    try:
        manifest, ignored = submitted(manifest)
        job, warnings = load_job(manifest, manager)
    except JobError as exc:
        return Judgement(None, exc.problems, [])
    except Exception as exc:
        kind = manifest.get("kind")
        return Judgement(
            None, [Problem("spec", f"internal error in the checks of {kind}: {exc!r}")], []
        )
    return Judgement(job, [], ignored + warnings)
