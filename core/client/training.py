"""`Client.train` and `Client.function_job`: the job of a kind that runs a Python function.

The kind's plugin builds the spec (`t9kjobs_function_spec`, docs/plugin-guide.md), so the
function runs the way the kind launches any program (torchrun for PyTorchTrainingJob, the
deepspeed launcher for DeepSpeedJob, one process a pod for GenericJob) and a third-party kind
opts in by implementing the hook. The function and its arguments travel as source and JSON
(`t9kjobs.client.functions`); what cannot travel is refused before anything is built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from t9kjobs.client.errors import ClientError, JobInvalid, UnknownKind
from t9kjobs.client.functions import package_function
from t9kjobs.client.reader import find_kind
from t9kjobs.client.runner import BOOTSTRAP, PACKAGES_ENV
from t9kjobs.kinds import FunctionRun
from t9kjobs.loading import JobError, parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from t9kjobs.models.job import API_VERSION

__all__ = ["FunctionJobs", "build_function_job", "function_kinds"]

# How the runner starts: `python3` is the interpreter of T9k's images (Debian's) and of any
# venv; the local backend runs its own interpreter under that name (`t9kjobs.client.local`).
COMMAND = ("python3", "-c", BOOTSTRAP)


def function_kinds(plugins: PluginManager) -> list[str]:
    """The kinds whose plugin can run a function (implements `t9kjobs_function_spec`)."""
    return sorted(kind for kind in plugins.kinds if plugins.hooks_for(kind).runs_functions)


def _resources(resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """`{"cpu": 2, "nvidia.com/gpu": 1}` as a container's limits and requests (both: a pod
    gets what it asked for)."""
    if not resources:
        return {}
    if "limits" in resources or "requests" in resources:
        return {k: {n: str(v) for n, v in dict(q).items()} for k, q in resources.items()}
    quantities = {name: str(value) for name, value in resources.items()}
    return {"limits": quantities, "requests": dict(quantities)}


def _generate_name(fn: Callable[..., Any]) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", getattr(fn, "__name__", "fn").lower()).strip("-")
    return f"{name[:40] or 'fn'}-"


def build_function_job(
    plugins: PluginManager,
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    kind: str,
    nodes: int,
    procs_per_node: int,
    image: str,
    resources: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
    packages: Sequence[str],
    namespace: str,
    name: str | None,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
) -> Job:
    """The typed job that runs `fn(*args, **kwargs)` (not sent: `Client.create` sends it)."""
    info = find_kind(kind, plugins)
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise ClientError(f"args={args!r}: a list or tuple of the function's arguments")
    if nodes < 1 or procs_per_node < 1:
        raise ClientError(f"nodes={nodes}, procs_per_node={procs_per_node}: at least 1 each")
    packaged = package_function(fn, args, kwargs)
    run_env = {**packaged.env(), **{str(k): str(v) for k, v in (env or {}).items()}}
    if packages:
        run_env[PACKAGES_ENV] = json.dumps([str(p) for p in packages])
    run = FunctionRun(
        command=COMMAND,
        env=run_env,
        image=image,
        nodes=nodes,
        procs_per_node=procs_per_node,
        resources=_resources(resources),
    )
    try:
        spec = plugins.hooks_for(info.kind).function_spec(run)
    except ValueError as exc:
        raise ClientError(f"{info.kind} cannot run {packaged.name} so: {exc}") from None
    if spec is None:
        able = ", ".join(function_kinds(plugins)) or "none"
        raise UnknownKind(
            f"{info.kind} cannot run a function (its plugin implements no"
            f" t9kjobs_function_spec); kinds that can: {able}"
        )
    meta: dict[str, Any] = {"namespace": namespace}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = _generate_name(fn)
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    manifest = {"apiVersion": API_VERSION, "kind": info.kind, "metadata": meta, "spec": spec}
    try:
        return parse_job(manifest, plugins)
    except JobError as exc:
        raise JobInvalid(f"the {info.kind} of {packaged.name}", exc.problems) from None


class FunctionJobs:
    """`Client.function_job` and `Client.train` (a base of `Client`, kept here beside what
    they call)."""

    plugins: PluginManager
    namespace: str
    # The image of a function's job when none is given (None: one must be; the local backend
    # runs none).
    default_image: str | None = None

    if TYPE_CHECKING:

        def create(self, source: Job, *, namespace: str | None = None) -> Job: ...

    def function_job(
        self,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        kind: str = "PyTorchTrainingJob",
        nodes: int = 1,
        procs_per_node: int = 1,
        image: str | None = None,
        resources: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        packages: Sequence[str] = (),
        namespace: str | None = None,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Job:
        """The typed job that would run `fn(*args, **kwargs)`, not sent: change its spec
        through the kind's model, then `create` it. The arguments are `train`'s."""
        image = image or self.default_image
        if not image:
            raise ClientError("image=: the image that runs the function (with its Python)")
        return build_function_job(
            self.plugins, fn, args, kwargs, kind=kind, nodes=nodes,
            procs_per_node=procs_per_node, image=image, resources=resources, env=env,
            packages=packages, namespace=namespace or self.namespace, name=name,
            labels=labels, annotations=annotations,
        )  # fmt: skip

    def train(
        self,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Job:
        """Run `fn` as a job (docs/python.md, "From a function"): `kind` (default
        PyTorchTrainingJob: torchrun; DeepSpeedJob, GenericJob, any kind whose plugin
        implements `t9kjobs_function_spec`), `nodes` (pods), `procs_per_node`, `image`,
        `resources` (`{"cpu": 2, "nvidia.com/gpu": 1}`), `env`, `packages` (pip requirement
        lines, installed at start), `namespace`, `name` (default: generated from the
        function's), `labels`, `annotations`, and `args`/`kwargs` for the function (JSON). The
        function receives `rank`, `world_size` and `local_rank` when it names them.
        `FunctionNotSendable` before anything is sent for what cannot travel; the job as
        created."""
        return self.create(self.function_job(fn, args, kwargs, **options))
