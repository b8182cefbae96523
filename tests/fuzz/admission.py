"""The API server's verdict on every case: `kubectl create --dry-run=server`, as a user submits.

kubectl reads the file (its YAML decoding is part of the verdict), the API server decodes,
validates against the CRD schema and its CEL rules and admits or refuses, and nothing is stored.
Batchable cases go several hundred to a `kubectl create` (kubectl goes on past a refused object
and names each admitted one on stdout); the others, one `kubectl create` each.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.generator import Case

__all__ = ["ServerVerdict", "server_verdicts"]

BATCH = 400
_NAME = re.compile(r"\b(fz-\d{5})\b")


@dataclass(frozen=True)
class ServerVerdict:
    admitted: bool
    message: str


def _kubectl(
    kubectl: Path, kubeconfig: Path, namespace: str, path: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(kubectl),
            "--kubeconfig",
            str(kubeconfig),
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-o",
            "name",
            "-f",
            path,
        ],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=600,
        check=False,
    )


def _batch(
    chunk: list[Case], kubectl: Path, kubeconfig: Path, namespace: str, tmp: Path
) -> dict[str, ServerVerdict]:
    path = tmp / "batch.yaml"
    path.write_bytes(b"".join(b"---\n" + c.text for c in chunk))
    done = _kubectl(kubectl, kubeconfig, namespace, str(path))
    admitted = {m.group(1) for line in done.stdout.splitlines() if (m := _NAME.search(line))}
    messages: dict[str, str] = {}
    for line in done.stderr.splitlines():
        match = _NAME.search(line)
        if match:
            messages.setdefault(match.group(1), line)
    out = {}
    for case in chunk:
        assert case.name is not None
        ok = case.name in admitted
        out[case.id] = ServerVerdict(ok, "" if ok else messages.get(case.name, done.stderr[-500:]))
    return out


def _single(
    case: Case, kubectl: Path, kubeconfig: Path, namespace: str, tmp: Path
) -> ServerVerdict:
    if case.special == "missing":
        path = str(tmp / "does-not-exist.yaml")
    elif case.special == "directory":
        path = str(tmp / "empty-dir")
        Path(path).mkdir(exist_ok=True)
    else:
        path = str(tmp / "case.yaml")
        Path(path).write_bytes(case.text)
    done = _kubectl(kubectl, kubeconfig, namespace, path)
    ok = done.returncode == 0 and bool(done.stdout.strip())
    return ServerVerdict(ok, done.stderr.strip()[-2000:])


def server_verdicts(
    cases: Iterable[Case], kubectl: Path, kubeconfig: Path, namespace: str
) -> dict[str, ServerVerdict]:
    """Case id -> whether kubectl and the API server admit it (and why not)."""
    cases = list(cases)
    out: dict[str, ServerVerdict] = {}
    with tempfile.TemporaryDirectory(prefix="t9kjobs-admission-") as tmp:
        batchable = [c for c in cases if c.batchable]
        for start in range(0, len(batchable), BATCH):
            chunk = batchable[start : start + BATCH]
            out.update(_batch(chunk, kubectl, kubeconfig, namespace, Path(tmp)))
        for case in cases:
            if not case.batchable:
                out[case.id] = _single(case, kubectl, kubeconfig, namespace, Path(tmp))
    return out
