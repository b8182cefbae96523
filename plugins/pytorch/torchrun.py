"""The torchrun command line of one pod, from the job's topology and `spec.torchrunConfig`.

Options use torchrun's underscore spellings (`--nproc_per_node`): every torchrun accepts them,
while the dash spellings (`--nproc-per-node`) exist only since torch 2.0 (pytorch/pytorch#94505)
and T9k's own images ship torch 1.13. Options are written `--name=value`, one argv item each, so a
value can never be taken for an option or for the training script.
"""

from __future__ import annotations

from t9kjobs.plugins.pytorch.spec import TorchrunConfig
from t9kjobs.plugins.pytorch.topology import Node, Topology

__all__ = ["GENERATED_OPTIONS", "option_name", "torchrun_command"]

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


def torchrun_command(
    top: Topology, node: Node, config: TorchrunConfig, args: list[str]
) -> list[str]:
    """`torchrun <generated options> <extraOptions> <args>` for the pod `node`."""
    argv = [
        "torchrun",
        f"--nnodes={top.nnodes}",
        f"--nproc_per_node={node.nproc_per_node}",
        f"--rdzv_backend={config.rdzv_backend}",
        f"--rdzv_endpoint={top.endpoint}",
        f"--rdzv_id={top.job_uid}",
    ]
    if config.max_restarts is not None:
        argv.append(f"--max_restarts={config.max_restarts}")
    if top.elastic_range is None:
        argv.append(f"--node_rank={node.rank}")
    return argv + list(config.extra_options) + list(args)
