"""Regenerate the Kineto sample traces in sample_data/ by running real training under the collector.

2 ranks, torch.distributed with the gloo backend on CPU (DDP), profiled by rankscope's collector
(``from collector import Profiler``) with the torch.profiler backend: record_shapes,
with_memory (profile_memory) and with_stack, a static window over steps 2 and 3 after one warm-up
step, one trace file per step, plus the always-on step scalars (step wall time and loss). The
output is exactly what a user of the collector gets:

    sample_data/kineto_gloo_2rank/rank_{r}/rankscope_scalars.jsonl
    sample_data/kineto_gloo_2rank/rank_{r}/window_step2/rankscope_window.json
    sample_data/kineto_gloo_2rank/rank_{r}/window_step2/rank{r}_step00000{2,3}.pt.trace.json

Needs torch (`pip install torch==2.13.0`); the traces are committed, so users of the sample data
do not.

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
sys.path.insert(0, str(HERE.parent))  # the repo's collector, also when rankscope is not installed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank: int, world: int, port: int, out: str, window: tuple[int, int], slow_rank: int | None) -> None:
    import time

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    from collector import Profiler

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start, end = window
    config = {
        "profile_type": "static",
        "ranks": [-1],
        "backend": "torch",
        "static_param": {
            "save_path": out,
            "start_step": start,
            "end_step": end,
            "warmup": 1,
            "record_shapes": True,
            "with_memory": True,
            "with_stack": True,
        },
    }
    with Profiler(config) as prof:
        for _ in range(end + 1):
            x = torch.randn(64, 256)
            y = torch.randint(0, 10, (64,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if slow_rank is not None and rank == slow_rank:
                time.sleep(0.02)
            opt.step()
            prof.step(loss=loss.item())
    # every rank leaves together: torch 2.13 + gloo aborted at interpreter exit ('terminate called
    # without an active exception', SIGABRT) in 7 of 25 plain torchrun runs of this script on a loaded
    # 2-core machine when one rank tore down while its peer was still in destroy_process_group
    dist.barrier()
    dist.destroy_process_group()


SCENARIOS = {
    # name: (world size, profiled steps [start, end), slow rank)
    "kineto_gloo_2rank": (2, (2, 4), None),
}


def generate(name: str) -> Path:
    import torch.multiprocessing as tmp

    world, window, slow = SCENARIOS[name]
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    port = _free_port()
    cwd = os.getcwd()
    os.chdir(HERE)  # relative save_path: no absolute path of this machine in the committed files
    try:
        tmp.spawn(_train, args=(world, port, name, window, slow), nprocs=world, join=True)
    finally:
        os.chdir(cwd)
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
