#!/usr/bin/env python3
"""A training script that keeps the recovery contract of a `gpu-cluster run` (docs/operations.md,
"Checkpoints: what a training script does"): it saves a checkpoint every --save-every steps and
on SIGTERM, and starts from the newest complete checkpoint in $CHECKPOINT_DIR.

A checkpoint is complete once its directory holds COMPLETE, written last: a save cut short (the
pod killed after its grace period) leaves a directory without it, which is never loaded. Only
rank 0 writes; every rank loads. Runs under torchrun (WORLD_SIZE > 1: gloo on CPU, NCCL on GPUs)
or alone. The model and data are stand-ins: a linear model on data drawn from the step number,
so a run resumed from step N continues exactly as one that never stopped.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist

COMPLETE = "COMPLETE"
STEP_DIR = re.compile(r"^step-(\d{8})$")
# What a process killed by SIGTERM exits with (128 + 15): the Job counts the pod as failed, never
# as an index that completed.
SIGTERM_EXIT = 143


class Stop:
    """Set by SIGTERM; the loop checks it between steps, so a save never races a step."""

    requested = False

    @classmethod
    def on_sigterm(cls, signum: int, frame: FrameType | None) -> None:
        cls.requested = True


def stopping(distributed: bool, device: torch.device) -> bool:
    """Whether any rank got SIGTERM: all stop after the same step, or the next step's all-reduce
    would wait for the ranks that left."""
    if not distributed:
        return Stop.requested
    flag = torch.tensor([1 if Stop.requested else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    Stop.requested = bool(flag.item())
    return Stop.requested


def newest_complete(root: Path) -> Path | None:
    found = [
        (int(m.group(1)), d)
        for d in (root.iterdir() if root.is_dir() else ())
        if (m := STEP_DIR.match(d.name)) and (d / COMPLETE).is_file()
    ]
    return max(found)[1] if found else None


def save(
    root: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, keep: int
) -> Path:
    """Writes step-<step>/ through a temporary directory, COMPLETE last, then drops all but the
    `keep` newest complete checkpoints."""
    final = root / f"step-{step:08d}"
    partial = root / f".partial-step-{step:08d}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, partial / "state.pt")
    with open(partial / "state.pt", "rb") as written:
        os.fsync(written.fileno())
    (partial / COMPLETE).write_text(f"{step}\n")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    complete = sorted(
        d for d in root.iterdir() if STEP_DIR.match(d.name) and (d / COMPLETE).is_file()
    )
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def batch(step: int, size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The data of `step`, the same whenever it is drawn."""
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(size, 8, generator=generator)
    return x, x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.01 * torch.randn(
        size, 1, generator=generator
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, required=True, help="train up to this step")
    parser.add_argument("--save-every", type=int, default=100)
    parser.add_argument("--keep", type=int, default=2, help="complete checkpoints kept")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR"))
    parser.add_argument("--step-seconds", type=float, default=0.0, help="stand-in work per step")
    args = parser.parse_args()
    if not args.checkpoint_dir:
        parser.error("give --checkpoint-dir or set CHECKPOINT_DIR")
    root = Path(args.checkpoint_dir)
    signal.signal(signal.SIGTERM, Stop.on_sigterm)

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else None
    device = device or torch.device("cpu")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    newest = newest_complete(root)
    if newest is not None:
        state = torch.load(newest / "state.pt", map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        print(f"resumed from step {step} ({newest})", flush=True)
    trained: torch.nn.Module = (
        torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    )

    while step < args.steps and not stopping(distributed, device):
        step += 1
        x, y = (t.to(device) for t in batch(step))
        loss = torch.nn.functional.mse_loss(trained(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]  # torch 2.13 leaves Tensor.backward unannotated
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)
        if rank == 0 and step % args.save_every == 0:
            save(root, step, model, optimizer, args.keep)
        time.sleep(args.step_seconds)
    if Stop.requested:
        if rank == 0:
            print(f"SIGTERM: saved {save(root, step, model, optimizer, args.keep)}", flush=True)
        return SIGTERM_EXIT
    if rank == 0 and step % args.save_every != 0:
        save(root, step, model, optimizer, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
