"""Real training runs that differ in known ways, for comparing runs (`analyze diff`, `analyze check`).

4 ranks of data-parallel training (DDP over gloo, torch 2.13 CPU), profiled by rankscope's
collector (torch.profiler backend, record_shapes and with_memory, steps ``START``..``END - 1``,
one trace per step). Each configuration runs in 4 processes of its own, forked from the parent after
it imported torch and the collector (imported once: the whole set takes about a minute, 32 s CPU), with
a fresh model and a fresh DDP wrapper, into ``OUT/<config>/rank_{r}/``:

========== ===================================================================================
config     differs from ``base`` in
========== ===================================================================================
base       (hidden size ``HIDDEN``, DDP's default buckets, ``MICRO`` micro-batch, no slow rank)
rerun      nothing: the same configuration run again (the run-to-run noise)
hidden     hidden size ``2 * HIDDEN`` (the two square layers' compute x4, gradients x~3.9)
bucket     DDP ``bucket_cap_mb`` ``SMALL_BUCKET_MB`` (gradients all-reduced in several buckets)
slow       rank ``SLOW_RANK`` sleeps ``SLEEP_S`` after its backward pass every step
micro      ``2 * MICRO`` micro-batches per step (gradient accumulation with ``no_sync``)
========== ===================================================================================

Needs torch (``pip install torch==2.13.0``). The tests run it once per session (``tests/conftest.py``);
by hand::

    python tests/data/make_compare_runs.py OUT [CONFIG ...]
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the repo's collector, also when rankscope is not installed

WORLD = 4
IN_FEATURES = 64
HIDDEN = 256
CLASSES = 10
BATCH = 64
MICRO = 1
SMALL_BUCKET_MB = 0.05  # 50 kB: the square layers (256 kB of gradient each) get a bucket each
SLOW_RANK = 2
SLEEP_S = 0.4
START, END = 2, 8  # profiled steps [START, END): after two steps for DDP's bucket rebuild and warm-up

# config -> what differs from base
CONFIGS: dict[str, dict[str, Any]] = {
    "base": {},
    "rerun": {},
    "hidden": {"hidden": 2 * HIDDEN},
    "bucket": {"bucket_cap_mb": SMALL_BUCKET_MB},
    "slow": {"slow_rank": SLOW_RANK},
    "micro": {"micro": 2 * MICRO},
}


def settings(config: str) -> dict[str, Any]:
    """Every setting of a configuration (the defaults with the config's change)."""
    out = {"hidden": HIDDEN, "bucket_cap_mb": None, "slow_rank": None, "micro": MICRO}
    out.update(CONFIGS[config])
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _warm_up() -> None:
    """A few profiled steps of a small model, kept nowhere: the first profiler session and the first
    collectives of a process pay one-time costs (Kineto's start, gloo's connections), which would
    otherwise land in the profiled steps."""
    import torch
    import torch.nn as nn
    from torch.profiler import profile

    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Linear(HIDDEN, CLASSES))
    )
    with profile(record_shapes=True, profile_memory=True):
        for _ in range(3):
            model(torch.randn(BATCH, IN_FEATURES)).sum().backward()


def _run_config(rank: int, name: str, out: Path) -> None:
    import time

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    from collector import Profiler

    s = settings(name)
    torch.manual_seed(0)
    h = s["hidden"]
    model = nn.Sequential(
        nn.Linear(IN_FEATURES, h),
        nn.ReLU(),
        nn.Linear(h, h),
        nn.ReLU(),
        nn.Linear(h, h),
        nn.ReLU(),
        nn.Linear(h, CLASSES),
    )
    kw = {} if s["bucket_cap_mb"] is None else {"bucket_cap_mb": s["bucket_cap_mb"]}
    ddp = nn.parallel.DistributedDataParallel(model, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    config = {
        "profile_type": "static",
        "ranks": [-1],
        "backend": "torch",
        "static_param": {
            "save_path": str(out / name),
            "start_step": START,
            "end_step": END,
            "record_shapes": True,
            "with_memory": True,
        },
    }
    gen = torch.Generator().manual_seed(rank)
    dist.barrier()  # every rank starts the configuration together
    with Profiler(config) as prof:
        for _ in range(END + 1):
            opt.zero_grad()
            micro = s["micro"]
            for m in range(micro):
                x = torch.randn(BATCH, IN_FEATURES, generator=gen)
                y = torch.randint(0, CLASSES, (BATCH,), generator=gen)
                if m < micro - 1:
                    with ddp.no_sync():  # gradients accumulate; only the last micro-batch all-reduces
                        (nn.functional.cross_entropy(ddp(x), y) / micro).backward()
                else:
                    loss = nn.functional.cross_entropy(ddp(x), y) / micro
                    loss.backward()
            if s["slow_rank"] == rank:
                time.sleep(SLEEP_S)  # e.g. a slow data loader or extra host work on one rank
            opt.step()
            prof.step(loss=float(loss))
    dist.barrier()


def _train(rank: int, port: int, out: str, name: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    _warm_up()
    _run_config(rank, name, Path(out))
    # every rank leaves together (torch 2.13 + gloo can abort at exit when a peer is still tearing down)
    dist.barrier()
    dist.destroy_process_group()


def generate(out: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Run the configurations (default: all) into ``out/<config>``; returns config -> folder.

    Each configuration runs in its own 4 processes, forked from this one after it imported torch (so
    torch is imported once): the allocator's memory accounting, which torch.profiler reports as the
    process's total allocated bytes, starts afresh for each, as in separate jobs."""
    # imported here once: the forked ranks inherit them
    import torch.distributed
    import torch.multiprocessing as tmp
    import torch.nn
    import torch.profiler  # noqa: F401

    import collector  # noqa: F401

    names = list(names or CONFIGS)
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; there are {sorted(CONFIGS)}")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        tmp.start_processes(_train, args=(_free_port(), str(out), name), nprocs=WORLD, join=True, start_method="fork")
    return {n: out / n for n in names}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for name, folder in generate(Path(sys.argv[1]), sys.argv[2:]).items():
        print(f"{name}: {folder}")
