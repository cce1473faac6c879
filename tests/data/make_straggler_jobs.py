"""Real data-parallel training with one slow rank, profiled by the collector: the straggler tests' jobs.

``world`` ranks (2, 3, 4 ...) train one small MLP with torch.distributed over gloo on CPU: every
step a batch comes from a ``DataLoader`` (in-process), forward, backward, the gradients are
all-reduced (one flat tensor) and the loss is all-reduced. One launch runs every *mode* one after
the other, each as its own profiled job (``OUT/<mode>/rank_{r}/...``, one ``analyze ingest`` each):

- ``control``: no rank is slow;
- ``sleep``: the slow rank sleeps ``delay`` right before the gradient all-reduce (host-side wait);
- ``compute``: the slow rank multiplies matrices for ``delay`` before it (extra compute);
- ``input``: the slow rank's dataset takes ``delay`` per batch (a slow input pipeline: its
  ``__getitem__`` waits, as on a slow disk).

Every batch takes ``READ_S`` to read on every rank (a sleep: I/O, no CPU), the ranks run at a
higher scheduling priority (``NICE``) when allowed, and in the slow modes the slow rank has a CPU
core of its own (the others share the rest; in the control every rank has the same share, see
``_cores``): on a shared machine other processes' load would otherwise starve
some rank at random (on two cores loaded ~5x over, one rank of a 2-rank control arrived 15 ms
late at every step of a 21 ms step, a real straggler the control is not meant to have), and the
slow rank's extra compute would slow its peers too (their arrival ~10 ms later, the margin it
costs them that much shorter than the compute), which ranks on their own devices do not do.

torch.profiler records ``steps`` steps after ``warmup`` steps (``ProfilerStep#warmup`` …), one
trace per rank written after the window (``OUT/<mode>/rank_{r}/rank{r}.pt.trace.json``), so nothing
but the training runs between the profiled steps. The time each step's injection really took
(perf_counter) is in ``rank_{r}/injected.json`` (``injected_ns``: {step: ns}, 0 when nothing was
injected), with the time each step's ``next(loader)`` took (``fetch_ns``: a slow input pipeline
costs its extra fetch time, Python and collation around the slow reads included) and, for each of
the step's two all-reduces (the gradients', then the loss'), the machine's clock just before the
rank called it and again once the call had issued it (``call_ns``: {step: [[before, after], ...]},
``time.monotonic_ns``: one clock for every process of the machine, read without the profiler).
The tests compare the analyses with what was done, not with what was asked (a sleep overshoots, and
on a loaded machine a compute loop takes longer than asked), and with what the job saw: how much
later than its peers each rank called each all-reduce on the machine's clock is the what-if gain
measured without traces, clock alignment or matching, known within the two stamps (microseconds
apart on an idle machine; on a busy one a rank descheduled between its stamp and its call is late in
the trace by as much).

    python tests/data/make_straggler_jobs.py OUT --world 3 --slow-rank 2 --delay-ms 40
    python tests/data/make_straggler_jobs.py OUT --jobs 2:1,3:2,4:1 --delay-ms 50   # OUT/w2, OUT/w3, OUT/w4

Needs torch (``pip install torch==2.13.0``). The tests run it once (test_straggler's module fixture:
every job from one launch, the ranks forked from it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

MODES = ("control", "sleep", "compute", "input")
BATCH = 32
FEATURES = 64
READ_S = 0.02  # every rank's batch takes this long to read (I/O, no CPU): the step is not all CPU
NICE = -10  # scheduling priority of the ranks when the user may raise it (root); else as they are


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Slow:
    """Time spent in the injected slowness since the last ``take()``."""

    def __init__(self) -> None:
        self.ns = 0

    def add(self, t0: float) -> None:
        self.ns += int((time.perf_counter() - t0) * 1e9)

    def take(self) -> int:
        n, self.ns = self.ns, 0
        return n


def _read(items: list) -> tuple:
    """default_collate after the batch's read time (``READ_S``)."""
    from torch.utils.data import default_collate

    time.sleep(READ_S)
    return default_collate(items)


def _call(collective, tensor, stamps: list[list[int]]) -> None:
    """Run one collective as ``dist.all_reduce`` does (issue it, then wait for it), with the machine's
    monotonic clock read just before the call and again when the call has issued it, before the
    wait: the trace's mark of the call lies between the two stamps, whatever the scheduler did in
    between (on a busy machine a rank descheduled right after its first stamp calls the collective
    milliseconds later). Appends [before, after] to ``stamps``."""
    before = time.monotonic_ns()  # one clock for every process of the machine
    work = collective(tensor, async_op=True)
    stamps.append([before, time.monotonic_ns()])
    work.wait()


def _cores(rank: int, world: int, slow_rank: int, mode: str, cpus: list[int]) -> set[int]:
    """The CPU cores a rank may run on in a mode. A slow mode gives the slow rank a core of its own
    (the others share the rest: its extra compute must not slow its peers). The control gives every
    rank the same share: one core each in turn when the ranks divide evenly over the cores, else
    every core (the scheduler balances). With the slow mode's layout in the control too, a 4-rank
    control on 2 cores had rank 1 alone on a core and ranks 0, 2, 3 sharing the other; descheduled
    between their operators, those three showed 2-3 ms (10-11 % of the step) more Free than rank 1
    at every step, a real difference the job made, and the advisor rightly reported it."""
    if mode != "control":
        return {cpus[-1]} if rank == slow_rank else set(cpus[:-1])
    if world % len(cpus) == 0:
        return {cpus[rank % len(cpus)]}
    return set(cpus)


def _train(rank: int, world: int, port: int, out: str, slow_rank: int, delay_s: float, steps: int, warmup: int) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, Dataset

    try:  # ahead of other processes' load on a shared machine: see the module doc
        os.nice(NICE)
    except (PermissionError, OSError):
        pass
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    slow = _Slow()

    class Data(Dataset):
        def __init__(self, n: int, per_item_s: float):
            self.x = torch.randn(n, FEATURES)
            self.y = torch.randint(0, 10, (n,))
            self.per_item_s = per_item_s

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int):
            if self.per_item_s:
                t0 = time.perf_counter()
                time.sleep(self.per_item_s)  # a slow read
                slow.add(t0)
            return self.x[i], self.y[i]

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    t0 = time.perf_counter()
    for _ in range(20):
        torch.mm(a, b)
    per_mm = (time.perf_counter() - t0) / 20

    for mode in MODES:
        me_slow = rank == slow_rank and mode != "control"
        if len(cpus) >= 2:
            os.sched_setaffinity(0, _cores(rank, world, slow_rank, mode, cpus))
        model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        per_item = delay_s / BATCH if me_slow and mode == "input" else 0.0
        loader = iter(
            DataLoader(Data(BATCH * (steps + warmup), per_item), batch_size=BATCH, num_workers=0, collate_fn=_read)
        )
        folder = Path(out) / mode / f"rank_{rank}"
        folder.mkdir(parents=True, exist_ok=True)
        injected: dict[int, int] = {}
        fetch: dict[int, int] = {}
        calls: dict[int, list[list[int]]] = {}

        def on_ready(p: profile, folder: Path = folder) -> None:
            p.export_chrome_trace(str(folder / f"rank{rank}.pt.trace.json"))

        dist.barrier()
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=warmup - 1, warmup=1, active=steps),
            on_trace_ready=on_ready,
        ) as prof:
            for i in range(warmup + steps):
                t_fetch = time.perf_counter()
                x, y = next(loader)
                fetch[i] = int((time.perf_counter() - t_fetch) * 1e9)
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                flat = torch.cat([p.grad.flatten() for p in model.parameters()])
                if me_slow and mode == "sleep":
                    t0 = time.perf_counter()
                    time.sleep(delay_s)
                    slow.add(t0)
                elif me_slow and mode == "compute":
                    t0 = time.perf_counter()
                    while time.perf_counter() - t0 < delay_s - per_mm / 2:
                        torch.mm(a, b)
                    slow.add(t0)
                _call(dist.all_reduce, flat, calls.setdefault(i, []))
                offset = 0
                for p in model.parameters():
                    n = p.grad.numel()
                    p.grad.copy_(flat[offset : offset + n].view_as(p.grad) / world)
                    offset += n
                opt.step()
                total = loss.detach().clone()
                _call(dist.all_reduce, total, calls[i])
                injected[i] = slow.take()  # ProfilerStep#i
                prof.step()
        (folder / "injected.json").write_text(
            json.dumps({"injected_ns": injected, "fetch_ns": fetch, "call_ns": calls})
        )
    # every rank leaves together: torch 2.13 + gloo can abort at interpreter exit when one rank
    # tears down while a peer is still in destroy_process_group (see make_slow_rank.py)
    dist.barrier()
    dist.destroy_process_group()


def generate(
    out: Path, world: int, slow_rank: int, delay_ms: float, steps: int = 8, warmup: int = 2
) -> dict[str, Path]:
    """Run the job; returns {mode: folder to ingest}. The ranks are forked from this process, which
    imports torch once for them (spawned ranks each imported it again: ~2.5 s of CPU per rank)."""
    # imported here once: the forked ranks inherit them
    import torch.distributed
    import torch.multiprocessing as tmp
    import torch.nn
    import torch.profiler
    import torch.utils.data  # noqa: F401

    out.mkdir(parents=True, exist_ok=True)
    args = (world, _free_port(), str(out), slow_rank, delay_ms / 1000, steps, warmup)
    tmp.start_processes(_train, args=args, nprocs=world, join=True, start_method="fork")
    (out / "job.json").write_text(
        json.dumps({"world": world, "slow_rank": slow_rank, "delay_ms": delay_ms, "steps": steps, "warmup": warmup})
    )
    return {m: out / m for m in MODES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--slow-rank", type=int, default=None, help="default: the last rank")
    ap.add_argument("--delay-ms", type=float, default=40.0)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--jobs",
        help="several jobs one after the other, WORLD:SLOW_RANK,... (e.g. 2:1,3:2,4:1), each into OUT/w{WORLD} "
        "(instead of --world/--slow-rank)",
    )
    a = ap.parse_args(argv)
    if a.jobs:
        jobs = [tuple(int(x) for x in j.split(":")) for j in a.jobs.split(",")]
        todo = [(a.out / f"w{world}", world, slow) for world, slow in jobs]
    else:
        todo = [(a.out, a.world, a.world - 1 if a.slow_rank is None else a.slow_rank)]
    for out, world, slow in todo:
        for mode, folder in generate(out, world, slow, a.delay_ms, a.steps, a.warmup).items():
            print(f"{mode}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
