"""Make a job's pods run under KWOK: the `sim.t9kjobs.dev/*` annotations on every pod template
(run S seconds, then exit with code N), and no PersistentVolumeClaim volumes (a simulated
cluster has no storage, and a pod waiting for a claim never starts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t9kjobs.vocabulary import Obj

__all__ = ["SIM_EXIT_CODE", "SIM_RUN_SECONDS", "simulate", "without_claims"]

SIM_EXIT_CODE = "sim.t9kjobs.dev/exit-code"
SIM_RUN_SECONDS = "sim.t9kjobs.dev/run-seconds"


def _each_template(manifest: Obj, visit: Callable[[Obj], None]) -> None:
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                visit(template)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest.get("spec"))


def simulate(manifest: Obj, exit_code: int = 0, seconds: int = 2) -> Obj:
    """Annotate every pod template so its pods run `seconds`, then exit with `exit_code`."""

    def annotate(template: Obj) -> None:
        notes = template.setdefault("metadata", {}).setdefault("annotations", {})
        notes[SIM_EXIT_CODE] = str(exit_code)
        notes[SIM_RUN_SECONDS] = str(seconds)

    _each_template(manifest, annotate)
    return manifest


def without_claims(manifest: Obj) -> Obj:
    """Drop PersistentVolumeClaim volumes, and the mounts of them, from every pod template."""

    def strip(template: Obj) -> None:
        pod = template["spec"]
        claims = {v["name"] for v in pod.get("volumes") or [] if "persistentVolumeClaim" in v}
        if not claims:
            return
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in claims]
        for c in [*pod.get("containers", []), *pod.get("initContainers", [])]:
            c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m["name"] not in claims]

    _each_template(manifest, strip)
    return manifest
