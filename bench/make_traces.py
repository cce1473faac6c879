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
- ``bench/out/single_1gb/rank_0/rank0.pt.trace.json`` — one rank's trace of about 1 GB, scaled up
  from ``bench/out/single_seed/`` (rank 0 of a separate 2-rank run of the same job, 20 profiled
  steps, ~37 MB; rank 1 profiles too, so that its collectives behave the same, but its file is
  deleted): the seed's steps are written 27 times over (540 steps) in torch.profiler's own layout,
  each copy's timestamps shifted by the seed's step pitch times its step count, its
  ``ProfilerStep#N`` renumbered and its ids (``External id``, ``Ev Idx``, ``Python id``, flow ids,
  ``Sequence number``) moved past the previous copy's (``scale``). The events before the first step
  are written once, and the profiler's closing span and window end are moved to the last copy's end.
  Profiling 540 real steps held ~7.5 GB of RAM for a minute (torch.profiler keeps every event of
  the window until it exports); the seed needs a few hundred MB.

Needs torch (``pip install torch==2.13.0``); the analyzer itself never imports torch.

    python bench/make_traces.py                # both sets (skips a set that already exists)
    python bench/make_traces.py --set set_4rank --force
    python bench/make_traces.py --set set_4rank --steps 20     # a smaller set, for a quick try
    python bench/make_traces.py --set single_1gb --copies 8    # a ~300 MB single trace from the seed
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
    "single_seed": (2, 20, (0,)),  # real steps that single_1gb repeats
}
# name: (seed set, copies of its steps)
SCALED: dict[str, tuple[str, int]] = {"single_1gb": ("single_seed", 27)}


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


# the fields a copy of the seed's steps changes: times (µs with three decimals, as torch writes
# them), step numbers, and ids that name one event (or one flow) of the trace
_SHIFT_RE = re.compile(
    r'(?P<tk>"ts": )(?P<ti>\d+)\.(?P<tf>\d{3})'
    r'|(?P<sk>"name": "ProfilerStep#)(?P<sn>\d+)'
    r'|(?P<ik>"(?P<iname>External id|Ev Idx|Python id|Python parent id|Sequence number|id)": )(?P<iv>\d+)'
)
_EVENT_SEP = "\n  },\n  {\n"  # torch.profiler's layout: one event after the other at an indent of two


def _field(item: str, key: str) -> str | None:
    m = re.search(rf'\n    "{key}": ("[^"\n]*"|[^,\n]*)', item)
    return m.group(1).strip('"') if m else None


def _ns(ts: str) -> int:
    whole, _, frac = ts.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def scale(seed: Path, out: Path, copies: int) -> None:
    """Write ``seed`` (a trace in torch.profiler's pretty layout) with its steps ``copies`` times over
    (see the module's text): one event at a time, through the JSON text, so the result is what
    torch would have written for a longer window of the same steps."""
    text = seed.read_text()
    head_end = text.index("\n  {\n", text.index('"traceEvents": [')) + 1
    tail_start = text.rindex("\n  }\n  ]") + len("\n  }")
    items = text[head_end + len("  {\n") : tail_start - len("\n  }")].split(_EVENT_SEP)
    steps = sorted(
        (_ns(_field(it, "ts") or "0"), _ns(_field(it, "dur") or "0"))
        for it in items
        if (_field(it, "name") or "").startswith("ProfilerStep#")
    )
    first, n = steps[0][0], len(steps)
    period = (steps[-1][0] - first) * n // (n - 1)  # the step pitch times the steps
    trailer = {"Spans", "Traces", ""}  # the profiler's own span, iteration start and window end
    body, kept, closing = [], [], []
    for it in items:
        pid, ph = _field(it, "pid"), _field(it, "ph")
        if pid in trailer:
            closing.append(it)
        elif ph != "M" and first <= _ns(_field(it, "ts") or "0") < first + period:
            body.append(it)
            kept.append(it)
        else:
            kept.append(it)
    body_text = _EVENT_SEP.join(body)
    top = {k: max((int(v) for v in re.findall(rf'"{k}": (\d+)', text)), default=0) + 1 for k in _ID_KEYS}
    first_python = min((int(v) for v in re.findall(r'"Python id": (\d+)', body_text)), default=0)

    def shifted(chunk: str, k: int) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group("tk"):
                t = int(m.group("ti")) * 1000 + int(m.group("tf")) + k * period
                return f"{m.group('tk')}{t // 1000}.{t % 1000:03d}"
            if m.group("sk"):
                return f"{m.group('sk')}{int(m.group('sn')) + k * n}"
            name, v = m.group("iname"), int(m.group("iv"))
            if name == "Python parent id":  # a parent outside the steps (the training loop) stays
                return m.group(0) if v < first_python else f"{m.group('ik')}{v + k * top['Python id']}"
            return f"{m.group('ik')}{v + k * top[name]}"

        return _SHIFT_RE.sub(sub, chunk)

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write(text[:head_end] + "  {\n" + _EVENT_SEP.join(kept))
        for k in range(1, copies):
            f.write(_EVENT_SEP + shifted(body_text, k))
        for it in closing:  # the profiler's span and window end: to the last copy's end
            if _field(it, "ph") == "X" and _field(it, "dur"):
                d = _ns(_field(it, "dur") or "0") + (copies - 1) * period
                it = re.sub(r'"dur": [\d.]+', f'"dur": {d // 1000}.{d % 1000:03d}', it)
            elif _field(it, "name") == "Record Window End":
                it = shifted(it, copies - 1)
            f.write(_EVENT_SEP + it)
        f.write(text[tail_start - len("\n  }") :])


_ID_KEYS = ("External id", "Ev Idx", "Python id", "Sequence number", "id")


def _describe(name: str, out: Path, t0: float, **extra: object) -> None:
    files = sorted(out.glob("rank_*/*.json"))
    info = {
        "set": name,
        **extra,
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


def generate(name: str, steps: int | None = None, copies: int | None = None) -> Path:
    out = OUT / name
    if name in SCALED:
        seed_name, default_copies = SCALED[name]
        seed = OUT / seed_name
        if not (OUT / f"{seed_name}.json").exists():
            generate(seed_name, steps)
        copies = copies or default_copies
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        for f in sorted(seed.glob("rank_*/*.json")):
            scale(f, out / f.relative_to(seed), copies)
        made_by = f"bench/make_traces.py scale: the steps of {seed_name} (real training) written {copies} times"
        _describe(name, out, t0, made_by=made_by, copies=copies)
        return out
    import torch.multiprocessing as tmp

    world, default_steps, keep = SETS[name]
    steps = steps or default_steps
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    tmp.spawn(_train, args=(world, _free_port(), str(out), steps, keep), nprocs=world, join=True)
    made_by = "bench/make_traces.py (real training, torch.profiler; no replicated events)"
    _describe(name, out, t0, made_by=made_by, world_size=world, profiled_steps=steps)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", choices=sorted([*SETS, *SCALED]), help="default: all sets")
    ap.add_argument("--steps", type=int, help="profiled steps (default: the calibrated number of the set)")
    ap.add_argument("--copies", type=int, help="copies of the seed's steps in a scaled set (default: its own)")
    ap.add_argument("--force", action="store_true", help="regenerate a set that already exists")
    args = ap.parse_args(argv)
    for name in args.set or [*SETS, *SCALED]:
        if (OUT / f"{name}.json").exists() and not args.force and args.steps is None and args.copies is None:
            print(f"{name}: exists ({OUT / name}); --force to regenerate")
            continue
        generate(name, args.steps, args.copies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
