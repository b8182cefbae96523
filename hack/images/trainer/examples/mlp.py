"""A small MLP trained data-parallel on CPU (gloo), for the real-node tests and the examples.

Every launcher the operator generates ends up here: the operator's env for plain pods
(``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``), torchrun (static or elastic),
``deepspeed`` over pdsh and ssh, and ``colossalai run``. The script reads the rendezvous from the
environment, trains on data it generates (the same on every rank, a different shard each) and
prints lines the tests read:

    start rank=R world=W local_rank=L host=H restart=N   (N: torchrun's restart count, or -)
    step S rank=R world=W loss=X          (every --log-every steps)
    T9KJOBS_PROGRESS step=S total=T loss=X  (rank 0, every --log-every steps and the last)
    done rank=R world=W first_loss=X last_loss=Y steps=S

The `T9KJOBS_PROGRESS` line is the training progress the operator puts in the job's status
(docs/python.md, "Progress"): this image does not carry t9k-jobs, so the script prints the
line `t9kjobs.progress.report` would print.

``--fail-rank R`` makes global rank R raise after ``--fail-after`` steps (failure tests);
``--deepspeed`` trains through ``deepspeed.initialize`` (ZeRO stage 0 on CPU);
``--colossalai`` joins the group through ``colossalai.launch_from_torch`` (as under
``colossalai run``) instead of ``torch.distributed.init_process_group``;
``--steps``, ``--sleep`` (seconds per step) set how long it runs; ``--rank-offset N`` adds N to
``$RANK`` (a GenericJob numbers each replica type from 0).

Checkpoints (docs/lifecycle.md, "Checkpoints"): ``--checkpoint-every N`` saves the model and the
optimizer every N steps under ``$T9KJOBS_CHECKPOINT_DIR`` (``step-S``; DeepSpeed's own
``save_checkpoint`` under ``--deepspeed``), says so in the progress line (``checkpoint=...
checkpoint_step=S``, repeated by every later line), and resumes from ``$T9KJOBS_RESUME_FROM``
when the operator gives one: ``resume rank=R from=P step=S``. Test knobs, each in incarnation
``--*-incarnation`` only (``$T9KJOBS_RESTART_COUNT``, default 0): ``--kill-after S`` SIGKILLs
the process S seconds into training (writing the step reached to ``killed-at`` in the checkpoint
folder first, so that the next incarnation can say ``redone=...``), ``--hang-after S`` blocks
for ever. With ``$T9KJOBS_STALL_SECONDS`` set, every progress line re-arms
``faulthandler.dump_traceback_later`` (the stacks of a hung rank land in its log).
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep each step")
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--fail-after", type=int, default=5)
    parser.add_argument("--deepspeed", action="store_true", help="deepspeed.initialize")
    parser.add_argument(
        "--colossalai", action="store_true", help="colossalai.launch_from_torch to join the group"
    )
    parser.add_argument(
        "--rank-offset",
        type=int,
        default=0,
        help="added to $RANK (a GenericJob's ranks count per replica type: workers after a master)",
    )
    parser.add_argument("--checkpoint-every", type=int, default=0, help="steps; 0: never")
    parser.add_argument("--kill-after", type=float, default=None, help="seconds; then SIGKILL")
    parser.add_argument("--kill-incarnation", type=int, default=0)
    parser.add_argument("--hang-after", type=float, default=None, help="seconds; then hang")
    parser.add_argument("--hang-incarnation", type=int, default=0)
    # deepspeed's launcher passes --local_rank=N unless told --no_local_rank
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None)
    return parser.parse_args(argv)


def say(line: str) -> None:
    """Print one line in one write: ranks sharing a stdout (torchrun, pdsh) never merge lines,
    as print's separate write of the newline lets them."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Checkpoints:
    """Saving and resuming under the operator's checkpoint folder (module docstring)."""

    def __init__(self, every: int, rank: int, engine: object | None) -> None:
        self.folder = os.environ.get("T9KJOBS_CHECKPOINT_DIR", "")
        self.every = every if self.folder else 0
        self.rank = rank
        self.engine = engine  # DeepSpeed's, which saves and loads its own way
        self.newest = ""  # said by every progress line once saved

    def resume(self, net: torch.nn.Module, opt: torch.optim.Optimizer | None) -> int:
        """The step to go on from: the checkpoint's, or 0."""
        source = os.environ.get("T9KJOBS_RESUME_FROM", "")
        if not source or not os.path.exists(source):
            self._say_redone("-", 0)  # a restart from scratch redoes every step
            return 0
        if self.engine is not None:
            folder, tag = os.path.split(source.rstrip("/"))
            _, state = self.engine.load_checkpoint(folder, tag=tag)  # type: ignore[attr-defined]
            step = int((state or {}).get("step", 0))
        else:
            state = torch.load(os.path.join(source, "state.pt"))
            net.load_state_dict(state["model"])
            if opt is not None:
                opt.load_state_dict(state["optimizer"])
            step = int(state["step"])
        self._say_redone(source, step)
        self.newest = f" checkpoint={source} checkpoint_step={step}"
        return step

    def _say_redone(self, source: str, step: int) -> None:
        """`resume rank=R from=P step=S`, and `redone=N` after a `--kill-after` (the steps
        this incarnation runs again)."""
        killed = os.path.join(self.folder, "killed-at") if self.folder else ""
        redone = ""
        if killed and os.path.exists(killed):
            with open(killed) as f:
                redone = f" redone={int(f.read()) - step}"
        if source != "-" or redone:
            say(f"resume rank={self.rank} from={source} step={step}{redone}")

    def save(self, step: int, net: torch.nn.Module, opt: torch.optim.Optimizer | None) -> None:
        if not self.every or step % self.every:
            return
        path = os.path.join(self.folder, f"step-{step}")
        if self.engine is not None:  # collective: every rank saves its part
            save = self.engine.save_checkpoint  # type: ignore[attr-defined]
            save(self.folder, tag=f"step-{step}", client_state={"step": step})
        elif self.rank == 0:
            os.makedirs(path, exist_ok=True)
            state = {"model": net.state_dict(), "step": step}
            if opt is not None:
                state["optimizer"] = opt.state_dict()
            torch.save(state, os.path.join(path, "state.pt.tmp"))
            os.replace(os.path.join(path, "state.pt.tmp"), os.path.join(path, "state.pt"))
        self.newest = f" checkpoint={path} checkpoint_step={step}"

    def saved(self, step: int) -> bool:
        """Whether this step saved one (its line is said at once)."""
        return bool(self.every) and step % self.every == 0


def knobs(args: argparse.Namespace, started: float, step: int, folder: str) -> None:
    """The test knobs: SIGKILL or hang, in the incarnation asked for."""
    incarnation = int(os.environ.get("T9KJOBS_RESTART_COUNT") or 0)
    elapsed = time.monotonic() - started
    rank = os.environ.get("RANK", "0")
    kill, hang = args.kill_after, args.hang_after
    if kill is not None and incarnation == args.kill_incarnation and elapsed >= kill:
        if folder:
            with open(os.path.join(folder, "killed-at"), "w") as f:
                f.write(str(step))
        say(f"kill rank={rank} step={step} (--kill-after)")
        if os.getpid() == 1:  # a container's first process: the kernel drops its own SIGKILL
            os._exit(128 + signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if hang is not None and incarnation == args.hang_incarnation and elapsed >= hang:
        say(f"hang rank={rank} step={step} (--hang-after)")
        threading.Event().wait()  # for ever: only a stop ends it


def progress_line(step: int, total: int, loss: float, checkpoints: Checkpoints) -> None:
    """What `t9kjobs.progress.report` prints (this image does not carry t9k-jobs), and the
    stack dump it re-arms."""
    stall = os.environ.get("T9KJOBS_STALL_SECONDS", "")
    if stall.isdigit() and int(stall) > 0:
        faulthandler.dump_traceback_later(int(stall), exit=False)
    say(f"T9KJOBS_PROGRESS step={step} total={total} loss={loss:.5f}{checkpoints.newest}")


def model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def batches(rank: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy samples of a fixed linear function; each rank draws its own."""
    gen = torch.Generator().manual_seed(1234 + rank)
    true_w = torch.linspace(-1, 1, 16).unsqueeze(1)
    x = torch.randn(batch * 8, 16, generator=gen)
    y = x @ true_w + 0.01 * torch.randn(batch * 8, 1, generator=gen)
    return x, y


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # SIGTERM ends it, as it ends any process but a container's first, which the kernel spares
    # from signals it has no handler for (the pod would wait its whole grace for SIGKILL).
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
    env = os.environ
    local_rank = args.local_rank if args.local_rank is not None else int(env.get("LOCAL_RANK", 0))
    if args.rank_offset:
        os.environ["RANK"] = str(int(env["RANK"]) + args.rank_offset)
    if args.colossalai:
        import colossalai

        colossalai.launch_from_torch(config={}, backend="gloo")
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    say(
        f"start rank={rank} world={world} local_rank={local_rank} host={socket.gethostname()}"
        f" restart={env.get('TORCHELASTIC_RESTART_COUNT', '-')}"
    )
    net = model()
    engine = None
    opt = None
    if args.deepspeed:
        import deepspeed

        config = {
            "train_micro_batch_size_per_gpu": args.batch,
            "optimizer": {"type": "SGD", "params": {"lr": args.lr}},
            "zero_optimization": {"stage": 0},
        }
        engine, _, _, _ = deepspeed.initialize(
            model=net, model_parameters=net.parameters(), config=config
        )

        def train_step(x: torch.Tensor, y: torch.Tensor) -> float:
            loss = torch.nn.functional.mse_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            return float(loss)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(net)
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)

        def train_step(x: torch.Tensor, y: torch.Tensor) -> float:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            return float(loss)

    checkpoints = Checkpoints(args.checkpoint_every, rank, engine)
    begin = checkpoints.resume(net, opt)
    x_all, y_all = batches(rank, args.batch)
    first = last = float("nan")
    started = time.monotonic()
    for step in range(begin + 1, args.steps + 1):
        knobs(args, started, step - 1, checkpoints.folder)
        if args.fail_rank == rank and step > args.fail_after:
            raise RuntimeError(f"rank {rank} fails on purpose at step {step} (--fail-rank)")
        i = (step * args.batch) % len(x_all)
        x, y = x_all[i : i + args.batch], y_all[i : i + args.batch]
        if len(x) < args.batch:
            x, y = x_all[: args.batch], y_all[: args.batch]
        last = train_step(x, y)
        if step == begin + 1:
            first = last
        if step % args.log_every == 0 or step == 1:
            say(f"step {step} rank={rank} world={world} loss={last:.5f}")
        checkpoints.save(step, net, opt)
        if rank == 0 and (
            step % args.log_every == 0 or step == args.steps or checkpoints.saved(step)
        ):
            progress_line(step, args.steps, last, checkpoints)
        if args.sleep:
            time.sleep(args.sleep)
    # every rank agrees on the weights: all-reduce a checksum and compare
    checksum = torch.tensor([sum(float(p.sum()) for p in net.parameters())])
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    in_sync = all(abs(float(g) - float(checksum)) < 1e-4 for g in gathered)
    say(
        f"done rank={rank} world={world} first_loss={first:.5f} last_loss={last:.5f}"
        f" steps={args.steps} in_sync={in_sync}"
    )
    # No dist.destroy_process_group(): with torch 1.13 under torchrun's static rendezvous (as
    # `colossalai run` starts it) it never returns, torchrun's agents then wait at their exit
    # barrier, and the job never ends. Exiting frees the group just as well.
    return 0 if in_sync else 1


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Without interpreter teardown: torch 1.13's gloo group, never destroyed (above), sometimes
    # aborts in its destructors at exit ("terminate called without an active exception",
    # SIGABRT, seen once in a torchrun rank after its done line), failing a job that trained.
    os._exit(code)
