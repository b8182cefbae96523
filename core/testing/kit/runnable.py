"""Contracts on what a real run of the job needs, beyond fitting the operator.

Found by a plugin written from the docs alone that passed every other contract and whose jobs
could not have run: a hostfile naming `<pod>.<job>-workers`, a name no Service serves (or pods
without the `subdomain` their names need), and a launch line joined with `" ".join`, which
bash cannot parse once an argument holds a quote. So, on the objects of an example's first
reconcile (what `t9kjobs render` prints):

- every host name of the job in a ConfigMap, an env var or a command resolves: a pod's
  `hostname.subdomain` with a headless Service of that name selecting it, or a Service;
- every shell script parses (`bash -n`): commands run under `sh -c`/`bash -c`, and scripts in
  ConfigMaps (a key ending in `.sh`, or a text starting with `#!` and naming a shell);
- an argument the user wrote with quotes, spaces, `$` and a newline reaches the command
  unchanged: one word, every character literal (`t9kjobs.testing.kit.shellwords`).

Only what the plugin wrote is judged: a container's `sh -c` script that is a string of the
user's spec as written (a sidecar's `while true; ...` loop, a debug command) is the user's own,
passed through untouched, and no check of the kit's to pass or fail; a plugin that rewrites or
wraps it is judged on what it made of it.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from t9kjobs.loading import JobError
from t9kjobs.objects import Obj
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.shellwords import words
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "TRICKY_ARGUMENT",
    "arguments_survive_the_shell",
    "host_names_resolve",
    "pod_hostname",
    "scripts_parse",
    "shell_script",
    "unresolved",
    "user_strings",
]

# What an argument may hold: a quote (unbalanced), spaces, an expansion, a newline, a backquote.
TRICKY_ARGUMENT = 't9kconformance it\'s "a b" $HOME\n`x` \\y'
# Shells a command line may pass through: the script's, then those it hands it on to (ssh).
_SHELL_LEVELS = 3
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
# A DNS name of two labels or more, not a part of a path, a longer name or a word.
_DNS_NAME = re.compile(
    r"(?<![A-Za-z0-9_./-])[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)+"
    r"(?![A-Za-z0-9_/-]|\.[A-Za-z0-9])"
)
# A host without a dot before a port (`<job>-worker-0:6666`): an address, never a file.
_BARE_ADDRESS = re.compile(r"(?<![A-Za-z0-9_./:-])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?):[0-9]{1,5}\b")
# What ends a file name rather than a host name (`--config=<job>-ds.json`).
_FILE_SUFFIXES = frozenset(
    {"json", "yaml", "yml", "txt", "sh", "py", "conf", "cfg", "ini", "toml", "log", "csv", "pt"}
)
_FIX_HOSTS = (
    "name a pod as t9kjobs.objects.pod_host(job, pod), build its pods with"
    " new_pod(..., subdomain=job.name) and return headless_service(job) from"
    " t9kjobs_build_objects"
)


@dataclass(frozen=True)
class _Text:
    where: str  # "pod P container C command[2]", "ConfigMap X key K"
    text: str
    hostfile: bool = False  # each line's first word is a host


@dataclass(frozen=True)
class _Script:
    where: str
    text: str


def _containers(pod: Obj) -> Iterator[Obj]:
    spec = pod.get("spec") or {}
    yield from spec.get("initContainers") or []
    yield from spec.get("containers") or []


def _texts(created: Sequence[Obj]) -> Iterator[_Text]:
    for obj in created:
        name = obj["metadata"]["name"]
        if obj.get("kind") == "ConfigMap":
            for key, value in sorted((obj.get("data") or {}).items()):
                if isinstance(value, str):
                    yield _Text(f"ConfigMap {name} key {key}", value, "host" in key.lower())
        elif obj.get("kind") == "Pod":
            for container in _containers(obj):
                at = f"pod {name} container {container.get('name')}"
                for field in ("command", "args"):
                    for i, arg in enumerate(container.get(field) or []):
                        if isinstance(arg, str):
                            yield _Text(f"{at} {field}[{i}]", arg)
                for env in container.get("env") or []:
                    if isinstance(env.get("value"), str):
                        yield _Text(f"{at} env {env.get('name')}", env["value"])


def user_strings(manifest: Obj) -> frozenset[str]:
    """Every string the user wrote in the spec: a script equal to one is the user's own."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(manifest.get("spec"))
    return frozenset(found)


def _scripts(created: Sequence[Obj], users: frozenset[str] = frozenset()) -> Iterator[_Script]:
    """The scripts the pods run, but for a container's that is a string of the user's spec as
    written (`users`): the user's own command, passed through untouched."""
    for obj in created:
        name = obj["metadata"]["name"]
        if obj.get("kind") == "ConfigMap":
            for key, value in sorted((obj.get("data") or {}).items()):
                first = value.split("\n", 1)[0] if isinstance(value, str) else ""
                shebang = first.startswith("#!") and any(s in first for s in _SHELLS)
                if isinstance(value, str) and (key.endswith(".sh") or shebang):
                    yield _Script(f"ConfigMap {name} key {key}", value)
        elif obj.get("kind") == "Pod":
            for container in _containers(obj):
                argv = [*(container.get("command") or []), *(container.get("args") or [])]
                script = shell_script(argv)
                if script is not None and script not in users:
                    at = f"pod {name} container {container.get('name')}"
                    yield _Script(f"{at} ({argv[0]} -c)", script)


def shell_script(argv: list[Any]) -> str | None:
    """The script of `sh -c SCRIPT ...` (options such as `-ec` too), else None."""
    if not argv or not isinstance(argv[0], str) or argv[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for i, arg in enumerate(argv[1:], 1):
        if not isinstance(arg, str) or not arg.startswith("-"):
            return None
        if "c" in arg[1:] and not arg.startswith("--") and i + 1 < len(argv):
            script = argv[i + 1]
            return script if isinstance(script, str) else None
    return None


# -- host names ------------------------------------------------------------------------------


def _pods(created: Sequence[Obj]) -> list[Obj]:
    return [o for o in created if o.get("kind") == "Pod"]


def pod_hostname(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"])


def _selects(service: Obj, pod: Obj) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _headless(service: Obj) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def unresolved(host: str, job: str, namespace: str, created: Sequence[Obj]) -> str | None:
    """Why `host` names something of the job that never resolves; None if it resolves or is
    not the job's."""
    labels = host.split(".")
    pods = {pod_hostname(p): p for p in _pods(created)}
    services = {o["metadata"]["name"]: o for o in created if o.get("kind") == "Service"}
    first = labels[0]
    if first not in pods and first not in services and not first.startswith(f"{job}-"):
        return None  # not a name of this job's: an image registry, a file, a package
    rest = labels[1:]
    # A Service named as a pod (GenericJob's Service a replica) serves the bare name.
    service_first = first in services and (not rest or rest[0] == namespace)
    if first in pods and not service_first:
        pod = pods[first]
        subdomain = (pod.get("spec") or {}).get("subdomain")
        if not rest:
            return (
                f"a pod's bare name resolves only inside that pod (pod {first} has the DNS"
                f" name {first}.<subdomain> through a headless Service)"
            )
        wanted = rest[0]
        if subdomain != wanted:
            said = f"subdomain {subdomain!r}" if subdomain else "no spec.subdomain"
            return f"pod {first} has {said}, so {first}.{wanted} is no name of it"
        service = services.get(wanted)
        if service is None or not _headless(service) or not _selects(service, pod):
            return (
                f"no headless Service {wanted!r} of the job selects pod {first}, so its"
                f" subdomain gives it no DNS name"
            )
        rest = rest[1:]
    elif first in services:
        pass  # a Service's name resolves in the job's namespace
    elif labels[-1] in _FILE_SUFFIXES:
        return None  # a file named after the job (`<job>-config.json`), not a host
    else:
        return f"{first} is no pod and no Service of the job"
    if rest and rest[0] != namespace:
        return f"the job's pods and Services are in namespace {namespace!r}, not {rest[0]!r}"
    return None


def host_names_resolve(subject: Subject, example: Example) -> None:
    """Every host name of the job in its hostfiles, env vars and commands resolves.

    In ConfigMaps, env values and container commands of the first reconcile, a DNS name whose
    first label is a pod of the job (its `spec.hostname`, else its name), a Service of the job,
    or starts with `<job>-`, must resolve in the cluster: `<pod>.<subdomain>` where the pod has
    that `spec.subdomain` and a headless Service of that name selects it (optionally followed by
    the job's namespace), or a Service's name. In a ConfigMap key naming hosts (`hostfile`),
    each line's first word is a host, and a pod's bare name (which resolves only inside itself)
    does not do. Names without a dot are checked too where they are an address (`NAME:PORT`) or
    a whole env value naming a pod. A string of the user's spec passed through as written is
    the user's, not checked.
    """
    job = subject.job(example)
    created = subject.first_reconcile(job).create
    namespace = job.namespace
    users = user_strings(example.manifest)
    pod_names = {pod_hostname(p) for p in _pods(created)}
    for text in _texts(created):
        if text.text in users:
            continue  # the user's own string, passed through as written
        hosts = [m.group(0) for m in _DNS_NAME.finditer(text.text)]
        hosts += [m.group(1) for m in _BARE_ADDRESS.finditer(text.text)]
        if text.text.strip() in pod_names:
            hosts.append(text.text.strip())  # an env value that is a pod's bare name
        if text.hostfile:
            lines = (line.split() for line in text.text.splitlines())
            hosts += [w[0] for w in lines if w and not w[0].startswith("#") and "." not in w[0]]
        for host in hosts:
            why = unresolved(host, job.name, namespace, created)
            if why is not None:
                raise ContractViolation(
                    f"{example.id}: {text.where} names host {host!r}, which never resolves:"
                    f" {why}; {_FIX_HOSTS}"
                )


# -- scripts ---------------------------------------------------------------------------------


def _bash_n(script: str) -> str | None:
    """bash's complaint about `script` (`bash -n`: read, not run), or None."""
    bash = shutil.which("bash")
    if bash is None:
        raise ContractViolation("bash is not on PATH: the kit needs it to check scripts")
    done = subprocess.run(
        [bash, "-n"], input=script, capture_output=True, text=True, timeout=30, check=False
    )
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def scripts_parse(subject: Subject, example: Example) -> None:
    """Every shell script the job's pods run parses (`bash -n`).

    The scripts of the first reconcile: a container's `sh -c`/`bash -c` command (options such
    as `-ec` too) and ConfigMap entries that are scripts (a key ending in `.sh`, or a first line
    `#!` naming a shell); not a container's script the user wrote as it stands (a sidecar's
    `sh -c` loop passed through untouched). Build command lines with `shlex.join` and values
    with `shlex.quote`.
    """
    job = subject.job(example)
    users = user_strings(example.manifest)
    for script in _scripts(subject.first_reconcile(job).create, users):
        complaint = _bash_n(script.text)
        if complaint is not None:
            raise ContractViolation(
                f"{example.id}: the script of {script.where} does not parse: {complaint};"
                " build command lines with shlex.join(argv) and quote values with shlex.quote"
            )


def _argument_paths(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, value) of every string in a list of strings under the spec: an argv."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _argument_paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str):
                yield f"{path}[{i}]", item
            else:
                yield from _argument_paths(item, f"{path}[{i}]")


def _set_path(manifest: Any, path: str, value: str) -> None:
    steps = re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removeprefix("spec"))
    node = manifest["spec"]
    for i, (key, index) in enumerate(steps):
        last = i == len(steps) - 1
        if key:
            if last:
                node[key] = value
            else:
                node = node[key]
        elif last:
            node[int(index)] = value
        else:
            node = node[int(index)]


def arguments_survive_the_shell(subject: Subject, example: Example) -> None:
    """An argument the user wrote reaches the command unchanged through the launch script.

    For each string of a list in the spec (a program, its arguments) whose value appears in a
    script of the first reconcile, the kit writes instead an argument with a quote, spaces,
    `$HOME`, a newline and a backquote: the scripts must still parse, and hold it as one
    word, every character literal (neither split nor expanded), read by the script's shell or,
    quoted once more for each, by the shells it hands the line on to (`ssh host CMD`). A
    container's script that is the user's own string as written (a sidecar's `sh -c` loop) is
    not the plugin's and not judged; one the plugin rewrote or wrapped is. Build command lines
    with `shlex.join(argv)`.
    """
    job = subject.job(example)
    scripts = [
        s.text
        for s in _scripts(subject.first_reconcile(job).create, user_strings(example.manifest))
    ]
    if not scripts:
        return
    hooks = subject.hooks(job.kind)
    spec = example.manifest.get("spec")
    for path, value in _argument_paths(spec, "spec"):
        if not value or not any(value in s for s in scripts):
            continue
        manifest = copy.deepcopy(example.manifest)
        _set_path(manifest, path, TRICKY_ARGUMENT)
        try:
            changed = subject.parse(Example(example.id, example.path, manifest))
        except JobError:
            continue  # the field does not take such a value: nothing to carry
        if any(p.severity == "error" for p in hooks.validate(changed)):
            continue
        users = user_strings(manifest)
        for script in _scripts(subject.first_reconcile(changed).create, users):
            _check_carried(example, path, script)


def _carried(text: str, marker: str, levels: int) -> bool:
    """The tricky argument is a literal word of `text`, read by one shell or, quoted once more
    for each, by up to `levels` shells in turn (a command line handed on to `ssh`)."""
    for word in words(text):
        if word.holds(TRICKY_ARGUMENT):
            return True
        deeper = levels > 1 and marker in word.text and all(word.literal)
        if deeper and _carried(word.text, marker, levels - 1):
            return True
    return False


def _check_carried(example: Example, path: str, script: _Script) -> None:
    marker = TRICKY_ARGUMENT.split(" ", 1)[0]
    if marker not in script.text:
        return
    complaint = _bash_n(script.text)
    seen = [w.text for w in words(script.text) if marker in w.text]
    if complaint is None and _carried(script.text, marker, _SHELL_LEVELS):
        return
    what = f"does not parse ({complaint})" if complaint else f"bash reads it as {seen}"
    raise ContractViolation(
        f"{example.id}: with {path} = {TRICKY_ARGUMENT!r}, the script of {script.where} {what}:"
        " an argument must reach the command as one word, unexpanded; build command lines"
        " with shlex.join(argv) (or shlex.quote each value)"
    )
