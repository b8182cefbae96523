"""The admission tier of the conformance kit: a plugin's CRDs on a real API server, and the
examples submitted to it as `kubectl apply --dry-run=server` submits them.

The API server is the only faithful judge of a CRD: it compiles the CEL rules
(`x-kubernetes-validations`) and estimates their cost when the CRD is created, and validates a
job against the schema, its formats and its rules on every create. The tier creates each CRD of
the plugin once per kit session (an uncompilable rule is reported with the rule, the field it
sits on and the compiler's words), dry-runs every example in a namespace of its own, and, on a
cluster it did not start, deletes the CRDs it created when the session ends (it refuses to
touch a CRD that was there before: that cluster's jobs would go with it).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t9kjobs.testing.apiserver import ApiServer, ApiServerError, local_api_server
from t9kjobs.testing.subject import ContractViolation

__all__ = ["NAMESPACE", "AdmissionTier", "DryRun", "field_of_schema_path"]

NAMESPACE = "t9kjobs-conformance"
_TIMEOUT = 60
# `...openAPIV3Schema.properties[spec].properties[worker].items.x-kubernetes-validations[0].rule`
_SCHEMA_PATH = re.compile(
    r"openAPIV3Schema((?:\.properties\[[^\]]+\]|\.items|\.additionalProperties)*)"
    r"\.x-kubernetes-validations\[(\d+)\]\.(\w+)"
)


@dataclass(frozen=True)
class DryRun:
    """The API server's answer to a create: admitted (with the object it would store) or not."""

    admitted: bool
    message: str
    stored: dict[str, Any] | None = None


def field_of_schema_path(path: str) -> str:
    """`.properties[spec].properties[workers].items` -> `spec.workers[*]` (a job's field path)."""
    out = ""
    for part in re.findall(r"\.properties\[[^\]]+\]|\.items|\.additionalProperties", path):
        if part == ".items":
            out += "[*]"
        elif part == ".additionalProperties":
            out += ".*"
        else:
            out += "." + part[len(".properties[") : -1]
    return out.lstrip(".") or "<root>"


def _rule_at(schema: dict[str, Any], path: str, index: int) -> dict[str, Any]:
    node = schema
    for part in re.findall(r"\.properties\[([^\]]+)\]|\.(items|additionalProperties)", path):
        node = node["properties"][part[0]] if part[0] else node[part[1]]
    return dict(node["x-kubernetes-validations"][index])


def explain_crd_refusal(crd: dict[str, Any], message: str) -> str:
    """The API server's refusal of a CRD, with each broken CEL rule and the field it is on."""
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    lines = []
    for match in _SCHEMA_PATH.finditer(message):
        where = field_of_schema_path(match.group(1))
        try:
            rule = _rule_at(schema, match.group(1), int(match.group(2)))
        except (KeyError, IndexError, TypeError):
            continue
        lines.append(f"  the CEL rule on {where}: {rule.get(match.group(3), rule)!r}")
    if not lines:
        return f"the API server refuses the CRD {crd['metadata']['name']}:\n{message}"
    return (
        f"the API server refuses the CRD {crd['metadata']['name']}: a CEL rule"
        " (x-kubernetes-validations, from the models' json_schema_extra) does not compile or"
        " costs too much:\n" + "\n".join(dict.fromkeys(lines)) + f"\nthe server says:\n{message}"
    )


class AdmissionTier:
    """One API server per kit session (started at first use) and the CRDs created on it."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        self._kubeconfig = kubeconfig
        self._stack = ExitStack()
        self._server: ApiServer | None = None
        self._error: str | None = None
        self._crds: dict[str, str | None] = {}  # CRD name -> why it could not be created
        self._created: list[str] = []
        self._cache = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))

    @property
    def origin(self) -> str:
        return self._server.origin if self._server else "not started"

    def server(self) -> ApiServer:
        if self._server is None and self._error is None:
            try:
                self._server = self._stack.enter_context(local_api_server(self._kubeconfig))
                self._namespace()
            except (ApiServerError, ContractViolation, OSError) as exc:
                self._error = str(exc)
        if self._server is None:
            raise ContractViolation(f"admission tier: {self._error}")
        return self._server

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        server = self.server()
        argv = [str(server.kubectl), "--kubeconfig", str(server.kubeconfig)]
        return subprocess.run(
            [*argv, f"--cache-dir={self._cache}", f"--request-timeout={_TIMEOUT}s", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT * 2,
            check=False,
        )

    def _namespace(self) -> None:
        done = self.kubectl("create", "namespace", NAMESPACE)
        if done.returncode != 0 and "AlreadyExists" not in done.stderr:
            raise ContractViolation(f"cannot create the namespace {NAMESPACE}: {done.stderr}")

    def install(self, crd: dict[str, Any]) -> None:
        """Create the CRD (once a session) and wait until it is served; a violation if not."""
        name = crd["metadata"]["name"]
        if name not in self._crds:
            self._crds[name] = self._create(crd)
        problem = self._crds[name]
        if problem is not None:
            raise ContractViolation(problem)

    def _create(self, crd: dict[str, Any]) -> str | None:
        name = crd["metadata"]["name"]
        if self.kubectl("get", f"crd/{name}", "-o", "name").returncode == 0:
            return (
                f"the CRD {name} already exists on the cluster of {self.origin}: the kit"
                " creates the CRDs it checks and does not replace one it did not create (the"
                " cluster's jobs of that kind would go with it); delete it, or let the kit start"
                " an API server of its own (no --t9kjobs-kubeconfig)"
            )
        done = self.kubectl("create", "-f", "-", stdin=json.dumps(crd))
        if done.returncode != 0:
            return explain_crd_refusal(crd, done.stderr.strip())
        self._created.append(name)
        waited = self.kubectl(
            "wait", "--for=condition=Established", f"--timeout={_TIMEOUT}s", f"crd/{name}"
        )
        if waited.returncode != 0:
            return f"the CRD {name} was created but is not served: {waited.stderr.strip()}"
        return None

    def dry_run(self, manifest: dict[str, Any]) -> DryRun:
        """`kubectl create --dry-run=server` of the manifest, in the tier's namespace."""
        body = {**manifest, "metadata": {**(manifest.get("metadata") or {})}}
        body["metadata"]["namespace"] = NAMESPACE
        done = self.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(body)
        )
        if done.returncode != 0:
            return DryRun(False, done.stderr.strip())
        return DryRun(True, "", json.loads(done.stdout))

    def close(self) -> None:
        """Delete the CRDs created on a cluster the kit did not start; stop the one it did."""
        try:
            if self._server is not None and not self._server.started:
                for name in reversed(self._created):
                    self.kubectl("delete", f"crd/{name}", "--wait=true", f"--timeout={_TIMEOUT}s")
        finally:
            self._stack.close()


def _names(message: str, path: str) -> bool:
    """Whether an API server message is about `path` (not merely about a field inside it)."""
    return re.search(r"(?<![\w.])" + re.escape(path) + r"(?![\w.\[])", message) is not None


def refusal_names(dry_run: DryRun, paths: tuple[str, ...]) -> list[str]:
    """The paths of `paths` the refusal does not name (all of them when it was admitted)."""
    if dry_run.admitted:
        return list(paths)
    return [p for p in paths if not _names(dry_run.message, p)]


def pruned_fields(sent: Any, stored: Any, path: str) -> list[str]:
    """Fields written in `sent` that the API server dropped from `stored` (nulls aside)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        out = []
        for key, value in sent.items():
            if value is None:
                continue
            if key not in stored:
                out.append(f"{path}.{key}")
            else:
                out += pruned_fields(value, stored[key], f"{path}.{key}")
        return out
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        return [
            p
            for i, (a, b) in enumerate(zip(sent, stored, strict=True))
            for p in pruned_fields(a, b, f"{path}[{i}]")
        ]
    return []
