"""The MLP of the trainer image's examples/mlp.py (the same model, data and DDP step on gloo),
as a function `Client.train` sends (docs/notebooks/train.ipynb has it too, in a cell). Each line
is one write: ranks share a stdout."""

from __future__ import annotations


def train_mlp(steps: int = 60, lr: float = 0.05, *, rank: int, world_size: int) -> None:
    """Train data-parallel; rank 0 reports each step's loss (`t9kjobs.progress.report`)."""
    import sys

    import torch
    import torch.distributed as dist

    from t9kjobs.progress import report

    torch.manual_seed(0)  # the same initial weights on every rank
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1234 + rank)  # each rank its own samples
    x = torch.randn(512, 16, generator=gen)
    y = x @ torch.linspace(-1, 1, 16).unsqueeze(1) + 0.01 * torch.randn(512, 1, generator=gen)
    for step in range(1, steps + 1):
        i = (step * 64) % 512
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[i : i + 64]), y[i : i + 64])
        loss.backward()
        opt.step()
        if step == 1:
            sys.stdout.write(f"start rank={rank} world={world_size} loss={float(loss):.5f}\n")
        report(step, steps, every=0, loss=float(loss))
    sys.stdout.write(f"done rank={rank} world={world_size} last_loss={float(loss):.5f}\n")
    dist.barrier()
