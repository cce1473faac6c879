"""Tiny real CPU training driven by the collector's API, for the collector tests (run as a process).

    python train.py --config JSON [--steps N] [--crash exception|sigterm|sigint|exit --crash-at K]
                    [--pause-at 2,4 --sync DIR]

--sleep-at 20,41 makes those steps sleep --sleep-s seconds (step-time outliers); --scalar NAME
passes one more scalar of that name (the step number x 0.5: a name from the user).
--crash makes step K fail in the middle (after forward/backward, before the optimizer step).
--pause-at makes the process stop
after the given steps' boundaries until the test creates ``SYNC/go_{step}`` (it first writes
``SYNC/ready_{step}``, ``SYNC/ready_{step}.r{rank}`` in a job of several ranks), so a test can edit a
dynamic config at a known point.
With WORLD_SIZE > 1 in the environment (and RANK, MASTER_ADDR, MASTER_PORT) the process is one rank
of a gloo job training a DDP model.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def _train(args: argparse.Namespace) -> None:
    import torch
    import torch.nn as nn

    from collector import Profiler

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    pauses = {int(s) for s in args.pause_at.split(",") if s} if args.pause_at else set()
    sleeps = {int(s) for s in args.sleep_at.split(",") if s}
    prof = Profiler(json.loads(args.config))
    prof.start()
    for step in range(args.steps):
        x = torch.randn(16, 32)
        y = torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if args.crash and step == args.crash_at:
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
        if step in sleeps:
            time.sleep(args.sleep_s)
        extra = {args.scalar: step * 0.5} if args.scalar else {}
        prof.step(loss=loss.item(), lr=0.05, **extra)
        if step in pauses and args.sync:
            sync = Path(args.sync)
            ready = f"ready_{step}" + (f".r{os.environ['RANK']}" if world > 1 else "")
            (sync / ready).write_text(str(prof.step_num))
            deadline = time.time() + 120
            while not (sync / f"go_{step}").exists():
                if time.time() > deadline:
                    raise SystemExit(f"no go_{step} from the test")
                time.sleep(0.02)
    prof.stop()
    if world > 1:  # every rank leaves together (see unmodified_train.py)
        dist.barrier()
        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--crash", choices=["exception", "sigterm", "sigint", "exit"])
    ap.add_argument("--crash-at", type=int, default=-1)
    ap.add_argument("--pause-at", default="")
    ap.add_argument("--sync")
    ap.add_argument("--sleep-at", default="")
    ap.add_argument("--sleep-s", type=float, default=1.0)
    ap.add_argument("--scalar")
    _train(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
