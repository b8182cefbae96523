"""Contracts on what a job means to its program: its ranks, its world size, its peers' addresses.

Found by a plugin written from the docs alone that passed every other contract: process ids from
1, a process count of N-1, a coordinator `<job>-coordinator:6666` that no Service serves and a
bare `<job>-worker-0:6666`. Pods of such a job start and never meet; only what the program is
told shows it. The kind declares where that is (`Lifecycle.distribution`,
`t9kjobs.models.distribution`), and the kit reads it on the objects of an example's first
reconcile (what `t9kjobs render` prints): the training container's environment, its launch line
(and the scripts it runs), the job's hostfiles.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from t9kjobs.models import Distribution, EnvVar, Hostfile, Job, LaunchOption
from t9kjobs.models.distribution import Carrier
from t9kjobs.objects import Obj
from t9kjobs.testing.kit.calls import build_pods
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.runnable import pod_hostname, shell_script, unresolved
from t9kjobs.testing.kit.shellwords import words
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = ["addresses_name_the_job", "ranks_cover_the_world", "told_ranks"]

# Shells a launch line may pass through (a script, then `ssh host CMD`, quoted once more).
_LEVELS = 3
_FIX_ADDRESS = (
    "name a pod as t9kjobs.objects.pod_host(job, pod) (`<pod>.<job>`, with new_pod(...,"
    " subdomain=job.name) and headless_service(job)) or a Service the job creates"
)


@dataclass(frozen=True)
class _Pod:
    name: str
    replica_type: str
    obj: Obj
    container: Obj  # the training container

    def env(self, name: str) -> str | None:
        for env in self.container.get("env") or []:
            if env.get("name") == name and isinstance(env.get("value"), str):
                return str(env["value"])
        return None

    def options(self, flag: str) -> list[str]:
        """The values of `flag` on the launch line: `flag=V` or `flag V`."""
        line = _launch_words(
            [*(self.container.get("command") or []), *(self.container.get("args") or [])]
        )
        found = []
        for i, word in enumerate(line):
            if word == flag and i + 1 < len(line):
                found.append(line[i + 1])
            elif word.startswith(flag + "="):
                found.append(word[len(flag) + 1 :])
        return found

    def values(self, carrier: Carrier) -> list[str]:
        if isinstance(carrier, EnvVar):
            value = self.env(carrier.name)
            return [] if value is None else [value]
        if isinstance(carrier, LaunchOption):
            return self.options(carrier.flag)
        return []


def _launch_words(argv: list[object]) -> list[str]:
    """The words of a launch line: its argv, the words of the `sh -c` script it runs, and of
    the lines that script hands on (a word with blanks, read once more), `_LEVELS` deep."""
    line = [a for a in argv if isinstance(a, str)]
    script = shell_script(list(argv))
    texts = [script] if script is not None else []
    for _ in range(_LEVELS):
        deeper = []
        for text in texts:
            found = [w.text for w in words(text)]
            line += found
            deeper += [w for w in found if any(c in w for c in " \t\n")]
        texts = deeper
    return line


@dataclass(frozen=True)
class _Setting:
    job: Job
    declared: Distribution
    created: list[Obj]
    pods: list[_Pod]
    ranked: list[_Pod]
    required: bool  # launch lines and env are the real ones (not debug, not paused)
    elastic: bool  # a rendezvous may assign the ranks


def _setting(
    subject: Subject, example: Example, job: Job | None = None, made: Sequence[Obj] = ()
) -> _Setting | None:
    """What the kind declares and its pods are told: of the example's first reconcile, or of
    `job`'s objects `made` (another reconcile's)."""
    job = job or subject.job(example)
    life = job.spec.lifecycle()
    declared = life.distribution
    if declared is None:
        return None
    created = list(made) or list(subject.first_reconcile(job).create)
    desired = {p.name: p for p in build_pods(subject.hooks(job.kind), job)}
    pods = []
    for obj in created:
        name = obj["metadata"]["name"]
        if obj.get("kind") != "Pod" or name not in desired:
            continue
        containers = (obj.get("spec") or {}).get("containers") or [{}]
        wanted = desired[name].training_container
        container = next((c for c in containers if c.get("name") == wanted), containers[0])
        pods.append(_Pod(name, desired[name].replica_type, obj, container))
    if not pods:
        return None  # no pod yet (a paused job): nobody is told anything
    types = declared.ranked_types
    ranked = [p for p in pods if types is None or p.replica_type in types]
    required = not (life.run_mode.debugging or life.run_mode.paused)
    return _Setting(job, declared, created, pods, ranked, required, life.min_available is not None)


# -- hostfiles -------------------------------------------------------------------------------


def _hostfile(example: Example, s: _Setting, hostfile: Hostfile) -> list[tuple[str, int]]:
    """The hostfile's (host, slots), each host a ranked pod, each ranked pod once."""
    texts = [
        (o["metadata"]["name"], (o.get("data") or {})[hostfile.key])
        for o in s.created
        if o.get("kind") == "ConfigMap" and hostfile.key in (o.get("data") or {})
    ]
    if not texts:
        raise ContractViolation(
            f"{example.id}: the kind declares its ranks or world size in a {hostfile}, but no"
            f" ConfigMap of the job has the key {hostfile.key!r}: return it from"
            " t9kjobs_build_objects, or declare where the ranks are"
        )
    where, text = texts[0]
    lines: list[tuple[str, int]] = []
    for line in str(text).splitlines():
        parts = line.split("#", 1)[0].split()
        if not parts:
            continue
        said = next((p.split("=", 1)[1] for p in parts[1:] if p.startswith("slots=")), "1")
        lines.append((parts[0], int(said) if said.isdigit() else 0))
    names = {pod_hostname(p.obj): p.name for p in s.ranked}
    listed: list[str] = []
    for host, slots in lines:
        pod = names.get(host.split(".")[0])
        at = f"the hostfile (ConfigMap {where} key {hostfile.key})"
        if pod is None:
            raise ContractViolation(
                f"{example.id}: {at} lists {host!r}, which is no pod that takes a rank (those"
                f" are {sorted(names.values())}): list each ranked pod once, in rank order"
            )
        if pod in listed:
            raise ContractViolation(
                f"{example.id}: {at} lists pod {pod} twice: it would take two ranks' places"
            )
        if slots < 1:
            raise ContractViolation(f"{example.id}: {at} gives {host} no slots (`slots=N`)")
        listed.append(pod)
    missing = [p.name for p in s.ranked if p.name not in listed]
    if missing and s.required:
        raise ContractViolation(
            f"{example.id}: the hostfile (ConfigMap {where} key {hostfile.key}) misses"
            f" {missing}: their ranks never start, and the others wait for them"
        )
    return lines


def _world(example: Example, s: _Setting) -> tuple[int, str]:
    """The world size the replicas give, and how it is counted."""
    hostfiles = [c for c in (*s.declared.ranks, *s.declared.world_size) if isinstance(c, Hostfile)]
    lines = [_hostfile(example, s, h) for h in dict.fromkeys(hostfiles)]
    if lines and s.declared.unit == "process":
        slots = sum(n for _, n in lines[0])
        return slots, f"the {slots} slots of the hostfile's {len(lines[0])} ranked pods"
    n = len(s.ranked)
    units = "processes" if s.declared.unit == "process" else "nodes"
    return n, f"the job's {n} ranked pods ({units}: one rank each)"


def _holds(value: str, world: int) -> bool:
    """`value` is the world size, or an elastic range `MIN:MAX` holding it."""
    low, _, high = value.partition(":")
    if not low.isdigit() or (high and not high.isdigit()):
        return False
    return int(low) == world if not high else int(low) <= world <= int(high)


def _undeclared(example: Example) -> ContractViolation:
    return ContractViolation(
        f"{example.id}: the kind declares no Lifecycle.distribution, so nothing its program is"
        " told can be checked: return from JobSpec.lifecycle() a Distribution saying where each"
        " pod finds its rank and the world size (EnvVar, LaunchOption, Hostfile) and its peers'"
        " addresses (Address); if the framework or the user's program assigns the ranks (an"
        " elastic rendezvous, a generic job), declare that: Distribution() with no carrier."
        " Kit v4 (t9k-jobs 0.3) requires the declaration (docs/conformance.md)"
    )


def ranks_cover_the_world(subject: Subject, example: Example) -> None:
    """Ranks are unique and exactly 0..world-1, and the world size is what the replicas give.

    Where the kind declares them (`Lifecycle.distribution`: environment variables, launch
    options, a hostfile), over the pods of the first reconcile: each pod of a ranked replica type
    gets one rank (carriers that agree), the ranks are exactly 0..N-1 over N ranked pods, a
    hostfile lists each ranked pod once, and every world size the program is told equals the
    number of ranked pods (unit `node`, or `process` one a pod) or the hostfile's slots (unit
    `process`), or is an elastic range `MIN:MAX` holding it. The order of the ranks is free:
    rank 0 need not be the coordinator nor ranks follow the pods' indexes, as long as what the
    kind's framework expects of them holds (the kit cannot know it). A kind that declares no
    `distribution` fails (kit v4, t9k-jobs 0.3): one whose framework or user's program assigns
    the ranks says so, `Distribution()`.
    """
    if subject.job(example).spec.lifecycle().distribution is None:
        raise _undeclared(example)
    s = _setting(subject, example)
    if s is None:
        return
    world, counted = _world(example, s)
    for carrier in s.declared.world_size:
        if isinstance(carrier, Hostfile):
            continue
        holders = s.ranked if isinstance(carrier, EnvVar) else s.pods
        seen = [(p, v) for p in holders for v in p.values(carrier)]
        unset = [p.name for p in holders if not p.values(carrier)]
        if isinstance(carrier, EnvVar) and unset and s.required:
            raise ContractViolation(
                f"{example.id}: pods {unset} are not told the world size: {carrier} is not set"
            )
        if not seen and s.required:
            raise ContractViolation(
                f"{example.id}: no pod's launch line has the {carrier} the kind declares"
            )
        for pod, value in seen:
            if not _holds(value, world):
                raise ContractViolation(
                    f"{example.id}: pod {pod.name} is told the world size {value!r} ({carrier}),"
                    f" but {counted} make {world}: count the world from the replicas"
                )
    _check_ranks(example, s)


def _check_ranks(example: Example, s: _Setting) -> None:
    carriers = [c for c in s.declared.ranks if not isinstance(c, Hostfile)]
    if not carriers:
        return  # a hostfile's order gives them (checked with it), or the framework assigns them
    ranks: dict[str, int] = {}
    for pod in s.ranked:
        told = {(str(c), v) for c in carriers for v in pod.values(c)}
        if not told:
            if s.required and not s.elastic:
                said = ", ".join(str(c) for c in carriers)
                raise ContractViolation(
                    f"{example.id}: pod {pod.name} is told no rank: none of {said} is set"
                )
            continue
        values = {v for _, v in told}
        if len(values) > 1 or not next(iter(values)).isdigit():
            raise ContractViolation(
                f"{example.id}: pod {pod.name} is told the rank {sorted(told)}: one whole number"
            )
        ranks[pod.name] = int(values.pop())
    if not ranks:
        return
    n = len(s.ranked)
    if sorted(ranks.values()) != list(range(n)):
        given = ", ".join(f"{name}: {rank}" for name, rank in ranks.items())
        raise ContractViolation(
            f"{example.id}: the ranks ({', '.join(str(c) for c in carriers)}) of the job's {n}"
            f" ranked pods are {given}; they must be exactly 0..{n - 1}, one each"
            f" ({s.declared.unit} ranks): number them from 0 in the pods' order, each pod its own"
        )


def told_ranks(
    subject: Subject, example: Example, job: Job, made: Sequence[Obj]
) -> tuple[dict[str, int], str] | None:
    """Each ranked pod's rank as its program is told it among `job`'s objects `made`, and
    where it is told: by the kind's rank carriers, else by its place in the hostfile. None
    when the kind says no rank of its own (the framework assigns them), or says them so that
    `ranks_cover_the_world` fails (it says why)."""
    s = _setting(subject, example, job, made)
    if s is None or not s.declared.ranks:
        return None
    carriers = [c for c in s.declared.ranks if not isinstance(c, Hostfile)]
    try:
        if not carriers:
            hostfile = next(c for c in s.declared.ranks if isinstance(c, Hostfile))
            names = {pod_hostname(p.obj): p.name for p in s.ranked}
            lines = _hostfile(example, s, hostfile)
            order = {names[host.split(".")[0]]: i for i, (host, _) in enumerate(lines)}
            return order, f"its place in the {hostfile}"
    except ContractViolation:
        return None
    told: dict[str, int] = {}
    for pod in s.ranked:
        values = {v for c in carriers for v in pod.values(c)}
        if len(values) == 1 and next(iter(values)).isdigit():
            told[pod.name] = int(values.pop())
    return told, ", ".join(str(c) for c in carriers)


# -- addresses -------------------------------------------------------------------------------


def _told(s: _Setting) -> Iterator[tuple[_Pod, str, str, str | None]]:
    """(pod, carrier, host, port) of every address a pod's program is told."""
    for address in s.declared.addresses:
        for pod in s.pods:
            for value in pod.values(address.host):
                host, port = value, None
                head, sep, tail = value.rpartition(":")
                if sep and head and "/" not in value:
                    host, port = head, tail
                if address.port is not None:
                    port = next(iter(pod.values(address.port)), port)
                yield pod, f"{address.host} = {value!r}", host, port


def _ports_of(host: str, created: Sequence[Obj]) -> tuple[str, set[int]]:
    """The target a host name reaches and the ports it declares."""
    first = host.split(".")[0]
    by_host = {pod_hostname(o): o for o in created if o.get("kind") == "Pod"}
    services = {o["metadata"]["name"]: o for o in created if o.get("kind") == "Service"}
    targets = []
    what = f"pod {first}"
    if first in services and (first not in by_host or "." not in host):
        service = services[first]
        what = f"Service {first}"
        ports = set()
        for p in (service.get("spec") or {}).get("ports") or []:
            ports |= {v for v in (p.get("port"), p.get("targetPort")) if isinstance(v, int)}
        selector = (service.get("spec") or {}).get("selector") or {}
        targets = [
            o
            for o in by_host.values()
            if selector
            and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
    else:
        ports = set()
        targets = [by_host[first]] if first in by_host else []
    for pod in targets:
        for container in (pod.get("spec") or {}).get("containers") or []:
            ports |= {p.get("containerPort") for p in container.get("ports") or []}
    return what, {p for p in ports if isinstance(p, int)}


def addresses_name_the_job(subject: Subject, example: Example) -> None:
    """Every address a program is told names a pod or Service of the job, on a port it serves.

    Where the kind declares addresses (`Lifecycle.distribution.addresses`: a coordinator, a
    master, a rendezvous endpoint, in an environment variable or a launch option, `HOST` or
    `HOST:PORT`), each value whose host is the job's (its first label a pod's hostname, a
    Service of the job, or starting with `<job>-`) must resolve, with or without a dot: a pod
    as `<hostname>.<subdomain>` with its headless Service, or a Service's name (a pod's bare
    name resolves only inside that pod); and its port must be one the target container or
    Service declares, or one the kind documents (`Distribution.ports`). A kind that declares no
    `distribution` has no address checked here (ranks_cover_the_world fails it).
    """
    s = _setting(subject, example)
    if s is None:
        return
    namespace = s.job.namespace
    for pod, told, host, port in _told(s):
        why = unresolved(host, s.job.name, namespace, s.created)
        if why is not None:
            raise ContractViolation(
                f"{example.id}: pod {pod.name} is told {told}, but {host} never resolves: {why};"
                f" {_FIX_ADDRESS}"
            )
        first = host.split(".")[0]
        pods_and_services = {pod_hostname(o) for o in s.created if o.get("kind") == "Pod"} | {
            o["metadata"]["name"] for o in s.created if o.get("kind") == "Service"
        }
        if port is None or first not in pods_and_services:
            continue  # no port said, or not the job's (the user's own endpoint)
        target, served = _ports_of(host, s.created)
        documented = set(s.declared.ports)
        if not port.isdigit() or int(port) not in served | documented:
            raise ContractViolation(
                f"{example.id}: pod {pod.name} is told {told}: port {port} is neither declared"
                f" by {target} (its ports: {sorted(served) or 'none'}) nor documented by the kind"
                f" (Distribution.ports: {sorted(documented) or 'none'}): declare it as a"
                " containerPort of the target's container, a port of the Service, or in"
                " Distribution.ports"
            )
