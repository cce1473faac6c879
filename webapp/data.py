"""Data access for the web app: the only module of ``webapp`` that holds SQL.

Every function takes a :class:`Reader` (one per request: it opens the store through
``Store.read_connection``, which copies the catalog into memory and closes the file at once) and
returns a small pandas DataFrame or dict. Nothing is cached between requests, so a run committed by a concurrent ``analyze ingest``
shows on the next request. Every query is bounded: windows are aggregated into buckets, grids are
cut to a maximum number of rows, curves are downsampled on the server.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from analyzer.errors import QueryError, StoreError
from analyzer.store import Store

from .errors import EmptyStore, NotFound

# Upper bounds of what one request may return.
MAX_EXACT_SLICES = 4000  # timeline: above this many slices in view, show occupancy per bucket
MAX_BUCKETS = 2000  # timeline / memory: buckets per lane / curve
MAX_GRID_ROWS = 2000  # operators / collectives grids
MAX_MEMORY_BLOCKS = 500  # operator memory table
MAX_SCALAR_POINTS = 2000  # per (rank, scalar) curve
MAX_DRILL_RANKS = 4096


# ---------------------------------------------------------------------------------------------
# connections
# ---------------------------------------------------------------------------------------------


class Reader:
    """One request's view of the store.

    The facts come from ``Store.read_connection(run, ranks)`` (an in-memory DuckDB holding a copy of
    the catalog and views over the run's Parquet files; the catalog file is closed at once). A
    request usually needs one such connection: catalog queries reuse it (it holds every catalog
    table). Close the reader (``with reader(store, run, ranks) as rd``) at the end of the request.
    """

    def __init__(self, store: Store, run: str | None = None, ranks: Sequence[int] | None = None):
        self.store = store
        self._hint = (run, None if ranks is None else tuple(sorted(int(r) for r in ranks)))
        self._stack = contextlib.ExitStack()
        self._facts: dict[tuple[str, tuple[int, ...] | None], duckdb.DuckDBPyConnection] = {}
        self._catalog: duckdb.DuckDBPyConnection | None = None

    def close(self) -> None:
        self._stack.close()
        self._facts.clear()
        self._catalog = None

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _require(self) -> None:
        if not self.store.exists():
            raise EmptyStore(f"no store at {self.store.path}")

    def catalog(self) -> duckdb.DuckDBPyConnection:
        """A connection where the catalog tables (runs, collections, source_files, fact_files) can be read."""
        if self._facts:
            return next(iter(self._facts.values()))
        if self._catalog is None:
            self._require()
            run, ranks = self._hint
            if run is not None:
                return self.facts(run, ranks)
            cat = self.store.load_catalog()
            con = self._stack.enter_context(contextlib.closing(duckdb.connect(":memory:")))
            for name, tbl in cat.items():
                con.register(name, tbl)
            self._catalog = con
        return self._catalog

    def facts(self, run: str, ranks: Sequence[int] | None) -> duckdb.DuckDBPyConnection:
        """A connection with the fact tables of ``run`` (at least ``ranks``; None = every rank)."""
        key = (run, None if ranks is None else tuple(sorted(int(r) for r in ranks)))
        for (r, rk), con in self._facts.items():
            if r == run and (rk is None or (key[1] is not None and set(key[1]) <= set(rk))):
                return con
        self._require()
        con = self._stack.enter_context(self.store.read_connection(run=run, ranks=None if key[1] is None else list(key[1])))
        self._facts[key] = con
        return con


def reader(
    store: Store | Reader, run: str | None = None, ranks: Sequence[int] | None = None
) -> contextlib.AbstractContextManager[Reader]:
    """``with reader(store, run, ranks) as rd``: a Reader for one request (name the run / ranks you
    will read so the store is opened once). Given a Reader, uses it and leaves it open."""
    if isinstance(store, Reader):
        return contextlib.nullcontext(store)
    return Reader(store, run, ranks)


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    try:
        return con.execute(sql, params or {}).df()
    except duckdb.Error as exc:  # a schema or data problem: report it, do not crash the page
        raise QueryError(str(exc).strip().splitlines()[0]) from exc


def _ranks_param(ranks: Sequence[int] | None) -> list[int] | None:
    return None if ranks is None else [int(r) for r in ranks]


RANK_FILTER = "($ranks IS NULL OR list_contains($ranks, rank))"

# ---------------------------------------------------------------------------------------------
# runs, ranks, collections (catalog only: cheap)
# ---------------------------------------------------------------------------------------------

RUNS_SQL = """
SELECT r.run,
       count(DISTINCT c.rank) AS ranks,
       count(c.collection_id) AS collections,
       (SELECT count(DISTINCT s) FROM (SELECT unnest(c2.steps) AS s FROM collections c2 WHERE c2.run = r.run)) AS steps,
       list(DISTINCT c.producer ORDER BY c.producer) AS formats,
       CASE WHEN count(c.collection_id) = 0 THEN 'error'
            WHEN bool_and(c.status = 'complete') THEN 'complete'
            WHEN bool_or(c.status IN ('complete', 'partial')) THEN 'partial'
            ELSE min(c.status) END AS status,
       (SELECT count(*) FROM source_files f WHERE f.run = r.run AND f.status IN ('warning', 'error')) AS problems,
       sum(c.n_rows) AS rows,
       r.updated_at, r.root_path
FROM runs r LEFT JOIN collections c ON c.run = r.run
GROUP BY r.run, r.updated_at, r.root_path
ORDER BY r.updated_at DESC, r.run
"""


def runs(rd: Reader) -> pd.DataFrame:
    """Runs in the store, most recently ingested first."""
    if not rd.store.exists():
        return pd.DataFrame(columns=["run", "ranks", "collections", "steps", "formats", "status", "problems",
                                     "rows", "updated_at", "root_path"])
    con = rd.catalog()
    return _df(con, RUNS_SQL)


def run_names(rd: Reader) -> list[str]:
    return [str(r) for r in runs(rd)["run"]]


def resolve_run(rd: Reader, run: str | None) -> str:
    """The named run, or the most recently ingested one; EmptyStore / NotFound otherwise."""
    names = run_names(rd)
    if not names:
        raise EmptyStore("the store has no runs yet")
    if run is None:
        return names[0]
    if run not in names:
        raise NotFound(f"no run named {run!r} in the store (runs: {', '.join(names[:20])})")
    return run


COLLECTIONS_SQL = """
SELECT rank, collection_id, producer, producer_version, level, status, root_path, world_size, hostname,
       device_id, start_ns, end_ns, steps, capabilities, missing, n_rows
FROM collections WHERE run = $run ORDER BY rank, start_ns NULLS LAST, collection_id
"""


def collections(rd: Reader, run: str) -> pd.DataFrame:
    """One row per collection of the run (rank, producer, level, status, steps, capabilities, missing...)."""
    con = rd.catalog()
    return _df(con, COLLECTIONS_SQL, {"run": run})


def ranks_of(rd: Reader, run: str) -> list[int]:
    con = rd.catalog()
    df = _df(con, "SELECT DISTINCT rank FROM collections WHERE run = $run ORDER BY rank", {"run": run})
    return [int(r) for r in df["rank"]]


def check_ranks(rd: Reader, run: str, ranks: Sequence[int] | None) -> list[int]:
    """The requested ranks (all of the run when None); NotFound names ranks the run does not have."""
    have = ranks_of(rd, run)
    if ranks is None:
        return have
    unknown = sorted(set(ranks) - set(have))
    if unknown:
        shown = ", ".join(map(str, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
        raise NotFound(f"run {run!r} has no rank {shown} (ranks: {_compact(have)})")
    return sorted(set(int(r) for r in ranks))


def _compact(ranks: Sequence[int]) -> str:
    from .params import format_ranks

    return format_ranks(ranks) or "none"


PROBLEMS_SQL = """
SELECT path, status, reader, error FROM source_files
WHERE run = $run AND status IN ('warning', 'error')
ORDER BY status DESC, path LIMIT 200
"""


def problems(rd: Reader, run: str) -> pd.DataFrame:
    """Files of the run that were read with a warning or not read (at most 200)."""
    con = rd.catalog()
    return _df(con, PROBLEMS_SQL, {"run": run})


def time_bounds(rd: Reader, run: str, ranks: Sequence[int] | None) -> tuple[int, int] | None:
    """Earliest start and latest end (ns) of the selected ranks' collections."""
    con = rd.catalog()
    row = con.execute(
        f"SELECT min(start_ns), max(end_ns) FROM collections WHERE run = $run AND {RANK_FILTER}",
        {"run": run, "ranks": _ranks_param(ranks)},
    ).fetchone()
    if row is None or row[0] is None or row[1] is None:
        return None
    return int(row[0]), int(row[1])


# ---------------------------------------------------------------------------------------------
# steps and scalars
# ---------------------------------------------------------------------------------------------

STEPS_SQL = f"""
SELECT step, min(start_ns) AS start_ns, max(end_ns) AS end_ns, count(DISTINCT rank) AS ranks,
       avg(dur_ns) AS avg_ns, max(dur_ns) AS max_ns
FROM steps WHERE run = $run AND {RANK_FILTER} AND step IS NOT NULL AND source <> 'collector'
GROUP BY step ORDER BY step LIMIT 10000
"""


def steps(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Profiled steps of the selected ranks: earliest start and latest end over the ranks."""
    con = rd.facts(run, ranks)
    return _df(con, STEPS_SQL, {"run": run, "ranks": _ranks_param(ranks)})


RANK_STEPS_SQL = f"""
SELECT rank, count(DISTINCT step) AS steps, avg(dur_ns) AS avg_ns, max(dur_ns) AS max_ns, min(dur_ns) AS min_ns
FROM steps WHERE run = $run AND {RANK_FILTER} AND source <> 'collector'
GROUP BY rank ORDER BY rank
"""


def rank_steps(rd: Reader, run: str, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    con = rd.facts(run, ranks)
    return _df(con, RANK_STEPS_SQL, {"run": run, "ranks": _ranks_param(ranks)})


SCALARS_SQL = f"""
WITH s AS (
  SELECT rank, name, step, value, ts_ns,
         row_number() OVER (PARTITION BY rank, name ORDER BY step, ts_ns) AS i,
         count(*) OVER (PARTITION BY rank, name) AS n
  FROM scalars WHERE run = $run AND {RANK_FILTER})
SELECT rank, name, step, value FROM s
WHERE n <= $maxp OR (i - 1) % CAST(ceil(n / $maxp) AS BIGINT) = 0 OR i = n
ORDER BY name, rank, step
"""


def scalars(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per-step training scalars (step_time_ns, loss, ...), thinned to ~2000 points per (rank, name)."""
    con = rd.facts(run, ranks)
    return _df(con, SCALARS_SQL, {"run": run, "ranks": _ranks_param(ranks), "maxp": MAX_SCALAR_POINTS})


# ---------------------------------------------------------------------------------------------
# timeline
# ---------------------------------------------------------------------------------------------

LANE_GROUP_ORDER = ("host", "device", "communication", "overlap", "other")

LANES_SQL = f"""
SELECT rank, collection_id, pid, tid, process, lane, lane_group, sort_index, n_slices
FROM lanes WHERE run = $run AND {RANK_FILTER} AND n_slices > 0
"""


def lanes(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Timeline rows: one per (rank, lane group, process, lane) in drawing order, with ``row`` numbers.

    The same thread seen in several collections of a rank is one row. ``members`` keeps the
    (collection_id, pid, tid) keys that slices join on.
    """
    con = rd.facts(run, ranks)
    df = _df(con, LANES_SQL, {"run": run, "ranks": _ranks_param(ranks)})
    return order_lanes(df)


def order_lanes(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df.assign(row=pd.Series(dtype="int64"), group_order=pd.Series(dtype="int64"))
    df = df.copy()
    df["lane_group"] = df["lane_group"].fillna("other")
    df["process"] = df["process"].fillna("")
    df["lane"] = df["lane"].fillna("")
    df["group_order"] = df["lane_group"].map({g: i for i, g in enumerate(LANE_GROUP_ORDER)}).fillna(len(LANE_GROUP_ORDER))
    df["sort_key"] = pd.to_numeric(df["sort_index"], errors="coerce").fillna(np.iinfo(np.int64).max)
    keys = ["rank", "group_order", "process", "lane"]
    rows = (
        df.groupby(keys, sort=False, dropna=False)
        .agg(sort_key=("sort_key", "min"), n_slices=("n_slices", "sum"), lane_group=("lane_group", "first"))
        .reset_index()
        .sort_values(["rank", "group_order", "sort_key", "process", "lane"], kind="stable")
        .reset_index(drop=True)
    )
    rows["row"] = np.arange(len(rows), dtype=np.int64)
    return df.drop(columns=["n_slices", "lane_group", "sort_key"]).merge(
        rows[keys + ["row", "n_slices", "lane_group"]], on=keys, how="left"
    )


EXACT_SQL = f"""
SELECT rank, collection_id, pid, tid, name, category, ts_ns, dur_ns, event_id
FROM slices
WHERE run = $run AND {RANK_FILTER} AND ts_ns < $end AND ts_ns + dur_ns >= $start
LIMIT $limit
"""

OCCUPANCY_SQL = f"""
WITH s AS MATERIALIZED (
  SELECT rank, collection_id, pid, tid, name, ts_ns, dur_ns,
         greatest(ts_ns, $start) AS a, least(ts_ns + dur_ns, $end) AS b
  FROM slices
  WHERE run = $run AND {RANK_FILTER} AND ts_ns < $end AND ts_ns + dur_ns >= $start),
counts AS (
  SELECT rank, collection_id, pid, tid,
         least(CAST(floor((a - $start) / $width) AS BIGINT), $nb - 1) AS bucket,
         count(*) AS events, arg_max(name, b - a) AS longest, max(b - a) AS longest_ns
  FROM s GROUP BY ALL),
ordered AS (  -- interval union per lane: cut off what earlier slices already cover
  SELECT rank, collection_id, pid, tid, a, b,
         max(b) OVER (PARTITION BY rank, collection_id, pid, tid ORDER BY a, b DESC
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM s WHERE b > a),
pieces AS (
  SELECT rank, collection_id, pid, tid, greatest(a, coalesce(reach, a)) AS a, b
  FROM ordered WHERE b > coalesce(reach, a)),
split AS (
  SELECT rank, collection_id, pid, tid, a, b,
         least(CAST(floor((a - $start) / $width) AS BIGINT), $nb - 1) AS b0,
         least(CAST(floor((b - 1 - $start) / $width) AS BIGINT), $nb - 1) AS b1
  FROM pieces),
busy AS (
  SELECT rank, collection_id, pid, tid, b0 AS bucket, sum(b - a) AS busy_ns
  FROM split WHERE b0 = b1 GROUP BY ALL
  UNION ALL
  SELECT rank, collection_id, pid, tid, bucket,
         sum(least(b, $start + (bucket + 1) * $width) - greatest(a, $start + bucket * $width)) AS busy_ns
  FROM (SELECT *, unnest(range(b0, b1 + 1)) AS bucket FROM split WHERE b1 > b0) GROUP BY ALL)
SELECT coalesce(c.rank, u.rank) AS rank, coalesce(c.collection_id, u.collection_id) AS collection_id,
       coalesce(c.pid, u.pid) AS pid, coalesce(c.tid, u.tid) AS tid, coalesce(c.bucket, u.bucket) AS bucket,
       coalesce(u.busy_ns, 0) AS busy_ns, coalesce(c.events, 0) AS events, c.longest, c.longest_ns
FROM counts c FULL OUTER JOIN (
  SELECT rank, collection_id, pid, tid, bucket, sum(busy_ns) AS busy_ns FROM busy GROUP BY ALL) u
  USING (rank, collection_id, pid, tid, bucket)
"""


@dataclass
class Window:
    """What the timeline shows for one time window."""

    start_ns: int
    end_ns: int
    lanes: pd.DataFrame  # order_lanes() output
    mode: str  # "exact" | "occupancy" | "empty"
    slices: pd.DataFrame  # exact: one row per slice, with ``row``
    buckets: pd.DataFrame  # occupancy: rank/lane bucket rows, with ``row``
    bucket_ns: float
    n_buckets: int


def timeline_window(
    rd: Reader,
    run: str,
    ranks: Sequence[int] | None,
    start_ns: int,
    end_ns: int,
    n_buckets: int = 800,
    max_exact: int = MAX_EXACT_SLICES,
) -> Window:
    """The slices of a time window: exact when at most ``max_exact`` overlap it, else per-lane
    occupancy (share of each bucket covered by the union of the lane's slices, event count and the
    longest slice starting in the bucket) over ``n_buckets`` equal buckets."""
    if end_ns <= start_ns:
        end_ns = start_ns + 1
    n_buckets = max(1, min(int(n_buckets), MAX_BUCKETS))
    params = {"run": run, "ranks": _ranks_param(ranks), "start": int(start_ns), "end": int(end_ns)}
    con = rd.facts(run, ranks)
    lane_df = order_lanes(_df(con, LANES_SQL, {"run": run, "ranks": _ranks_param(ranks)}))
    exact = _df(con, EXACT_SQL, {**params, "limit": max_exact + 1})
    if len(exact) <= max_exact:
        sl = _attach_rows(exact, lane_df)
        return Window(start_ns, end_ns, lane_df, "exact" if len(sl) else "empty", sl, pd.DataFrame(), 0.0, 0)
    width = (end_ns - start_ns) / n_buckets
    occ = _df(con, OCCUPANCY_SQL, {**params, "width": width, "nb": n_buckets})
    occ = _attach_rows(occ, lane_df)
    occ = (
        occ.groupby(["row", "bucket"], as_index=False)
        .agg(busy_ns=("busy_ns", "sum"), events=("events", "sum"), longest=("longest", "first"),
             longest_ns=("longest_ns", "max"))
    )
    return Window(start_ns, end_ns, lane_df, "occupancy", pd.DataFrame(), occ, width, n_buckets)


def _attach_rows(df: pd.DataFrame, lane_df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df.assign(row=pd.Series(dtype="int64"))
    keys = ["rank", "collection_id", "pid", "tid"]
    out = df.merge(lane_df[keys + ["row"]].drop_duplicates(keys), on=keys, how="inner")
    out["row"] = out["row"].astype("int64")
    return out


SLICE_SQL = """
SELECT s.rank, s.collection_id, s.pid, s.tid, s.name, s.category, s.ts_ns, s.dur_ns, s.event_id, s.args,
       l.process, l.lane, l.lane_group
FROM slices s LEFT JOIN lanes l USING (run, rank, collection_id, pid, tid)
WHERE s.run = $run AND s.rank = $rank AND s.collection_id = $cid AND s.event_id = $eid
LIMIT 1
"""

SLICE_OP_SQL = """
SELECT step, self_ns, depth, input_shapes, input_types, call_stack, sequence_number
FROM operators WHERE run = $run AND rank = $rank AND collection_id = $cid AND event_id = $eid LIMIT 1
"""

SLICE_STEP_SQL = """
SELECT step FROM steps WHERE run = $run AND rank = $rank AND start_ns <= $ts AND end_ns > $ts
ORDER BY start_ns DESC LIMIT 1
"""


def slice_detail(rd: Reader, run: str, rank: int, collection_id: str, event_id: int) -> dict[str, Any] | None:
    """Everything known about one slice: lane, times, args, and the operator row (shapes, stack)."""
    p = {"run": run, "rank": int(rank), "cid": str(collection_id), "eid": int(event_id)}
    con = rd.facts(run, [int(rank)])
    row = _df(con, SLICE_SQL, p)
    if row.empty:
        return None
    out = {k: _plain(v) for k, v in row.iloc[0].to_dict().items()}
    op = _df(con, SLICE_OP_SQL, p)
    if not op.empty:
        out.update({k: _plain(v) for k, v in op.iloc[0].to_dict().items()})
    if out.get("step") is None and out.get("ts_ns") is not None:
        st = _df(con, SLICE_STEP_SQL, {"run": run, "rank": int(rank), "ts": int(out["ts_ns"])})
        if not st.empty:
            out["step"] = _plain(st.iloc[0]["step"])
    return out


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is pd.NA or v is pd.NaT:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (ValueError, AttributeError):
            return v
    return v


# ---------------------------------------------------------------------------------------------
# operators and kernels
# ---------------------------------------------------------------------------------------------

SOURCES = ("operators", "kernels")
GROUPINGS = ("type", "name", "shape")

# What "type" means per source: the kernel's operator type (its name when the producer gave none),
# the host operator's category (cpu_op, user_annotation, ...).
_KEY_EXPR = {
    ("kernels", "type"): ("coalesce(op_type, name)", "NULL"),
    ("kernels", "name"): ("name", "NULL"),
    ("kernels", "shape"): ("name", "coalesce(input_shapes, '')"),
    ("operators", "type"): ("coalesce(category, '')", "NULL"),
    ("operators", "name"): ("name", "NULL"),
    ("operators", "shape"): ("name", "coalesce(input_shapes, '')"),
}

_OP_FILTER = {
    "operators": "name NOT LIKE 'ProfilerStep#%' AND coalesce(category, '') <> 'python_function'",
    "kernels": "true",
}


def _op_base(source: str, grouping: str) -> str:
    key, shape = _KEY_EXPR[(source, grouping)]
    self_col = "self_ns" if source == "operators" else "dur_ns"
    return f"""
      SELECT rank, {key} AS key, {shape} AS shape, dur_ns, {self_col} AS self_ns
      FROM {source} WHERE run = $run AND {RANK_FILTER} AND {_OP_FILTER[source]} AND dur_ns IS NOT NULL"""


def operator_stats(
    rd: Reader,
    run: str,
    source: str,
    grouping: str,
    ranks: Sequence[int] | None,
    across: bool,
    limit: int = MAX_GRID_ROWS,
) -> tuple[pd.DataFrame, int]:
    """Count, total, self, avg, min, max per key (type / name / name+shape).

    ``across=False``: one row per (key, rank). ``across=True``: one row per key over the selected
    ranks, with the per-rank totals' min / max / mean, their spread ((max - min) / mean) and the
    rank with the largest total. Returns (rows sorted by total, at most ``limit``; number of rows
    before the cut).
    """
    if source not in SOURCES or grouping not in GROUPINGS:
        raise QueryError(f"unknown operator view {source}/{grouping}")
    base = _op_base(source, grouping)
    per_rank = f"""
      SELECT key, shape, rank, count(*) AS count, sum(dur_ns) AS total_ns, sum(self_ns) AS self_ns,
             min(dur_ns) AS min_ns, max(dur_ns) AS max_ns
      FROM ({base}) GROUP BY key, shape, rank"""
    if across:
        sql = f"""
        WITH pr AS ({per_rank})
        SELECT key, shape, sum(count) AS count, sum(total_ns) AS total_ns, sum(self_ns) AS self_ns,
               sum(total_ns) / sum(count) AS avg_ns, min(min_ns) AS min_ns, max(max_ns) AS max_ns,
               count(*) AS ranks, min(total_ns) AS rank_min_ns, max(total_ns) AS rank_max_ns,
               avg(total_ns) AS rank_mean_ns,
               CASE WHEN avg(total_ns) > 0 THEN 100.0 * (max(total_ns) - min(total_ns)) / avg(total_ns) END AS spread_pct,
               arg_max(rank, total_ns) AS max_rank, arg_min(rank, total_ns) AS min_rank,
               count(*) OVER () AS n_rows
        FROM pr GROUP BY key, shape
        ORDER BY total_ns DESC, key, shape LIMIT $limit"""
    else:
        sql = f"""
        SELECT key, shape, rank, count, total_ns, self_ns, total_ns / count AS avg_ns, min_ns, max_ns,
               count(*) OVER () AS n_rows
        FROM ({per_rank})
        ORDER BY total_ns DESC, key, shape, rank LIMIT $limit"""
    con = rd.facts(run, ranks)
    df = _df(con, sql, {"run": run, "ranks": _ranks_param(ranks), "limit": int(limit)})
    n = int(df["n_rows"].iloc[0]) if len(df) else 0
    return df.drop(columns=["n_rows"]), n


def operator_drill(
    rd: Reader, run: str, source: str, grouping: str, key: str, shape: str | None, ranks: Sequence[int] | None
) -> pd.DataFrame:
    """One operator type / name (/ shape) across ranks: per rank count, total, avg, quantiles, min, max."""
    if source not in SOURCES or grouping not in GROUPINGS:
        raise QueryError(f"unknown operator view {source}/{grouping}")
    base = _op_base(source, grouping)
    shape_filter = "AND shape = $shape" if grouping == "shape" else ""
    sql = f"""
      SELECT rank, count(*) AS count, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns, min(dur_ns) AS min_ns,
             quantile_cont(dur_ns, 0.25) AS p25_ns, median(dur_ns) AS p50_ns,
             quantile_cont(dur_ns, 0.75) AS p75_ns, quantile_cont(dur_ns, 0.99) AS p99_ns,
             max(dur_ns) AS max_ns, sum(self_ns) AS self_ns
      FROM ({base}) WHERE key = $key {shape_filter}
      GROUP BY rank ORDER BY rank LIMIT {MAX_DRILL_RANKS}"""
    p: dict[str, Any] = {"run": run, "ranks": _ranks_param(ranks), "key": key}
    if grouping == "shape":
        p["shape"] = shape or ""
    con = rd.facts(run, ranks)
    return _df(con, sql, p)


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

MEMORY_KINDS_SQL = f"""
SELECT component, coalesce(device, '') AS device, count(*) AS samples,
       count(allocated_bytes) AS n_allocated, count(reserved_bytes) AS n_reserved, count(active_bytes) AS n_active
FROM memory_samples WHERE run = $run AND {RANK_FILTER}
GROUP BY ALL ORDER BY samples DESC, component, device
"""


def memory_components(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Which memory counters exist (component, device) with how many samples of each series."""
    con = rd.facts(run, ranks)
    return _df(con, MEMORY_KINDS_SQL, {"run": run, "ranks": _ranks_param(ranks)})


MEMORY_CURVE_SQL = f"""
WITH m AS (
  SELECT rank, coalesce(device, '') AS device, ts_ns, allocated_bytes, reserved_bytes, active_bytes
  FROM memory_samples
  WHERE run = $run AND {RANK_FILTER} AND component = $component AND ts_ns BETWEEN $start AND $end),
b AS (
  SELECT *, least(CAST(floor((ts_ns - $start) / $width) AS BIGINT), $nb - 1) AS bucket FROM m)
SELECT rank, device, bucket, min(ts_ns) AS ts_ns,
       max(allocated_bytes) AS allocated_bytes, max(reserved_bytes) AS reserved_bytes,
       max(active_bytes) AS active_bytes,
       min(allocated_bytes) AS allocated_min_bytes, count(*) AS samples
FROM b GROUP BY ALL ORDER BY rank, device, bucket
"""

MEMORY_PEAKS_SQL = f"""
SELECT rank, coalesce(device, '') AS device,
       max(allocated_bytes) AS peak_allocated_bytes, arg_max(ts_ns, allocated_bytes) AS peak_allocated_ns,
       max(reserved_bytes) AS peak_reserved_bytes, arg_max(ts_ns, reserved_bytes) AS peak_reserved_ns,
       max(active_bytes) AS peak_active_bytes, arg_max(ts_ns, active_bytes) AS peak_active_ns,
       count(*) AS samples, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns
FROM memory_samples WHERE run = $run AND {RANK_FILTER} AND component = $component
GROUP BY ALL ORDER BY rank, device
"""


def memory_peaks(rd: Reader, run: str, ranks: Sequence[int] | None, component: str) -> pd.DataFrame:
    """Per (rank, device): peak allocated / reserved / active and when they happened."""
    con = rd.facts(run, ranks)
    return _df(con, MEMORY_PEAKS_SQL, {"run": run, "ranks": _ranks_param(ranks), "component": component})


def memory_curves(
    rd: Reader, run: str, ranks: Sequence[int] | None, component: str, start_ns: int, end_ns: int,
    n_buckets: int = 1000,
) -> pd.DataFrame:
    """Allocated / reserved / active per (rank, device), downsampled to ``n_buckets`` per curve by
    keeping each bucket's maximum (so peaks survive) and its minimum allocated."""
    n_buckets = max(1, min(int(n_buckets), MAX_BUCKETS))
    width = max((end_ns - start_ns) / n_buckets, 1.0)
    con = rd.facts(run, ranks)
    return _df(con, MEMORY_CURVE_SQL, {
        "run": run, "ranks": _ranks_param(ranks), "component": component, "start": int(start_ns),
        "end": int(end_ns), "width": width, "nb": n_buckets,
    })


OPERATOR_MEMORY_SQL = f"""
SELECT rank, name, size_bytes, alloc_ns, release_ns, coalesce(duration_ns, release_ns - alloc_ns) AS duration_ns,
       active_duration_ns, alloc_allocated_bytes, alloc_reserved_bytes, device,
       count(*) OVER () AS n_rows
FROM operator_memory WHERE run = $run AND {RANK_FILTER}
ORDER BY size_bytes DESC NULLS LAST, rank, alloc_ns LIMIT $limit
"""


def operator_memory(rd: Reader, run: str, ranks: Sequence[int] | None, limit: int = MAX_MEMORY_BLOCKS) -> tuple[pd.DataFrame, int]:
    """Largest memory blocks attributed to operators (size, allocation time, lifetime)."""
    con = rd.facts(run, ranks)
    df = _df(con, OPERATOR_MEMORY_SQL, {"run": run, "ranks": _ranks_param(ranks), "limit": int(limit)})
    n = int(df["n_rows"].iloc[0]) if len(df) else 0
    return df.drop(columns=["n_rows"]), n


# ---------------------------------------------------------------------------------------------
# communication
# ---------------------------------------------------------------------------------------------

COMM_BANDWIDTH_SQL = f"""
SELECT rank, transport, sum(bytes) AS bytes, sum(transit_ns) AS transit_ns,
       CASE WHEN sum(transit_ns) > 0 THEN sum(bytes) / (sum(transit_ns) / 1e9) END AS bandwidth_bytes_per_s,
       min(bandwidth_bytes_per_s) FILTER (WHERE bandwidth_bytes_per_s > 0) AS min_bandwidth_bytes_per_s,
       max(bandwidth_bytes_per_s) AS max_bandwidth_bytes_per_s, count(*) AS ops
FROM comm_bandwidth
WHERE run = $run AND {RANK_FILTER} AND packet_size_bytes IS NULL AND transport IS NOT NULL
GROUP BY rank, transport ORDER BY rank, transport
"""


def comm_bandwidth(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Bytes, transit time and bandwidth per (rank, transport)."""
    con = rd.facts(run, ranks)
    return _df(con, COMM_BANDWIDTH_SQL, {"run": run, "ranks": _ranks_param(ranks)})


COLLECTIVES_SQL = f"""
WITH c AS (
  SELECT name, op_type, group_name, rank, step, dur_ns, wait_ns, transit_ns, bytes
  FROM comm_ops WHERE run = $run AND {RANK_FILTER})
SELECT name, op_type, group_name, min(step) AS step, count(DISTINCT rank) AS ranks, count(*) AS calls,
       sum(dur_ns) AS total_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns, avg(dur_ns) AS avg_ns,
       arg_max(rank, dur_ns) AS slowest_rank, arg_min(rank, dur_ns) AS fastest_rank,
       max(wait_ns) AS max_wait_ns, sum(transit_ns) AS transit_ns, max(bytes) AS bytes,
       count(*) OVER () AS n_rows
FROM c GROUP BY name, op_type, group_name
ORDER BY max_ns DESC, name LIMIT $limit
"""


COMM_RANK_SQL = f"""
SELECT rank, count(*) AS ops, sum(dur_ns) AS elapsed_ns, sum(wait_ns) AS wait_ns, sum(transit_ns) AS transit_ns,
       sum(sync_ns) AS sync_ns, sum(idle_ns) AS idle_ns, sum(bytes) AS bytes,
       count(wait_ns) AS with_wait, count(transit_ns) AS with_transit,
       list(DISTINCT source) AS sources
FROM comm_ops WHERE run = $run AND {RANK_FILTER}
GROUP BY rank ORDER BY rank
"""


def comm_per_rank(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per rank: operations, elapsed time and the producer's own wait / transit / idle split."""
    con = rd.facts(run, ranks)
    return _df(con, COMM_RANK_SQL, {"run": run, "ranks": _ranks_param(ranks)})


COMM_MATRIX_SQL = f"""
SELECT src_rank, dst_rank, string_agg(DISTINCT transport, ', ') AS transport,
       sum(bytes) AS bytes, sum(transit_ns) AS transit_ns,
       CASE WHEN sum(transit_ns) > 0 THEN sum(bytes) / (sum(transit_ns) / 1e9) END AS bandwidth_bytes_per_s
FROM comm_links
WHERE run = $run AND {RANK_FILTER} AND src_rank IS NOT NULL AND dst_rank IS NOT NULL
  AND lower(op_key) LIKE '%total%'
GROUP BY src_rank, dst_rank ORDER BY src_rank, dst_rank LIMIT 1000000
"""


def comm_matrix(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Rank x rank links (global ranks): bytes, transit time and bandwidth, from the producers'
    per-op-type totals of the communication matrix."""
    con = rd.facts(run, ranks)
    return _df(con, COMM_MATRIX_SQL, {"run": run, "ranks": _ranks_param(ranks)})


def collectives(rd: Reader, run: str, ranks: Sequence[int] | None, limit: int = MAX_GRID_ROWS) -> tuple[pd.DataFrame, int]:
    """One row per communication operation name (an op instance for HCCL, a kind for gloo/NCCL
    annotations) over the selected ranks: calls, ranks, min / max / avg time, slowest rank."""
    con = rd.facts(run, ranks)
    df = _df(con, COLLECTIVES_SQL, {"run": run, "ranks": _ranks_param(ranks), "limit": int(limit)})
    n = int(df["n_rows"].iloc[0]) if len(df) else 0
    return df.drop(columns=["n_rows"]), n


# ---------------------------------------------------------------------------------------------
# cluster analyses (analyzer.analyses), cached per content of the run
# ---------------------------------------------------------------------------------------------

_CACHE_SIZE = 32
_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()


def run_fingerprint(rd: Reader, run: str) -> tuple[str, ...]:
    """Identifies the run's content: its fact files (fresh names on every ingest) and collections."""
    con = rd.catalog()
    ff = con.execute(
        "SELECT path FROM fact_files WHERE run = $run UNION ALL "
        "SELECT collection_id || ':' || CAST(ingested_at AS VARCHAR) FROM collections WHERE run = $run",
        {"run": run},
    ).fetchall()
    return tuple(sorted(str(r[0]) for r in ff))


def _cached(rd: Reader, run: str, name: str, args: tuple[Any, ...], compute: Any) -> Any:
    key = (str(rd.store.path), run, name, args, hash(run_fingerprint(rd, run)))
    with _cache_lock:
        if key in _cache:
            value = _cache.pop(key)
            _cache[key] = value  # most recently used last
            return value
    value = compute()
    with _cache_lock:
        _cache[key] = value
        while len(_cache) > _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
    return value


def step_breakdown(rd: Reader, run: str, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """msprof-analyze's step time breakdown per (rank, step) (``analyzer.analyses.step_breakdown``),
    computed once per content of the run and kept in memory."""
    from analyzer.analyses import step_breakdown as compute

    rk = None if ranks is None else tuple(sorted(int(r) for r in ranks))
    return _cached(rd, run, "step_breakdown", (rk,), lambda: compute(rd.store, run, None if rk is None else list(rk)))
