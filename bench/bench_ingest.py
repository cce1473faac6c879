"""Ingest speed and memory of rankscope against HTA's loader (two releases), same run, whole process
against whole process.

    python bench/make_traces.py                      # once: real traces under bench/out/
    python bench/bench_ingest.py                     # both sets, 5 timed + 2 memory rounds, then the 1 GB trace
    python bench/bench_ingest.py --sets set_4rank --repeat 3 --no-single
    python bench/bench_ingest.py --tools ours,hta06,json
    python bench/bench_ingest.py --sets "" --single-hta-cap 900   # the 1 GB trace, and HTA on it once (capped)

Baselines, each in its own virtual environment (both install a package named ``hta``; neither
pulls torch):

- ``hta05``: ``holistictraceanalysis`` 0.5.0, the last release under that name
  (``python -m venv .venv-hta05 && .venv-hta05/bin/pip install holistictraceanalysis==0.5.0``);
- ``hta06``: ``traceinsight`` 0.6.x, HTA's maintained release
  (``python -m venv .venv-hta06 && .venv-hta06/bin/pip install traceinsight==0.6.1``);
- ``json``: ``json.load`` of each file in one process (the decoding floor of the standard library).

Every tool runs in its own subprocess, one at a time, the tools interleaved within a round (ours,
hta05, hta06, ours, ...) so that a busy machine slows all of them alike; one uncounted warm-up
ingest first. What is compared is the **whole process**, start to exit, on both sides: ours is
``analyze ingest <set> --store <fresh folder>`` (interpreter start, imports, discovery, parsing,
Parquet, catalog commit); HTA's is ``python -c`` importing ``hta`` and calling
``TraceAnalysis(trace_dir=...)``. The work alone (HTA's call, the ingest time our CLI reports)
is printed too. Two kinds of rounds:

- timed rounds: nothing else runs; wall time, and CPU time of the process *and all its
  descendants* (ours and HTA both parse ranks in a process pool) from ``wait4``; after each of
  our ingests, a second ``analyze ingest`` of the same, unchanged set into the same store (the
  re-ingest: it must find nothing to read);
- memory rounds: the process tree is sampled from ``/proc`` every 40 ms (which costs CPU, hence
  apart): peak PSS of the tree (pages a forked worker shares with its parent counted once: the
  figure the ratio uses), peak RSS of the tree, and the peak RSS and PSS of its largest process.

After each of our ingests (clock stopped) the store is checked: every event of every file read,
every collection complete. Ratios are of the medians over the rounds of this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
SAMPLE_S = 0.04
BASELINE_PYTHONS = {"hta05": REPO / ".venv-hta05/bin/python", "hta06": REPO / ".venv-hta06/bin/python"}
TARGET_SPEEDUP = 10.0  # HTA whole process / ours
TARGET_PEAK = 0.3  # our peak / HTA's peak
TARGET_EVENTS_PER_S = 400_000
TARGET_REINGEST = 0.02  # re-ingest of an unchanged set / first ingest
TARGET_SINGLE_S, TARGET_SINGLE_MB = 5.0, 600.0


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
    wall_seconds: float  # whole subprocess, start to exit: the figure compared
    work_seconds: float  # the work alone: our ingest() as the CLI reports it; HTA's call; the json.load loop
    cpu_seconds: float  # user + system time of the whole process tree
    peak_pss_mb: float  # process tree
    peak_rss_mb: float  # process tree
    largest_rss_mb: float  # the largest single process
    largest_pss_mb: float
    peak_processes: int
    reingest_seconds: float = float("nan")  # ours: the second, unchanged ingest (whole process)
    capped: bool = False  # killed when its wall time reached the cap (its figures: up to then)
    info: dict = field(default_factory=dict)  # what the process printed (JSON)


def _env() -> dict[str, str]:
    """The tools run as on a user's machine: Python caches compiled modules (some shells here set
    PYTHONDONTWRITEBYTECODE, which would make every process recompile our package)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(tool: str, cmd: list[str], sample: bool, cap: float | None = None) -> Measured:
    """Run ``cmd`` (it prints one JSON document, or a JSON line last) and wait for it. With ``sample``,
    the memory of its process tree is sampled every 40 ms meanwhile (timed rounds do not sample).
    ``cap``: seconds after which the process group is killed (``capped``; sampled meanwhile)."""
    t0 = time.perf_counter()
    sample = sample or cap is not None
    capped = False
    errf = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed below, after the process ended
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=errf, text=True, env=_env(), start_new_session=cap is not None
    )
    peak_pss = peak_rss = big_rss = big_pss = 0
    peak_n = 0
    out_chunks: list[str] = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if sample else 0)
        if pid:
            break
        pids = _tree(proc.pid)
        pss = [_kb(f"/proc/{p}/smaps_rollup", b"Pss:") for p in pids]
        rss = [_kb(f"/proc/{p}/status", b"VmRSS:") for p in pids]
        peak_pss, peak_rss = max(peak_pss, sum(pss)), max(peak_rss, sum(rss))
        big_rss, big_pss = max([big_rss, *rss]), max([big_pss, *pss])
        peak_n = max(peak_n, len(pids))
        if cap is not None and not capped and time.perf_counter() - t0 > cap:
            os.killpg(proc.pid, signal.SIGKILL)
            capped = True
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    errf.seek(0)
    err = errf.read()
    errf.close()
    if proc.returncode != 0 and not capped:
        raise RuntimeError(f"{tool} failed ({proc.returncode}):\n{err[-3000:]}")
    out = "".join(out_chunks).strip()
    try:
        info = json.loads(out)  # our CLI with --json: one document
    except ValueError:
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        info = json.loads(lines[-1]) if lines else {}
    cpu = usage.ru_utime + usage.ru_stime  # the process and every descendant it waited for
    nan = float("nan")

    def mb(kb: int) -> float:
        return kb / 1024 if sample else nan

    return Measured(
        tool,
        wall,
        float(info.get("seconds", wall)),
        cpu,
        mb(peak_pss),
        mb(peak_rss),
        mb(big_rss),
        mb(big_pss),
        peak_n,
        capped=capped,
        info=info,
    )


# -- the tools (child side) ---------------------------------------------------------------------

# HTA's whole process: `python -c` so that what runs is the interpreter, HTA's imports and its loader
HTA_CHILD = """
import json, logging, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
logging.disable(logging.WARNING)
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
rows = sum(len(analysis.t.get_trace(r)) for r in analysis.t.get_ranks())
print(json.dumps({"seconds": t2 - t1, "import_seconds": t1 - t0, "ranks": len(analysis.t.get_ranks()), "rows": rows}))
"""

JSON_CHILD = """
import json, sys, time
t0 = time.perf_counter()
n = 0
for f in sys.argv[1:]:
    with open(f, "rb") as fh:
        d = json.load(fh)
    n += len(d["traceEvents"])
    del d
print(json.dumps({"seconds": time.perf_counter() - t0, "events": n}))
"""


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


def _check_store(store: Path, folder: Path, events: int) -> None:
    """Every event of every file read, every collection complete (after the clock stopped)."""
    import duckdb

    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        n, ok = con.execute(
            "SELECT (SELECT sum(rows) FROM source_files WHERE status = 'ok'), "
            "(SELECT bool_and(status = 'complete') FROM collections)"
        ).fetchone()
    finally:
        con.close()
    if int(n or 0) != events or not ok:
        raise RuntimeError(f"ingest of {folder} read {n} events (expected {events}), all complete: {ok}")


def run_ours(folder: Path, scratch: Path, workers: int | None, events: int, sample: bool, reingest: bool) -> Measured:
    store = Path(tempfile.mkdtemp(prefix="store-", dir=scratch))
    cmd = _analyze_cmd() + ["ingest", str(folder), "--store", str(store), "--json"]
    if workers:
        cmd += ["--workers", str(workers)]
    try:
        m = measure("ours", cmd, sample)
        _check_store(store, folder, events)
        if reingest:
            again = measure("ours", cmd, False)
            if again.info.get("collections") or not again.info.get("unchanged"):
                raise RuntimeError(f"re-ingest of the unchanged {folder} read something: {again.info}")
            m.reingest_seconds = again.wall_seconds
            _check_store(store, folder, events)
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
        return run_ours(folder, scratch, args.workers, events, sample, reingest=not sample)
    if tool in BASELINE_PYTHONS:
        return measure(tool, [str(BASELINE_PYTHONS[tool]), "-c", HTA_CHILD, str(flat)], sample)
    return measure("json", [sys.executable, "-c", JSON_CHILD, *map(str, files)], sample)


def _detail(m: Measured) -> dict[str, object]:
    return {k: v for k, v in asdict(m).items() if k != "info"}


def _median(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def _fmt(ms: list[Measured], attr: str, unit: str = "") -> str:
    vals = [getattr(m, attr) for m in ms]
    return f"{_median(vals):8.2f}{unit}  (" + ", ".join(f"{v:.2f}" for v in vals) + ")"


def _ok(good: bool) -> str:
    return "OK" if good else "MISSED"


def bench_set(folder: Path, tools: list[str], args: argparse.Namespace, scratch: Path) -> dict[str, object]:
    files = _trace_files(folder)
    if not files:
        raise SystemExit(f"no traces under {folder}: run python bench/make_traces.py first")
    size = sum(f.stat().st_size for f in files)
    events = _events(folder, files)
    flat = scratch / f"hta_flat_{folder.name}"  # HTA wants every rank's file in one folder
    flat.mkdir()
    for f in files:
        (flat / f.name).symlink_to(f.resolve())
    print(
        f"\nset: {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder} — {len(files)} files, "
        f"{size / 1e6:.0f} MB, {events:,} events; {args.repeat} timed rounds, {args.memory_repeat} memory rounds; "
        f"load {tuple(round(x, 2) for x in os.getloadavg())}"
    )
    timed: dict[str, list[Measured]] = {t: [] for t in tools}
    sampled: dict[str, list[Measured]] = {t: [] for t in tools}
    if "ours" in tools:  # warm-up, not counted: compiled modules cached, files in the page cache
        run_ours(folder, scratch, args.workers, events, False, reingest=False)
    for kind, rounds, bucket in (("timed", args.repeat, timed), ("memory", args.memory_repeat, sampled)):
        for r in range(rounds):
            order = tools if r % 2 == 0 else tools[::-1]  # alternate who goes first
            for tool in order:
                m = run_tool(tool, folder, files, flat, scratch, args, events, kind == "memory")
                bucket[tool].append(m)
                if kind == "memory":
                    what = (
                        f"peak PSS {m.peak_pss_mb:6.0f} MB  RSS {m.peak_rss_mb:6.0f} MB  "
                        f"largest process RSS {m.largest_rss_mb:5.0f} MB  procs {m.peak_processes}"
                    )
                else:
                    what = f"CPU {m.cpu_seconds:6.2f} s" + (
                        f"  re-ingest {m.reingest_seconds:5.2f} s" if tool == "ours" else ""
                    )
                print(
                    f"  {kind} round {r + 1} {tool:6s} {m.wall_seconds:7.2f} s (work {m.work_seconds:6.2f} s)  {what}",
                    flush=True,
                )

    def med(tool: str, attr: str, bucket: dict[str, list[Measured]]) -> float:
        return _median([getattr(m, attr) for m in bucket[tool]])

    out: dict[str, object] = {"set": folder.name, "bytes": size, "events": events, "median": {}}
    print(f"  medians (rounds in brackets); load now {tuple(round(x, 2) for x in os.getloadavg())}")
    for tool in tools:
        out["median"][tool] = {  # type: ignore[index]
            "wall_seconds": med(tool, "wall_seconds", timed),
            "work_seconds": med(tool, "work_seconds", timed),
            "cpu_seconds": med(tool, "cpu_seconds", timed),
            "reingest_seconds": med(tool, "reingest_seconds", timed),
            "peak_pss_mb": med(tool, "peak_pss_mb", sampled),
            "peak_rss_mb": med(tool, "peak_rss_mb", sampled),
            "largest_rss_mb": med(tool, "largest_rss_mb", sampled),
            "largest_pss_mb": med(tool, "largest_pss_mb", sampled),
        }
        print(
            f"  {tool:6s} whole process {_fmt(timed[tool], 'wall_seconds', ' s')}  "
            f"work {_fmt(timed[tool], 'work_seconds', ' s')}\n"
            f"         CPU {_fmt(timed[tool], 'cpu_seconds', ' s')}\n"
            f"         peak PSS {_fmt(sampled[tool], 'peak_pss_mb', ' MB')}  largest process RSS "
            f"{_fmt(sampled[tool], 'largest_rss_mb', ' MB')}"
        )
    mm = out["median"]  # type: ignore[assignment]
    if "ours" in tools:
        o = mm["ours"]  # type: ignore[index]
        eps = events / o["wall_seconds"]
        out["events_per_s"] = eps
        print(f"  ours: {eps:,.0f} events/s whole process (target >= {TARGET_EVENTS_PER_S:,} on the 356 MB set)")
        re = o["reingest_seconds"] / o["wall_seconds"]
        out["reingest_ratio"] = re
        print(
            f"  ours: re-ingest of the unchanged set {o['reingest_seconds']:.2f} s = {100 * re:.1f} % of the first "
            f"(target <= {100 * TARGET_REINGEST:.0f} %: {_ok(re <= TARGET_REINGEST)})"
        )
        for base in (t for t in tools if t != "ours"):
            b = mm[base]  # type: ignore[index]
            speed = b["wall_seconds"] / o["wall_seconds"]
            rounds = [bm.wall_seconds / om.wall_seconds for om, bm in zip(timed["ours"], timed[base])]
            pss = o["peak_pss_mb"] / b["peak_pss_mb"]
            big = o["largest_rss_mb"] / b["largest_rss_mb"]
            out[f"{base}_over_ours"] = {
                "whole_process": speed,
                "whole_process_rounds": rounds,
                "work": b["work_seconds"] / o["work_seconds"],
                "cpu": b["cpu_seconds"] / o["cpu_seconds"],
                "peak_pss": pss,
                "largest_rss": big,
            }
            tgt = base.startswith("hta")
            print(
                f"  {base} / ours, whole process {speed:6.2f}x  (rounds: {', '.join(f'{x:.2f}' for x in rounds)})"
                + (f"   target >= {TARGET_SPEEDUP:.0f}: {_ok(speed >= TARGET_SPEEDUP)}" if tgt else "")
                + f"\n         work alone {b['work_seconds'] / o['work_seconds']:6.2f}x, "
                f"CPU {b['cpu_seconds'] / o['cpu_seconds']:6.2f}x"
                + f"\n         our peak / its peak: PSS of the tree {pss:5.2f}, largest process RSS {big:5.2f}"
                + (f"   target <= {TARGET_PEAK}: {_ok(pss <= TARGET_PEAK and big <= TARGET_PEAK)}" if tgt else "")
            )
    out["rounds_detail"] = {t: [_detail(m) for m in timed[t] + sampled[t]] for t in tools}
    return out


def bench_single(folder: Path, args: argparse.Namespace, scratch: Path) -> dict[str, object]:
    files = _trace_files(folder)
    size = sum(f.stat().st_size for f in files)
    events = _events(folder, files)
    print(f"\nsingle trace: {folder} — {size / 1e6:.0f} MB, {events:,} events")
    timed, sampled = [], []
    for kind, rounds, bucket in (("timed", args.repeat, timed), ("memory", args.memory_repeat, sampled)):
        for r in range(rounds):
            m = run_ours(folder, scratch, args.workers, events, kind == "memory", reingest=False)
            bucket.append(m)
            what = f"peak PSS {m.peak_pss_mb:6.0f} MB  RSS {m.peak_rss_mb:6.0f} MB" if kind == "memory" else ""
            print(
                f"  {kind} round {r + 1} ours  {m.wall_seconds:7.2f} s  CPU {m.cpu_seconds:6.2f} s  {what}", flush=True
            )
    hta = _single_hta(files, args)
    secs = _median([m.wall_seconds for m in timed])
    pk = _median([m.peak_pss_mb for m in sampled])
    rss = _median([m.peak_rss_mb for m in sampled])
    print(
        f"  1 GB trace ({events:,} events): {secs:.2f} s ({events / secs:,.0f} events/s; "
        f"target <= {TARGET_SINGLE_S} s: "
        f"{_ok(secs <= TARGET_SINGLE_S)}), peak PSS {pk:.0f} MB, peak RSS {rss:.0f} MB (target <= "
        f"{TARGET_SINGLE_MB:.0f} MB: {_ok(max(pk, rss) <= TARGET_SINGLE_MB)})"
    )
    return {
        "events": events,
        "seconds": secs,
        "cpu_seconds": _median([m.cpu_seconds for m in timed]),
        "peak_pss_mb": pk,
        "peak_rss_mb": rss,
        "rounds_detail": [_detail(m) for m in timed + sampled],
        "hta06": _detail(hta) if hta is not None else None,
    }


def _single_hta(files: list[Path], args: argparse.Namespace) -> Measured | None:
    """One memory-sampled round of HTA (``hta06``) loading the single trace's folder, killed after
    ``--single-hta-cap`` seconds (it may need many minutes and several GB: a killed round says so)."""
    python = BASELINE_PYTHONS["hta06"]
    if not args.single_hta_cap or not python.exists() or not files:
        return None
    m = measure("hta06", [str(python), "-c", HTA_CHILD, str(files[0].parent)], True, cap=args.single_hta_cap)
    end = f"killed at the {args.single_hta_cap:.0f} s cap, unfinished" if m.capped else "loaded"
    print(
        f"  hta06 {end}: {m.wall_seconds:7.2f} s  CPU {m.cpu_seconds:6.2f} s  peak PSS {m.peak_pss_mb:6.0f} MB"
        f"  largest process RSS {m.largest_rss_mb:6.0f} MB",
        flush=True,
    )
    return m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="set_4rank_small,set_4rank", help="trace sets under bench/out/ (comma-separated)")
    ap.add_argument("--single", type=Path, default=OUT / "single_1gb", help="folder with the ~1 GB trace")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--memory-repeat", type=int, default=2, help="memory-sampled rounds (default 2)")
    ap.add_argument("--tools", default="ours,hta05,hta06", help="comma-separated subset of ours,hta05,hta06,json")
    ap.add_argument("--no-single", action="store_true", help="skip the 1 GB single-trace ingest")
    ap.add_argument(
        "--single-hta-cap",
        type=float,
        default=0.0,
        help="also load the 1 GB trace with hta06 once, killed after this many seconds (default 0: not at all)",
    )
    ap.add_argument("--workers", type=int, help="passed to analyze ingest (default: its own)")
    args = ap.parse_args(argv)

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for t in tools:
        if t in BASELINE_PYTHONS and not BASELINE_PYTHONS[t].exists():
            print(f"{t}: {BASELINE_PYTHONS[t]} missing (see the module doc); left out", file=sys.stderr)
    tools = [t for t in tools if t not in BASELINE_PYTHONS or BASELINE_PYTHONS[t].exists()]
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load {tuple(round(x, 2) for x in os.getloadavg())}; tools {', '.join(tools)}"
    )
    summary: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": os.cpu_count(),
        "load_start": os.getloadavg(),
        "timed_rounds": args.repeat,
        "memory_rounds": args.memory_repeat,
        "sets": {},
    }
    scratch = Path(tempfile.mkdtemp(prefix="bench-", dir=OUT))
    try:
        for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
            summary["sets"][name] = bench_set(OUT / name, tools, args, scratch)  # type: ignore[index]
        if not args.no_single and args.single.exists() and "ours" in tools:
            summary["single"] = bench_single(args.single, args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary["load_end"] = os.getloadavg()
    res = OUT / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    res.write_text(json.dumps(summary, indent=1))
    print(f"\nload at the end {tuple(round(x, 2) for x in os.getloadavg())}; written {res.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
