"""The admission tier of the conformance kit: a plugin's CRDs on a real API server, and the
examples submitted to it as `kubectl apply --dry-run=server` submits them.

The API server is the only faithful judge of a CRD: it compiles the CEL rules
(`x-kubernetes-validations`) and estimates their cost when the CRD is created, and validates a
job against the schema, its formats and its rules on every create. The tier talks to it with
the operator's own client (`t9kjobs.kube.transport`), as kubectl would: a dry-run create
with strict field validation is what `kubectl apply --dry-run=server` sends.

The tier creates each CRD of the plugin once per kit session (an uncompilable rule is reported
with the rule, the field it sits on and the compiler's words), dry-runs every example in a
namespace of its own, and, on a cluster it did not start, deletes the CRDs it created when the
session ends (it refuses to touch a CRD that was there before: that cluster's jobs would go with
it).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from t9kjobs.kube.transport import ApiError, Transport, load_configuration
from t9kjobs.testing.harness.apiserver import ApiServer, ApiServerError, local_api_server
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "NAMESPACE",
    "AdmissionTier",
    "DryRun",
    "explain_crd_refusal",
    "field_of_schema_path",
    "pruned_fields",
    "refusal_names",
]

NAMESPACE = "t9kjobs-conformance"
_TIMEOUT = 60
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
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


def _problems(error: ApiError) -> str:
    """The API server's refusal as kubectl prints it: the message, then a line per cause."""
    body = error.body if isinstance(error.body, dict) else {}
    causes = (body.get("details") or {}).get("causes") or []
    lines = [f"* {c.get('field', '')}: {c.get('message', '')}" for c in causes if c.get("field")]
    message = str(body.get("message") or error)
    head, invalid, _ = message.partition(" is invalid: ")
    if lines and invalid:  # the message repeats the causes on one line
        message = f"{head} is invalid:"
    return "\n".join([message, *lines])


class AdmissionTier:
    """One API server per kit session (started at first use) and the CRDs created on it."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        self._kubeconfig = kubeconfig
        self._stack = contextlib.ExitStack()
        self._server: ApiServer | None = None
        self._transport: Transport | None = None
        self._error: str | None = None
        self._crds: dict[str, str | None] = {}  # CRD name -> why it could not be created
        self._plurals: dict[tuple[str, str], str] = {}  # (group, kind) -> plural
        self._created: list[str] = []
        self._expected: list[dict[str, Any]] = []

    @property
    def origin(self) -> str:
        """Which API server the session uses, for the report's summary."""
        if self._server is not None:
            return self._server.origin
        return "none (see the failures)" if self._error else "not used (no contract needed it)"

    def api(self) -> Transport:
        """The session's API server (started on the first call); a violation if none."""
        if self._transport is None and self._error is None:
            try:
                self._server = self._stack.enter_context(local_api_server(self._kubeconfig))
                self._transport = Transport(load_configuration(str(self._server.kubeconfig)))
                self._namespace(self._transport)
            except ApiServerError as exc:
                self._error = str(exc)
            except (ApiError, OSError, ValueError) as exc:
                self._error = f"the admission tier's API server ({self.origin}) fails: {exc}"
        if self._transport is None:
            raise ContractViolation(str(self._error))
        return self._transport

    @staticmethod
    def _namespace(api: Transport) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        try:
            api.request("POST", "/api/v1/namespaces", body=body)
        except ApiError as exc:
            if exc.reason != "AlreadyExists":
                raise

    def expect(self, crds: list[dict[str, Any]]) -> None:
        """CRDs the session will need: installed with the first ones asked for."""
        self._expected += crds

    def install(self, crds: list[dict[str, Any]]) -> None:
        """Create the CRDs not created yet this session (and those expected), wait until each
        is served, and send each kind a first request (in parallel: a new kind's first create
        takes the server about two seconds)."""
        wanted = {c["metadata"]["name"]: c for c in [*self._expected, *crds]}
        self._expected = []
        new = [c for name, c in wanted.items() if name not in self._crds]
        for crd in new:
            self._crds[crd["metadata"]["name"]] = self._create(crd)
        ready = [c for c in new if self._crds[c["metadata"]["name"]] is None]
        with ThreadPoolExecutor(max_workers=max(1, len(ready))) as pool:
            list(pool.map(self._first_request, ready))

    def problem(self, crd: dict[str, Any]) -> str | None:
        """Why the CRD could not be created and served (after `install`), or None."""
        return self._crds.get(crd["metadata"]["name"], "the CRD was not installed")

    def _first_request(self, crd: dict[str, Any]) -> None:
        spec = crd["spec"]
        manifest = {
            "apiVersion": f"{spec['group']}/{spec['versions'][0]['name']}",
            "kind": spec["names"]["kind"],
            "metadata": {"name": "t9kjobs-conformance-warm-up"},
        }
        self.dry_run(manifest)

    def _create(self, crd: dict[str, Any]) -> str | None:
        api, name = self.api(), crd["metadata"]["name"]
        try:
            api.request("GET", f"{_CRDS}/{name}")
        except ApiError as exc:
            if exc.status != 404:
                return f"cannot read the CRD {name}: {exc}"
        else:
            return (
                f"the CRD {name} already exists on the cluster of {self.origin}: the kit"
                " creates the CRDs it checks and does not replace one it did not create (the"
                " cluster's jobs of that kind would go with it); delete it, or let the kit start"
                " an API server of its own (no --t9kjobs-kubeconfig)"
            )
        try:
            api.request("POST", _CRDS, body=crd)
        except ApiError as exc:
            return explain_crd_refusal(crd, _problems(exc))
        self._created.append(name)
        spec = crd["spec"]
        version = spec["versions"][0]["name"]
        plural = spec["names"]["plural"]
        self._plurals[(spec["group"], spec["names"]["kind"])] = plural
        served = f"/apis/{spec['group']}/{version}/namespaces/{NAMESPACE}/{plural}"
        if not _poll(lambda: _answers(api, served)):
            return f"the CRD {name} was created but {served} is not served after {_TIMEOUT}s"
        return None

    def dry_run(self, manifest: dict[str, Any]) -> DryRun:
        """A create of the manifest in the tier's namespace, as `kubectl apply
        --dry-run=server` sends it (nothing stored; unknown fields refused, not pruned)."""
        group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
        plural = self._plurals.get((group, str(manifest.get("kind"))))
        if plural is None:
            raise ContractViolation(f"no CRD of {manifest.get('kind')} in {group} was installed")
        body = {**manifest, "metadata": {**(manifest.get("metadata") or {})}}
        body["metadata"]["namespace"] = NAMESPACE
        path = f"/apis/{group}/{version}/namespaces/{NAMESPACE}/{plural}"
        query = {"dryRun": "All", "fieldValidation": "Strict"}
        try:
            stored = self.api().request("POST", path, query=query, body=body)
        except ApiError as exc:
            return DryRun(False, _problems(exc))
        return DryRun(True, "", stored)

    def close(self) -> None:
        """Delete the CRDs created on a cluster the kit did not start; stop the one it did."""
        try:
            if self._transport is not None and self._server and not self._server.started:
                for name in reversed(self._created):
                    self._delete(self._transport, name)
        finally:
            self._stack.close()

    @staticmethod
    def _delete(api: Transport, name: str) -> None:
        with contextlib.suppress(ApiError):
            api.request("DELETE", f"{_CRDS}/{name}")

        def gone() -> bool:
            try:
                api.request("GET", f"{_CRDS}/{name}")
            except ApiError as exc:
                return exc.status == 404
            return False

        _poll(gone)


def _answers(api: Transport, path: str) -> bool:
    try:
        api.request("GET", path, query={"limit": 1})
    except ApiError:
        return False
    return True


def _poll(done: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + _TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


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
