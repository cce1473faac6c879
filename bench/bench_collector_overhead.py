"""Per-step overhead of an armed-but-idle collector, against no collector, in the same run.

    python bench/bench_collector_overhead.py               # 20 000 boundaries per variant + the training check
    python bench/bench_collector_overhead.py --steps 50000 --no-train

Target: under 1 % of a 10 ms step, i.e. under 100 µs per ``prof.step()``.

1. Boundary cost. A loop does a small fixed amount of work per step and then calls, at the
   step boundary, either nothing (baseline: an empty function call) or ``prof.step(loss=...)``
   of a collector that is armed but outside any window. Each boundary call is timed with
   ``perf_counter_ns``; variants run interleaved in rounds so that a busy machine slows all
   alike. Variants:
     - dynamic, default: watched ``profiler_config.json`` (profiling off), checked at most once a
       second, step scalars written every step (the defaults);
     - dynamic, check every step: ``poll_interval_s: 0`` (one ``stat()`` per step, the worst case);
     - static, before its window: a static window far in the future, scalars every step;
     - scalars off: dynamic, ``scalars.enable: false`` (the watch alone).
   Reported: mean, median and p99 of (collector - baseline) per boundary, and the mean as a
   share of a 10 ms step.
2. Training check (needs torch): a real CPU training step sized to ~10 ms (MLP, 1 thread), run
   in triples in rotating order: with the armed dynamic collector, with a no-op ``step()`` in its
   place (the control: what the harness measures when nothing is added), and bare. Reported: the
   median difference to the bare step of each, the collector minus the control, and the
   collector's ``step()`` timed alone right after each real step (slower than in the loop of 1.:
   the CPU caches then hold the model's data, not the collector's code). On a shared
   VM single medians move by ~±1 % from run to run (the control shows how much); the check is
   there to show that nothing hidden costs more than the boundary itself.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector import Profiler

STEP_NS = 10_000_000  # the reference step: 10 ms


def _work(state: list[float]) -> float:
    s = 0.0
    for i in range(200):  # ~10 µs of Python work: keeps the loop from being a pure call benchmark
        s += i * 0.5
    state[0] += s
    return state[0] * 1e-9


def _variant_configs(root: Path) -> dict[str, dict[str, Any]]:
    def dyn(name: str, **extra: Any) -> dict[str, Any]:
        d = {
            "profile_type": "dynamic",
            "static_param": {"save_path": str(root / name / "out")},
            "dynamic_param": {"config_path": str(root / name / "dyn"), "poll_interval_s": 1.0},
        }
        for k, v in extra.items():
            d[k] = {**d.get(k, {}), **v}
        return d

    return {
        "dynamic (defaults: check <= 1/s, scalars every step)": dyn("dyn"),
        "dynamic, check every step (poll_interval_s 0)": dyn("dyn0", dynamic_param={"poll_interval_s": 0}),
        "static, before its window": {
            "static_param": {"save_path": str(root / "static" / "out"), "start_step": 10**9, "end_step": 10**9 + 1}
        },
        "dynamic, scalars off": dyn("noscal", scalars={"enable": False}),
    }


def boundary_costs(steps: int, rounds: int) -> dict[str, list[int]]:
    root = Path(tempfile.mkdtemp(prefix="rankscope-bench-"))
    configs = _variant_configs(root)
    profs = {name: Profiler(cfg, handle_signals=False).start() for name, cfg in configs.items()}

    def noop(**_: Any) -> None:
        return None

    calls: dict[str, Callable[..., None]] = {"baseline (no collector)": noop, **{n: p.step for n, p in profs.items()}}
    samples: dict[str, list[int]] = {n: [] for n in calls}
    state = [0.0]
    per_round = steps // rounds
    gc.disable()
    try:
        for _ in range(rounds):
            for name, call in calls.items():
                out = samples[name]
                pc = time.perf_counter_ns
                for _ in range(per_round):
                    loss = _work(state)
                    t0 = pc()
                    call(loss=loss)
                    out.append(pc() - t0)
    finally:
        gc.enable()
    for p in profs.values():
        p.stop()
    return samples


def training_check(triples: int) -> dict[str, float] | None:
    """Median step (ns) and the median differences (ns) to the bare step of the collector and of the
    no-op control, measured interleaved (see the module docstring)."""
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        return None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 512)

    def step() -> float:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.detach())

    for _ in range(20):
        step()
    t0 = time.perf_counter()
    for _ in range(20):
        step()
    per = (time.perf_counter() - t0) / 20
    reps = max(1, round(0.010 / per))  # make one "step" ~10 ms

    def big_step() -> float:
        v = 0.0
        for _ in range(reps):
            v = step()
        return v

    def noop(**_: Any) -> None:
        return None

    root = Path(tempfile.mkdtemp(prefix="rankscope-bench-train-"))
    cfg = _variant_configs(root)["dynamic (defaults: check <= 1/s, scalars every step)"]
    prof = Profiler(cfg, handle_signals=False).start()
    kinds: list[tuple[str, Callable[..., None] | None]] = [("collector", prof.step), ("control", noop), ("bare", None)]
    times: dict[str, list[int]] = {k: [] for k, _ in kinds}
    calls: list[int] = []  # the collector's step() alone, right after a real step (caches full of the model's data)
    for i in range(triples):  # rotating order: drift of a shared machine and position effects cancel out
        for name, boundary in kinds[i % 3 :] + kinds[: i % 3]:
            t0 = time.perf_counter_ns()
            loss = big_step()
            if boundary is not None:
                t1 = time.perf_counter_ns()
                boundary(loss=loss)
                if name == "collector":
                    calls.append(time.perf_counter_ns() - t1)
            times[name].append(time.perf_counter_ns() - t0)
    prof.stop()
    bare = times["bare"]
    d_col = [a - b for a, b in zip(times["collector"], bare)]
    d_ctl = [a - b for a, b in zip(times["control"], bare)]
    d_net = [a - b for a, b in zip(times["collector"], times["control"])]
    return {
        "step": statistics.median(bare),
        "collector": statistics.median(d_col),
        "control": statistics.median(d_ctl),
        "net": statistics.median(d_net),
        "call_median": statistics.median(calls),
        "call_mean": statistics.fmean(calls),
        "call_p99": sorted(calls)[int(0.99 * len(calls))],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20_000, help="boundaries per variant")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-train", action="store_true", help="skip the torch training check")
    args = ap.parse_args(argv)

    samples = boundary_costs(args.steps, args.rounds)
    base = samples.pop("baseline (no collector)")
    b_mean = statistics.fmean(base)
    print(f"boundary cost, {args.steps} steps per variant, {args.rounds} interleaved rounds")
    print(f"  baseline (no collector): empty call, mean {b_mean / 1000:.2f} µs")
    print(f"  {'variant':55s} {'mean µs':>9s} {'median µs':>10s} {'p99 µs':>8s} {'% of 10 ms':>11s}")
    worst = 0.0
    for name, xs in samples.items():
        xs_sorted = sorted(xs)
        mean = statistics.fmean(xs) - b_mean
        med = statistics.median(xs) - statistics.median(base)
        p99 = xs_sorted[int(0.99 * len(xs_sorted))] - sorted(base)[int(0.99 * len(base))]
        pct = 100 * mean / STEP_NS
        worst = max(worst, pct)
        print(f"  {name:55s} {mean / 1000:9.2f} {med / 1000:10.2f} {p99 / 1000:8.2f} {pct:10.4f}%")
    print(f"  target < 1 % of a 10 ms step: {'met' if worst < 1.0 else 'NOT met'} (worst variant {worst:.4f} %)")

    if not args.no_train:
        res = training_check(triples=300)
        if res is None:
            print("training check skipped: torch is not installed")
        else:
            step_ns = res["step"]

            def show(ns: float) -> str:
                return f"{ns / 1000:+7.1f} µs = {100 * ns / step_ns:+.3f} %"

            print(
                f"training check: real CPU steps of ~{step_ns / 1e6:.1f} ms, 300 triples (rotating order), "
                "median difference to the bare step:"
            )
            print(f"  with the armed dynamic collector   {show(res['collector'])}")
            print(f"  with a no-op step() (control)      {show(res['control'])}   <- the harness's own noise")
            print(f"  collector minus control            {show(res['net'])}")
            print(
                "  the collector's step() alone, timed right after each real step: median "
                f"{res['call_median'] / 1000:.1f} µs, "
                f"mean {res['call_mean'] / 1000:.1f} µs, p99 {res['call_p99'] / 1000:.1f} µs "
                f"= {100 * res['call_mean'] / STEP_NS:.3f} % of a 10 ms step (mean)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
