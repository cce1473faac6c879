"""Ingest speed and memory of rankscope against HTA's loader and a plain ``json.load``, same run.

    python bench/make_traces.py                 # once: real traces under bench/out/
    python bench/bench_ingest.py                # 3 timed + 2 memory rounds, then the 1 GB trace
    python bench/bench_ingest.py --repeat 5 --memory-repeat 3 --no-single

Every tool runs in its own subprocess, one at a time, the tools interleaved within a round (ours,
HTA, json.load, ours, ...) so that a busy machine slows all of them alike; one uncounted warm-up
ingest first. Two kinds of rounds:

- timed rounds: nothing else runs; wall time, and CPU time of the process *and all its
  descendants* (our ingest and HTA both parse ranks in a process pool) from ``wait4``;
- memory rounds: the process tree is sampled from ``/proc`` every 40 ms (which costs CPU, hence
  apart): peak PSS — the sum over the tree of proportional set sizes, pages shared by a parent
  and its forked workers counted once: the figure the ratio uses — and peak RSS (shared pages
  counted in every process).

What is timed:

- ours: the real CLI, ``analyze ingest <set> --store <fresh folder>``, from process start to exit
  (interpreter start, imports, discovery, parsing, Parquet, catalog commit — everything); after
  each run (clock stopped) the store is checked: every event read, every collection complete;
- HTA: ``TraceAnalysis(trace_dir=...)`` only (its import time is reported apart and not counted);
  HTA wants every rank's file in one folder, so it gets a folder of symlinks to the same files;
- json.load: ``json.load`` of each file in turn in one process (the decoding floor of the stdlib).

The first ratio is HTA's call against our whole process (start-up on our side only); two
like-for-like ratios follow: whole process against whole process, and the work alone (HTA's call
against the ingest time our CLI reports, neither counting interpreter start and imports).
Ratios are of the medians over the rounds of this run. Needs ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SAMPLE_S = 0.04


# -- process-tree memory sampling ---------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
        ppid = int(stat[stat.rfind(b")") + 2 :].split(b" ", 2)[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree(root: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def _kb(path: str, key: bytes) -> int:
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Measured:
    tool: str
    seconds: float  # the figure compared first: our whole process; HTA's TraceAnalysis() call; json.load loop
    wall_seconds: float  # whole subprocess (interpreter start and imports included)
    work_seconds: float  # the work alone: our ingest() as the CLI reports it; HTA's call; the json.load loop
    peak_pss_mb: float
    peak_rss_mb: float
    peak_processes: int
    cpu_seconds: float  # user + system time of the whole process tree


def _env() -> dict[str, str]:
    """The tools run as on a user's machine: Python caches compiled modules (some shells here set
    PYTHONDONTWRITEBYTECODE, which would make every process recompile our package)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(tool: str, cmd: list[str], sample: bool) -> Measured:
    """Run ``cmd`` (it prints one JSON line last) and wait for it. With ``sample``, the memory of its
    process tree is sampled every 40 ms meanwhile (that costs CPU: timed rounds do not sample)."""
    t0 = time.perf_counter()
    errf = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read and closed once the process has ended
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, text=True, env=_env())
    peak_pss = peak_rss = 0
    peak_n = 0
    out_chunks: list[str] = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if sample else 0)
        if pid:
            break
        pids = _tree(proc.pid)
        pss = sum(_kb(f"/proc/{p}/smaps_rollup", b"Pss:") for p in pids)
        rss = sum(_kb(f"/proc/{p}/status", b"VmRSS:") for p in pids)
        peak_pss, peak_rss, peak_n = max(peak_pss, pss), max(peak_rss, rss), max(peak_n, len(pids))
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    errf.seek(0)
    err = errf.read()
    errf.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} failed ({proc.returncode}):\n{err[-3000:]}")
    out = "".join(out_chunks).strip()
    try:
        info = json.loads(out)  # our CLI with --json: one document
    except ValueError:
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        info = json.loads(lines[-1]) if lines else {}
    cpu = usage.ru_utime + usage.ru_stime  # the process and every descendant it waited for
    work = float(info.get("seconds", wall))
    nan = float("nan")
    primary = wall if tool == "ours" else work
    return Measured(
        tool, primary, wall, work, peak_pss / 1024 if sample else nan, peak_rss / 1024 if sample else nan, peak_n, cpu
    )


# -- the tools (child side) ---------------------------------------------------------------------


def child_hta(folder: str) -> None:
    import logging

    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    t1 = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=folder)
    t2 = time.perf_counter()
    rows = sum(len(analysis.t.get_trace(r)) for r in analysis.t.get_ranks())
    print(
        json.dumps({"seconds": t2 - t1, "import_seconds": t1 - t0, "ranks": len(analysis.t.get_ranks()), "rows": rows})
    )


def child_json(files: list[str]) -> None:
    t0 = time.perf_counter()
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            d = json.load(fh)
        n += len(d["traceEvents"])
        del d
    print(json.dumps({"seconds": time.perf_counter() - t0, "events": n}))


# -- driver ------------------------------------------------------------------------------------


def _analyze_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("analyze")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "analyzer"]


def _trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.is_file())


def _events(folder: Path, files: list[Path]) -> int:
    info = OUT / f"{folder.name}.json"
    if info.exists():
        return int(json.loads(info.read_text())["total_events"])
    sys.path.insert(0, str(HERE))
    from make_traces import count_events

    return sum(count_events(f) for f in files)


def run_ours(folder: Path, scratch: Path, workers: int | None, events: int, sample: bool) -> Measured:
    store = Path(tempfile.mkdtemp(prefix="store-", dir=scratch))
    cmd = _analyze_cmd() + ["ingest", str(folder), "--store", str(store), "--json"]
    if workers:
        cmd += ["--workers", str(workers)]
    try:
        m = measure("ours", cmd, sample)
        # after the clock stopped: the store holds every event, every collection complete
        from analyzer.store import Store

        got = (
            Store(store)
            .query(
                "SELECT (SELECT sum(rows) FROM source_files WHERE status = 'ok') AS n, "
                "(SELECT bool_and(status = 'complete') FROM collections) AS ok"
            )
            .iloc[0]
        )
        if int(got["n"]) != events or not bool(got["ok"]):
            raise RuntimeError(
                f"ingest of {folder} read {got['n']} events (expected {events}), all complete: {got['ok']}"
            )
        return m
    finally:
        shutil.rmtree(store, ignore_errors=True)


def run_tool(
    tool: str,
    folder: Path,
    files: list[Path],
    flat: Path,
    scratch: Path,
    args: argparse.Namespace,
    events: int,
    sample: bool,
) -> Measured:
    if tool == "ours":
        return run_ours(folder, scratch, args.workers, events, sample)
    if tool == "hta":
        return measure("hta", [sys.executable, __file__, "--child", "hta", str(flat)], sample)
    return measure("json", [sys.executable, __file__, "--child", "json", *map(str, files)], sample)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _fmt(ms: list[Measured], attr: str, unit: str = "") -> str:
    vals = [getattr(m, attr) for m in ms]
    return f"{_median(vals):8.2f}{unit}  (" + ", ".join(f"{v:.2f}" for v in vals) + ")"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", type=Path, default=OUT / "set_4rank", help="multi-rank trace folder")
    ap.add_argument("--single", type=Path, default=OUT / "single_1gb", help="folder with the ~1 GB trace")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--memory-repeat", type=int, default=2, help="memory-sampled rounds (default 2)")
    ap.add_argument("--tools", default="ours,hta,json", help="comma-separated subset of ours,hta,json")
    ap.add_argument("--no-single", action="store_true", help="skip the 1 GB single-trace ingest")
    ap.add_argument("--workers", type=int, help="passed to analyze ingest (default: its own)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        (child_hta if kind == "hta" else child_json)(rest[0] if kind == "hta" else rest)  # type: ignore[arg-type]
        return 0

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    files = _trace_files(args.set)
    if not files:
        print(f"no traces under {args.set}: run python bench/make_traces.py first", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in files)
    events = _events(args.set, files)
    single_files = _trace_files(args.single) if not args.no_single and args.single.exists() else []
    scratch = Path(tempfile.mkdtemp(prefix="bench-", dir=OUT))
    flat = scratch / "hta_flat"
    flat.mkdir()
    for f in files:
        (flat / f.name).symlink_to(f.resolve())

    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load {tuple(round(x, 2) for x in os.getloadavg())}"
    )
    print(
        f"set: {args.set} — {len(files)} files, {size / 1e6:.0f} MB, {events:,} events; "
        f"{args.repeat} timed rounds, {args.memory_repeat} memory rounds\n"
    )
    timed: dict[str, list[Measured]] = {t: [] for t in tools}
    sampled: dict[str, list[Measured]] = {t: [] for t in tools}
    single_t: list[Measured] = []
    single_m: list[Measured] = []
    sevents = 0
    try:
        if "ours" in tools:  # warm-up, not counted: compiled modules cached, files in the page cache
            run_ours(args.set, scratch, args.workers, events, False)
        for kind, rounds, bucket in (("timed", args.repeat, timed), ("memory", args.memory_repeat, sampled)):
            for r in range(rounds):
                for tool in tools:
                    m = run_tool(tool, args.set, files, flat, scratch, args, events, kind == "memory")
                    bucket[tool].append(m)
                    what = (
                        f"peak PSS {m.peak_pss_mb:6.0f} MB  RSS {m.peak_rss_mb:6.0f} MB  procs {m.peak_processes}"
                        if kind == "memory"
                        else f"CPU {m.cpu_seconds:6.2f} s"
                    )
                    print(
                        f"  {kind} round {r + 1} {tool:5s} {m.seconds:7.2f} s (process {m.wall_seconds:6.2f} s)  "
                        f"{what}",
                        flush=True,
                    )
        if single_files:
            ssize = sum(f.stat().st_size for f in single_files)
            sevents = _events(args.single, single_files)
            print(f"\nsingle trace: {args.single} — {ssize / 1e6:.0f} MB, {sevents:,} events")
            for kind, rounds, bucket1 in (("timed", args.repeat, single_t), ("memory", args.memory_repeat, single_m)):
                for r in range(rounds):
                    m = run_ours(args.single, scratch, args.workers, sevents, kind == "memory")
                    bucket1.append(m)
                    what = (
                        f"peak PSS {m.peak_pss_mb:6.0f} MB  RSS {m.peak_rss_mb:6.0f} MB"
                        if kind == "memory"
                        else f"CPU {m.cpu_seconds:6.2f} s"
                    )
                    print(f"  {kind} round {r + 1} ours  {m.seconds:7.2f} s  {what}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def med(ms: list[Measured], attr: str) -> float:
        return _median([getattr(m, attr) for m in ms])

    print(f"\nmedians (individual rounds in brackets); load now {tuple(round(x, 2) for x in os.getloadavg())}")
    summary: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": os.cpu_count(),
        "set": str(args.set),
        "set_bytes": size,
        "set_events": events,
        "timed_rounds": args.repeat,
        "memory_rounds": args.memory_repeat,
        "median": {},
        "rounds_detail": {t: [m.__dict__ for m in timed[t] + sampled[t]] for t in tools},
    }
    for tool in tools:
        summary["median"][tool] = {  # type: ignore[index]
            "seconds": med(timed[tool], "seconds"),
            "wall_seconds": med(timed[tool], "wall_seconds"),
            "work_seconds": med(timed[tool], "work_seconds"),
            "cpu_seconds": med(timed[tool], "cpu_seconds"),
            "peak_pss_mb": med(sampled[tool], "peak_pss_mb"),
            "peak_rss_mb": med(sampled[tool], "peak_rss_mb"),
        }
        print(
            f"  {tool:5s} time {_fmt(timed[tool], 'seconds', ' s')}  CPU {_fmt(timed[tool], 'cpu_seconds', ' s')}\n"
            f"        peak PSS {_fmt(sampled[tool], 'peak_pss_mb', ' MB')}  peak RSS "
            f"{_fmt(sampled[tool], 'peak_rss_mb', ' MB')}"
        )
    mm = summary["median"]  # type: ignore[assignment]
    if "ours" in tools and "hta" in tools:
        o, h = mm["ours"], mm["hta"]  # type: ignore[index]
        speed = h["seconds"] / o["seconds"]
        per_round = [hm.seconds / om.seconds for om, hm in zip(timed["ours"], timed["hta"])]
        mem = o["peak_pss_mb"] / h["peak_pss_mb"]
        print(
            f"\n  HTA load time / our ingest time   {speed:6.2f}x  "
            f"(each round: {', '.join(f'{x:.2f}' for x in per_round)})"
            f"   target >= 8: {'OK' if speed >= 8 else 'MISSED'}"
        )
        print(
            f"  same, whole processes both        {h['wall_seconds'] / o['wall_seconds']:6.2f}x  "
            f"(HTA {h['wall_seconds']:.2f} s with its imports, ours {o['wall_seconds']:.2f} s)"
        )
        print(
            f"  same, the work alone both         {h['work_seconds'] / o['work_seconds']:6.2f}x  "
            f"(HTA's call {h['work_seconds']:.2f} s, our ingest() {o['work_seconds']:.2f} s, no start-up)"
        )
        print(f"  HTA CPU / our CPU (process trees) {h['cpu_seconds'] / o['cpu_seconds']:6.2f}x")
        print(f"  our peak / HTA peak, PSS          {mem:6.2f}   target <= 0.5: {'OK' if mem <= 0.5 else 'MISSED'}")
        print(f"  our peak / HTA peak, RSS          {o['peak_rss_mb'] / h['peak_rss_mb']:6.2f}")
        summary.update(
            hta_over_ours_time=speed,
            hta_over_ours_time_rounds=per_round,
            ours_over_hta_peak_pss=mem,
            hta_over_ours_whole_process=h["wall_seconds"] / o["wall_seconds"],
            hta_over_ours_work=h["work_seconds"] / o["work_seconds"],
            hta_over_ours_cpu=h["cpu_seconds"] / o["cpu_seconds"],
        )
    if "ours" in tools and "json" in tools:
        print(f"  json.load time / our ingest time  {mm['json']['seconds'] / mm['ours']['seconds']:6.2f}x")  # type: ignore[index]
    for tool in tools:
        print(f"  {tool:5s} {events / mm[tool]['seconds']:>10,.0f} events/s")  # type: ignore[index]
    if single_t:
        secs, pk = med(single_t, "seconds"), med(single_m, "peak_pss_mb")
        print(
            f"\n  1 GB trace ({sevents:,} events): ours {secs:.2f} s ({sevents / secs:,.0f} events/s), "
            f"peak PSS {pk:.0f} MB, peak RSS {med(single_m, 'peak_rss_mb'):.0f} MB   target < 1024 MB: "
            f"{'OK' if pk < 1024 else 'MISSED'}"
        )
        summary["single"] = {
            "events": sevents,
            "seconds": secs,
            "cpu_seconds": med(single_t, "cpu_seconds"),
            "peak_pss_mb": pk,
            "peak_rss_mb": med(single_m, "peak_rss_mb"),
            "rounds_detail": [m.__dict__ for m in single_t + single_m],
        }
    res = OUT / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    res.write_text(json.dumps(summary, indent=1))
    print(f"\nwritten {res.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
