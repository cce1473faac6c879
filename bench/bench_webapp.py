"""Server time per web-app callback on a large store: 64 ranks, tens of millions of events.

The store is built from real traces by replication: the source folder (default: the torch_npu
Level1 sample, real Ascend 910B output with kernels, HCCL communication, memory records) is ingested
with ``analyze ingest``; then, for every target rank, the facts of one source rank are copied K
times along the time axis (timestamps shifted by K x the source span plus a gap, step ids, event
and kernel ids renumbered, communication links remapped onto the 64 ranks) and written through the
analyzer's own ``FactWriter`` and committed with ``Store.commit`` — the same path as an ingest.
The store is kept in ``bench/out/webapp_store`` and reused while the parameters stay the same.

Every callback is then called the way the browser calls it: an HTTP POST to
``/_dash-update-component`` (Flask test client, so Dash's own work and the JSON encoding count),
with inputs varied over ranks and windows, and timed. Printed: p50 / p95 / max per callback, the
response size, and ratios against two baselines measured in the same run:

- ``open``: opening the store for one request (``Store.read_connection(run, ranks)``), the floor
  every callback pays;
- ``ship-trace``: what a trace viewer does instead of the timeline's level of detail: read every
  slice of 8 ranks and encode them as JSON.

    python bench/bench_webapp.py                      # build (first time) and measure
    python bench/bench_webapp.py --ranks 16 --slices 2000000 --repeat 5   # a smaller, quicker try
    python bench/bench_webapp.py --rebuild
"""

# every lambda below is called at once by timed(), inside its loop iteration:
# ruff: noqa: B023
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from webapp_helpers import callback_body  # noqa: E402

from analyzer import schema  # noqa: E402
from analyzer.factwriter import FactWriter  # noqa: E402
from analyzer.ingest.aggregate import (  # noqa: E402
    COUNTER_ROWS_SQL,
    LANE_SLICES_SQL,
    MEMORY_SQL,
    SCALAR_CURVE_SQL,
    counter_curve,
    lane_pyramid,
)
from analyzer.store import Store, utcnow  # noqa: E402

OUT = REPO / "bench" / "out"
RUN = "bench64"
TIME_COLS = (
    "ts_ns", "start_ns", "end_ns", "alloc_ns", "release_ns", "active_release_ns",
    # the aggregates' times (copied ones: the others are built from the replicated facts)
    "slowest_ts_ns", "device_start_ns", "device_end_ns", "host_start_ns", "host_end_ns",
)  # fmt: skip
NOT_REPLICATED = {"lanes", "comm_groups", "statistics"}
# aggregates computed from the replicated facts as the ingest computes them, not copied: their
# buckets lie on a grid of the rank's clock (memory curves: MEMORY_BUCKETS over the collection's
# span; the lanes' occupancy pyramid) or on its steps, which shifted copies of the source's miss
BUILT_HERE = {
    "agg_counter_curve", "agg_scalar_curve", "agg_memory_curve", "agg_lanes", "agg_lane_occupancy", "agg_lane_slices",
}  # fmt: skip
TRAIN_STEPS = 20_000  # steps of the collector's per-step scalars of each rank (step time, loss, lr: every step)
TIMELINE_PX = 1150  # the canvas' data area on a 1920 px wide screen (lane names and the details panel beside it)


# ---------------------------------------------------------------------------------------------
# building the store
# ---------------------------------------------------------------------------------------------


def ingest_source(source: Path, work: Path) -> Store:
    store_dir = work / "source_store"
    if store_dir.exists():
        shutil.rmtree(store_dir)
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "analyze"), "ingest", str(source), "--run", "source", "--store", str(store_dir)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return Store(store_dir)


def _shift(tbl: pa.Table, col: str, by: int) -> pa.Table:
    if col not in tbl.column_names or by == 0:
        return tbl
    i = tbl.column_names.index(col)
    arr = tbl.column(col)
    return tbl.set_column(i, col, pc.add(arr, pa.scalar(by, type=arr.type)))


def build_store(source: Path, dest: Path, n_ranks: int, target_slices: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = ingest_source(source, Path(tmp))
        with src.read_connection(run="source") as con:
            cols = con.execute("SELECT * FROM collections WHERE run = 'source' ORDER BY rank").df()
            facts: dict[int, dict[str, pa.Table]] = {}
            for rank in cols["rank"].astype(int):
                facts[rank] = {
                    t.name: con.sql(f'SELECT * FROM "{t.name}" WHERE rank = {rank}').to_arrow_table()
                    for t in schema.FACT_TABLES
                }
    src_ranks = sorted(facts)
    per_rank_slices = max(1, min(facts[r]["slices"].num_rows for r in src_ranks))
    copies = max(1, math.ceil(target_slices / n_ranks / per_rank_slices))
    if dest.exists():
        shutil.rmtree(dest)
    store = Store(dest)
    store.initialize()
    collections, fact_files = [], []
    total_rows = 0
    for r in range(n_ranks):
        sr = src_ranks[r % len(src_ranks)]
        crow = cols[cols["rank"] == sr].iloc[0].to_dict()
        f = facts[sr]
        start, end = int(crow["start_ns"]), int(crow["end_ns"])
        period = (end - start) + 1_000_000
        jitter = (r // len(src_ranks)) * 20_000  # ranks are not perfectly aligned
        steps = f["steps"].column("step").to_pylist() if f["steps"].num_rows else []
        step_span = (max(steps) - min(steps) + 1) if steps else 1
        max_event = (
            max([pc.max(f[t].column("event_id")).as_py() or 0 for t in ("slices", "operators") if f[t].num_rows] + [0])
            + 1
        )
        max_kernel = (pc.max(f["kernels"].column("kernel_id")).as_py() or 0) + 1 if f["kernels"].num_rows else 1
        cid = f"bench{r:04d}"
        w = FactWriter(dest, RUN, r, cid)
        replicated: dict[str, pa.Table] = {}
        for t in schema.FACT_TABLES:
            tbl = f[t.name]
            if tbl.num_rows == 0 or t.name in BUILT_HERE:
                continue
            tbl = tbl.drop_columns(["run", "rank", "collection_id"])
            if t.name in NOT_REPLICATED:
                if t.name == "lanes":
                    tbl = tbl.set_column(
                        tbl.column_names.index("n_slices"), "n_slices", pc.multiply(tbl.column("n_slices"), copies)
                    )
                w.write(t.name, tbl)
                replicated[t.name] = tbl
                continue
            parts = []
            for k in range(copies):
                p = tbl
                for c in TIME_COLS:
                    p = _shift(p, c, k * period + jitter)
                p = _shift(p, "step", k * step_span)
                p = _shift(p, "event_id", k * max_event)
                p = _shift(p, "kernel_id", k * max_kernel)
                parts.append(p)
            big = pa.concat_tables(parts)
            if t.name == "comm_links":
                big = _remap_links(big, sr, r, n_ranks)
            w.write(t.name, big)
            replicated[t.name] = big
        samples = _built_here(r, replicated, ("memory_samples", "counters"), COUNTER_ROWS_SQL, keep_rank=True)
        curves = counter_curve(samples).drop_columns(["rank"])
        if curves.num_rows:
            w.write("agg_counter_curve", curves)
        memory = _built_here(r, replicated, ("memory_samples",), MEMORY_SQL)
        if memory.num_rows:
            w.write("agg_memory_curve", memory)
        slices = _built_here(r, replicated, ("slices", "lanes"), LANE_SLICES_SQL)
        if slices.num_rows:
            for name, tbl in zip(("agg_lanes", "agg_lane_occupancy", "agg_lane_slices"), lane_pyramid(slices)):
                w.write(name, tbl)
        if f["scalars"].num_rows == 0:  # the collector's scalars of a long run (the source has none)
            replicated["scalars"] = _scalars(r, start + jitter, TRAIN_STEPS)
            w.write("scalars", replicated["scalars"])
        if "scalars" in replicated:
            w.write("agg_scalar_curve", _built_here(r, replicated, ("scalars",), SCALAR_CURVE_SQL))
        fact_files += w.close()
        total_rows += w.total_rows
        row = {k: crow.get(k) for k in schema.TABLES["collections"].column_names}
        row.update(
            collection_id=cid,
            run=RUN,
            rank=r,
            root_path=f"replica/rank_{r}",
            world_size=n_ranks,
            start_ns=start + jitter,
            end_ns=end + (copies - 1) * period + jitter,
            steps=sorted({s + k * step_span for s in steps for k in range(copies)}),
            n_rows=w.total_rows,
            ingested_at=utcnow(),
        )
        for k in ("capabilities", "missing", "steps"):
            if row.get(k) is not None:
                row[k] = [x.item() if hasattr(x, "item") else x for x in list(row[k])]
        collections.append(row)
        print(f"\r  rank {r + 1}/{n_ranks}: {total_rows:,} rows", end="", flush=True)
    store.commit(RUN, str(source), [], collections, fact_files, [])
    print()
    info = {
        "source": str(source.relative_to(REPO) if source.is_relative_to(REPO) else source),
        "ranks": n_ranks,
        "copies": copies,
        "rows": total_rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    with Store(dest).read_connection(run=RUN) as con:
        info["slices"] = con.execute("SELECT count(*) FROM slices").fetchone()[0]
        info["events"] = con.execute(
            "SELECT (SELECT count(*) FROM slices) + (SELECT count(*) FROM kernels)"
            " + (SELECT count(*) FROM memory_samples) + (SELECT count(*) FROM counters)"
            " + (SELECT count(*) FROM comm_ops)"
        ).fetchone()[0]
    info["size_bytes"] = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    return info


def _built_here(
    rank: int, facts: dict[str, pa.Table], sources: tuple[str, ...], sql: str, keep_rank: bool = False
) -> pa.Table:
    """An aggregate of a replicated rank built as the ingest builds it (``sql`` of
    ``analyzer.ingest.aggregate``) from its replicated ``sources`` (the source's counter curves are
    on its own time grid, its scalar curves on its own steps: shifted, they would not be the
    replica's; so are its lanes' occupancy pyramid and its memory curves)."""
    import duckdb

    con = duckdb.connect()
    for name in sources:
        tbl = facts.get(name)
        if tbl is None:
            sch = schema.arrow_schema(name)
            tbl = sch.empty_table().drop_columns(["run", "rank", "collection_id"])
        con.register(f"__{name}", tbl)
        con.execute(f"CREATE VIEW {name} AS SELECT *, {int(rank)} AS rank FROM __{name}")
    out = con.sql(sql).to_arrow_table()
    con.close()
    return out.drop_columns(["rank"]) if "rank" in out.column_names and not keep_rank else out


def _scalars(rank: int, t0: int, n_steps: int) -> pa.Table:
    """What the collector writes for ``n_steps`` steps of a rank: step_time_ns (about 100 ms, noisy,
    one step in 500 a few times longer), loss (decaying) and lr (warm-up then constant)."""
    import numpy as np

    rng = np.random.default_rng(rank)
    step = np.arange(n_steps, dtype=np.int32)
    dt = rng.lognormal(np.log(100e6), 0.05, n_steps) * np.where(rng.random(n_steps) < 0.002, 4.0, 1.0)
    ts = t0 + np.cumsum(dt).astype(np.int64)
    loss = 4.0 * np.exp(-step / 5000) + rng.normal(0, 0.05, n_steps)
    lr = np.minimum(1.0, (step + 1) / 1000) * 3e-4
    names = ["step_time_ns", "loss", "lr"]
    return pa.table(
        {
            "step": np.tile(step, 3),
            "ts_ns": np.tile(ts, 3),
            "name": pa.array(np.repeat(names, n_steps)),
            "value": np.concatenate([dt, loss, lr]),
        }
    )


def _remap_links(tbl: pa.Table, src_rank: int, rank: int, n_ranks: int) -> pa.Table:
    for col in ("src_rank", "dst_rank"):
        a = tbl.column(col).to_pylist()
        tbl = tbl.set_column(
            tbl.column_names.index(col),
            col,
            pa.array([None if v is None else (rank + (v - src_rank)) % n_ranks for v in a], pa.int32()),
        )
    return tbl


# ---------------------------------------------------------------------------------------------
# calling callbacks over HTTP (Flask test client)
# ---------------------------------------------------------------------------------------------


class Client:
    def __init__(self, app: Any):
        self.app = app
        self.http = app.server.test_client()
        self.http.get("/")  # first request: Dash sets up the routes
        self.deps = self.http.get("/_dash-dependencies").get_json()

    def call(
        self,
        first_output: str,
        inputs: dict[str, Any],
        state: dict[str, Any] | None = None,
        changed: list[str] | None = None,
    ) -> tuple[float, int, dict[str, Any]]:
        body = callback_body(self.deps, first_output, inputs, state, changed)
        t = time.perf_counter()
        r = self.http.post("/_dash-update-component", json=body)
        dt = time.perf_counter() - t
        if r.status_code not in (200, 204):
            raise RuntimeError(f"{first_output}: HTTP {r.status_code}: {r.get_data(as_text=True)[:300]}")
        data = r.get_json() if r.status_code == 200 else {}
        text = json.dumps(data)
        if "msg-error" in text or "Internal error" in text:
            raise RuntimeError(f"{first_output}: the callback reported an error: {text[:400]}")
        return dt, len(r.get_data()), data

    def layout(self, path: str, search: str = "") -> tuple[float, int, dict[str, Any]]:
        return self.call(
            "_pages_content.children", {"_pages_location.pathname": path, "_pages_location.search": search}
        )


def control_client(store: Store, folder: Path) -> Client:
    """An app with ``--control`` over a dynamic-profiling folder whose log has what 64 ranks write
    for 20 windows (the page reads at most its last MiB), asked with the token as a program would."""
    from collector.dynamic import CONFIG_NAME, LOG_NAME
    from webapp import create_app

    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_NAME).write_text(json.dumps({"start_step": 0, "active": 1, "ranks": [-1]}))
    lines = []
    for r in range(64):
        lines.append(f"2026-01-01 00:00:00 host=node{r // 8} pid={1000 + r} rank={r} watching {folder}/{CONFIG_NAME}")
    for k in range(20):
        for r in range(64):
            head = f"2026-01-01 00:{k:02d}:00 host=node{r // 8} pid={1000 + r} rank={r}"
            w = f"steps {100 * k}..{100 * k + 1}, all ranks"
            lines += [
                f"{head} accepted: window {w}, output below /out (read with torch_npu's meaning)",
                f"{head} starting window {w} in /out/rank_{r}/window_step{100 * k}",
                f"{head} stopped window {w}: complete, captured steps [{100 * k}, {100 * k + 1}]",
            ]
    (folder / LOG_NAME).write_text("\n".join(lines) + "\n")
    app = create_app(store, token="bench-token", control=folder)
    c = Client.__new__(Client)
    c.app, c.http = app, app.server.test_client()
    c.http.environ_base["HTTP_AUTHORIZATION"] = "Bearer bench-token"
    c.http.get("/")
    c.deps = c.http.get("/_dash-dependencies").get_json()
    return c


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--source", default=str(REPO / "sample_data" / "torch_npu_text_level1"), help="real traces to replicate"
    )
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--slices", type=int, default=20_000_000, help="target number of timeline slices over all ranks")
    ap.add_argument("--repeat", type=int, default=20, help="calls per callback (inputs varied)")
    ap.add_argument("--store", default=str(OUT / "webapp_store"))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--dump", help="write every call's wall and CPU seconds per callback to this JSON file")
    args = ap.parse_args()

    dest = Path(args.store)
    meta = dest / "bench_meta.json"
    want = {
        "source": str(Path(args.source).resolve()),
        "ranks": args.ranks,
        "slices": args.slices,
        "train_steps": TRAIN_STEPS,
        "built_here": sorted(BUILT_HERE),
    }
    if args.rebuild or not meta.exists() or json.loads(meta.read_text()).get("want") != want:
        print(f"building {dest} from {args.source}: {args.ranks} ranks, ~{args.slices:,} slices ...")
        info = build_store(Path(args.source).resolve(), dest, args.ranks, args.slices)
        meta.write_text(json.dumps({"want": want, "info": info}, indent=2))
    info = json.loads(meta.read_text())["info"]
    print(
        f"store: {info['ranks']} ranks x {info['copies']} copies of {info['source']}: {info['slices']:,} slices, "
        f"{info['events']:,} events (slices + kernels + memory + counters + comm), {info['rows']:,} rows, "
        f"{info['size_bytes'] / 2**20:,.0f} MiB (built in {info['seconds']} s)"
    )

    from webapp import create_app, data, tiles, warmup
    from webapp.params import format_ranks
    from webapp.reader import reader

    warmup.ENABLED = False  # the first call of every callback below is measured cold (no background warm-up)
    store = Store(dest)
    app = create_app(store)
    cl = Client(app)
    rng = random.Random(7)
    ranks = list(range(args.ranks))
    with reader(store, RUN) as rd:
        bounds = data.time_bounds(rd, RUN, None)
        steps = data.steps(rd, RUN, None)
        comps = data.memory_components(rd, RUN, [0])
    assert bounds is not None
    origin = bounds[0]
    component = str(comps["component"].iloc[0]) if not comps.empty else None
    step_ids = [int(s) for s in steps["step"]]

    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # CPU time of the process (every thread: DuckDB's too) per call
    sizes: dict[str, list[int]] = {}

    def timed(name: str, fn: Callable[[], tuple[float, int, Any]]) -> Any:
        c = time.process_time()
        dt, size, out = fn()
        cpu.setdefault(name, []).append(time.process_time() - c)
        results.setdefault(name, []).append(dt)
        sizes.setdefault(name, []).append(size)
        return out

    def sel(n: int) -> list[int]:
        start = rng.randrange(0, max(1, args.ranks - n + 1))
        return ranks[start : start + n]

    # warm-up: the first call per process pays imports; the first overview computes the step
    # breakdown of the run (then cached per content of the run): measured once, reported apart
    t = time.perf_counter()
    cl.call("ov-content.children", {"ov-run.value": RUN, "ov-ranks.value": [], "ov-step.value": "mean"})
    cold_overview = time.perf_counter() - t
    cl.layout("/timeline", f"?run={RUN}")

    def tl_meta(rs: list[int]) -> tuple[float, int, Any]:
        t = time.perf_counter()
        r = cl.http.get(f"/_timeline/meta?run={RUN}&ranks={format_ranks(rs)}")
        dt = time.perf_counter() - t
        if r.status_code != 200:
            raise RuntimeError(f"timeline meta: HTTP {r.status_code}: {r.get_data(as_text=True)[:300]}")
        return dt, len(r.get_data()), r.get_json()

    def tl_tiles(m: dict[str, Any], keys: list[str], a: float, b: float) -> tuple[float, int, Any]:
        """The tiles the browser asks for to draw rows ``keys`` over [a, b) (ns after the origin) on a
        1150 px wide canvas, in requests of at most 256 tiles, gzip as the browser takes them."""
        z = tiles.level_for((b - a) / TIMELINE_PX)
        want = [[k, z, i] for k in keys for i in tiles.tiles_for(a, b, z)]
        dt, size, n = 0.0, 0, 0
        for lo in range(0, len(want), 256):
            t = time.perf_counter()
            r = cl.http.post(
                "/_timeline/tiles",
                json={"run": RUN, "fp": m["fp"], "tiles": want[lo : lo + 256]},
                headers={"Accept-Encoding": "gzip"},
            )
            dt += time.perf_counter() - t
            if r.status_code != 200:
                raise RuntimeError(f"timeline tiles: HTTP {r.status_code}: {r.get_data(as_text=True)[:300]}")
            size += len(r.get_data())
            n += sum(t["n"] for t in tiles.decode(gzip.decompress(r.get_data())).tiles)
        return dt, size, n

    def post(path: str, body: dict[str, Any]) -> tuple[float, int, Any]:
        t = time.perf_counter()
        r = cl.http.post(path, json=body)
        dt = time.perf_counter() - t
        if r.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {r.status_code}: {r.get_data(as_text=True)[:300]}")
        return dt, len(r.get_data()), r.get_json()

    def view_rows(m: dict[str, Any], folded: bool, limit: int = 40) -> list[str]:
        """The rows on the first screen: a folded rank's lane groups, or an expanded rank's lanes."""
        if folded:
            keys = [f"{ln['rank']}.{ln['group']}" for ln in m["lanes"] if ln["group"] != "other"]
            return list(dict.fromkeys(keys))[:limit]
        return [ln["key"] for ln in m["lanes"] if ln["group"] != "other"][:limit]

    ctl = control_client(store, Path(args.store).parent / "control")
    if hasattr(warmup, "settle"):  # what `analyze serve` does once its app is built (a tree before it: not)
        warmup.settle()

    for i in range(args.repeat):
        timed("layout /", lambda: cl.layout("/", f"?run={RUN}"))
        timed("layout /timeline", lambda: cl.layout("/timeline", f"?run={RUN}&ranks=0-7"))
        timed("layout /operators", lambda: cl.layout("/operators", f"?run={RUN}"))
        timed(
            "overview (64 ranks, cached breakdown)",
            lambda: cl.call(
                "ov-content.children",
                {"ov-run.value": RUN, "ov-ranks.value": [], "ov-step.value": rng.choice(["mean"] + step_ids)},
            ),
        )
        # timeline: the lanes of 8 ranks, then the tiles the browser asks for to draw the whole run
        # (ranks folded), a step and a 1 ms window (two ranks' lanes expanded), and an event's details
        rs = sel(8)
        m8 = timed("timeline lanes (meta), 8 ranks", lambda: tl_meta(rs))
        ev = m8["events"][str(rs[0])]
        timed("timeline tiles whole run, 8 ranks folded", lambda: tl_tiles(m8, view_rows(m8, True), ev[0], ev[1]))
        m64 = timed("timeline lanes (meta), 64 ranks", lambda: tl_meta(ranks))
        timed("timeline tiles whole run, 64 ranks folded", lambda: tl_tiles(m64, view_rows(m64, True), ev[0], ev[1]))
        st = rng.choice([s for s in m8["steps"] if s[0] == rs[0]])
        timed("timeline tiles one step, 2 ranks' lanes", lambda: tl_tiles(m8, view_rows(m8, False), st[2], st[3]))
        a = rng.uniform(ev[0], ev[1] - 1e6)
        timed("timeline tiles 1 ms, 2 ranks' lanes", lambda: tl_tiles(m8, view_rows(m8, False), a, a + 1e6))
        with reader(store, RUN, [rs[0]], ("slices",)) as rd:
            con = rd.facts(RUN, [rs[0]], ("slices",))
            pick = con.execute(
                f"SELECT collection_id, event_id FROM slices WHERE rank = {rs[0]} USING SAMPLE 1 ROWS"
            ).fetchone()
        sel_data = {"run": RUN, "rank": rs[0], "collection_id": pick[0], "event": int(pick[1]), "origin": str(origin)}
        timed("timeline click event details", lambda: cl.call("tl-detail.children", {"tl-selected.data": sel_data}))
        # counter tracks of 8 ranks over a step (1150 buckets); flow arrows of 8 ranks over 1 ms
        off8 = {str(c["rank"]): c["offset"] or 0 for c in m8["clock"]}
        timed(
            "timeline counter tracks, 8 ranks, a step",
            lambda: post(
                "/_timeline/counters",
                {"run": RUN, "fp": m8["fp"], "tracks": [c["key"] for c in m8["counters"]], "offsets": off8,
                 "a": st[2], "b": st[3], "n": TIMELINE_PX},
            ),
        )  # fmt: skip
        timed(
            "timeline flow arrows (launch, send/recv, collectives), 8 ranks, 1 ms",
            lambda: post(
                "/_timeline/flows",
                {"run": RUN, "fp": m8["fp"], "ranks": rs, "kinds": ["launch", "p2p", "collective"],
                 "offsets": off8, "a": a, "b": a + 1e6},
            ),
        )  # fmt: skip
        # operators
        for src, grp, scope in (
            ("kernels", "name", "across"),
            ("kernels", "type", "rank"),
            ("operators", "shape", "across"),
        ):
            timed(
                f"operators {src} by {grp} {scope}",
                lambda: cl.call(
                    "op-grid.rowData",
                    {
                        "op-run.value": RUN,
                        "op-ranks.value": [],
                        "op-source.value": src,
                        "op-group.value": grp,
                        "op-scope.value": scope,
                    },
                ),
            )
        out = cl.call(
            "op-grid.rowData",
            {
                "op-run.value": RUN,
                "op-ranks.value": [],
                "op-source.value": "kernels",
                "op-group.value": "type",
                "op-scope.value": "across",
            },
        )[2]
        rows = out["response"]["op-grid"]["rowData"]
        if rows:
            pick = rows[rng.randrange(min(10, len(rows)))]

            def drill_call() -> tuple[float, int, Any]:
                out = cl.call(
                    "op-drill.children",
                    {"op-grid.selectedRows": [pick], "op-grid.rowData": rows},
                    {"op-run.value": RUN, "op-ranks.value": [], "op-source.value": "kernels", "op-group.value": "type"},
                )
                if str(pick["key"]) not in json.dumps(out[2]):  # a real drill names its operator
                    raise RuntimeError(f"the drill did not show {pick['key']!r}")
                return out

            timed("operators drill one type across 64 ranks", drill_call)
        # memory
        if component:
            timed(
                "memory curves 8 ranks",
                lambda: cl.call(
                    "mem-curves.figure",
                    {
                        "mem-run.value": RUN,
                        "mem-ranks.value": rs,
                        "mem-component.value": component,
                        "mem-series.value": ["allocated", "reserved", "active"],
                    },
                ),
            )
            timed(
                "memory peaks + top blocks",
                lambda: cl.call(
                    "mem-peaks.children",
                    {"mem-run.value": RUN, "mem-ranks.value": rs, "mem-component.value": component},
                ),
            )
        # communication
        timed(
            "communication (64 ranks)",
            lambda: cl.call(
                "cm-content.children",
                {
                    "cm-run.value": RUN,
                    "cm-ranks.value": [],
                    "cm-metric.value": rng.choice(["bytes", "transit_ns", "bandwidth_bytes_per_s"]),
                },
            ),
        )
        # advisor (the findings are computed once per run and cached; the first call is reported as "first")
        timed(
            "advisor (every finding, 64 ranks)",
            lambda: cl.call(
                "adv-content.children",
                {
                    "adv-run.value": RUN,
                    "adv-ranks.value": rng.choice([[], sel(8)]),
                    "adv-severity.value": ["high", "medium", "low"],
                    "adv-rule.value": None,
                },
                {"adv-want.data": None},
            ),
        )
        # cluster: the layout grid coloured by a metric
        timed(
            "cluster grid (64 ranks)",
            lambda: cl.call(
                "cl-content.children",
                {
                    "cl-run.value": RUN,
                    "cl-metric.value": rng.choice(
                        ["step_ns", "free_ns", "wait_ns", "peak_memory", "slow_rank_votes", "straggler_lateness_ns"]
                    ),
                },
                {"cl-mark.data": None},
            ),
        )
        timed(
            "cluster grid by straggler lateness (64 ranks)",
            lambda: cl.call(
                "cl-content.children",
                {"cl-run.value": RUN, "cl-metric.value": "straggler_lateness_ns"},
                {"cl-mark.data": None},
            ),
        )
        # pipeline: a step of a PP group (the page says "no pipeline" when the source has no send/recv)
        timed(
            "pipeline page, a step of a group",
            lambda: cl.call(
                "pp-content.children",
                {"pp-run.value": RUN, "pp-step.value": rng.choice(step_ids), "pp-group.value": rng.choice([0, 1])},
            ),
        )
        # training: a scalar and the step time of 20 000 steps per rank, outliers, profiled steps
        timed(
            f"training ({TRAIN_STEPS:,} steps x 64 or 8 ranks)",
            lambda: cl.call(
                "tr-content.children",
                {
                    "tr-run.value": RUN,
                    "tr-ranks.value": rng.choice([[], sel(8)]),
                    "tr-scalar.value": rng.choice(["loss", "lr", "step_time_ns"]),
                },
            ),
        )
        timed(
            "training: a click on a step",
            lambda: cl.call(
                "navigate.href",
                {"tr-steptime.clickData": {"points": [{"customdata": rng.choice(ranks), "x": rng.choice(step_ids)}]}},
                {"tr-run.value": RUN},
            ),
        )
        # profiling: the file, the log of 64 ranks and their states (analyze serve --control)
        timed(
            "profiling page refresh (64 ranks' log)",
            lambda: ctl.call("pf-config.children", {"pf-tick.n_intervals": i}),
        )
        # baselines
        rb = sel(8)

        def open_only() -> tuple[float, int, Any]:
            t = time.perf_counter()
            with store.read_connection(run=RUN, ranks=rb):
                pass
            return time.perf_counter() - t, 0, None

        timed("baseline: open the store (read_connection, 8 ranks)", open_only)

        def ship_trace() -> tuple[float, int, Any]:
            t = time.perf_counter()
            with store.read_connection(run=RUN, ranks=rb) as con:
                df = con.execute("SELECT rank, pid, tid, name, ts_ns, dur_ns FROM slices").df()
            text = df.to_json(orient="values")
            return time.perf_counter() - t, len(text), None

        if i < 3:
            timed("baseline: ship the whole trace of 8 ranks", ship_trace)
        print(f"\r  round {i + 1}/{args.repeat}", end="", flush=True)
    print()

    if args.dump:
        Path(args.dump).write_text(json.dumps({n: {"wall": xs, "cpu": cpu[n]} for n, xs in results.items()}))
    base_open = statistics.median(results["baseline: open the store (read_connection, 8 ranks)"])
    base_ship = statistics.median(results["baseline: ship the whole trace of 8 ranks"])
    print(f"\nserver time per callback over HTTP ({args.repeat} calls each; 2-core machine shared with others)")
    print("(first = the first call of the process with those inputs' data: caches cold;")
    print(" p50/p95/max over the calls after it;")
    print(" cpu = CPU time of the process during the call, every thread, the figure a shared machine leaves true)")
    print(
        f"{'callback':<52} {'calls':>5} {'first':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu first':>9} "
        f"{'cpu p50':>8} {'cpu p95':>8} {'resp KiB':>9} {'p50/open':>9} {'p50/ship':>9}"
    )
    worst = 0.0
    for name, xs in results.items():
        first, first_cpu = xs[0], cpu[name][0]
        xs, cs = (xs[1:], cpu[name][1:]) if len(xs) > 1 else (xs, cpu[name])
        p50, p95 = pct(xs, 0.5), pct(xs, 0.95)
        if not name.startswith("baseline"):
            worst = max(worst, p95)
        kib = statistics.median(sizes[name]) / 1024
        print(
            f"{name:<52} {len(xs):5d} {first * 1e3:7.0f} {p50 * 1e3:8.1f} {p95 * 1e3:8.1f} {max(xs) * 1e3:8.1f} "
            f"{first_cpu * 1e3:9.0f} {pct(cs, 0.5) * 1e3:8.1f} {pct(cs, 0.95) * 1e3:8.1f} "
            f"{kib:9.1f} {p50 / base_open:9.1f} {p50 / base_ship:9.2f}"
        )
    print(
        f"\nfirst overview of the run (computes the step breakdown of {args.ranks} ranks, then cached): "
        f"{cold_overview * 1e3:.0f} ms"
    )
    print(f"worst p95 over the callbacks: {worst * 1e3:.0f} ms (target 300 ms) -> {'OK' if worst <= 0.3 else 'OVER'}")


if __name__ == "__main__":
    main()
