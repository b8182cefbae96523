"""Manifests of every kind around one pod template, and validate's refusals of them by field path:
the template refusal tables (admission and validate) share them."""

from __future__ import annotations

import copy

from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_VERSION
from t9kjobs.vocabulary import Obj

CONTAINER = {"name": "main", "image": "busybox"}


def template(spec: Obj | None = None, **metadata: Obj) -> Obj:
    out: Obj = {"spec": {"containers": [CONTAINER], **(spec or {})}}
    if metadata:
        out["metadata"] = metadata
    return out


def generic(tpl: Obj) -> Obj:
    return manifest("GenericJob", {"replicaSpecs": [{"type": "worker", "template": tpl}]})


def pytorch(tpl: Obj) -> Obj:
    return manifest(
        "PyTorchTrainingJob",
        {
            "replicaSpecs": [
                {"type": "master", "template": template()},
                {"type": "worker", "template": tpl},
            ]
        },
    )


def deepspeed(tpl: Obj) -> Obj:
    return manifest(
        "DeepSpeedJob", {"config": {"run": {"python": ["train.py"]}}, "worker": {"template": tpl}}
    )


def colossalai(tpl: Obj, **spec: Obj) -> Obj:
    return manifest(
        "ColossalAIJob",
        {
            "torchConfig": {"script": ["train.py"]},
            "replicaSpecs": [{"type": "worker", "template": tpl}],
            **spec,
        },
    )


# Where each kind's (second, for PyTorch) template is.
TEMPLATE_PATH = {
    "GenericJob": "spec.replicaSpecs[0].template",
    "PyTorchTrainingJob": "spec.replicaSpecs[1].template",
    "DeepSpeedJob": "spec.worker.template",
    "ColossalAIJob": "spec.replicaSpecs[0].template",
}


BUILDERS = {
    "GenericJob": generic,
    "PyTorchTrainingJob": pytorch,
    "DeepSpeedJob": deepspeed,
    "ColossalAIJob": colossalai,
}


def problems(manager: PluginManager, doc: Obj) -> dict[str, str]:
    """validate's refusal of the manifest's schema and rules: path -> message; {} if none."""
    try:
        parse_job(copy.deepcopy(doc), manager)
    except JobError as exc:
        return {p.path: p.message for p in exc.problems}
    return {}


SECRET = "victim-ssh"


HOSTFILE = "victim-hostfile"

# (case, pod spec, the path under the template's spec, what the message begins with)
FOREIGN: list[tuple[str, Obj, str, str]] = [
    (
        "secret-volume",
        {"volumes": [{"name": "keys", "secret": {"secretName": SECRET}}]},
        "volumes[0].secret.secretName",
        "`secretName` names a Secret ending in `-ssh`",
    ),
    (
        "configmap-volume",
        {"volumes": [{"name": "hosts", "configMap": {"name": HOSTFILE}}]},
        "volumes[0].configMap.name",
        "`name` names a ConfigMap ending in `-hostfile`",
    ),
    (
        "stacks-volume",
        {"volumes": [{"name": "stacks", "configMap": {"name": "victim-stacks"}}]},
        "volumes[0].configMap.name",
        "`name` names a ConfigMap ending in `-hostfile` or `-stacks`",
    ),
    (
        "projected-secret",
        {"volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": SECRET}}]}}]},
        "volumes[0].projected.sources[0].secret.name",
        "`name` names a Secret ending in `-ssh`",
    ),
    (
        "projected-configmap",
        {"volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": HOSTFILE}}]}}]},
        "volumes[0].projected.sources[0].configMap.name",
        "`name` names a ConfigMap ending in `-hostfile`",
    ),
    (
        "env-secret-key",
        {
            "containers": [
                CONTAINER
                | {
                    "env": [
                        {
                            "name": "KEY",
                            "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "id_rsa"}},
                        }
                    ]
                }
            ]
        },
        "containers[0].env[0].valueFrom.secretKeyRef.name",
        "`name` names a Secret ending in `-ssh`",
    ),
    (
        "env-from-configmap",
        {"initContainers": [{**CONTAINER, "envFrom": [{"configMapRef": {"name": HOSTFILE}}]}]},
        "initContainers[0].envFrom[0].configMapRef.name",
        "`name` names a ConfigMap ending in `-hostfile`",
    ),
]


def manifest(kind: str, spec: Obj) -> Obj:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "job"}, "spec": spec}
