"""Regenerate the Kineto sample traces in sample_data/ by running real training.

2 ranks, torch.distributed with the gloo backend on CPU, torch.profiler with shapes, memory and
stacks. Needs torch (`pip install torch==2.13.0`); the traces are committed, so users of the
sample data do not.

    python sample_data/generate.py            # all scenarios
    python sample_data/generate.py kineto_gloo_2rank
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank: int, world: int, port: int, out: str, steps: int, slow_rank: int | None) -> None:
    import time

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rank_dir = Path(out) / f"rank_{rank}"
    rank_dir.mkdir(parents=True, exist_ok=True)

    def on_ready(p: profile) -> None:
        p.export_chrome_trace(str(rank_dir / f"rank{rank}.pt.trace.json"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=steps),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        on_trace_ready=on_ready,
    ) as prof:
        for _ in range(steps + 2):
            x = torch.randn(64, 256)
            y = torch.randint(0, 10, (64,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if slow_rank is not None and rank == slow_rank:
                time.sleep(0.02)
            opt.step()
            prof.step()
    dist.destroy_process_group()


SCENARIOS = {
    # name: (world size, profiled steps, slow rank)
    "kineto_gloo_2rank": (2, 3, None),
}


def generate(name: str) -> Path:
    import torch.multiprocessing as tmp

    world, steps, slow = SCENARIOS[name]
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    port = _free_port()
    tmp.spawn(_train, args=(world, port, str(out), steps, slow), nprocs=world, join=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {sorted(SCENARIOS)}")
    args = ap.parse_args(argv)
    for name in args.scenarios or sorted(SCENARIOS):
        print(f"generated {generate(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
