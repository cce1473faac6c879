"""Where the ingest of one rank spends its time: cProfile of `analyze ingest` in one process, for
our code and for the code of another revision (the before / after summary of bench/README.md).

    python bench/profile_ingest.py                                  # rank 0 of set_4rank_small, vs 1a1c576
    python bench/profile_ingest.py --trace-dir bench/out/set_4rank/rank_0 --before main --top 20

Each side runs the click command of ``analyze ingest <rank folder> --workers 1 --store <fresh>``
under cProfile (one process: the reading is in the profiled one), the package of ``--before`` exported with ``git
archive`` and put first on ``PYTHONPATH``. cProfile sees the main thread only: what a reader hands to
a thread (read-ahead, Parquet encoding) shows as the main thread's waits for it. The timer is the
process's CPU time (threads included), not the wall clock: a shared machine's load does not count;
the second of two runs is profiled (the first compiles the package). Printed per side:
the profiled total, the functions with the most time of their own, and that time summed by where the
function lives (our package by module; the libraries by top-level package; built-ins).
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

from bench_commands import BEFORE, export_tree  # noqa: E402

# the `analyze` program ends with os._exit (no interpreter teardown), which would lose cProfile's
# output: the child runs the same click command as the program does, inside the profiler
CHILD = """
import cProfile, sys, time
from analyzer import cli
cli._PROGRAM = True  # as `analyze` sets it (absent in older code: harmless)
prof = cProfile.Profile(time.process_time)  # CPU time: the machine may be shared
try:
    prof.runcall(cli.main, sys.argv[2:], standalone_mode=False)
finally:
    prof.dump_stats(sys.argv[1])
"""


def _area(filename: str) -> str:
    """Where a profiled function lives: ``analyzer/<module>``, a library's top-level package, or builtin."""
    if filename.startswith(("~", "<")):
        return "builtin (C: msgspec / pyarrow / numpy calls, I/O)"
    parts = Path(filename).parts
    if "analyzer" in parts:
        i = len(parts) - 1 - parts[::-1].index("analyzer")
        return "/".join(parts[i:]).removesuffix(".py")
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    return "python stdlib"


def profile(label: str, trace_dir: Path, pythonpath: Path | None, scratch: Path, top: int) -> float:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    else:
        env.pop("PYTHONPATH", None)
    key = label.split()[0]
    out = scratch / f"{key}.prof"
    store = scratch / f"store-{key}"
    cmd = [sys.executable, "-c", CHILD, str(out), "ingest", str(trace_dir), "--workers", "1", "--store", str(store)]
    for _ in range(2):  # the first run compiles the package (Python caches it, as on a user's machine)
        shutil.rmtree(store, ignore_errors=True)
        subprocess.run(cmd, env=env, cwd=scratch, check=True, capture_output=True)
    st = pstats.Stats(str(out))
    total = st.total_tt  # type: ignore[attr-defined]
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    print(f"\n== {label}: {total:.2f} s CPU profiled (one process)")
    print(f"  {'own s':>7} {'calls':>10}  function")
    for (fn, line, name), (_cc, nc, tt, _ct, _callers) in rows[:top]:
        print(f"  {tt:7.2f} {nc:10d}  {_area(fn)}:{line} {name}")
    by_area: dict[str, float] = defaultdict(float)
    for (fn, _line, _name), (_cc, _nc, tt, _ct, _callers) in rows:
        by_area[_area(fn)] += tt
    print(f"  {'own s':>7}  by where it lives")
    for area, tt in sorted(by_area.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {tt:7.2f}  {area}")
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace-dir", type=Path, default=OUT / "set_4rank_small" / "rank_0")
    ap.add_argument("--before", default=BEFORE, help=f"git revision of the baseline code (default {BEFORE})")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    if not args.trace_dir.exists():
        ap.error(f"{args.trace_dir} missing: python bench/make_traces.py makes it")
    OUT.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="profile-", dir=OUT))
    try:
        before_src = export_tree(args.before, scratch)
        before = profile(f"before ({args.before})", args.trace_dir.resolve(), before_src, scratch, args.top)
        ours = profile("ours", args.trace_dir.resolve(), None, scratch, args.top)
        print(f"\nprofiled time before / ours: {before / ours:.2f}x ({args.trace_dir})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
