"""What the server holds in memory against the rank count (issue 15 item 2).

One process: the web app on waitress in a thread of this process (as ``analyze serve`` runs it),
one simulated user of ``bench_load.py`` (its warm-up visit of every page, then ``--visits`` random
visits: random ranks, windows, steps), then the process's RSS and what holds it:

- Python objects (``tracemalloc``, started before the app is built), the growth since the app
  was built by file and line;
- each cache of the server: its entries and their estimated bytes (``analyzer.store.nbytes``):
  ``webapp.cache.RESULTS`` / ``RENDERED``, the analyses' ``RESULTS``, the kept answers
  (``webapp.answers.ANSWERS``) and the timeline's lane indexes (``webapp.cache.LANES``);
- DuckDB's own accounting of the read databases (``duckdb_memory()``) and pyarrow's pool;
- the RSS split into anonymous and file-backed pages, and the RSS after glibc's ``malloc_trim(0)``
  (what the allocator held free).

Variants to try against the growth: ``--duckdb SETTING=VALUE`` (applied to every read database the
store makes, e.g. ``allocator_flush_threshold='4MiB'``, ``threads=1``, ``parquet_metadata_cache=false``),
``--view-sets N`` (fact view sets kept per read database), ``MALLOC_ARENA_MAX=2`` in the environment,
``--no-tracemalloc`` (RSS without tracemalloc's own bookkeeping).

Run it once per store, each in a fresh process, and compare (64 and 256 ranks of the same job):

    python bench/bench_server_memory.py --store bench/out/store64 --run job
    python bench/bench_server_memory.py --store bench/out/store256 --run job
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def caches() -> dict[str, dict[str, float]]:
    """Entries and estimated MiB of every cache the server keeps."""
    from analyzer.analyses import cache as analyses_cache
    from analyzer.store import nbytes
    from webapp import answers, cache

    out: dict[str, dict[str, float]] = {}
    for name, c in (
        ("webapp RESULTS", cache.RESULTS),
        ("webapp RENDERED", cache.RENDERED),
        ("analyses RESULTS", analyses_cache.RESULTS),
    ):
        with c.lock:
            values = list(c._values.values())
        out[name] = {"entries": len(values), "MiB": sum(map(getattr(c, "measure", nbytes), values)) / 2**20}
    out["answers"] = {"entries": len(answers.ANSWERS), "MiB": answers.ANSWERS.nbytes / 2**20}
    out["lane indexes"] = {"entries": len(cache.LANES._items), "MiB": cache.LANES.nbytes / 2**20}
    return out


def duckdb_mib() -> float:
    from analyzer.store import store as store_mod

    total = 0
    with store_mod._READ_LOCK:
        dbs = list(store_mod._READ_DBS.values())
    for db in dbs:
        con = db.con.cursor()
        try:
            total += con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0] or 0
        finally:
            con.close()
    return total / 2**20


def rss_parts() -> dict[str, float]:
    """The RSS split by what backs it (``/proc/self/status``): anonymous memory, mapped files, shared memory (MiB)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def anonymous_regions() -> dict[str, float]:
    """The anonymous resident memory (MiB, ``/proc/self/smaps``) by the allocator that likely owns
    it: glibc's main heap (``[heap]``), glibc's thread arenas (regions inside 64 MiB-aligned
    reservations), and the rest (large ``mmap`` blocks of either allocator, DuckDB's own)."""
    out = {"[heap] (glibc main arena)": 0.0, "64 MiB-aligned reservations (glibc thread arenas)": 0.0, "other": 0.0}
    start, name = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            start = int(head[0].split("-")[0], 16)
            name = head[5] if len(head) > 5 else ""
        elif head[0] == "Anonymous:":
            mib = int(head[1]) / 1024
            if name == "[heap]":
                out["[heap] (glibc main arena)"] += mib
            elif not name and start % (64 << 20) == 0:
                out["64 MiB-aligned reservations (glibc thread arenas)"] += mib
            elif not name or name.startswith("[anon"):
                out["other"] += mib
    return out


def take_snapshot() -> tracemalloc.Snapshot | None:
    return tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: the free pages of every arena given back (False: not glibc)."""
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0) or True)
    except (OSError, AttributeError):
        return False


def release_in_turn() -> tuple[dict[str, float], dict[str, float]]:
    """What each holder kept: the RSS (MiB) after each is emptied in turn (then ``gc.collect()`` and
    ``malloc_trim(0)``), starting from the end of the visits: the drop from one line to the next is
    what that holder kept alive (its own bytes and whatever it pinned); and the anonymous memory left."""
    from analyzer.analyses import cache as analyses_cache
    from analyzer.store import runs as store_runs
    from analyzer.store import store as store_mod
    from webapp import answers, cache, timeline_api

    def settle() -> float:
        gc.collect()
        malloc_trim()
        return rss_mib()

    out = {"before": settle()}
    for name, drop in (
        ("web app results (RESULTS, RENDERED, answers)", lambda: [
            cache.RESULTS.clear(), cache.RENDERED.clear(), answers.ANSWERS.clear()]),
        ("lane indexes (LANES)", cache.LANES.clear),
        ("timeline contexts", timeline_api._CONTEXTS.clear),
        ("analyses RESULTS", analyses_cache.RESULTS.clear),
        ("catalog-derived (runs._DERIVED)", store_runs._DERIVED.clear),
        ("DuckDB read databases (_READ_DBS)", lambda: [
            db.con.close() for db in store_mod._READ_DBS.values()] and store_mod._READ_DBS.clear()),
        ("catalog snapshots (_SNAPSHOTS)", store_mod._SNAPSHOTS.clear),
    ):  # fmt: skip
        drop()
        out[name] = settle()
    return out, anonymous_regions()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", default="job")
    ap.add_argument("--visits", type=int, default=40, help="random visits after the warm-up")
    ap.add_argument("--top", type=int, default=12, help="tracemalloc lines shown")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument(
        "--duckdb", action="append", default=[], metavar="SETTING=VALUE",
        help="a DuckDB setting applied to every read database the store makes (e.g. parquet_metadata_cache=false)",
    )  # fmt: skip
    ap.add_argument("--view-sets", type=int, default=None, help="fact view sets per read database (store._VIEW_SETS)")
    ap.add_argument("--no-tracemalloc", action="store_true", help="RSS without tracemalloc's own bookkeeping")
    ap.add_argument(
        "--arrow-decay-ms", type=int, default=None,
        help="pyarrow.jemalloc_set_decay_ms(N) before the app is built (0: freed pages given back at once)",
    )  # fmt: skip
    ap.add_argument(
        "--release", action="store_true",
        help="at the end, empty each cache and the DuckDB read databases in turn: the RSS after each",
    )  # fmt: skip
    args = ap.parse_args()
    if not args.no_tracemalloc:
        tracemalloc.start(8)
    import pyarrow as pa
    from bench_load import PAGES, Recorder, User, store_info
    from waitress import create_server

    from analyzer.store import Store
    from webapp.app import create_app

    if args.duckdb:
        from analyzer.store import store as store_mod

        made = store_mod.Store._catalog_database

        def with_settings(self: Any, cat: Any) -> Any:
            con = made(self, cat)
            for kv in args.duckdb:
                k, v = kv.split("=", 1)
                con.execute(f"SET {k} = {v}")
            return con

        store_mod.Store._catalog_database = with_settings  # type: ignore[method-assign]
    if args.view_sets is not None:
        from analyzer.store import store as store_mod

        store_mod._VIEW_SETS = args.view_sets
    if args.arrow_decay_ms is not None:
        pa.jemalloc_set_decay_ms(args.arrow_decay_ms)
    store = Path(args.store).resolve()
    info = store_info(store, args.run)
    app = create_app(Store(store))
    server = create_server(app.server, host="127.0.0.1", port=0, threads=8)
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{server.effective_port}"
    gc.collect()
    snap0, rss0, parts0, anon0 = take_snapshot(), rss_mib(), rss_parts(), anonymous_regions()
    rec = Recorder()
    rec.counting = True
    user = User(base, base + "/", rec, [], info)
    user.open()
    user.deps = user.http.get(base + "/_dash-dependencies", timeout=120).json()
    t = time.perf_counter()
    for p in PAGES:
        user.visit(p)
    warm_s = time.perf_counter() - t
    gc.collect()
    rss1 = rss_mib()
    for _ in range(args.visits):
        user.visit(user.rng.choice(PAGES))
    gc.collect()
    rss2, parts2, anon2 = rss_mib(), rss_parts(), anonymous_regions()
    trimmed = malloc_trim()
    rss3 = rss_mib()
    snap = take_snapshot()
    errors = sum(len(v) for v in rec.errors.values())
    py_now = sum(s.size for s in snap.statistics("filename")) / 2**20 if snap else 0.0
    py_before = sum(s.size for s in snap0.statistics("filename")) / 2**20 if snap0 else 0.0
    result: dict[str, Any] = {
        "store": str(store),
        "ranks": info["n_ranks"],
        "load": os.getloadavg(),
        "warm_up_s": round(warm_s, 1),
        "cpu_s": round(time.process_time(), 1),
        "errors": errors,
        "rss_mib": {
            "app built": rss0,
            "after the first views": rss1,
            f"after {args.visits} visits": rss2,
            "after malloc_trim(0)" if trimmed else "malloc_trim not available": rss3,
        },
        "rss_parts_mib": {"app built": parts0, "end": parts2},
        "anonymous_mib": {"app built": anon0, "end": anon2},
        "env": {
            k: os.environ[k]
            for k in ("MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_", "ARROW_DEFAULT_MEMORY_POOL")
            if k in os.environ
        },
        "arrow_pool": pa.default_memory_pool().backend_name,
        "arrow_decay_ms": args.arrow_decay_ms,
        "duckdb_settings": args.duckdb,
        "view_sets": args.view_sets,
        "python_mib": {"app built": py_before, "end": py_now},
        "caches": caches(),
        "duckdb_mib": duckdb_mib(),
        "arrow_pool_mib": pa.total_allocated_bytes() / 2**20,
    }
    if args.release:
        result["rss_after_releasing_mib"], result["anonymous_mib"]["released"] = release_in_turn()
    print(json.dumps(result, indent=1))
    if snap is not None and snap0 is not None:
        print(f"Python objects grown since the app was built (top {args.top} lines):")
        for st in snap.compare_to(snap0, "lineno")[: args.top]:
            print(f"  {st.size_diff / 2**20:+8.2f} MiB  {st.count_diff:+8d}  {st.traceback[0]}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))
    server.close()


if __name__ == "__main__":
    main()
