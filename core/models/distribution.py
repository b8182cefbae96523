"""What a distributed job means to its program: how its ranks, its world size and its peers'
addresses reach it, declared by the kind (`JobSpec.lifecycle().distribution`).

The operator does not read it; the conformance kit does (`t9kjobs.testing.kit.meaning`): over
every pod and launch line of the first reconcile it checks that the ranks are unique and
exactly 0..world-1, that the world size is what the replicas give, and that every address the
program is told names a pod or Service of the job that resolves, on a port the target declares
or the kind documents. A plugin that passes the kit without declaring it has proven its pods
and its plumbing, not what they mean to the program: ranks from 1 or a world size of N-1 start
pods that never meet.

Where a value is carried:

* `EnvVar(NAME)`: the training container's environment variable `NAME` (a literal `value`).
* `LaunchOption(FLAG)`: an option of the training container's command line, `FLAG=V` or
  `FLAG V`, also inside the `sh -c` script it runs and the lines that script hands to `ssh`.
* `Hostfile(KEY)`: the key `KEY` of a ConfigMap of the job: a host a line (its first word; `#`
  comments and blank lines skipped), `slots=N` processes on it (1 without). Its order gives the
  ranks (MPI, DeepSpeed, ColossalAI number hosts as listed); its lines or slots give the world.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Address", "Carrier", "Distribution", "EnvVar", "Hostfile", "LaunchOption"]


@dataclass(frozen=True)
class EnvVar:
    """A value in the training container's environment variable `name`."""

    name: str

    def __str__(self) -> str:
        return f"env {self.name}"


@dataclass(frozen=True)
class LaunchOption:
    """A value on the training container's launch line: `flag=V` or `flag V` (`--nnodes`,
    `-np`), read in its `sh -c` script and in lines that script hands on (`ssh host CMD`)."""

    flag: str

    def __str__(self) -> str:
        return f"launch option {self.flag}"


@dataclass(frozen=True)
class Hostfile:
    """Hosts in order, in the key `key` of a ConfigMap of the job: a host a line, `slots=N`."""

    key: str = "hostfile"

    def __str__(self) -> str:
        return f"hostfile (ConfigMap key {self.key})"


Carrier = EnvVar | LaunchOption | Hostfile


@dataclass(frozen=True)
class Address:
    """Where the program is told a peer's address (a coordinator, a master, a rendezvous
    endpoint): `host` holds `HOST` or `HOST:PORT`; `port`, when given, holds the port."""

    host: EnvVar | LaunchOption
    port: EnvVar | LaunchOption | None = None


@dataclass(frozen=True)
class Distribution:
    """How ranks, world size and peers' addresses reach a kind's program.

    `unit`: what a rank numbers, a `process` or a `node` (a pod; torchrun's `--node_rank`).
    `ranks`: where each ranked pod finds its rank, exactly 0..world-1 over the job's ranked pods
    (several carriers must agree), in any order: rank 0 need not be the coordinator, nor ranks
    follow the pods' indexes, for the kit (the kind's framework may want so: torch's MASTER_ADDR
    names rank 0's pod); empty: the framework assigns them (an elastic rendezvous, or a kind that
    leaves it to the user's program), which a kind declares as `Distribution()`. `world_size`:
    where the program finds the world size: the number of ranked pods, or with a hostfile and
    unit `process` its slots; a value `MIN:MAX` (an elastic range) must hold it. `addresses`:
    where it is told peers' addresses.
    `ports`: the ports the kind documents its programs listen on (an address's port must be one
    of them or one the target container or Service declares). `ranked_types`: the replica types
    whose pods take ranks (None: every pod; a launcher that only starts the others takes none).
    """

    unit: Literal["process", "node"] = "process"
    ranks: tuple[Carrier, ...] = ()
    world_size: tuple[Carrier, ...] = ()
    addresses: tuple[Address, ...] = ()
    ports: tuple[int, ...] = ()
    ranked_types: tuple[str, ...] | None = None
