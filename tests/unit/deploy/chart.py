"""The Helm chart rendered for tests: helm installed when missing (hack/install-tools.sh), the
chart rendered with values, and lookups in what it renders."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.cli.main import _parser
from t9kjobs.vocabulary import Obj
from tests.repo import REPO

CHART = REPO / "deploy" / "helm" / "t9k-jobs"


RELEASE = "t9k-jobs"


NAMESPACE = "t9k-system"


def install_tool(name: str) -> Path:
    """The path of a tool of hack/install-tools.sh, installed first when missing."""
    out = subprocess.run(
        ["bash", str(REPO / "hack" / "install-tools.sh"), name],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout
    return Path(out.strip())


# The chart installs only once told what to serve: every namespace, here (unless a test says).
CLUSTER_WIDE = {"clusterWide": True}


def render_chart(
    helm: Path, values: Obj | None = None, namespace: str = NAMESPACE, release: str = RELEASE
) -> list[Obj]:
    """The chart's objects as `helm template` renders them (CRDs excluded)."""
    proc = subprocess.run(
        [str(helm), "template", release, str(CHART), "--namespace", namespace, "--values", "-"],
        input=yaml.safe_dump(values or {}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def by_kind(objects: list[Obj], kind: str) -> list[Obj]:
    """The objects of `kind`, but the node reader's ClusterRole and binding (lostNodes, on by
    default: test_chart_lost_nodes.py): the tests here are about the operator's other rights."""
    return [
        o
        for o in objects
        if o["kind"] == kind and not o["metadata"]["name"].endswith("-node-reader")
    ]


def one(objects: list[Obj], kind: str) -> Obj:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"{len(found)} {kind}(s)"
    return found[0]


def named(objects: list[Obj], kind: str, suffix: str) -> Obj:
    """The one object of `kind` whose name ends with `-suffix`."""
    found = [o for o in by_kind(objects, kind) if o["metadata"]["name"].endswith(f"-{suffix}")]
    assert len(found) == 1, f"{len(found)} {kind}(s) named *-{suffix}"
    return found[0]


def container(objects: list[Obj]) -> Obj:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def operator_args(objects: list[Obj]) -> Any:
    """The Deployment's args as `t9kjobs operator` parses them (unknown flags fail)."""
    return _parser().parse_args(["operator", *container(objects)["args"]])
