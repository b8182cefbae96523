"""From the pods the operator would create to processes of this machine.

The local backend launches nothing its own way: it renders the job as the operator's first
reconcile would (`t9kjobs.render`: the plugin's pods, with the launch commands and the
environment the kind gives each replica: torchrun's options, RANK, MASTER_ADDR...), then runs
each pod's training container as one process group. What a pod names of the cluster is made
local: the job's host names (pods `<pod>.<job>`, its Services) become 127.0.0.1, and each port
they name (a Service's or a container's port, `host:PORT` after one of those names, a `*PORT`
variable) becomes a free port of this machine, the same for every replica, so that two local
jobs never meet on one port. `python3` and `python` run the backend's interpreter, `torchrun`
is `python -m torch.distributed.run`.

What it cannot do is refused before anything starts (`LocalUnsupported`, naming the pod and
the field): replicas that reach each other over ssh (a Secret among the job's objects: the
DeepSpeed, ColossalAI and MPI launchers), volumes, init containers and containers beside the
training one, a container without a command, environment from Secrets, and more GPUs than this
machine has. Images are not pulled: every replica runs on this machine's Python.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from t9kjobs.client.errors import ClientError
from t9kjobs.client.reader import training_container
from t9kjobs.objects import GPU_RESOURCE, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, Obj

__all__ = ["LocalUnsupported", "Replica", "local_gpus", "replicas"]

LOCALHOST = "127.0.0.1"
_PORT_VARIABLE = re.compile(r"(^|_)PORT$")
_given_ports: set[int] = set()  # handed out by this process: never twice
_ports_lock = threading.Lock()


class LocalUnsupported(ClientError):
    """What the local backend cannot run; the message names the pod and the field."""


@dataclass(frozen=True)
class Replica:
    """One pod of the job as a local process group."""

    name: str  # the pod's name: `<job>-worker-0`
    replica_type: str
    index: int
    container: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    manifest: Obj  # the pod as rendered, for `pods()`


def local_gpus() -> int:
    """The NVIDIA GPUs of this machine (their device files)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def _free_port() -> int:
    with _ports_lock:
        while True:
            with socket.socket() as s:
                s.bind((LOCALHOST, 0))
                port = int(s.getsockname()[1])
            if port not in _given_ports:
                _given_ports.add(port)
                return port


def _host_names(objects: list[Obj], namespace: str) -> list[str]:
    """The names by which the job's pods and Services are reached, longest first."""
    names: set[str] = set()
    for obj in objects:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if obj["kind"] == "Pod":
            host = spec.get("hostname") or meta["name"]
            names.add(host)
            if spec.get("subdomain"):
                base = f"{host}.{spec['subdomain']}"
                names |= {base, f"{base}.{namespace}", f"{base}.{namespace}.svc"}
                names.add(f"{base}.{namespace}.svc.cluster.local")
        elif obj["kind"] == "Service":
            svc = meta["name"]
            names |= {svc, f"{svc}.{namespace}", f"{svc}.{namespace}.svc"}
            names.add(f"{svc}.{namespace}.svc.cluster.local")
    return sorted(names, key=len, reverse=True)


class _Localizer:
    """Host names to 127.0.0.1 and the ports they name to free ones (module docstring)."""

    def __init__(self, objects: list[Obj], namespace: str) -> None:
        names = _host_names(objects, namespace)
        alternatives = "|".join(re.escape(n) for n in names) or r"(?!)"
        self.hosts = re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")
        self.ports: dict[int, int] = {}
        for obj in objects:
            spec = obj.get("spec") or {}
            for port in spec.get("ports") or []:  # a Service's
                self._port(port.get("port"))
                self._port(port.get("targetPort"))
            for container in spec.get("containers") or []:
                for port in container.get("ports") or []:
                    self._port(port.get("containerPort"))

    def _port(self, value: Any) -> int | None:
        if not isinstance(value, int) and not (isinstance(value, str) and value.isdigit()):
            return None
        number = int(value)
        if number not in self.ports:
            self.ports[number] = _free_port()
        return self.ports[number]

    def text(self, value: str, port_variable: bool = False) -> str:
        if port_variable and value.isdigit():
            return str(self._port(value))
        value = self.hosts.sub(LOCALHOST, value)
        return re.sub(
            rf"{re.escape(LOCALHOST)}:(\d+)", lambda m: f"{LOCALHOST}:{self._port(m[1])}", value
        )


def _env_value(pod: Obj, entry: Obj, config_maps: Mapping[str, Obj], where: str) -> str:
    if "value" in entry:
        return str(entry.get("value") or "")
    source = entry.get("valueFrom") or {}
    field = (source.get("fieldRef") or {}).get("fieldPath")
    meta = pod["metadata"]
    by_field = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", ""),
        "status.podIP": LOCALHOST,
        "status.hostIP": LOCALHOST,
        "spec.nodeName": socket.gethostname(),
    }
    if field in by_field:
        return str(by_field[field])
    if field and field.startswith(("metadata.labels['", "metadata.annotations['")):
        key = field.split("['", 1)[1].rstrip("']")
        group = "labels" if field.startswith("metadata.labels") else "annotations"
        return str((meta.get(group) or {}).get(key, ""))
    ref = source.get("configMapKeyRef")
    if ref and ref.get("name") in config_maps:
        return str((config_maps[ref["name"]].get("data") or {}).get(ref.get("key"), ""))
    raise LocalUnsupported(f"{where}: a value from {sorted(source)} is not known locally")


def _refusals(pod: Obj, name: str) -> None:
    where = f"Pod {pod['metadata']['name']}"
    spec = pod.get("spec") or {}
    if spec.get("initContainers"):
        raise LocalUnsupported(f"{where}: spec.initContainers do not run locally")
    others = [c["name"] for c in spec.get("containers") or [] if c["name"] != name]
    if others:
        raise LocalUnsupported(
            f"{where}: only the training container runs locally, not {', '.join(others)}"
        )
    if spec.get("volumes"):
        volumes = ", ".join(v.get("name", "?") for v in spec["volumes"])
        raise LocalUnsupported(f"{where}: spec.volumes ({volumes}): no volumes locally")


def _gpus(pod: Obj) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        total += int(str(limits.get(GPU_RESOURCE, "0")) or 0)
    return total


def _argv(command: list[str], python: str) -> list[str]:
    first = os.path.basename(command[0])
    if first in ("python3", "python"):
        return [python, *command[1:]]
    if first == "torchrun":
        return [python, "-m", "torch.distributed.run", *command[1:]]
    return command


def replicas(objects: list[Obj], namespace: str, python: str) -> list[Replica]:
    """The processes of a job whose first reconcile creates `objects` (`render_job`), or
    `LocalUnsupported` for what cannot run here."""
    secrets = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    if secrets:
        raise LocalUnsupported(
            f"the job's replicas reach each other over ssh (Secret {secrets[0]}): the local"
            " backend runs kinds whose replicas start without ssh (PyTorchTrainingJob,"
            " GenericJob); run this one on a cluster"
        )
    pods = [o for o in objects if o["kind"] == "Pod"]
    wanted, have = sum(_gpus(p) for p in pods), local_gpus()
    if wanted > have:
        raise LocalUnsupported(
            f"the job asks for {wanted} {GPU_RESOURCE} in all and this machine has {have}"
        )
    config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    local = _Localizer(objects, namespace)
    out = []
    for pod in pods:
        meta = pod["metadata"]
        name = training_container(pod) or ""
        _refusals(pod, name)
        container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
        where = f"Pod {meta['name']}, container {name}"
        command = [str(a) for a in (container.get("command") or [])]
        command += [str(a) for a in (container.get("args") or [])]
        if not container.get("command"):
            raise LocalUnsupported(
                f"{where}: no command (the image's own entrypoint does not run locally)"
            )
        env = {}
        for k, entry in enumerate(container.get("env") or []):
            value = _env_value(pod, entry, config_maps, f"{where}, env[{k}]")
            env[entry["name"]] = local.text(value, bool(_PORT_VARIABLE.search(entry["name"])))
        labels = meta.get("labels") or {}
        out.append(
            Replica(
                name=meta["name"],
                replica_type=str(labels.get(LABEL_REPLICA_TYPE, "")),
                index=int(labels.get(LABEL_REPLICA_INDEX, 0)),
                container=name,
                argv=tuple(_argv([local.text(a) for a in command], python)),
                env=env,
                manifest=pod,
            )
        )
    return out
