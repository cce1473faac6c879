"""Tiny real CPU training driven by the collector's API, for the collector tests (run as a process).

    python train.py --out DIR --config JSON [--steps N] [--world W]
                    [--crash exception|sigterm|sigint|exit --crash-at K]
                    [--pause-at 2,4 --sync DIR]

--world 2 runs 2 ranks with torch.multiprocessing + gloo (DDP). --crash makes step K fail in the
middle (after forward/backward, before the optimizer step). --pause-at makes the process stop
after the given steps' boundaries until the test creates ``SYNC/go_{step}`` (it first writes
``SYNC/ready_{step}``), so a test can edit a dynamic config at a known point.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path


def _train(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    import torch
    import torch.nn as nn

    from collector import Profiler

    if world > 1:
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model: nn.Module = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    pauses = {int(s) for s in args.pause_at.split(",") if s} if args.pause_at else set()
    prof = Profiler(json.loads(args.config))
    prof.start()
    for step in range(args.steps):
        x = torch.randn(16, 32)
        y = torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if args.crash and step == args.crash_at and rank == args.crash_rank:
            if args.crash == "exception":
                raise RuntimeError(f"boom at step {step}")
            if args.crash == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            if args.crash == "sigint":
                os.kill(os.getpid(), signal.SIGINT)
            if args.crash == "exit":
                os._exit(3)
            time.sleep(5)  # the signal is delivered before this returns
        opt.step()
        prof.step(loss=loss.item(), lr=0.05)
        if step in pauses and args.sync:
            sync = Path(args.sync)
            (sync / f"ready_{step}").write_text(str(prof.step_num))
            deadline = time.time() + 120
            while not (sync / f"go_{step}").exists():
                if time.time() > deadline:
                    raise SystemExit(f"no go_{step} from the test")
                time.sleep(0.02)
    prof.stop()
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--crash", choices=["exception", "sigterm", "sigint", "exit"])
    ap.add_argument("--crash-at", type=int, default=-1)
    ap.add_argument("--crash-rank", type=int, default=0)
    ap.add_argument("--pause-at", default="")
    ap.add_argument("--sync")
    args = ap.parse_args()
    if args.world == 1:
        _train(0, 1, 0, args)
        return
    import torch.multiprocessing as tmp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp.spawn(_train, args=(args.world, port, args), nprocs=args.world, join=True)


if __name__ == "__main__":
    sys.exit(main())
