"""Who is who in a PyTorchTrainingJob: its pods in rank order, the master, processes per pod,
and the environment every training container gets (the contract in docs/pytorch.md).

Everything here is derived from the spec alone, so `build_pods`, `build_launch_command` and
`compute_status` agree on ranks and the master without passing state between hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from t9kjobs.plugin import Job, gpu_count, pod_host, pod_name, training_container
from t9kjobs.plugins.pytorch.spec import (
    MASTER_PORT,
    MASTER_TYPE,
    PyTorchReplicaSpec,
    PyTorchTrainingJobSpec,
)

__all__ = [
    "MASTER_PORT",
    "RESERVED_ENV",
    "TRAINING_CONTAINER",
    "Node",
    "Topology",
    "pod_env",
    "replica_counts",
    "split_by_weight",
    "topology",
]

# The training container is the one named `python`, else the first (T9k's user guide).
TRAINING_CONTAINER = "python"

# Set by the operator on every training container; a user value of the same name is an error.
RESERVED_ENV = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_WORLD_SIZE",
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_RDZV_BACKEND",
    "PET_RDZV_ENDPOINT",
    "PET_RDZV_ID",
    "PET_RDZV_CONF",
)


@dataclass(frozen=True)
class Node:
    """One pod of the job: a torchrun node, or a single process without torchrun."""

    replica_type: str
    index: int
    rank: int
    name: str
    # Processes the pod runs; None when procPerNode is `gpu` and the GPU count is unknown
    # (an invalid job): torchrun then counts the GPUs itself.
    procs: int | None

    @property
    def nproc_per_node(self) -> str:
        return "gpu" if self.procs is None else str(self.procs)


@dataclass(frozen=True)
class Topology:
    """The pods of a job in rank order (master first) and how they meet."""

    # The master's DNS name through the job's headless Service: `<pod>.<job>`.
    host: str
    job_uid: str
    nodes: tuple[Node, ...]
    torchrun: bool
    # (min, max) number of nodes when elastic, master included.
    elastic_range: tuple[int, int] | None
    rdzv_backend: str

    @property
    def master(self) -> Node | None:
        return self.nodes[0] if self.nodes else None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{MASTER_PORT}"

    @property
    def nnodes(self) -> str:
        """torchrun --nnodes: `N`, or `min:max` when elastic."""
        if self.elastic_range is not None:
            return f"{self.elastic_range[0]}:{self.elastic_range[1]}"
        return str(len(self.nodes))

    @property
    def world_size(self) -> int | None:
        """Processes of the whole job, when every pod's count is known."""
        counts = [n.procs for n in self.nodes]
        return sum(c for c in counts if c is not None) if None not in counts else None

    @property
    def dynamic_rendezvous(self) -> bool:
        """torchrun meets through a rendezvous backend (not by fixed node ranks)."""
        return self.torchrun or self.elastic_range is not None

    def named(self, node: Node) -> bool:
        """Whether the pod's DNS name `<pod>.<job>` resolves (the job's headless Service
        selects it, and the pod names the Service as its subdomain).

        Without torchrun and elastic, only the master's is ever resolved: `MASTER_ADDR`, where
        every rank meets the master's store; the ranks then exchange addresses, not names,
        through it (gloo and NCCL alike). torchrun's rendezvous names any node: torch 1.x
        gives its trainers the fully qualified name of the node the rendezvous ranked first
        (by that name, so not always the master) as their `MASTER_ADDR`. A pod not named costs
        kube-controller-manager no Endpoints write (`t9kjobs.objects.headless_service`).
        """
        return self.dynamic_rendezvous or node == self.master

    def node(self, replica_type: str, index: int) -> Node:
        for n in self.nodes:
            if n.replica_type == replica_type and n.index == index:
                return n
        raise KeyError(f"no pod {replica_type}-{index} in the job")


def split_by_weight(total: int, weights: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Share `total` pods among types by weight: largest remainder, ties to the first listed.

    Each type gets floor(total * w / W); the pods left over go one each to the types with the
    largest remainders. Integer arithmetic only, so the split is exact and deterministic.
    """
    whole = sum(w for _, w in weights)
    if whole <= 0:
        return {t: 0 for t, _ in weights}
    shares = {t: total * w // whole for t, w in weights}
    left = total - sum(shares.values())
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(total * weights[i][1] % whole), i))
    for i in by_remainder[:left]:
        shares[weights[i][0]] += 1
    return shares


def replica_counts(spec: PyTorchTrainingJobSpec) -> dict[str, int]:
    """Pods per replica type now. Elastic: the master keeps its 1 pod, the other types share
    expectedReplicas (default: their `replicas` summed), clamped to [min, max], by weight."""
    counts = {rs.type: rs.replicas for rs in spec.replica_specs}
    elastic = spec.elastic
    if elastic is None or not elastic.enabled:
        return counts
    scaled = [(rs.type, rs.scaling_weight) for rs in spec.replica_specs if rs.type != MASTER_TYPE]
    total = elastic.replicas(sum(counts[t] for t, _ in scaled))
    counts.update(split_by_weight(total, scaled))
    return counts


def _procs(spec: PyTorchTrainingJobSpec, rs: PyTorchReplicaSpec) -> int | None:
    config = spec.torchrun_config
    if config is None or not config.enabled:
        return 1
    fixed = config.fixed_procs()
    if fixed is not None:
        return fixed
    found = training_container(rs.template, TRAINING_CONTAINER)
    return gpu_count(found[1]) if found is not None else None


def topology(job: Job, spec: PyTorchTrainingJobSpec) -> Topology:
    """The job's pods in rank order: the master type first, then the others as listed."""
    counts = replica_counts(spec)
    ordered = sorted(spec.replica_specs, key=lambda rs: rs.type != MASTER_TYPE)
    nodes: list[Node] = []
    for rs in ordered:
        procs = _procs(spec, rs)
        for index in range(counts[rs.type]):
            name = pod_name(job.name, rs.type, index)
            nodes.append(Node(rs.type, index, len(nodes), name, procs))
    elastic_range = None
    elastic = spec.elastic
    if elastic is not None and elastic.enabled:
        # Both bounds are set: the spec model refuses elastic training without them.
        assert elastic.min_replicas is not None and elastic.max_replicas is not None
        fixed = sum(counts[rs.type] for rs in spec.replica_specs if rs.type == MASTER_TYPE)
        elastic_range = (elastic.min_replicas + fixed, elastic.max_replicas + fixed)
    config = spec.torchrun_config
    return Topology(
        host=pod_host(job, nodes[0].name) if nodes else "",
        job_uid=job.metadata.uid,
        nodes=tuple(nodes),
        torchrun=config is not None and config.enabled,
        elastic_range=elastic_range,
        rdzv_backend=config.rdzv_backend if config is not None else "c10d",
    )


def pod_env(top: Topology, node: Node) -> dict[str, str]:
    """The environment of one pod's training container (docs/pytorch.md, "Environment")."""
    env = {"MASTER_ADDR": top.host, "MASTER_PORT": str(MASTER_PORT)}
    world = top.world_size
    if world is not None:
        env["WORLD_SIZE"] = str(world)
    env["RANK"] = str(node.rank)
    if node.procs is not None:
        env["LOCAL_WORLD_SIZE"] = str(node.procs)
    env["PET_NNODES"] = top.nnodes
    env["PET_NPROC_PER_NODE"] = node.nproc_per_node
    if top.elastic_range is None:
        env["PET_NODE_RANK"] = str(node.rank)
    env["PET_MASTER_ADDR"] = top.host
    env["PET_MASTER_PORT"] = str(MASTER_PORT)
    if top.dynamic_rendezvous:
        env["PET_RDZV_BACKEND"] = top.rdzv_backend
        env["PET_RDZV_ENDPOINT"] = top.endpoint
        env["PET_RDZV_ID"] = top.job_uid
        if top.rdzv_backend == "c10d":
            # which pod hosts the c10d store (torchrun cannot tell from names in a pod)
            hosts = top.master is not None and node.name == top.master.name
            env["PET_RDZV_CONF"] = f"is_host={int(hosts)}"
    return env
