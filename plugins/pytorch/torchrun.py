"""The torchrun command line of one pod, from the job's topology and `spec.torchrunConfig`.

Options use torchrun's underscore spellings (`--nproc_per_node`): every torchrun accepts them,
while the dash spellings (`--nproc-per-node`) exist only since torch 2.0 (pytorch/pytorch#94505)
and T9k's own images ship torch 1.13. Options are written `--name=value`, one argv item each, so a
value can never be taken for an option or for the training script.

With the c10d rendezvous one torchrun must host the store at `--rdzv_endpoint`. torchrun guesses
which by comparing the endpoint's host name with the machine's, and in a pod the names differ
(`<job>-master-0.<job>` against the pod's own hostname and FQDN), so no pod hosts it and every
node waits for ever. The line therefore says it: `--rdzv_conf=is_host=1` on the master's pod,
`is_host=0` on the others (torch >= 1.10 reads it), merged into a `--rdzv_conf` the user gives.

An elastic line without `maxRestarts` gets `--max_restarts=3`, not torchrun's 0. When a node
joins, each running agent stops its ranks on its own monitor tick; a rank whose peer was
stopped first fails in the collective before its own agent has seen the new node, and torchrun
counts that as a failure of the worker group. With no restart left that agent gives up: seen on
the real node, the store's host waited 300 s at its exit barrier and exited 1 while the others
trained without it. 3 is torch's own elastic example ("tolerates up to 3 membership changes or
failures"); `maxRestarts: 0` still says none.
"""

from __future__ import annotations

from t9kjobs.plugins.pytorch.spec import TorchrunConfig
from t9kjobs.plugins.pytorch.topology import Node, Topology

__all__ = ["ELASTIC_MAX_RESTARTS", "GENERATED_OPTIONS", "option_name", "torchrun_command"]

# `--max_restarts` of an elastic line whose job does not set `maxRestarts` (module docstring).
ELASTIC_MAX_RESTARTS = 3

# The options this module generates, by argparse `dest`, for spotting extraOptions that
# override them.
GENERATED_OPTIONS = frozenset(
    {
        "nnodes",
        "nproc_per_node",
        "rdzv_backend",
        "rdzv_endpoint",
        "rdzv_id",
        "max_restarts",
        "node_rank",
    }
)


def option_name(option: str) -> str | None:
    """The argparse `dest` of a long option (`--nproc-per-node=2` -> `nproc_per_node`)."""
    if not option.startswith("--"):
        return None
    return option[2:].split("=", 1)[0].replace("-", "_")


def _with_is_host(extra_options: list[str], is_host: bool) -> tuple[list[str], bool]:
    """`extraOptions` with `is_host` added to a `--rdzv_conf` among them, and whether one was
    there. A user's own `is_host` is kept as written."""
    out = list(extra_options)
    flag = f"is_host={int(is_host)}"
    for k, option in enumerate(out):
        if option_name(option) != "rdzv_conf":
            continue
        if "=" in option:
            name, _, value = option.partition("=")
            if "is_host" not in value:
                out[k] = f"{name}={value},{flag}" if value else f"{name}={flag}"
            return out, True
        if k + 1 < len(out):  # the two-item form `--rdzv_conf VALUE`
            if "is_host" not in out[k + 1]:
                out[k + 1] = f"{out[k + 1]},{flag}"
            return out, True
    return out, False


def torchrun_command(
    top: Topology, node: Node, config: TorchrunConfig, args: list[str]
) -> list[str]:
    """`torchrun <generated options> <extraOptions> <args>` for the pod `node`."""
    extra = list(config.extra_options)
    argv = [
        "torchrun",
        f"--nnodes={top.nnodes}",
        f"--nproc_per_node={node.nproc_per_node}",
        f"--rdzv_backend={config.rdzv_backend}",
        f"--rdzv_endpoint={top.endpoint}",
        f"--rdzv_id={top.job_uid}",
    ]
    max_restarts = config.max_restarts
    if max_restarts is None and top.elastic_range is not None:
        max_restarts = ELASTIC_MAX_RESTARTS
    if max_restarts is not None:
        argv.append(f"--max_restarts={max_restarts}")
    if top.elastic_range is None:
        argv.append(f"--node_rank={node.rank}")
    if config.rdzv_backend == "c10d":
        is_host = top.master is not None and node.name == top.master.name
        extra, merged = _with_is_host(extra, is_host)
        if not merged:
            argv.append(f"--rdzv_conf=is_host={int(is_host)}")
    return argv + extra + list(args)
