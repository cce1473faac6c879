"""Generate the benchmark trace sets in bench/out/ by running real training.

Two sets, both real torch.profiler output of torch 2.13 on CPU:

- ``bench/out/set_4rank/rank_{0..3}/rank{r}.pt.trace.json`` — 4 ranks, torch.distributed with the
  gloo backend, a small Transformer language model under DistributedDataParallel, trained with
  AdamW; torch.profiler with ``record_shapes``, ``profile_memory`` and ``with_stack`` (so the mix is
  the one users have: ``cpu_op``, ``python_function``, ``[memory]`` instant events,
  ``user_annotation`` for ``ProfilerStep#N`` and ``gloo:all_reduce``, ``fwdbwd`` flows).
  About 350 MB in all (design.md measured its peers on 343 MB / 956 k events).
- ``bench/out/set_4rank_small/`` — the same job with 12 profiled steps: 4 x ~23 MB, the size of
  set users ingest most often (fixed costs — start-up, imports, the pool — weigh as much as throughput).
- ``bench/out/single_1gb/rank_0/rank0.pt.trace.json`` — one rank of a separate 2-rank run of the
  same job with more profiled steps, so the one file is about 1 GB. Real training as well: no
  events are replicated. Only rank 0 keeps its trace (rank 1 profiles too, so that its
  collectives behave the same, but its file is deleted).

torch.profiler keeps every event of the window in memory until it exports, so the 1 GB run is
profiled in one window and needs a few GB of RAM for a minute. Needs torch
(``pip install torch==2.13.0``); the analyzer itself never imports torch.

    python bench/make_traces.py                # both sets (skips a set that already exists)
    python bench/make_traces.py --set set_4rank --force
    python bench/make_traces.py --set set_4rank --steps 20     # a smaller set, for a quick try
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

# name: (world size, profiled steps, ranks whose trace is kept). Steps calibrated on torch 2.13 CPU
# so that the set is ~350 MB (4 ranks) and the single trace ~1 GB.
SETS: dict[str, tuple[int, int, tuple[int, ...]]] = {
    "set_4rank": (4, 48, (0, 1, 2, 3)),
    "set_4rank_small": (4, 12, (0, 1, 2, 3)),  # ~23 MB per rank: the size users ingest most often
    "single_1gb": (2, 540, (0,)),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank: int, world: int, port: int, out: str, steps: int, keep: tuple[int, ...]) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    vocab, d_model, seq, batch = 512, 64, 32, 8

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.enc(self.emb(x)))

    model = nn.parallel.DistributedDataParallel(TinyLM(), bucket_cap_mb=1)
    # foreach=False: one optimizer op per parameter, as with many real optimizers' fallbacks
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    rank_dir = Path(out) / f"rank_{rank}"
    rank_dir.mkdir(parents=True, exist_ok=True)
    trace = rank_dir / f"rank{rank}.pt.trace.json"

    def on_ready(p: profile) -> None:
        p.export_chrome_trace(str(trace))
        if rank not in keep:
            trace.unlink(missing_ok=True)
            shutil.rmtree(rank_dir, ignore_errors=True)

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=steps),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        on_trace_ready=on_ready,
    ) as prof:
        for _ in range(steps + 2):
            x = torch.randint(0, vocab, (batch, seq))
            y = torch.randint(0, vocab, (batch, seq))
            loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def count_events(path: Path) -> int:
    """Events in a torch 2.13 trace, by counting the lines that open an event (pretty-printed)."""
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line == b"  {\n":
                n += 1
    return n


def generate(name: str, steps: int | None = None) -> Path:
    import torch.multiprocessing as tmp

    world, default_steps, keep = SETS[name]
    steps = steps or default_steps
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    tmp.spawn(_train, args=(world, _free_port(), str(out), steps, keep), nprocs=world, join=True)
    files = sorted(out.glob("rank_*/*.json"))
    info = {
        "set": name,
        "made_by": "bench/make_traces.py (real training, torch.profiler; no replicated events)",
        "world_size": world,
        "profiled_steps": steps,
        "seconds": round(time.perf_counter() - t0, 1),
        "files": [
            {"path": str(f.relative_to(out)), "bytes": f.stat().st_size, "events": count_events(f)} for f in files
        ],
    }
    info["total_bytes"] = sum(f["bytes"] for f in info["files"])
    info["total_events"] = sum(f["events"] for f in info["files"])
    (OUT / f"{name}.json").write_text(json.dumps(info, indent=1))
    print(
        f"{name}: {len(files)} file(s), {info['total_bytes'] / 1e6:.0f} MB, {info['total_events']:,} events, "
        f"{info['seconds']} s"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", choices=sorted(SETS), help="default: all sets")
    ap.add_argument("--steps", type=int, help="profiled steps (default: the calibrated number of the set)")
    ap.add_argument("--force", action="store_true", help="regenerate a set that already exists")
    args = ap.parse_args(argv)
    for name in args.set or list(SETS):
        if (OUT / f"{name}.json").exists() and not args.force and args.steps is None:
            print(f"{name}: exists ({OUT / name}); --force to regenerate")
            continue
        generate(name, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
