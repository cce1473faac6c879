"""Regenerate tests/data/kineto_gloo_4rank_slow/ by running real 4-rank gloo training on CPU.

The job is a 2-stage pipeline (PP=2) with data parallelism inside each stage (DP=2), laid out like
Megatron (rank = pp_rank * DP + dp_rank): stage 0 = ranks {0, 1}, stage 1 = ranks {2, 3}; DP
groups {0, 1} and {2, 3}; PP groups {0, 2} and {1, 3}. Groups are created without names, so the
analyses must infer the layout from the communication itself.

Each step: two micro-batches flow forward (stage 0 sends activations to its PP peer, which waits
in ``recv``: the pipeline bubble) and backward (stage 1 sends gradients back); gradients are
all-reduced in the DP group, one collective per parameter (different sizes); then every rank joins
two world all-reduces. Between them rank 1 sleeps ``SLEEP_S`` (extra host work on one rank), so
the three others wait for it in the second one: rank 1 is the slow rank the analyses must name.

Needs torch (``pip install torch==2.13.0``); the traces are committed (gzip), tests do not run this.

    python tests/data/make_slow_rank.py
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "kineto_gloo_4rank_slow"
WORLD = 4
DP = 2
STEPS = 6
SLOW_RANK = 1
SLEEP_S = 0.03
MICRO_BATCHES = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank: int, port: int, out: str) -> None:
    import time

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    pp_rank, dp_rank = divmod(rank, DP)
    # every rank must create every group, in the same order
    dp_groups = [dist.new_group([s * DP + d for d in range(DP)]) for s in range(WORLD // DP)]
    pp_groups = [dist.new_group([s * DP + d for s in range(WORLD // DP)]) for d in range(DP)]
    dp_group, pp_group = dp_groups[pp_rank], pp_groups[dp_rank]
    peer = (1 - pp_rank) * DP + dp_rank
    if pp_rank == 0:
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512))
    else:
        model = nn.Sequential(nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rank_dir = Path(out) / f"rank_{rank}"
    rank_dir.mkdir(parents=True, exist_ok=True)

    def on_ready(p: profile) -> None:
        plain = rank_dir / f"rank{rank}.pt.trace.json"
        p.export_chrome_trace(str(plain))
        with open(plain, "rb") as src, gzip.open(str(plain) + ".gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        plain.unlink()

    mb = 32
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=STEPS),
        record_shapes=True,
        on_trace_ready=on_ready,
    ) as prof:
        for _ in range(STEPS + 2):
            opt.zero_grad()
            loss_sum = torch.zeros(1)
            if pp_rank == 0:
                outs = []
                for _m in range(MICRO_BATCHES):
                    y = model(torch.randn(mb, 256))
                    dist.send(y.detach(), dst=peer, group=pp_group)
                    outs.append(y)
                for y in outs:
                    g = torch.empty_like(y)
                    dist.recv(g, src=peer, group=pp_group)
                    y.backward(g)
            else:
                acts, losses = [], []
                for _m in range(MICRO_BATCHES):  # all forwards first (GPipe), then all backwards
                    a = torch.empty(mb, 512)
                    dist.recv(a, src=peer, group=pp_group)
                    a.requires_grad_()
                    acts.append(a)
                    losses.append(nn.functional.cross_entropy(model(a), torch.randint(0, 10, (mb,))) / MICRO_BATCHES)
                for a, loss in zip(acts, losses):
                    loss.backward()
                    dist.send(a.grad, dst=peer, group=pp_group)
                    loss_sum += loss.detach()
            for p in model.parameters():
                dist.all_reduce(p.grad, group=dp_group)
                p.grad /= DP
            dist.all_reduce(torch.ones(1))  # world group: everybody in step
            if rank == SLOW_RANK:
                time.sleep(SLEEP_S)  # e.g. extra host work on one rank
            dist.all_reduce(loss_sum)  # world group: everyone waits for the slow rank here
            opt.step()
            prof.step()
    # every rank leaves together: torch 2.13 + gloo aborted at interpreter exit ('terminate called
    # without an active exception', SIGABRT) in 7 of 25 plain torchrun runs of this script on a loaded
    # 2-core machine when one rank tore down while its peer was still in destroy_process_group
    dist.barrier()
    dist.destroy_process_group()


def generate(out: Path = OUT) -> Path:
    import torch.multiprocessing as tmp

    shutil.rmtree(out, ignore_errors=True)
    tmp.spawn(_train, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return out


if __name__ == "__main__":
    print(f"generated {generate()}")
    sys.exit(0)
