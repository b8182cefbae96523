"""A deterministic corpus of bad and borderline job manifests, over every kind and field.

Each kind has a *base* manifest that sets nearly every field and is valid. Every field of the
kind's CRD schema (`t9kjobs crds`) is then nulled, retyped, set out of range, misspelt, given
unicode, huge or YAML 1.1 values, one field at a time; pod templates get the shapes people and
tools get wrong; and the file as a whole gets the mistakes of YAML and of encodings: anchors and
alias bombs, deep nesting, duplicate keys, UTF-16, invalid UTF-8, several documents.

A `Case` is the bytes of one file. Cases marked `batchable` are valid YAML holding one job named
`Case.name`, so that many of them can go to the API server in one `kubectl create` (a name in
kubectl's answer means admitted); the others are sent one by one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from t9kjobs.crds import crd_for
from t9kjobs.manager import load_plugins
from t9kjobs.models import API_VERSION

__all__ = ["BASES", "Case", "cases", "dump", "set_at", "with_raw"]

Path = tuple[str | int, ...]
Json = Any

_CONTAINER = {
    "name": "main",
    "image": "busybox:1.36",
    "command": ["sh", "-c", "echo hi"],
    "env": [{"name": "GREETING", "value": "hello"}],
    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
}
_TEMPLATE = {
    "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "fuzz"}},
    "spec": {"containers": [_CONTAINER]},
}
_RUN_MODE = {
    "debug": {
        "enabled": False,
        "replicaSpecs": [{"type": "worker", "skipInitContainer": False, "command": ["sleep"]}],
    },
    "pause": {
        "enabled": False,
        "resumeSpecs": [
            {"type": "worker", "skipInitContainer": False, "command": ["sh"], "args": ["-c"]}
        ],
    },
}
# DeepSpeedJob and ColossalAIJob generate every pod's command: a resume may not set one.
_RUN_MODE_GENERATED = {
    **_RUN_MODE,
    "pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "skipInitContainer": False}]},
}
_SCHEDULER = {"t9kScheduler": {"queue": "default", "priority": 10}}
_RUN_POLICY = {"activeDeadlineSeconds": 3600, "backoffLimit": 3, "cleanUpPolicy": "All"}
# The engine's recovery rules, on every kind (docs/lifecycle.md, "Recovery rules").
_RECOVERY = {
    "infrastructureRestartLimit": 5,
    "rules": [
        {
            "name": "bad-input",
            "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, 43]},
            "action": "FailJob",
        },
        {
            "onPodConditions": [{"type": "DisruptionTarget", "reasons": ["EvictionByEvictionAPI"]}],
            "replicaTypes": ["worker"],
            "action": "RestartReplica",
            "budget": "Infrastructure",
        },
        {"onReasons": ["Evicted", "Preempted"], "action": "Ignore"},
    ],
}


def _job(kind: str, spec: Json) -> Json:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "base"}, "spec": spec}


def _with_container(**fields: Json) -> Json:
    template = copy.deepcopy(_TEMPLATE)
    template["spec"]["containers"][0].update(fields)
    return template


# Valid manifests setting (nearly) every field of their kind; the mutations start from them.
BASES: dict[str, Json] = {
    "GenericJob": _job(
        "GenericJob",
        {
            "successRules": [{"worker": [0]}],
            "failureRules": [{"worker": [0, 1]}],
            "service": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
            "runMode": _RUN_MODE,
            "cleanUpPolicy": "Unfinished",
            "scheduler": _SCHEDULER,
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": {"policy": "OnFailure", "limit": 2},
                    "template": _TEMPLATE,
                }
            ],
        },
    ),
    "PyTorchTrainingJob": _job(
        "PyTorchTrainingJob",
        {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "scalingWeight": 1,
                    "template": _with_container(command=None, args=["train.py"]),
                }
            ],
            "torchrunConfig": {
                "enabled": True,
                "maxRestarts": 3,
                "procPerNode": "1",
                "rdzvBackend": "c10d",
                "extraOptions": ["--monitor_interval=5"],
            },
            "elastic": {
                "enabled": True,
                "minReplicas": 1,
                "maxReplicas": 4,
                "expectedReplicas": 2,
            },
            "runMode": _RUN_MODE,
            "runPolicy": _RUN_POLICY,
            "scheduler": _SCHEDULER,
            "tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/logs"], "image": "tb:1"},
        },
    ),
    "DeepSpeedJob": _job(
        "DeepSpeedJob",
        {
            "scheduler": _SCHEDULER,
            "runPolicy": _RUN_POLICY,
            "runMode": _RUN_MODE_GENERATED,
            "elastic": {
                "enabled": False,
                "minReplicas": 1,
                "maxReplicas": 4,
                "expectedReplicas": 2,
            },
            "config": {
                "slotsPerWorker": 1,
                "localRank": True,
                "autotune": "run",
                "run": {"python": ["train.py", "--epochs=1"]},
                "otherArgs": ["--bind_cores_to_rank"],
            },
            "disableCustomEnv": False,
            "worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": _TEMPLATE},
        },
    ),
    "ColossalAIJob": _job(
        "ColossalAIJob",
        {
            "ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
            "runMode": _RUN_MODE_GENERATED,
            "runPolicy": {"cleanUpWorkers": True},
            "scheduler": _SCHEDULER,
            "torchConfig": {
                "procPerWorker": 1,
                "script": ["train.py", "--epochs=1"],
                "extraArgs": ["--max_restarts=0"],
            },
            "replicaSpecs": [
                {
                    "type": "launcher",
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": _with_container(name="launcher"),
                },
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": {"policy": "OnFailure", "limit": 1},
                    "template": _with_container(name="worker"),
                },
            ],
        },
    ),
}
for _base in BASES.values():
    _base["spec"]["recoveryPolicy"] = copy.deepcopy(_RECOVERY)
# A None container field in a base means "leave it out".
for _base in BASES.values():
    for _spec in [*(_base["spec"].get("replicaSpecs") or []), _base["spec"].get("worker") or {}]:
        for _c in (_spec.get("template") or {}).get("spec", {}).get("containers", []):
            for _key in [k for k, v in _c.items() if v is None]:
                del _c[_key]


@dataclass(frozen=True)
class Case:
    """One file to feed `t9kjobs validate`, `render` and the API server."""

    id: str
    text: bytes
    kind: str | None = None
    # Valid YAML holding one job named `name`: may share a multi-document file with others.
    batchable: bool = False
    name: str | None = None
    # What to pass instead of a file holding `text` (a path that does not exist, a directory).
    special: str | None = None


# -- building blocks ---------------------------------------------------------------------------


def dump(doc: Json) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 20)


def set_at(doc: Json, path: Path, value: Json) -> Json:
    """`doc` with `value` at `path` (missing parents created as mappings). Only the nodes along
    the path are copied: the rest, and `value`, are shared, so deep values are never walked."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, list) and isinstance(head, int) and head <= len(doc):
        out_list = list(doc)
        child = out_list[head] if head < len(doc) else {}
        if head == len(doc):
            out_list.append(None)
        out_list[head] = set_at(child, rest, value)
        return out_list
    if isinstance(doc, dict):
        out = dict(doc)
        out[head] = set_at(doc.get(head, {}), rest, value)
        return out
    return doc


def _rename(doc: Json, path: Path, new_key: str) -> Json:
    parent = _get(doc, path[:-1])
    if not isinstance(parent, dict) or path[-1] not in parent:
        return doc
    renamed = {(new_key if k == path[-1] else k): v for k, v in parent.items()}
    return set_at(doc, path[:-1], renamed)


def _get(doc: Json, path: Path) -> Json:
    node = doc
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _show(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_RAW = "ZZRAWVALUEZZ"


def with_raw(doc: Json, path: Path, scalar: str) -> str:
    """YAML text of `doc` with the plain scalar `scalar` written verbatim at `path`."""
    return dump(set_at(doc, path, _RAW)).replace(_RAW, scalar, 1)


def _typos(name: str) -> list[str]:
    """Misspellings: two letters swapped, a letter dropped, the wrong case, a plural."""
    out = []
    if len(name) > 3:
        out.append(name[:1] + name[2] + name[1] + name[3:])
        out.append(name[:-2] + name[-1])
    out.append(name[0].swapcase() + name[1:])
    out.append(name + "s")
    return list(dict.fromkeys(t for t in out if t != name))


# -- mutations by schema type --------------------------------------------------------------------

Mutation = tuple[str, Json | None, str | None]  # (label, value, raw YAML scalar)

_STRING_VALUES: list[Mutation] = [
    ("null", None, None),
    ("int", 1, None),
    ("bool-yaml11", None, "yes"),
    ("on-yaml11", None, "on"),
    ("list", ["a"], None),
    ("mapping", {"a": "b"}, None),
    ("empty", "", None),
    ("unicode", "wörker-ü", None),
    ("emoji", "run-\U0001f680", None),
    ("zero-width", "wor\u200bker", None),
    ("nul", "a\x00b", None),
    ("long", "a" * 10_000, None),
    ("date", None, "2024-01-31"),
    ("octal", None, "0755"),
    ("sexagesimal", None, "1:20"),
    ("tilde", None, "~"),
]
_INT_VALUES: list[Mutation] = [
    ("null", None, None),
    ("string", "1", None),
    ("fraction", 1.5, None),
    ("bool", True, None),
    ("negative", -1, None),
    ("zero", 0, None),
    ("2^31", 2**31, None),
    ("2^63", 2**63, None),
    ("1e23", None, "100000000000000000000000"),
    ("exp-1e1", None, "1e1"),
    ("float-2.0", None, "2.0"),
    ("hex", None, "0x10"),
    ("octal", None, "010"),
    ("underscore", None, "1_0"),
    ("yes", None, "yes"),
    ("list", [1], None),
]
_BOOL_VALUES: list[Mutation] = [
    ("null", None, None),
    ("string-true", "true", None),
    ("string-yes", "yes", None),
    ("int", 1, None),
    ("yes", None, "yes"),
    ("on", None, "on"),
    ("off", None, "off"),
    ("y", None, "y"),
    ("TRUE", None, "TRUE"),
    ("n", None, "n"),
]
_ARRAY_VALUES: list[Mutation] = [
    ("null", None, None),
    ("mapping", {"a": 1}, None),
    ("string", "x", None),
    ("empty", [], None),
    ("null-item", [None], None),
    ("nested", [[["x"]]], None),
]
_OBJECT_VALUES: list[Mutation] = [
    ("null", None, None),
    ("list", [], None),
    ("string", "x", None),
    ("int", 1, None),
    ("empty", {}, None),
]
_INT_OR_STRING_VALUES: list[Mutation] = [
    ("null", None, None),
    ("fraction", 1.5, None),
    ("bool", True, None),
    ("list", [], None),
    ("empty", "", None),
    ("word", "abc", None),
    ("zero", 0, None),
    ("negative", -1, None),
    ("70000", 70000, None),
    ("yes", None, "yes"),
]
_RESTART_POLICY_VALUES: list[Mutation] = [
    ("null", None, None),
    ("int", 1, None),
    ("bool", True, None),
    ("list", [], None),
    ("empty-object", {}, None),
    ("lowercase", "onfailure", None),
    ("trailing-space", "Never ", None),
    ("bad-policy", {"policy": "Sometimes"}, None),
    ("negative-limit", {"policy": "Never", "limit": -1}, None),
    ("unknown-key", {"policy": "Never", "limit": 1, "retries": 2}, None),
    ("string-limit", {"policy": "Never", "limit": "1"}, None),
    ("huge-limit", {"policy": "Never", "limit": 2**63}, None),
    ("yes", None, "yes"),
]


def _enum_values(values: list[Any]) -> list[Mutation]:
    word = str(next(v for v in values if v is not None))
    return [
        ("enum-lowercase", word.lower(), None),
        ("enum-typo", word[:-1] + word[-1] * 2, None),
        ("enum-space", f" {word}", None),
    ]


def _mutations(node: Json) -> list[Mutation]:
    if "x-kubernetes-int-or-string" in node:
        return _INT_OR_STRING_VALUES
    kind = node.get("type")
    if kind is None and node.get("x-kubernetes-preserve-unknown-fields"):
        return _RESTART_POLICY_VALUES
    if kind == "string":
        return _STRING_VALUES + (_enum_values(node["enum"]) if "enum" in node else [])
    if kind == "integer":
        return _INT_VALUES
    if kind == "boolean":
        return _BOOL_VALUES
    if kind == "array":
        return _ARRAY_VALUES
    if kind == "object":
        return _OBJECT_VALUES
    return []


def _schema_paths(node: Json, base: Json, path: Path) -> Iterator[tuple[Path, Json]]:
    """Every field of the schema under `path`, list items as index 0, map values by the base's
    first key; pod templates are left to `_template_cases`."""
    yield path, node
    if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") == "object":
        return
    for name, sub in (node.get("properties") or {}).items():
        yield from _schema_paths(sub, base, (*path, name))
    if isinstance(node.get("items"), dict):
        yield from _schema_paths(node["items"], base, (*path, 0))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        given = _get(base, path)
        key = next(iter(given)) if isinstance(given, dict) and given else "worker"
        yield from _schema_paths(extra, base, (*path, key))


def _spec_schema(kind: str) -> Json:
    manager = load_plugins()
    crd = crd_for(manager.kind_info(kind))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


# -- case families -----------------------------------------------------------------------------

Emit = Callable[[str, Json | str], None]


def _field_cases(kind: str, base: Json, emit: Emit) -> None:
    for path, node in _schema_paths(_spec_schema(kind), base, ("spec",)):
        if path == ("spec",):
            continue
        where = _show(path)
        for label, value, raw in _mutations(node):
            if raw is not None:
                emit(f"{where}={label}", with_raw(base, path, raw))
            else:
                emit(f"{where}={label}", set_at(base, path, value))
        if isinstance(path[-1], str) and _get(base, path) is not None:
            for typo in _typos(path[-1])[:2]:
                emit(f"{where}=misspelt:{typo}", _rename(base, path, typo))
        if node.get("type") == "object" and "properties" in node:
            emit(f"{where}=unknown-field", set_at(base, (*path, "unknownField"), 1))
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            item = _get(base, (*path, 0))
            if item is not None:
                emit(f"{where}=1000-items", set_at(base, path, [item] * 1000))


def _template_paths(kind: str) -> list[Path]:
    if kind == "DeepSpeedJob":
        return [("spec", "worker", "template")]
    if kind == "ColossalAIJob":
        return [("spec", "replicaSpecs", 1, "template")]
    return [("spec", "replicaSpecs", 0, "template")]


def _deep(depth: int) -> Json:
    node: Json = "x"
    for _ in range(depth):
        node = [node]
    return node


# (label, path below the template, value)
_TEMPLATE_VALUES: list[tuple[str, Path, Json]] = [
    ("template-null", (), None),
    ("template-list", (), []),
    ("template-string", (), "x"),
    ("template-empty", (), {}),
    ("metadata-list", ("metadata",), []),
    ("labels-int-value", ("metadata", "labels"), {"team": 1}),
    ("labels-string", ("metadata", "labels"), "x"),
    ("annotations-bool", ("metadata", "annotations"), {"note": True}),
    ("spec-null", ("spec",), None),
    ("spec-list", ("spec",), []),
    ("spec-string", ("spec",), "x"),
    ("containers-null", ("spec", "containers"), None),
    ("containers-mapping", ("spec", "containers"), {"name": "main"}),
    ("containers-string", ("spec", "containers"), "main"),
    ("containers-empty", ("spec", "containers"), []),
    ("container-string", ("spec", "containers", 0), "main"),
    ("container-null", ("spec", "containers", 0), None),
    ("container-list", ("spec", "containers", 0), []),
    ("container-name-missing", ("spec", "containers", 0, "name"), None),
    ("container-name-upper", ("spec", "containers", 0, "name"), "Main"),
    ("container-name-int", ("spec", "containers", 0, "name"), 1),
    ("container-image-missing", ("spec", "containers", 0, "image"), None),
    ("container-image-empty", ("spec", "containers", 0, "image"), ""),
    ("container-image-int", ("spec", "containers", 0, "image"), 3),
    ("command-string", ("spec", "containers", 0, "command"), "sleep 1"),
    ("command-int-item", ("spec", "containers", 0, "command"), ["sleep", 1]),
    ("args-mapping", ("spec", "containers", 0, "args"), {"a": 1}),
    ("env-string", ("spec", "containers", 0, "env"), "A=B"),
    ("env-string-item", ("spec", "containers", 0, "env"), ["A=B"]),
    ("env-name-int", ("spec", "containers", 0, "env"), [{"name": 1, "value": "x"}]),
    ("env-name-missing", ("spec", "containers", 0, "env"), [{"value": "x"}]),
    ("env-value-int", ("spec", "containers", 0, "env"), [{"name": "A", "value": 1}]),
    ("env-value-list", ("spec", "containers", 0, "env"), [{"name": "A", "value": ["x"]}]),
    ("ports-string-port", ("spec", "containers", 0, "ports"), [{"containerPort": "80"}]),
    ("ports-70000", ("spec", "containers", 0, "ports"), [{"containerPort": 70000}]),
    ("ports-mapping", ("spec", "containers", 0, "ports"), {"containerPort": 80}),
    ("resources-string", ("spec", "containers", 0, "resources"), "big"),
    ("limits-list", ("spec", "containers", 0, "resources", "limits"), ["cpu"]),
    ("gpu-word", ("spec", "containers", 0, "resources", "limits"), {"nvidia.com/gpu": "many"}),
    ("gpu-fraction", ("spec", "containers", 0, "resources", "limits"), {"nvidia.com/gpu": 0.5}),
    ("mounts-string", ("spec", "containers", 0, "volumeMounts"), "/data"),
    ("mounts-no-name", ("spec", "containers", 0, "volumeMounts"), [{"mountPath": "/d"}]),
    ("workingdir-int", ("spec", "containers", 0, "workingDir"), 1),
    ("volumes-string", ("spec", "volumes"), "data"),
    ("volumes-empty-item", ("spec", "volumes"), [{}]),
    ("init-string", ("spec", "initContainers"), "x"),
    ("init-no-image", ("spec", "initContainers"), [{"name": "init"}]),
    ("restart-policy-always", ("spec", "restartPolicy"), "Always"),
    ("misspelt-containers", ("spec", "containres"), [_CONTAINER]),
    ("two-same-names", ("spec", "containers"), [_CONTAINER, _CONTAINER]),
    ("deep-50", ("spec", "deep"), _deep(50)),
]


def _template_cases(kind: str, base: Json, emit: Emit) -> None:
    for template in _template_paths(kind):
        for label, below, value in _TEMPLATE_VALUES:
            path = template + below
            emit(f"{_show(template)}={label}", set_at(base, path, value))
        for depth in (990, 1000, 5000):
            nested = "[" * depth + "x" + "]" * depth
            emit(
                f"{_show(template)}=deep-{depth}",
                with_raw(base, (*template, "spec", "deep"), nested),
            )
        emit(
            f"{_show(template)}=containers-unknown-field",
            set_at(base, (*template, "spec", "containers", 0, "imagee"), "busybox"),
        )
    if kind == "PyTorchTrainingJob":
        nested = "[" * 1000 + "]" * 1000
        emit(
            "spec.tensorboardSpec=deep-1000",
            with_raw(base, ("spec", "tensorboardSpec", "x"), nested),
        )


def _metadata_cases(kind: str, base: Json, emit: Emit) -> None:
    names: list[tuple[str, Json]] = [
        ("name-52", "a" * 52),
        ("name-53", "a" * 53),
        ("name-63", "a" * 63),
        ("name-64", "a" * 64),
        ("name-254", "a" * 254),
        ("name-upper", "Fuzz"),
        ("name-dots", "a.b"),
        ("name-underscore", "a_b"),
        ("name-empty", ""),
        ("name-int", 1),
        ("name-null", None),
        ("name-yes", True),
        ("name-unicode", "jöb"),
        ("name-leading-dash", "-a"),
    ]
    for label, value in names:
        emit(f"metadata.{label}", set_at(base, ("metadata", "name"), value))
    meta = base["metadata"]
    emit("metadata.generate-name", {**base, "metadata": {"generateName": "fz-"}})
    emit("metadata.missing", {k: v for k, v in base.items() if k != "metadata"})
    for label, value in (("null", None), ("list", []), ("string", "x")):
        emit(f"metadata={label}", {**base, "metadata": value})
    for label, extra in (
        ("labels-int", {"labels": {"a": 1}}),
        ("labels-bad-key", {"labels": {"a b": "c"}}),
        ("annotations-bool", {"annotations": {"a": True}}),
        ("namespace-bad", {"namespace": "Bad_NS"}),
        ("uid-given", {"uid": "1234"}),
        ("resource-version-given", {"resourceVersion": "12"}),
        ("creation-timestamp-word", {"creationTimestamp": "yesterday"}),
        ("finalizers-string", {"finalizers": "x"}),
        ("owner-references-junk", {"ownerReferences": [{"kind": "X"}]}),
        ("unknown-field", {"colour": "red"}),
    ):
        emit(f"metadata.{label}", {**base, "metadata": {**meta, **extra}})


_MISSING = object()


def _top_level_cases(kind: str, base: Json, emit: Emit) -> None:
    variants: dict[str, list[tuple[str, Any]]] = {
        "apiVersion": [
            ("missing", _MISSING),
            ("wrong-group", "batch/v1"),
            ("v1beta2", "batch.tensorstack.dev/v1beta2"),
            ("int", 1),
        ],
        "kind": [
            ("missing", _MISSING),
            ("unknown", "FooJob"),
            ("lowercase", kind.lower()),
            ("mapping", {"name": kind}),
            ("list", [kind]),
            ("int", 1),
        ],
        "spec": [("missing", _MISSING), ("null", None), ("list", []), ("string", "x")],
    }
    for key, values in variants.items():
        for label, value in values:
            doc = {k: v for k, v in base.items() if k != key}
            if value is not _MISSING:
                doc[key] = value
            emit(f"{key}={label}", doc)
    emit("spec=empty", {**base, "spec": {}})
    emit("top-level-unknown-field", {**base, "colour": "red"})
    emit("status-junk", {**base, "status": {"phase": 7, "tasks": "x"}})
    emit("status-valid", {**base, "status": {"phase": "Running"}})


# Options that contradict each other, per kind: (label, path, value).
_CONFLICTS: dict[str, list[tuple[str, Path, Json]]] = {
    "GenericJob": [
        ("duplicate-types", ("spec", "replicaSpecs", 1), {"type": "worker"}),
        (
            "33-types",
            ("spec", "replicaSpecs"),
            [{"type": f"t{i}", "template": _TEMPLATE} for i in range(33)],
        ),
        ("rule-unknown-type", ("spec", "successRules"), [{"nope": [0]}]),
        ("rule-index-out-of-range", ("spec", "successRules"), [{"worker": [5]}]),
        ("rule-negative-index", ("spec", "failureRules"), [{"worker": [-1]}]),
        ("rule-empty", ("spec", "successRules"), [{}]),
        (
            "service-ports-same-port",
            ("spec", "service", "ports"),
            [{"name": "a", "port": 80}, {"name": "b", "port": 80}],
        ),
        (
            "service-ports-same-name",
            ("spec", "service", "ports"),
            [{"name": "a", "port": 80}, {"name": "a", "port": 81}],
        ),
        ("service-port-name-upper", ("spec", "service", "ports", 0, "name"), "HTTP"),
        ("service-protocol-lowercase", ("spec", "service", "ports", 0, "protocol"), "tcp"),
        (
            "variable-unknown",
            ("spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "command"),
            ["echo", "$(service.nope[0].host)"],
        ),
        (
            "debug-and-pause",
            ("spec", "runMode"),
            {"debug": {"enabled": True}, "pause": {"enabled": True}},
        ),
        ("debug-unknown-type", ("spec", "runMode", "debug", "replicaSpecs", 0, "type"), "nope"),
        ("enabled-and-enable", ("spec", "runMode", "debug", "enable"), True),
        ("queue-and-Queue", ("spec", "scheduler", "t9kScheduler", "Queue"), "other"),
        ("queue-missing", ("spec", "scheduler", "t9kScheduler"), {"priority": 1}),
        (
            "huge-replicas-2^31",
            ("spec", "replicaSpecs", 0, "replicas"),
            2147483648,
        ),
        ("replicas-1e6", ("spec", "replicaSpecs", 0, "replicas"), 1_000_000),
        ("replicas-10000", ("spec", "replicaSpecs", 0, "replicas"), 10_000),
        ("replicas-1000", ("spec", "replicaSpecs", 0, "replicas"), 1000),
        ("clean-up-null", ("spec", "cleanUpPolicy"), None),
    ],
    "PyTorchTrainingJob": [
        (
            "two-masters",
            ("spec", "replicaSpecs", 1),
            {"type": "master", "replicas": 1, "template": _TEMPLATE},
        ),
        (
            "master-2-replicas",
            ("spec", "replicaSpecs", 0),
            {"type": "master", "replicas": 2, "template": _TEMPLATE},
        ),
        ("duplicate-types", ("spec", "replicaSpecs", 1), {"type": "worker", "template": _TEMPLATE}),
        ("elastic-no-bounds", ("spec", "elastic"), {"enabled": True}),
        ("elastic-min-above-max", ("spec", "elastic", "minReplicas"), 9),
        ("elastic-expected-above-max", ("spec", "elastic", "expectedReplicas"), 9),
        ("proc-per-node-0", ("spec", "torchrunConfig", "procPerNode"), "0"),
        ("proc-per-node-gpu-no-limit", ("spec", "torchrunConfig", "procPerNode"), "gpu"),
        (
            "torchrun-no-args",
            ("spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "args"),
            None,
        ),
        (
            "reserved-env",
            ("spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "env"),
            [{"name": "MASTER_ADDR", "value": "x"}],
        ),
        ("zero-replicas", ("spec", "replicaSpecs", 0, "replicas"), 0),
        ("replicas-2^31", ("spec", "replicaSpecs", 0, "replicas"), 2**31),
        ("elastic-max-1e6", ("spec", "elastic", "maxReplicas"), 1_000_000),
        ("enabled-and-enable", ("spec", "torchrunConfig", "enable"), True),
    ],
    "DeepSpeedJob": [
        ("python-and-module", ("spec", "config", "run", "module"), ["m"]),
        ("no-program", ("spec", "config", "run"), {}),
        ("module-and-Module", ("spec", "config", "run"), {"module": ["a"], "Module": ["b"]}),
        ("custom-command-and-run", ("spec", "config", "customCommand"), "deepspeed train.py"),
        (
            "elastic-min-above-max",
            ("spec", "elastic"),
            {"enabled": True, "minReplicas": 5, "maxReplicas": 2},
        ),
        ("elastic-enabled-no-bounds", ("spec", "elastic"), {"enabled": True}),
        ("slots-0", ("spec", "config", "slotsPerWorker"), 0),
        ("slots-2^31", ("spec", "config", "slotsPerWorker"), 2**31),
        ("workers-0", ("spec", "worker", "replicas"), 0),
        ("workers-2^31", ("spec", "worker", "replicas"), 2**31),
        ("workers-1e5", ("spec", "worker", "replicas"), 100_000),
        ("other-args-hostfile", ("spec", "config", "otherArgs"), ["--hostfile=/x"]),
        (
            "reserved-volume",
            ("spec", "worker", "template", "spec", "volumes"),
            [{"name": "ssh-keys", "emptyDir": {}}],
        ),
        (
            "restart-policy-object",
            ("spec", "worker", "restartPolicy"),
            {"policy": "Never", "limit": 1},
        ),
    ],
    "ColossalAIJob": [
        ("two-workers", ("spec", "replicaSpecs", 0), {"type": "worker", "template": _TEMPLATE}),
        ("two-launchers", ("spec", "replicaSpecs", 1), {"type": "launcher", "template": _TEMPLATE}),
        ("no-worker", ("spec", "replicaSpecs"), [{"type": "launcher", "template": _TEMPLATE}]),
        ("launcher-2-replicas", ("spec", "replicaSpecs", 0, "replicas"), 2),
        ("script-shell", ("spec", "torchConfig", "script"), ["train.sh"]),
        ("script-m-only", ("spec", "torchConfig", "script"), ["-m"]),
        ("script-space", ("spec", "torchConfig", "script"), ["my train.py"]),
        ("script-m-file", ("spec", "torchConfig", "script"), ["-m", "pkg/train.py"]),
        ("script-unicode", ("spec", "torchConfig", "script"), ["tr\u0430in.py"]),
        ("extra-args-bad", ("spec", "torchConfig", "extraArgs"), ["max_restarts"]),
        ("ssh-relative", ("spec", "ssh", "authMountPath"), "root/.ssh"),
        ("type-other", ("spec", "replicaSpecs", 1, "type"), "ps"),
        ("workers-2^31", ("spec", "replicaSpecs", 1, "replicas"), 2**31),
        (
            "worker-no-container",
            ("spec", "replicaSpecs", 1, "template"),
            {"spec": {"containers": []}},
        ),
    ],
}


def _conflict_cases(kind: str, base: Json, emit: Emit) -> None:
    for label, path, value in _CONFLICTS[kind]:
        emit(f"conflict:{label}", set_at(base, path, value))


_ALIAS_BOMB = "  lol: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  l{i}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9)
)


def _yaml_cases(kind: str, base: Json) -> Iterator[tuple[str, bytes]]:
    """Mistakes of YAML itself: each case is a whole file."""
    text = dump(base)
    yield "yaml:duplicate-key", (text + "spec:\n  x: 1\n").encode()
    yield "yaml:duplicate-nested-key", with_raw(base, ("metadata", "name"), "a\n  name: b").encode()
    yield "yaml:alias-bomb", (text.replace("spec:\n", "spec:\n" + _ALIAS_BOMB, 1)).encode()
    yield (
        "yaml:self-reference",
        text.replace("spec:\n", "spec: &s\n  loop: *s\n", 1).encode(),
    )
    yield "yaml:unknown-anchor", text.replace("spec:\n", "spec:\n  x: *nope\n", 1).encode()
    merge = text.replace(
        "metadata:\n", "x-common: &common\n  name: merged\nmetadata:\n  <<: *common\n", 1
    )
    yield "yaml:merge-key", merge.replace("  name: base\n", "", 1).encode()
    yield (
        "yaml:anchor-reuse",
        text.replace("  name: base\n", "  name: &n base\n  labels: {a: *n}\n").encode(),
    )
    yield "yaml:tab-indent", text.replace("\n  ", "\n\t", 1).encode()
    yield "yaml:unclosed-flow", (text + "extra: [1, 2\n").encode()
    yield "yaml:bad-indent", text.replace("\nspec:\n  ", "\nspec:\n   ", 1).encode()
    yield "yaml:binary-tag", with_raw(base, ("metadata", "name"), "!!binary YmFzZQ==").encode()
    yield "yaml:int-tag-word", with_raw(base, ("metadata", "name"), "!!int x").encode()
    yield "yaml:custom-tag", with_raw(base, ("metadata", "name"), "!name base").encode()
    yield "yaml:set-tag", text.replace("spec:\n", "spec: !!set\n", 1).encode()
    yield "yaml:null-key", (text.rstrip("\n") + "\n~: 1\n").encode()
    yield "yaml:list-key", (text + "? [a]\n: 1\n").encode()
    yield "yaml:bool-key", (text + "spec2: 1\non: 2\n").encode()
    yield "yaml:nan", with_raw(base, ("metadata", "labels"), "{a: .nan}").encode()
    yield "yaml:inf-value", with_raw(base, ("metadata", "name"), ".inf").encode()
    yield "yaml:1e400", with_raw(base, ("metadata", "name"), "1e400").encode()
    yield "yaml:10^30-literal", with_raw(base, ("metadata", "name"), "1" + "0" * 30).encode()
    for template in _template_paths(kind):
        for depth in (1000, 10_001):
            yield (
                f"yaml:flow-depth-{depth}",
                with_raw(base, (*template, "spec", "deep"), "[" * depth + "]" * depth).encode(),
            )
        yield (
            "yaml:block-depth-200",
            with_raw(base, (*template, "spec", "deep"), _block_nesting(200)).encode(),
        )
    yield (
        "yaml:deep-in-typed-field",
        with_raw(base, ("spec", "runMode"), "[" * 2000 + "]" * 2000).encode(),
    )
    yield (
        "yaml:huge-string-1MiB",
        _set_text(base, ("metadata", "annotations"), {"a": "x" * (1 << 20)}),
    )
    yield (
        "yaml:huge-string-2MiB",
        _set_text(base, ("metadata", "annotations"), {"a": "x" * (2 << 20)}),
    )
    env = (*_template_paths(kind)[0], "spec", "containers", 0, "env", 0, "value")
    yield "yaml:huge-env-2MiB", _set_text(base, env, "x" * (2 << 20))
    yield (
        "yaml:huge-list",
        _set_text(
            base, ("spec", "runMode", "debug", "replicaSpecs", 0, "command"), ["x"] * 100_000
        ),
    )


def _set_text(base: Json, path: Path, value: Json) -> bytes:
    return json.dumps(set_at(base, path, value)).encode()


def _block_nesting(depth: int) -> str:
    lines = []
    for i in range(depth):
        lines.append("  " * i + "- ")
    return "\n" + "\n".join(line + ("x" if i == depth - 1 else "") for i, line in enumerate(lines))


def _encoding_cases(base: Json) -> Iterator[tuple[str, bytes]]:
    text = dump(base)
    yield "encoding:utf-16-bom", text.encode("utf-16")
    yield "encoding:utf-16-be-bom", b"\xfe\xff" + text.encode("utf-16-be")
    yield "encoding:utf-16-no-bom", text.encode("utf-16-le")
    yield "encoding:utf-8-bom", b"\xef\xbb\xbf" + text.encode()
    yield (
        "encoding:invalid-utf-8-value",
        text.replace("name: base", "name: base\n  labels: {a: b\xff}").encode("latin-1"),
    )
    yield "encoding:invalid-utf-8-start", b"\xff\xfe\xfd" + text.encode()
    yield (
        "encoding:latin-1",
        text.replace("name: base", "name: base\n  annotations: {a: caf\xe9}").encode("latin-1"),
    )
    yield "encoding:raw-nul", text.replace("name: base", "name: ba\x00se").encode()
    yield "encoding:crlf", text.replace("\n", "\r\n").encode()
    yield "encoding:control-char", text.replace("name: base", "name: ba\x07se").encode()
    yield "file:empty", b""
    yield "file:comments-only", b"# nothing here\n"
    yield "file:separator-only", b"---\n"
    yield "file:list", b"- a\n- b\n"
    yield "file:scalar", b"hello\n"
    yield "file:two-jobs", (text + "---\n" + text.replace("name: base", "name: base2")).encode()
    yield (
        "file:two-jobs-one-bad",
        (text + "---\n" + text.replace("name: base", "name: Base2")).encode(),
    )
    yield "file:job-and-empty-docs", ("---\n---\n" + text + "---\n").encode()
    yield "file:json", json.dumps(base).encode()
    yield "file:json-duplicate-key", json.dumps(base)[:-1].encode() + b', "spec": {}}'
    yield (
        "file:json-float-int",
        json.dumps(base).replace('"replicas": 2', '"replicas": 2.0').encode(),
    )
    yield "file:json-truncated", json.dumps(base)[:-5].encode()


def cases() -> list[Case]:
    """The whole corpus, in a fixed order."""
    out: list[Case] = []
    batch = 0

    for kind, base in BASES.items():
        prefix = f"{kind}:"

        def emit(label: str, doc: Json | str, *, _kind: str = kind) -> None:
            nonlocal batch
            name = f"fz-{batch:05d}"
            if isinstance(doc, str):
                text = doc.replace("name: base", f"name: {name}", 1)
                out.append(Case(f"{_kind}:{label}", text.encode(), _kind, True, name))
                batch += 1
                return
            if isinstance(doc, dict) and _get(doc, ("metadata", "name")) == "base":
                doc = set_at(doc, ("metadata", "name"), name)
                out.append(Case(f"{_kind}:{label}", dump(doc).encode(), _kind, True, name))
                batch += 1
            else:
                out.append(Case(f"{_kind}:{label}", dump(doc).encode(), _kind))

        emit("base", base)
        _field_cases(kind, base, emit)
        _template_cases(kind, base, emit)
        _conflict_cases(kind, base, emit)

        def emit_individual(label: str, doc: Json, *, _kind: str = kind) -> None:
            out.append(Case(f"{_kind}:{label}", dump(doc).encode(), _kind))

        _top_level_cases(kind, base, emit_individual)
        _metadata_cases(kind, base, emit_individual)
        for label, data in _yaml_cases(kind, base):
            out.append(Case(prefix + label, data, kind))
    for label, data in _encoding_cases(BASES["GenericJob"]):
        out.append(Case(f"GenericJob:{label}", data, "GenericJob"))
    out.append(Case("file:missing", b"", special="missing"))
    out.append(Case("file:directory", b"", special="directory"))
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return out
