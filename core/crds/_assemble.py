"""The CustomResourceDefinition of each kind around its spec and status schemas, and its file.

Names, version, subresources (status, and scale where the kind declares a replica count) and
printer columns; the YAML text and file name `t9kjobs crds` writes. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from t9kjobs.crds._common import CrdError
from t9kjobs.crds._convert import openapi_schema
from t9kjobs.kinds import KindInfo
from t9kjobs.manager import PluginManager
from t9kjobs.models import API_GROUP, API_VERSION, MANAGED_BY_RULE, NAME_RULE
from t9kjobs.vocabulary import Obj

_VERSION = API_VERSION.split("/", 1)[1]


def _lookup(schema: Obj, dotted: str) -> Obj | None:
    node: Obj | None = schema
    for part in dotted.split("."):
        if node is None:
            return None
        node = (node.get("properties") or {}).get(part)
    return node


def _scale(info: KindInfo, spec: Obj) -> Obj:
    relative = info.scale_spec_path or ""
    relative = relative.removeprefix(".").removeprefix("spec.")
    target = _lookup(spec, relative)
    if target is None or target.get("type") != "integer":
        raise CrdError(
            f"{info.kind}: scale_spec_path {info.scale_spec_path!r} is not an integer field of"
            " the spec"
        )
    return {
        "specReplicasPath": f".spec.{relative}",
        # Pods running now: what `kubectl get --subresource=scale` and autoscalers compare with.
        "statusReplicasPath": ".status.aggregate.running",
        # The job's pods, as a label selector string: a HorizontalPodAutoscaler refuses a
        # scale subresource without one.
        "labelSelectorPath": ".status.selector",
    }


def printer_columns() -> list[Obj]:
    """The columns of `kubectl get`: JSONPaths into what the operator already wrote, so the API
    server only reads them when it builds a table (docs/benchmarks.md measures the cost).
    Priority 1 columns show with `-o wide`."""

    def column(name: str, kind: str, path: str, description: str, priority: int = 0) -> Obj:
        out: Obj = {"name": name, "type": kind, "description": description, "jsonPath": path}
        if priority:
            out["priority"] = priority
        return out

    return [
        column("Phase", "string", ".status.phase", "The job's phase."),
        column("Replicas", "string", ".status.ready", "Replicas running / replicas of the job."),
        column(
            "Restarts",
            "integer",
            ".status.backoffCount",
            "Restarts charged to backoffLimit, all replicas.",
        ),
        column(
            "Reason",
            "string",
            ".status.reason",
            "Why the job failed, why it waits (its queue, its gang), or the failure a restart"
            " recovers from.",
        ),
        column("Age", "date", ".metadata.creationTimestamp", "Since the job was created."),
        column(
            "Infra",
            "integer",
            ".status.infrastructureRestartCount",
            "Restarts charged to spec.recoveryPolicy.infrastructureRestartLimit, all replicas.",
            1,
        ),
        column("Mode", "string", ".status.runMode", "Immediate, Debug or Pause.", 1),
        column(
            "Progress",
            "number",
            ".status.progress.percent",
            "Training progress in percent, as the program reports it.",
            1,
        ),
        column(
            "Queue",
            "string",
            ".spec.scheduler.t9kScheduler.queue",
            "The T9k scheduler's queue, if the job uses it.",
            1,
        ),
        column("Started", "date", ".status.startTime", "Since the job started.", 1),
        column("Finished", "date", ".status.completionTime", "Since the job finished.", 1),
    ]


def crd_for(info: KindInfo) -> Obj:
    """The CustomResourceDefinition of one kind."""
    spec = openapi_schema(info.spec_model)
    spec["description"] = (
        spec.get("description") or f"The desired state of the {info.kind}."
    ).strip()
    status = openapi_schema(info.status_model)
    status["description"] = f"The observed state of the {info.kind}, written by the operator."
    description = info.description or spec["description"]
    subresources: Obj = {"status": {}}
    if info.scale_spec_path:
        subresources["scale"] = _scale(info, spec)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{info.plural}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "t9k-jobs"},
        },
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                **({"shortNames": list(info.short_names)} if info.short_names else {}),
                **({"categories": list(info.categories)} if info.categories else {}),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": _VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "description": description,
                            "type": "object",
                            "properties": {
                                "apiVersion": {
                                    "description": "The versioned schema of this"
                                    f" representation of an object: {API_VERSION}.",
                                    "type": "string",
                                },
                                "kind": {
                                    "description": "The REST resource this object represents:"
                                    f" {info.kind}.",
                                    "type": "string",
                                },
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            "required": ["spec"],
                            # CEL reads metadata.name at the root only, and both specs
                            # there (managedBy's immutability, set or not).
                            "x-kubernetes-validations": [
                                dict(NAME_RULE),
                                dict(MANAGED_BY_RULE),
                            ],
                        }
                    },
                    "subresources": subresources,
                    "additionalPrinterColumns": printer_columns(),
                }
            ],
        },
    }


def crd_filename(info: KindInfo) -> str:
    """`batch.tensorstack.dev_<plural>.yaml`, as controller-gen names CRD files."""
    return f"{API_GROUP}_{info.plural}.yaml"


def crd_yaml(crd: Obj, plugin: str) -> str:
    """One CRD as the text of its file, with a header naming its source."""
    header = (
        f"# Generated by `t9kjobs crds` (make crds) from the {plugin!r} plugin's models."
        " Do not edit.\n"
    )
    # Block style, keys in the order built, lines folded at a fixed width: stable diffs.
    body = yaml.safe_dump(crd, sort_keys=False, width=100, allow_unicode=True)
    return header + "---\n" + body


def crds(manager: PluginManager) -> Iterator[tuple[str, str]]:
    """(file name, file text) of every kind the manager's plugins serve, sorted by file name."""
    kinds = sorted(manager.kinds.values(), key=crd_filename)
    for info in kinds:
        yield crd_filename(info), crd_yaml(crd_for(info), manager.owner_of(info.kind))
