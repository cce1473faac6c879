"""Queries of the web app: the only module of ``webapp`` that holds SQL.

Every function takes a :class:`~webapp.reader.Reader` (the request's view of the store) and returns a
small pandas DataFrame or dict. Every query is bounded: windows are aggregated into buckets, grids
are cut to a maximum number of rows, curves are downsampled on the server. Functions marked
``@run_cached`` (and the per-rank memory series, the lane indexes, the analyses) keep their results
between requests in ``webapp.cache``, keyed on the content of the run: a run committed by a
concurrent ``analyze ingest`` shows on the next request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analyzer import analyses
from analyzer.errors import NoRunsError, QueryError, UnknownRunError
from analyzer.histogram import quantiles
from analyzer.schema import SCALAR_LEVELS
from analyzer.store import runs as store_runs
from analyzer.store.runs import RUNS_SQL  # the one definition, shared with `analyze runs`
from analyzer.store.store import filter_fact_files
from analyzer.vocabulary import LANE_GROUPS

from . import cache, lod
from .cache import run_cached
from .errors import EmptyStore, NotFound
from .labels import said_error, t
from .reader import Reader

# Upper bounds of what one request may return.
MAX_BUCKETS = 2000  # memory: buckets per curve
MAX_GRID_ROWS = 2000  # operators / collectives grids
MAX_MEMORY_BLOCKS = 500  # operator memory table
MAX_SCALAR_POINTS = 2000  # per (rank, scalar) curve
SCALAR_NAMES_READ = 8  # a run with at most this many scalars has them all read by a chart's query
MAX_DRILL_RANKS = 4096


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


def runs(rd: Reader) -> pd.DataFrame:
    """Runs in the store, most recently ingested first."""
    if not rd.store.exists():
        return pd.DataFrame(
            columns=[
                "run",
                "ranks",
                "collections",
                "steps",
                "formats",
                "status",
                "problems",
                "rows",
                "updated_at",
                "root_path",
            ]
        )
    con = rd.catalog()
    return _df(con, RUNS_SQL)


def run_names(rd: Reader) -> list[str]:
    """Runs in the store, most recently ingested first (none when there is no store)."""
    return store_runs.run_names(rd.catalog_tables()) if rd.store.exists() else []


def resolve_run(rd: Reader, run: str | None) -> str:
    """``analyzer.store.resolve_run`` over the request's catalog: the named run, or the most
    recently ingested one; EmptyStore / NotFound otherwise."""
    try:
        return store_runs.resolve_run(rd.catalog_tables(), run)
    except NoRunsError as exc:
        raise EmptyStore(said_error(exc)) from exc
    except UnknownRunError as exc:
        raise NotFound(said_error(exc)) from exc


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
    """The run's ranks, ascending (from the request's catalog snapshot: no query; pages ask it often)."""
    cols = rd.catalog_tables()["collections"]
    ranks = pc.unique(cols.filter(pc.equal(cols["run"], run))["rank"])
    return sorted(int(r) for r in ranks.to_pylist())


def check_ranks(rd: Reader, run: str, ranks: Sequence[int] | None) -> list[int]:
    """The requested ranks (all of the run when None); NotFound names ranks the run does not have."""
    have = ranks_of(rd, run)
    if ranks is None:
        return have
    unknown = sorted(set(ranks) - set(have))
    if unknown:
        shown = ", ".join(map(str, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
        raise NotFound(t("err.run_no_rank", run=repr(run), ranks=shown, have=_compact(have)))
    return sorted({int(r) for r in ranks})


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
    ).fetchall()  # fetch everything: DuckDB refuses new work on a connection with a pending result
    row = row[0] if row else None
    if row is None or row[0] is None or row[1] is None:
        return None
    return int(row[0]), int(row[1])


# ---------------------------------------------------------------------------------------------
# steps and scalars
# ---------------------------------------------------------------------------------------------

# The steps' figures are read from the ingest's ``agg_steps`` (per rank, step and source: one file of
# the run, whatever its rank count) when every collection of the run holding steps has it, else from
# the steps themselves (a store written before it) in the same shape: a query of a whole-run view of
# the steps bound every rank's file (~4 KB each of the server's memory, per read database)
STEPS_OF_FACTS = """
SELECT run, rank, step, source, 1 AS n, start_ns, end_ns, CAST(dur_ns IS NOT NULL AS BIGINT) AS n_measured,
       dur_ns AS dur_sum_ns, dur_ns AS dur_max_ns
FROM {steps}
"""


def _steps_source(rd: Reader, run: str, ranks: Sequence[int] | None) -> str:
    """A subquery of the (rank, step, source) rows of ``agg_steps`` of ``run`` / ``ranks`` (None:
    every rank), for a query on ``rd.catalog()``: from the stored aggregate, else from the steps."""
    if all_stored(rd, run, "steps", "agg_steps"):
        return rd.source(run, ranks, "agg_steps")
    return f"({STEPS_OF_FACTS.format(steps=rd.source(run, ranks, 'steps'))})"


STEPS_SQL = """
SELECT step, min(start_ns) AS start_ns, max(end_ns) AS end_ns, count(DISTINCT rank) AS ranks,
       sum(dur_sum_ns) / sum(n_measured) AS avg_ns, max(dur_max_ns) AS max_ns
FROM {steps} WHERE run = $run AND step IS NOT NULL AND source <> 'collector'
GROUP BY step ORDER BY step LIMIT 10000
"""


@run_cached
def steps(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Profiled steps of the selected ranks: earliest start and latest end over the ranks."""
    return _df(rd.catalog(), STEPS_SQL.format(steps=_steps_source(rd, run, ranks)), {"run": run})


# a chart's buckets of steps are 2^level steps (bucket = step >> level: the same for every rank, and
# those of a level nest in the next one's), read from the ingest's ``agg_scalar_curve`` at that level
# when every rank shown has it, else from the records themselves
SCALAR_POINTS_SQL = """
SELECT rank, name, arg_min(step, (value, step)) AS lo_step, min(value) AS lo,
       arg_max(step, (value, -step)) AS hi_step, max(value) AS hi
FROM {scalars} JOIN __scalar_grid USING (name)
WHERE run = $run AND step IS NOT NULL
GROUP BY rank, name, step >> level
"""

SCALAR_CURVE_POINTS_SQL = """
SELECT rank, name, arg_min(lo_step, (lo, lo_step)) AS lo_step, min(lo) AS lo,
       arg_max(hi_step, (hi, -hi_step)) AS hi_step, max(hi) AS hi
FROM {curve} JOIN __scalar_grid USING (name, level)
WHERE run = $run
GROUP BY rank, name, bucket
"""


def scalar_grid(rd: Reader, run: str, names: Sequence[str] | None, buckets: int) -> pd.DataFrame:
    """Buckets of consecutive steps per scalar (``name``, ``level``: a bucket is the 2^level steps
    ``step >> level`` names): the finest level giving at most ``buckets`` over the run's steps of
    that scalar (``scalar_names``), the same for every rank, so that a bucket of one rank lines up
    with the same bucket of another."""
    g = scalar_names(rd, run)[["name", "first_step", "last_step"]].dropna()
    if names is not None:
        g = g[g["name"].isin(list(names))]
    first, last = g["first_step"].astype("int64").to_numpy(), g["last_step"].astype("int64").to_numpy()
    level = [_scalar_level(int(a), int(b), max(1, int(buckets))) for a, b in zip(first, last)]
    return pd.DataFrame({"name": g["name"].astype(str).to_numpy(), "level": np.asarray(level, dtype="int32")})


def _scalar_level(first: int, last: int, buckets: int) -> int:
    level = 0
    while (last >> level) - (first >> level) + 1 > buckets:
        level += 1
    return level


def _scalar_source(rd: Reader, run: str, ranks: Sequence[int] | None, grid: pd.DataFrame) -> str | None:
    """The ingest's ``agg_scalar_curve`` of ``run`` / ``ranks`` as a subquery when every rank shown
    that has scalars has it and each level asked is one it holds; else None: the records are read (a
    store ingested before the aggregate existed; charts of few steps)."""
    ff = rd.catalog_tables()["fact_files"]
    sel = None if ranks is None else [int(r) for r in ranks]
    with_scalars = set(filter_fact_files(ff, run, sel, "scalars")["rank"].to_pylist())
    with_curve = set(filter_fact_files(ff, run, sel, "agg_scalar_curve")["rank"].to_pylist())
    if with_scalars <= with_curve and set(grid["level"].tolist()) <= set(SCALAR_LEVELS):
        return rd.source(run, ranks, "agg_scalar_curve")
    return None


def _read_names(rd: Reader, run: str, names: Sequence[str] | None) -> tuple[str, ...] | None:
    """The scalars one query reads when ``names`` are asked: every scalar of the run when it has at
    most SCALAR_NAMES_READ (the query's scan costs the same: each rank's file holds them all; the
    other scalars' charts of the same ranks then cost no query), else ``names`` (None: every one)."""
    if names is None or len(scalar_names(rd, run)) <= SCALAR_NAMES_READ:
        return None
    return tuple(sorted({str(n) for n in names}))


def _grid_query(rd: Reader, run: str, grid: pd.DataFrame, sql: str, params: dict[str, Any]) -> pd.DataFrame:
    con = rd.catalog()  # the ranks' files read straight (``Reader.source``): a new set of ranks binds no views
    con.register("__scalar_grid", pa.Table.from_pandas(grid, preserve_index=False))
    try:
        return _df(con, sql, params)
    finally:
        con.unregister("__scalar_grid")


def scalars(
    rd: Reader,
    run: str,
    ranks: Sequence[int] | None,
    names: str | Sequence[str] | None = None,
    max_points: int = MAX_SCALAR_POINTS,
) -> pd.DataFrame:
    """Per-step training scalars (step_time_ns, loss, ...; only ``names`` when given), at most about
    ``max_points`` points per (rank, name): the steps are cut into at most ``max_points // 2``
    buckets (:func:`scalar_grid`) and each rank keeps, per bucket, its record of the lowest and of
    the highest value (at their steps; the first such step on a tie), so a spike or a dip of one
    step stays on its curve. With no more steps than buckets a bucket is one step: every record is
    kept (two records of one step: its lowest and highest). Columns rank, name, step, value, by
    name, rank and step."""
    want = [names] if isinstance(names, str) else None if names is None else [str(n) for n in names]
    out = scalar_points(rd, run, ranks, _read_names(rd, run, want), max_points)
    if want is not None:
        out = out[out["name"].isin(want)].reset_index(drop=True)
    return out


@run_cached
def scalar_points(
    rd: Reader, run: str, ranks: Sequence[int] | None, names: Sequence[str] | None, max_points: int
) -> pd.DataFrame:
    """:func:`scalars` of ``names`` (None: every scalar), one query."""
    grid = scalar_grid(rd, run, None if names is None else list(names), max(1, int(max_points) // 2))
    source = _scalar_source(rd, run, ranks, grid)
    sql = (
        SCALAR_CURVE_POINTS_SQL.format(curve=source)
        if source
        else SCALAR_POINTS_SQL.format(scalars=rd.source(run, ranks, "scalars"))
    )
    b = _grid_query(rd, run, grid, sql, {"run": run})
    cols = ["rank", "name", "step", "value"]
    lo = b[["rank", "name", "lo_step", "lo"]].set_axis(cols, axis=1).assign(k=0)
    # a bucket whose lowest and highest record are one (a single step, or equal values) is one point
    one = (b["hi_step"] == b["lo_step"]) & ((b["hi"] == b["lo"]) | (b["hi"].isna() & b["lo"].isna()))
    hi = b.loc[~one, ["rank", "name", "hi_step", "hi"]].set_axis(cols, axis=1).assign(k=1)
    out = pd.concat([lo, hi], ignore_index=True).sort_values(["name", "rank", "step", "k"], kind="stable")
    return out[cols].reset_index(drop=True)


SCALAR_BAND_SQL = """
SELECT name, min(step) AS step, min(value) AS lo, avg(value) AS mid, max(value) AS hi
FROM {scalars} JOIN __scalar_grid USING (name)
WHERE run = $run AND step IS NOT NULL
GROUP BY name, step >> level ORDER BY name, step
"""

SCALAR_CURVE_BAND_SQL = """
SELECT name, min(first_step) AS step, min(lo) AS lo, sum(sum_value) / nullif(sum(n), 0) AS mid, max(hi) AS hi
FROM {curve} JOIN __scalar_grid USING (name, level)
WHERE run = $run
GROUP BY name, bucket ORDER BY name, step
"""


def scalar_band(
    rd: Reader, run: str, ranks: Sequence[int] | None, name: str, max_points: int = MAX_SCALAR_POINTS
) -> pd.DataFrame:
    """One scalar over the ranks, per bucket of consecutive steps (at most ``max_points`` buckets,
    :func:`scalar_grid`): the first step of the bucket, the lowest, mean and highest value of any
    rank in it (so a spike of one rank in one step survives). One pass over the ingest's buckets
    (or the records): the mean, unlike a median, needs no sort of each bucket's values."""
    bands = scalar_bands(rd, run, ranks, _read_names(rd, run, [name]), max_points)
    return bands[bands["name"] == name].drop(columns="name").reset_index(drop=True)


@run_cached
def scalar_bands(
    rd: Reader, run: str, ranks: Sequence[int] | None, names: Sequence[str] | None, max_points: int
) -> pd.DataFrame:
    """:func:`scalar_band` of ``names`` (None: every scalar), one query; a name column."""
    grid = scalar_grid(rd, run, None if names is None else list(names), max_points)
    if grid.empty:
        return pd.DataFrame(columns=["name", "step", "lo", "mid", "hi"])
    source = _scalar_source(rd, run, ranks, grid)
    sql = (
        SCALAR_CURVE_BAND_SQL.format(curve=source)
        if source
        else SCALAR_BAND_SQL.format(scalars=rd.source(run, ranks, "scalars"))
    )
    return _grid_query(rd, run, grid, sql, {"run": run})


SCALAR_NAMES_SQL = """
SELECT name, count(*) AS n, count(DISTINCT rank) AS ranks, min(step) AS first_step, max(step) AS last_step
FROM {scalars} WHERE run = $run GROUP BY name ORDER BY name <> 'step_time_ns', name
"""


@run_cached
def scalar_names(rd: Reader, run: str) -> pd.DataFrame:
    """The run's training scalars: name (step_time_ns first), records, ranks, first and last step."""
    return _df(rd.catalog(), SCALAR_NAMES_SQL.format(scalars=rd.source(run, None, "scalars")), {"run": run})


PROFILED_STEPS_SQL = """
SELECT DISTINCT rank, step FROM {steps} WHERE run = $run AND step IS NOT NULL ORDER BY rank, step
"""


@run_cached
def profiled_steps(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """(rank, step) of every step a profile of the rank holds (any producer, also the collector's
    sidecar steps): the steps the timeline can open on."""
    return _df(rd.catalog(), PROFILED_STEPS_SQL.format(steps=_steps_source(rd, run, ranks)), {"run": run})


def step_outliers(rd: Reader, run: str) -> pd.DataFrame:
    """Steps of a rank much longer than their neighbours (``analyses.step_outliers``)."""
    return analyses.step_outliers(rd.store, run)


# ---------------------------------------------------------------------------------------------
# timeline
# ---------------------------------------------------------------------------------------------

LANE_GROUP_ORDER = LANE_GROUPS  # the order of the timeline's lane groups

LANES_SQL = """
SELECT rank, collection_id, pid, tid, process, lane, lane_group, sort_index, n_slices
FROM {lanes} WHERE run = $run AND n_slices > 0
"""


@run_cached
def lanes(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Timeline rows: one per (rank, lane group, process, lane) in drawing order, with ``row`` numbers.

    The same thread seen in several collections of a rank is one row. ``members`` keeps the
    (collection_id, pid, tid) keys that slices join on.
    """
    # from the ingest's copy in one file of the run when every collection has it (a whole-run view
    # of the lanes bound every rank's file), else from the lanes themselves (a store written before)
    table = "agg_lane_list" if all_stored(rd, run, "lanes", "agg_lane_list") else "lanes"
    return order_lanes(_df(rd.catalog(), LANES_SQL.format(lanes=rd.source(run, ranks, table)), {"run": run}))


def order_lanes(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df.assign(row=pd.Series(dtype="int64"), group_order=pd.Series(dtype="int64"))
    df = df.copy()
    df["lane_group"] = df["lane_group"].fillna("other")
    df["process"] = df["process"].fillna("")
    df["lane"] = df["lane"].fillna("")
    df["group_order"] = (
        df["lane_group"].map({g: i for i, g in enumerate(LANE_GROUP_ORDER)}).fillna(len(LANE_GROUP_ORDER))
    )
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


LANE_FILES_SQL = f"""
SELECT collection_id, min(rank) AS rank, list(path ORDER BY path) AS paths FROM fact_files
WHERE run = $run AND table_name = 'slices' AND {RANK_FILTER}
GROUP BY collection_id
"""

LANE_LOAD_SQL = """
SELECT k.lane_key, s.ts_ns, coalesce(s.dur_ns, 0) AS dur_ns, s.name, s.event_id
FROM {slices} s JOIN __lane_keys k USING (collection_id, pid, tid)
WHERE s.run = $run AND s.ts_ns IS NOT NULL
"""


def lane_sources(rd: Reader, run: str, ranks: Sequence[int] | None) -> dict[str, tuple[int, str]]:
    """Per collection_id of the ranks: (rank, source), the source naming the collection's slices
    files (the key of its lane indexes in ``cache.LANES``: a re-ingest writes files under new names)."""
    files = _df(rd.catalog(), LANE_FILES_SQL, {"run": run, "ranks": _ranks_param(ranks)})
    return {
        str(cid): (int(rank), "|".join(str(p) for p in paths))
        for cid, rank, paths in zip(files["collection_id"], files["rank"], files["paths"])
    }


def cached_lane_indexes(sources: dict[str, tuple[int, str]]) -> dict[str, lod.CollectionIndex] | None:
    """The lane indexes of these collections when every one is cached (no store access), else None."""
    out = {}
    for cid, (_, source) in sources.items():
        got = cache.LANES.get(source)
        if got is None:
            return None
        out[cid] = got
    return out


def lane_indexes(
    rd: Reader, run: str, ranks: Sequence[int] | None, lane_df: pd.DataFrame
) -> dict[str, lod.CollectionIndex]:
    """Per collection_id: the LOD indexes of its lanes (by (pid, tid)) and the names their slices'
    codes point into; from the cache when the collection's slices files were indexed before, else
    read once (all missing collections in one query) and cached."""
    out: dict[str, lod.CollectionIndex] = {}
    missing: list[tuple[str, str]] = []
    sources = lane_sources(rd, run, ranks)
    for cid, (_, source) in sources.items():
        got = cache.LANES.get(source)
        if got is None:
            missing.append((cid, source))
        else:
            out[cid] = got
    if missing:
        con = rd.catalog()
        want = {cid for cid, _ in missing}
        keys = (
            lane_df[lane_df["collection_id"].isin(want)][["collection_id", "pid", "tid"]]
            .drop_duplicates()
            .reset_index(drop=True)
        )
        keys = keys.assign(lane_key=np.arange(len(keys), dtype=np.int64))
        con.register("__lane_keys", pa.Table.from_pandas(keys, preserve_index=False))
        try:
            sql = LANE_LOAD_SQL.format(slices=rd.source(run, sorted({sources[c][0] for c in want}), "slices"))
            tbl = con.sql(sql, params={"run": run}).to_arrow_table()
        except duckdb.Error as exc:
            raise QueryError(str(exc).strip().splitlines()[0]) from exc
        finally:
            con.unregister("__lane_keys")
        # names as codes into one dictionary shared by the collections read together
        names = pc.fill_null(tbl.column("name"), "").combine_chunks().dictionary_encode()
        codes = names.indices.to_numpy(zero_copy_only=False)
        events = pc.fill_null(tbl.column("event_id"), -1).to_numpy()
        small = events.size and events.min() >= -(1 << 31) and events.max() < 1 << 31
        built = lod.index_groups(
            tbl.column("lane_key").to_numpy(),
            tbl.column("ts_ns").to_numpy(),
            tbl.column("dur_ns").to_numpy(),
            codes.astype(np.uint16 if len(names.dictionary) <= 1 << 16 else np.int32),  # 2 bytes a slice when they fit
            events.astype(np.int32) if small else events,
        )
        dictionary = names.dictionary.to_pylist()
        per_cid: dict[str, dict[tuple[str, str], lod.LaneIndex]] = {cid: {} for cid in want}
        for k, cid, pid, tid in zip(keys["lane_key"], keys["collection_id"], keys["pid"], keys["tid"]):
            ix = built.get(int(k))
            if ix is not None:
                per_cid[str(cid)][(pid, tid)] = ix
        for cid, source in missing:
            index = lod.CollectionIndex(per_cid[cid], dictionary)
            cache.LANES.put(source, index)
            out[cid] = index
    return out


# the timeline's zoomed-out levels, from what the ingest stored (``webapp.tiles.StoredTileSource``)
STORED_COLLECTIONS_SQL = """
SELECT collection_id FROM fact_files WHERE run = $run GROUP BY collection_id
HAVING bool_or(table_name = 'agg_lanes') OR NOT bool_or(table_name = 'slices')
"""

STORED_LANES_SQL = """
SELECT rank, collection_id, pid, tid, n_slices, first_ns, last_ns, max_depth FROM {agg_lanes}
WHERE run = $run AND list_contains($ranks, rank)
"""

STORED_OCCUPANCY_SQL = """
SELECT w.q, o.bucket - w.lo AS at, o.busy_ns, o.instants
FROM {agg_lane_occupancy} o JOIN __want w
  ON o.collection_id = w.collection_id AND o.pid = w.pid AND o.tid = w.tid AND o.level = w.level
 AND o.bucket >= w.lo AND o.bucket < w.hi
WHERE o.run = $run
"""

STORED_SLICES_SQL = """
SELECT w.q, s.ts_ns, s.dur_ns, s.depth, coalesce(s.event_id, -1) AS event_id, coalesce(s.name, '') AS name
FROM {agg_lane_slices} s JOIN __want w
  ON s.collection_id = w.collection_id AND s.pid = w.pid AND s.tid = w.tid AND s.ts_ns < w.b
 AND ((s.dur_ns >= w.min_dur AND s.ts_ns + s.dur_ns > w.a) OR (s.dur_ns = 0 AND s.ts_ns >= w.a))
WHERE s.run = $run
"""


def stored_collections(rd: Reader, run: str) -> set[str]:
    """The collections of ``run`` whose timeline lanes the ingest summarised (``agg_lanes``, the
    pyramid), or that have nothing to draw; the others (a store from before) need lane indexes."""
    return {str(c) for c in _df(rd.catalog(), STORED_COLLECTIONS_SQL, {"run": run})["collection_id"]}


LaneStats = tuple[int, int, int, int]  # slices, first start, last end, deepest nesting


def stored_lanes(rd: Reader, run: str, ranks: Sequence[int]) -> dict[tuple[str, Any, Any], LaneStats]:
    """Per lane (collection_id, pid, tid) of the ranks: its slices, first start, last end and
    deepest nesting, as the ingest stored them (``agg_lanes``); kept per rank (``cache.per_rank``),
    so a new set of ranks reads only the ranks not seen yet."""

    def load(missing: list[int]) -> dict[int, dict[tuple[str, Any, Any], LaneStats]]:
        sql = STORED_LANES_SQL.format(agg_lanes=rd.source(run, missing, "agg_lanes"))
        df = _df(rd.catalog(), sql, {"run": run, "ranks": missing})
        out: dict[int, dict[tuple[str, Any, Any], LaneStats]] = {r: {} for r in missing}
        for r, c, pid, tid, n, a, b, d in df.itertuples(index=False):
            out[int(r)][(str(c), pid, tid)] = (int(n), int(a), int(b), int(d))
        return out

    got = cache.per_rank(rd, run, "stored_lanes", list(ranks), (), load)
    return {k: v for r in ranks for k, v in (got.get(int(r)) or {}).items()}


def stored_tiles(rd: Reader, run: str, ranks: Sequence[int], want: pd.DataFrame) -> tuple[pa.Table, pa.Table]:
    """The stored pyramid rows and long slices of the tiles ``want`` (``tiles.StoredTileSource``)."""
    con = rd.catalog()
    occ_sql = STORED_OCCUPANCY_SQL.format(agg_lane_occupancy=rd.source(run, ranks, "agg_lane_occupancy"))
    sl_sql = STORED_SLICES_SQL.format(agg_lane_slices=rd.source(run, ranks, "agg_lane_slices"))
    con.register("__want", pa.Table.from_pandas(want, preserve_index=False))  # Arrow: DuckDB scans no Python objects
    try:
        occ = con.sql(occ_sql, params={"run": run}).to_arrow_table()
        sl = con.sql(sl_sql, params={"run": run}).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc
    finally:
        con.unregister("__want")
    return occ, sl


STEP_WINDOWS_SQL = """
SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
FROM {steps} WHERE run = $run AND list_contains($ranks, rank) AND step IS NOT NULL AND source <> 'collector'
GROUP BY rank, step ORDER BY step, rank LIMIT 200000
"""
MAX_STEP_WINDOWS = 200_000


def step_windows(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Each profiled step of each selected rank: rank, step, start_ns, end_ns (the rank's own clock),
    by step then rank; kept per rank (``cache.per_rank``: a new set of ranks reads only the ranks not
    seen yet)."""
    ranks = ranks_of(rd, run) if ranks is None else sorted({int(r) for r in ranks})

    def load(missing: list[int]) -> dict[int, pd.DataFrame]:
        sql = STEP_WINDOWS_SQL.format(steps=_steps_source(rd, run, missing))
        df = _df(rd.catalog(), sql, {"run": run, "ranks": missing})
        out = dict.fromkeys(missing, df.iloc[:0])
        out.update({int(r): g.reset_index(drop=True) for r, g in df.groupby("rank", sort=False)})
        return out

    got = cache.per_rank(rd, run, "step_windows", ranks, (), load)
    parts = [got[r] for r in ranks if got.get(r) is not None]
    if not parts:
        return pd.DataFrame(columns=["rank", "step", "start_ns", "end_ns"])
    df = pd.concat(parts, ignore_index=True)
    return df.sort_values(["step", "rank"], kind="stable").head(MAX_STEP_WINDOWS).reset_index(drop=True)


def advice(rd: Reader, run: str) -> pd.DataFrame:
    """The advisor's findings with their evidence (``analyzer.analyses.advise``)."""
    return analyses.advise(rd.store, run)


def parallel_dims(rd: Reader, run: str) -> pd.DataFrame:
    """The parallel dimensions found (``analyses.parallel_dims``): dim, size, groups, stride, source."""
    return analyses.parallel_dims(rd.store, run)


def layout_metric(rd: Reader, run: str, metric: str, agg: str = "mean") -> pd.DataFrame:
    """Every rank of the job with its coordinates and a per-rank step-breakdown metric (or
    ``slow_rank_votes``) as ``value`` (``analyses.layout_metric``)."""
    return analyses.layout_metric(rd.store, run, metric, agg)


def slow_links(rd: Reader, run: str) -> pd.DataFrame:
    """The judged bandwidth sets, slow or not (``analyses.slow_links``)."""
    return analyses.slow_links(rd.store, run)


MEMORY_PEAK_PER_RANK_SQL = """
SELECT rank, max(allocated_bytes) AS peak_allocated_bytes
FROM {table} WHERE run = $run AND ($ranks IS NULL OR list_contains($ranks, rank)) AND allocated_bytes IS NOT NULL
GROUP BY rank ORDER BY rank
"""


@run_cached
def memory_peak_per_rank(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per rank: the highest allocated memory of any counter that records allocations (the
    allocator's total: PTA+GE on torch_npu, Kineto's allocator); from the stored curves when the
    run has them (each bucket keeps its maximum)."""
    table = memory_source(rd, run)
    con = rd.facts(run, ranks, (table,))
    return _df(con, MEMORY_PEAK_PER_RANK_SQL.format(table=table), {"run": run, "ranks": _ranks_param(ranks)})


def pipeline_stages(rd: Reader, run: str) -> pd.DataFrame:
    """Per (rank, step) of a pipeline stage: micro-batches, forward / backward / bubble time
    (``analyses.pipeline_stages``); empty when the run has no pipeline."""
    return analyses.pipeline_stages(rd.store, run)


def pipeline_segments(rd: Reader, run: str) -> pd.DataFrame:
    """Every segment of every pipeline stage's steps (``analyses.pipeline``)."""
    return analyses.pipeline(rd.store, run)


def clock_offsets(rd: Reader, run: str) -> pd.DataFrame:
    """Per rank: the estimated clock offset to the reference rank and its residual
    (``analyzer.analyses.clock_offsets``)."""
    return analyses.clock_offsets(rd.store, run)


def collective_members(rd: Reader, run: str, rank: int, name: str, ts_ns: int) -> pd.DataFrame:
    """The collective instance a communication slice belongs to (matched across ranks by
    ``analyses.collectives``): one row per member rank with its entry time, duration, wait and
    transit; empty when the slice is not a matched collective. The slice is the rank's
    communication op of the same name starting within 1 us of it."""
    s = analyses.communication_summary(rd.store, run)
    if s.empty:
        return s
    mine = s[(s["rank"] == int(rank)) & (s["name"].astype(str) == str(name))]
    mine = mine[(pd.to_numeric(mine["ts_ns"], errors="coerce") - int(ts_ns)).abs() <= 1000]
    if mine.empty or pd.isna(mine["instance"].iloc[0]):
        return s.iloc[0:0]
    inst = mine["instance"].iloc[0]
    cols = ["rank", "name", "op_type", "group_name", "step", "ts_ns", "dur_ns", "wait_ns", "transit_ns", "bytes"]
    out = s[s["instance"] == inst][cols + ["instance", "n_members"]]
    return out.sort_values(["ts_ns", "rank"]).reset_index(drop=True)


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

# a device slice is a kernel row: same collection, name and start (text exports round the start to
# the microsecond differently in the two files, hence the tolerance)
SLICE_KERNEL_SQL = """
SELECT step, op_type, core_type, block_dim, input_shapes, input_dtypes AS input_types, input_formats,
       output_shapes, output_dtypes AS output_types
FROM kernels WHERE run = $run AND rank = $rank AND collection_id = $cid AND name = $name
  AND ts_ns BETWEEN $ts - 1000 AND $ts + 1000
ORDER BY abs(ts_ns - $ts), abs(dur_ns - $dur) LIMIT 1
"""

SLICE_STEP_SQL = """
SELECT step FROM steps WHERE run = $run AND rank = $rank AND start_ns <= $ts AND end_ns > $ts
ORDER BY start_ns DESC LIMIT 1
"""


SLICE_PY_STACK_SQL = """
SELECT name FROM slices
WHERE run = $run AND rank = $rank AND collection_id = $cid AND pid = $pid AND tid = $tid
  AND category = 'python_function' AND event_id <> $eid AND ts_ns <= $ts AND ts_ns + dur_ns >= $end
ORDER BY ts_ns DESC, dur_ns ASC LIMIT 128
"""


def slice_detail(rd: Reader, run: str, rank: int, collection_id: str, event_id: int) -> dict[str, Any] | None:
    """Everything known about one slice: lane, times, args, and the operator row (shapes, stack) or,
    for a device slice, the kernel row (shapes, types, formats)."""
    p = {"run": run, "rank": int(rank), "cid": str(collection_id), "eid": int(event_id)}
    con = rd.facts(run, [int(rank)], ("slices", "lanes", "operators", "kernels", "steps"))
    row = _df(con, SLICE_SQL, p)
    if row.empty:
        return None
    out = {k: _plain(v) for k, v in row.iloc[0].to_dict().items()}
    op = _df(con, SLICE_OP_SQL, p)
    if not op.empty:
        out.update({k: _plain(v) for k, v in op.iloc[0].to_dict().items()})
    elif out.get("ts_ns") is not None and out.get("name") is not None:
        kern = _df(
            con,
            SLICE_KERNEL_SQL,
            {
                "run": run,
                "rank": int(rank),
                "cid": str(collection_id),
                "name": out["name"],
                "ts": int(out["ts_ns"]),
                "dur": int(out.get("dur_ns") or 0),
            },
        )
        if not kern.empty:
            out.update({k: _plain(v) for k, v in kern.iloc[0].to_dict().items() if _plain(v) not in (None, "")})
    if not out.get("call_stack") and out.get("ts_ns") is not None:
        # Kineto with_stack: the stack is the python_function slices enclosing the event
        frames = _df(
            con,
            SLICE_PY_STACK_SQL,
            {
                **p,
                "pid": out["pid"],
                "tid": out["tid"],
                "ts": int(out["ts_ns"]),
                "end": int(out["ts_ns"]) + int(out.get("dur_ns") or 0),
            },
        )
        if not frames.empty:
            out["call_stack"] = "\n".join(str(n) for n in frames["name"])
            out["call_stack_source"] = "enclosing Python frames of the trace, innermost first"
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
      SELECT rank, {key} AS key, {shape} AS shape, ts_ns, dur_ns, {self_col} AS self_ns
      FROM {source} WHERE run = $run AND {RANK_FILTER} AND {_OP_FILTER[source]} AND dur_ns IS NOT NULL"""


_STORED_STATS = {"operators": ("agg_operator_stats", "self_ns"), "kernels": ("agg_kernel_stats", "total_ns")}

STATS_STORED_SQL = """
SELECT count(*) AS n FROM (
  SELECT collection_id FROM fact_files WHERE run = $run GROUP BY collection_id
  HAVING bool_or(table_name = $source) AND NOT bool_or(table_name = $stored))
"""


def all_stored(rd: Reader, run: str, source: str, stored: str) -> bool:
    """Whether every collection of ``run`` holding ``source`` rows has its aggregate ``stored``
    (written at ingest: a store from before has none)."""
    n = _df(rd.catalog(), STATS_STORED_SQL, {"run": run, "source": source, "stored": stored})
    return int(n["n"].iloc[0]) == 0


def _stats_stored(rd: Reader, run: str, source: str) -> bool:
    """Whether every collection of ``run`` holding ``source`` rows has its statistics stored at ingest."""
    return all_stored(rd, run, source, _STORED_STATS[source][0])


def _op_per_rank(rd: Reader, run: str, source: str, grouping: str) -> tuple[str, str]:
    """The per-(key, shape, rank) statistics of ``source``: (SQL, the table it reads) — from the
    statistics the ingest stored when every collection has them (sums of sums, min of mins, max of
    maxes: the same figures), else from every call."""
    if _stats_stored(rd, run, source):
        table, self_col = _STORED_STATS[source]
        key, shape = _KEY_EXPR[(source, grouping)]
        return (
            f"""
      SELECT key, shape, rank, sum(count) AS count, sum(total_ns) AS total_ns, sum(self_ns) AS self_ns,
             min(min_ns) AS min_ns, max(max_ns) AS max_ns, arg_max(slowest_ts_ns, max_ns) AS slowest_ts_ns
      FROM (SELECT rank, {key} AS key, {shape} AS shape, count, total_ns, {self_col} AS self_ns, min_ns, max_ns,
                   slowest_ts_ns
            FROM {table} WHERE run = $run AND {RANK_FILTER})
      GROUP BY key, shape, rank""",
            table,
        )
    return (
        f"""
      SELECT key, shape, rank, count(*) AS count, sum(dur_ns) AS total_ns, sum(self_ns) AS self_ns,
             min(dur_ns) AS min_ns, max(dur_ns) AS max_ns, arg_max(ts_ns, dur_ns) AS slowest_ts_ns
      FROM ({_op_base(source, grouping)}) GROUP BY key, shape, rank""",
        source,
    )


@run_cached
def operator_stats(
    rd: Reader,
    run: str,
    source: str,
    grouping: str,
    ranks: Sequence[int] | None,
    across: bool,
    limit: int = MAX_GRID_ROWS,
) -> tuple[pd.DataFrame, int]:
    """Count, total, self, avg, min, max per key (type / name / name+shape), and the slowest call
    (``slowest_rank``, ``slowest_ts_ns``; it lasted ``max_ns``).

    ``across=False``: one row per (key, rank). ``across=True``: one row per key over the selected
    ranks, with the per-rank totals' min / max / mean, their spread ((max - min) / mean) and the
    rank with the largest total. Returns (rows sorted by total, at most ``limit``; number of rows
    before the cut).
    """
    if source not in SOURCES or grouping not in GROUPINGS:
        raise QueryError(f"unknown operator view {source}/{grouping}")
    per_rank, table = _op_per_rank(rd, run, source, grouping)
    if across:
        sql = f"""
        WITH pr AS ({per_rank})
        SELECT key, shape, sum(count) AS count, sum(total_ns) AS total_ns, sum(self_ns) AS self_ns,
               sum(total_ns) / sum(count) AS avg_ns, min(min_ns) AS min_ns, max(max_ns) AS max_ns,
               count(*) AS ranks, min(total_ns) AS rank_min_ns, max(total_ns) AS rank_max_ns,
               avg(total_ns) AS rank_mean_ns,
               CASE WHEN avg(total_ns) > 0
                    THEN 100.0 * (max(total_ns) - min(total_ns)) / avg(total_ns) END AS spread_pct,
               arg_max(rank, total_ns) AS max_rank, arg_min(rank, total_ns) AS min_rank,
               arg_max(rank, max_ns) AS slowest_rank, arg_max(slowest_ts_ns, max_ns) AS slowest_ts_ns,
               count(*) OVER () AS n_rows
        FROM pr GROUP BY key, shape
        ORDER BY total_ns DESC, key, shape LIMIT $limit"""
    else:
        sql = f"""
        SELECT key, shape, rank, count, total_ns, self_ns, total_ns / count AS avg_ns, min_ns, max_ns,
               rank AS slowest_rank, slowest_ts_ns, count(*) OVER () AS n_rows
        FROM ({per_rank})
        ORDER BY total_ns DESC, key, shape, rank LIMIT $limit"""
    con = rd.facts(run, ranks, (table,))
    df = _df(con, sql, {"run": run, "ranks": _ranks_param(ranks), "limit": int(limit)})
    n = int(df["n_rows"].iloc[0]) if len(df) else 0
    return df.drop(columns=["n_rows"]), n


DRILL_QUANTILES = {"p25_ns": 0.25, "p50_ns": 0.5, "p75_ns": 0.75, "p99_ns": 0.99}
DRILL_COLUMNS = ["rank", "count", "total_ns", "avg_ns", "min_ns", *DRILL_QUANTILES, "max_ns", "self_ns"]


@run_cached
def operator_drill(
    rd: Reader, run: str, source: str, grouping: str, key: str, shape: str | None, ranks: Sequence[int] | None
) -> pd.DataFrame:
    """One operator type / name (/ shape) across ranks: per rank count, total, avg, quantiles, min, max.
    With grouping "shape" and ``shape`` None, every input shape of the name together. The quantiles
    come from the duration histograms the ingest stored with the statistics (within
    ``analyzer.histogram.RELATIVE_ACCURACY`` of the calls'; the rest exact) when every collection
    has them, else from every call."""
    if source not in SOURCES or grouping not in GROUPINGS:
        raise QueryError(f"unknown operator view {source}/{grouping}")
    # by name + shape without a shape (a link naming only the operator): every shape of that name
    shape_filter = "AND shape = $shape" if grouping == "shape" and shape is not None else ""
    p: dict[str, Any] = {"run": run, "ranks": _ranks_param(ranks), "key": key}
    if shape_filter:
        p["shape"] = shape
    if _stats_stored(rd, run, source):
        df = _drill_stored(rd, run, source, grouping, shape_filter, p)
        if df is not None:
            return df
    sql = f"""
      SELECT rank, count(*) AS count, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns, min(dur_ns) AS min_ns,
             quantile_cont(dur_ns, 0.25) AS p25_ns, median(dur_ns) AS p50_ns,
             quantile_cont(dur_ns, 0.75) AS p75_ns, quantile_cont(dur_ns, 0.99) AS p99_ns,
             max(dur_ns) AS max_ns, sum(self_ns) AS self_ns
      FROM ({_op_base(source, grouping)}) WHERE key = $key {shape_filter}
      GROUP BY rank ORDER BY rank LIMIT {MAX_DRILL_RANKS}"""
    con = rd.facts(run, ranks, (source,))
    return _df(con, sql, p)


def _drill_stored(
    rd: Reader, run: str, source: str, grouping: str, shape_filter: str, p: dict[str, Any]
) -> pd.DataFrame | None:
    """``operator_drill`` from the stored statistics and their histograms (merged per rank); None
    when a row of the operator has no histogram (a collection stored before them)."""
    table, self_col = _STORED_STATS[source]
    key, shape = _KEY_EXPR[(source, grouping)]
    # one scan of the statistics: per rank the sums and extremes, and the histograms of its rows
    # (merged here: a rank has one row per category or shape of the operator)
    sql = f"""
      SELECT rank, sum(count)::BIGINT AS count, sum(total_ns) AS total_ns, sum(total_ns) / sum(count) AS avg_ns,
             min(min_ns) AS min_ns, max(max_ns) AS max_ns, sum(self_ns) AS self_ns,
             count(*) FILTER (WHERE hist_counts IS NULL) AS unhistogrammed,
             flatten(list(hist_buckets)) AS hist_buckets, flatten(list(hist_counts)) AS hist_counts
      FROM (SELECT rank, {key} AS key, {shape} AS shape, count, total_ns, {self_col} AS self_ns, min_ns, max_ns,
                   hist_buckets, hist_counts
            FROM {table} WHERE run = $run AND {RANK_FILTER})
      WHERE key = $key {shape_filter}
      GROUP BY rank ORDER BY rank LIMIT {MAX_DRILL_RANKS}"""
    df = _df(rd.facts(run, p["ranks"], (table,)), sql, p)
    if int(df["unhistogrammed"].sum()):
        return None
    qs = quantiles(df["hist_buckets"], df["hist_counts"], list(DRILL_QUANTILES.values()), df["min_ns"], df["max_ns"])
    for i, col in enumerate(DRILL_QUANTILES):
        df[col] = qs[:, i]
    return df[DRILL_COLUMNS]


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

# The counters' list, peaks and zoomed-out curves come from the curves the ingest downsampled
# (``agg_memory_curve``: every bucket keeps each series' maximum, so the peaks are the samples'),
# when every collection of the run holding samples has them; the samples are read only for a
# window finer than the stored buckets, or in a store written before them.

MEMORY_KINDS_SQL = {
    "memory_samples": f"""
SELECT component, coalesce(device, '') AS device, count(*) AS samples,
       count(allocated_bytes) > 0 AS has_allocated, count(reserved_bytes) > 0 AS has_reserved,
       count(active_bytes) > 0 AS has_active,
       max(greatest(coalesce(allocated_bytes, 0), coalesce(reserved_bytes, 0), coalesce(active_bytes, 0)))
         AS peak_bytes
FROM memory_samples WHERE run = $run AND {RANK_FILTER} AND ts_ns IS NOT NULL
GROUP BY ALL ORDER BY samples DESC, component, device
""",
    "agg_memory_curve": f"""
SELECT component, coalesce(device, '') AS device, sum(samples)::BIGINT AS samples,
       count(allocated_bytes) > 0 AS has_allocated, count(reserved_bytes) > 0 AS has_reserved,
       count(active_bytes) > 0 AS has_active,
       max(greatest(coalesce(allocated_bytes, 0), coalesce(reserved_bytes, 0), coalesce(active_bytes, 0)))
         AS peak_bytes
FROM agg_memory_curve WHERE run = $run AND {RANK_FILTER}
GROUP BY ALL ORDER BY samples DESC, component, device
""",
}


@run_cached
def memory_source(rd: Reader, run: str) -> str:
    """The table the memory counters' whole-run figures are read from: the stored curves when every
    collection of ``run`` holding samples has them, else the samples."""
    return "agg_memory_curve" if all_stored(rd, run, "memory_samples", "agg_memory_curve") else "memory_samples"


@run_cached
def memory_components(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Which memory counters exist (component, device) with how many samples of each series, which
    series they record (``has_allocated`` / ``has_reserved`` / ``has_active``) and the highest value
    any of them reached (``peak_bytes``)."""
    table = memory_source(rd, run)
    con = rd.facts(run, ranks, (table,))
    return _df(con, MEMORY_KINDS_SQL[table], {"run": run, "ranks": _ranks_param(ranks)})


MEMORY_PEAKS_SQL = {
    "memory_samples": f"""
SELECT rank, coalesce(device, '') AS device,
       max(allocated_bytes) AS peak_allocated_bytes, arg_max(ts_ns, allocated_bytes) AS peak_allocated_ns,
       max(reserved_bytes) AS peak_reserved_bytes, arg_max(ts_ns, reserved_bytes) AS peak_reserved_ns,
       max(active_bytes) AS peak_active_bytes, arg_max(ts_ns, active_bytes) AS peak_active_ns,
       count(*) AS samples, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns, NULL::BIGINT AS bucket_ns
FROM memory_samples WHERE run = $run AND {RANK_FILTER} AND component = $component AND ts_ns IS NOT NULL
GROUP BY ALL ORDER BY rank, device
""",
    "agg_memory_curve": f"""
SELECT rank, coalesce(device, '') AS device,
       max(allocated_bytes) AS peak_allocated_bytes, arg_max(peak_ts_ns, allocated_bytes) AS peak_allocated_ns,
       max(reserved_bytes) AS peak_reserved_bytes, arg_max(reserved_peak_ts_ns, reserved_bytes) AS peak_reserved_ns,
       max(active_bytes) AS peak_active_bytes, arg_max(active_peak_ts_ns, active_bytes) AS peak_active_ns,
       sum(samples)::BIGINT AS samples, min(start_ns) AS first_ns, max(last_ts_ns) AS last_ns,
       max(bucket_ns) AS bucket_ns
FROM agg_memory_curve WHERE run = $run AND {RANK_FILTER} AND component = $component
GROUP BY ALL ORDER BY rank, device
""",
}


@run_cached
def memory_peaks(rd: Reader, run: str, ranks: Sequence[int] | None, component: str) -> pd.DataFrame:
    """Per (rank, device): peak allocated / reserved / active and when they happened, the samples,
    the first and last sample's time and the width of the stored buckets (``bucket_ns``; NULL
    when read from the samples)."""
    table = memory_source(rd, run)
    con = rd.facts(run, ranks, (table,))
    return _df(con, MEMORY_PEAKS_SQL[table], {"run": run, "ranks": _ranks_param(ranks), "component": component})


MEMORY_STORED_SQL = """
SELECT rank, coalesce(device, '') AS device, start_ns AS ts_ns, last_ts_ns, allocated_bytes, reserved_bytes,
       active_bytes, min_allocated_bytes, samples, last_allocated_bytes, last_reserved_bytes, last_active_bytes
FROM agg_memory_curve
WHERE run = $run AND list_contains($ranks, rank) AND component = $component
ORDER BY rank, device, start_ns
"""

# the samples of a window, with the last one before it and the first one after it (the values held
# when the window opens, and whether the counter goes on after it)
MEMORY_WINDOW_SQL = """
WITH s AS (
  SELECT rank, coalesce(device, '') AS device, ts_ns, allocated_bytes, reserved_bytes, active_bytes
  FROM memory_samples
  WHERE run = $run AND list_contains($ranks, rank) AND component = $component AND ts_ns IS NOT NULL)
SELECT * FROM s WHERE ts_ns >= $a AND ts_ns <= $b
UNION ALL (SELECT * FROM s WHERE ts_ns < $a
           QUALIFY row_number() OVER (PARTITION BY rank, device ORDER BY ts_ns DESC) = 1)
UNION ALL (SELECT * FROM s WHERE ts_ns > $b
           QUALIFY row_number() OVER (PARTITION BY rank, device ORDER BY ts_ns) = 1)
ORDER BY rank, device, ts_ns
"""

_SERIES = ("allocated_bytes", "reserved_bytes", "active_bytes")
MEMORY_CURVE_COLUMNS = [
    "rank",
    "device",
    "bucket",
    "ts_ns",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "allocated_min_bytes",
    "samples",
]


def _curve_runs(tbl: pa.Table) -> tuple[list[tuple[int, str, int, int]], dict[str, np.ndarray]]:
    """A table ordered by (rank, device, time) cut into its curves: (rank, device, lo, hi) of each,
    and its columns as numpy (int64 times and counts, float64 values: NULL is NaN)."""
    cols: dict[str, np.ndarray] = {}
    for c in tbl.column_names:
        if c in ("rank", "device"):
            continue
        arr = tbl.column(c).to_numpy(zero_copy_only=False)
        cols[c] = arr.astype(np.int64) if c.endswith("_ns") or c == "samples" else arr.astype(np.float64)
    if not tbl.num_rows:
        return [], cols
    rank = tbl.column("rank").to_numpy().astype(np.int64)
    dev = pc.dictionary_encode(tbl.column("device")).combine_chunks()
    dev_idx, dev_names = dev.indices.to_numpy(zero_copy_only=False), dev.dictionary.to_pylist()
    key = rank * 4096 + dev_idx
    cuts = np.r_[0, np.flatnonzero(np.diff(key)) + 1, len(key)]
    return [(int(rank[lo]), str(dev_names[dev_idx[lo]]), int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:])], cols


def _query_arrow(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> pa.Table:
    try:  # Arrow straight to numpy: a pandas frame of every sample costs more than the query
        return con.sql(sql, params=params).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc


Curve = tuple[int, str, dict[str, np.ndarray], dict[str, float] | None, dict[str, float] | None]


def _sample_curves(rd: Reader, run: str, ranks: list[int], component: str, a: int, b: int) -> list[Curve]:
    """Every sample of the window [a, b] per (rank, device), with the values held when it opens (the
    last sample before it, when the counter goes on into or past the window) and when it closes
    (the last sample in or before it, when the counter goes on after it)."""
    con = rd.facts(run, ranks, ("memory_samples",))
    tbl = _query_arrow(con, MEMORY_WINDOW_SQL, {"run": run, "ranks": ranks, "component": component, "a": a, "b": b})
    runs, cols = _curve_runs(tbl)
    out: list[Curve] = []
    for rank, device, lo, hi in runs:
        ts = cols["ts_ns"][lo:hi]
        i, j = int(np.searchsorted(ts, a, side="left")), int(np.searchsorted(ts, b, side="right"))
        n = hi - lo
        before = {c: cols[c][lo + i - 1] for c in _SERIES} if 0 < i < n else None
        after = {c: cols[c][lo + j - 1] for c in _SERIES} if 0 < j < n else None
        pts = {c: cols[c][lo + i : lo + j] for c in (*_SERIES, "ts_ns")}
        pts["allocated_min_bytes"] = pts["allocated_bytes"]
        pts["samples"] = np.ones(j - i, dtype=np.int64)
        out.append((rank, device, pts, before, after))
    return out


def _stored_curves(rd: Reader, run: str, ranks: list[int], component: str, a: int, b: int) -> list[Curve]:
    """The stored buckets (``agg_memory_curve``) holding samples of the window [a, b] per (rank,
    device), each drawn from max(its start, a) with its maxima, with the values held when the window
    opens (the last sample of the bucket before it) and closes (the last sample of the last bucket
    starting in or before it, when the counter goes on after it)."""
    con = rd.facts(run, ranks, ("agg_memory_curve",))
    tbl = _query_arrow(con, MEMORY_STORED_SQL, {"run": run, "ranks": ranks, "component": component})
    runs, cols = _curve_runs(tbl)
    last = {c: cols["last_" + c] for c in _SERIES}
    out: list[Curve] = []
    for rank, device, lo, hi in runs:
        start, end = cols["ts_ns"][lo:hi], cols["last_ts_ns"][lo:hi]
        inside = (start <= b) & (end >= a)
        earlier, later = np.flatnonzero(end < a), np.flatnonzero(end > b)
        first = np.flatnonzero(inside)
        before = None
        if earlier.size and (first.size == 0 or start[first[0]] > a) and (first.size or later.size):
            before = {c: last[c][lo + earlier[-1]] for c in _SERIES}
        after = None
        upto = np.flatnonzero(start <= b)
        if later.size and upto.size:
            after = {c: last[c][lo + upto[-1]] for c in _SERIES}
        pts = {c: cols[c][lo:hi][inside] for c in (*_SERIES, "samples")}
        pts["ts_ns"] = np.maximum(start[inside], a)
        pts["allocated_min_bytes"] = cols["min_allocated_bytes"][lo:hi][inside]
        out.append((rank, device, pts, before, after))
    return out


def memory_curves(
    rd: Reader,
    run: str,
    ranks: Sequence[int] | None,
    component: str,
    start_ns: int,
    end_ns: int,
    n_buckets: int = 1000,
) -> pd.DataFrame:
    """Allocated / reserved / active per (rank, device), downsampled to ``n_buckets`` per curve by
    keeping each bucket's maximum (so peaks survive) and its minimum allocated.

    Drawn from the curves the ingest stored (``agg_memory_curve``) when their buckets are no finer
    than the window's (a whole-run or zoomed-out view; ``attrs["stored"]`` is then True), else from
    the window's samples. A counter holds its value until its next sample, so each curve also
    starts at ``start_ns`` with the value held there and ends at ``end_ns`` with its last value when
    the series goes on after the window (``samples`` counts only the samples inside the window: a
    window between two samples draws the held value, with 0 samples in view)."""
    n_buckets = max(1, min(int(n_buckets), MAX_BUCKETS))
    width = max((end_ns - start_ns) / n_buckets, 1.0)
    ranks = ranks_of(rd, run) if ranks is None else [int(r) for r in ranks]
    stored = False
    if memory_source(rd, run) == "agg_memory_curve":
        resolution = pd.to_numeric(memory_peaks(rd, run, ranks, component)["bucket_ns"], errors="coerce").max()
        stored = bool(pd.isna(resolution) or width >= float(resolution))
    got = (_stored_curves if stored else _sample_curves)(rd, run, ranks, component, int(start_ns), int(end_ns))
    parts = []
    for rank, device, pts, before, after in got:
        ts = pts["ts_ns"]
        if ts.size == 0 and before is None:
            continue
        frames: list[dict[str, Any]] = []

        def held(vals: dict[str, float], t: int, bucket: int) -> dict[str, Any]:
            """Values held at time ``t`` (no sample of their own there)."""
            row: dict[str, Any] = {"bucket": [bucket], "ts_ns": [t], "samples": [0]}
            row.update({c: [vals[c]] for c in _SERIES})
            row["allocated_min_bytes"] = [vals["allocated_bytes"]]
            return row

        if before is not None:  # the value when the window opens
            frames.append(held(before, start_ns, 0))
        if ts.size:
            bucket = np.minimum(((ts - start_ns) / width).astype(np.int64), n_buckets - 1)
            cut = np.r_[0, np.flatnonzero(np.diff(bucket)) + 1]  # points are in time order: buckets are runs
            part = {"bucket": bucket[cut], "ts_ns": ts[cut], "samples": np.add.reduceat(pts["samples"], cut)}
            for c in _SERIES:
                part[c] = np.fmax.reduceat(pts[c], cut)
            part["allocated_min_bytes"] = np.fmin.reduceat(pts["allocated_min_bytes"], cut)
            frames.append(part)
        if after is not None:  # the value still held when the window closes
            frames.append(held(after, end_ns, n_buckets - 1))
        df = pd.concat([pd.DataFrame(f) for f in frames], ignore_index=True)
        parts.append(df.assign(rank=rank, device=device))
    cols = MEMORY_CURVE_COLUMNS
    out = pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    out.attrs["stored"] = stored
    return out


OPERATOR_MEMORY_SQL = """
SELECT rank, name, size_bytes, alloc_ns, release_ns, coalesce(duration_ns, release_ns - alloc_ns) AS duration_ns,
       active_duration_ns, alloc_allocated_bytes, alloc_reserved_bytes, device,
       count(*) OVER (PARTITION BY rank) AS n_rows
FROM operator_memory WHERE run = $run AND list_contains($ranks, rank)
QUALIFY row_number() OVER (PARTITION BY rank ORDER BY size_bytes DESC NULLS LAST, alloc_ns) <= $limit
"""


def operator_memory(
    rd: Reader, run: str, ranks: Sequence[int] | None, limit: int = MAX_MEMORY_BLOCKS
) -> tuple[pd.DataFrame, int]:
    """Largest memory blocks attributed to operators (size, allocation time, lifetime): the ``limit``
    largest over the ranks (from each rank's own largest, kept in memory); and how many there are."""
    ranks = ranks_of(rd, run) if ranks is None else list(ranks)

    def load(missing: list[int]) -> dict[int, tuple[pd.DataFrame, int]]:
        con = rd.facts(run, missing, ("operator_memory",))
        df = _df(con, OPERATOR_MEMORY_SQL, {"run": run, "ranks": missing, "limit": MAX_MEMORY_BLOCKS})
        return {
            int(r): (g.drop(columns=["n_rows"]).reset_index(drop=True), int(g["n_rows"].iloc[0]))
            for r, g in df.groupby("rank")
        }

    got = [v for v in cache.per_rank(rd, run, "operator_memory", ranks, (), load).values() if v is not None]
    if not got:
        return pd.DataFrame(
            columns=[
                "rank",
                "name",
                "size_bytes",
                "alloc_ns",
                "release_ns",
                "duration_ns",
                "active_duration_ns",
                "alloc_allocated_bytes",
                "alloc_reserved_bytes",
                "device",
            ]
        ), 0
    df = pd.concat([g for g, _ in got], ignore_index=True)
    df = df.sort_values(["size_bytes", "rank", "alloc_ns"], ascending=[False, True, True], na_position="last").head(
        int(limit)
    )
    return df.reset_index(drop=True), sum(n for _, n in got)


# ---------------------------------------------------------------------------------------------
# cluster analyses (analyzer.analyses: computed once per content of the run and kept by them)
# ---------------------------------------------------------------------------------------------


def _ranks_arg(rd: Reader, run: str, ranks: Sequence[int] | None) -> list[int] | None:
    """``ranks`` as the analyses take them: sorted, and None when they are every rank of the run, so
    a page showing every rank and one asking for the whole run share one result (and the analyses
    the ingest stored, which are the whole run's, are read rather than computed)."""
    if ranks is None:
        return None
    rs = sorted({int(r) for r in ranks})
    return None if rs == ranks_of(rd, run) else rs


def step_breakdown(rd: Reader, run: str, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """msprof-analyze's step time breakdown per (rank, step) (``analyses.step_breakdown``)."""
    return analyses.step_breakdown(rd.store, run, _ranks_arg(rd, run, ranks))


TOP_SLOWEST = (8, 32)  # the "top-N slowest" rank picks
MAX_PICKS = 300  # group and coordinate picks offered at most


@run_cached
def rank_picks(rd: Reader, run: str) -> list[tuple[str, dict[str, Any], list[int]]]:
    """Ready-made rank choices, (label key, its values, ranks) — cached, so in no language:
    the page writes the label (``webapp.labels``): the N slowest ranks by mean step time (the stored
    step breakdown), then every group and every coordinate of the parallel layout found
    (``analyses.parallel_layout``: "dp group 3", "pp = 1"), at most ``MAX_PICKS``."""
    out: list[tuple[str, dict[str, Any], list[int]]] = []
    bd = step_breakdown(rd, run)
    if not bd.empty:
        mean = bd.assign(s=pd.to_numeric(bd["step_ns"], errors="coerce")).groupby("rank")["s"].mean().dropna()
        order = mean.sort_values(ascending=False, kind="stable")
        for n in TOP_SLOWEST:
            if len(order) > n:
                out.append(("picks.slowest", {"n": n}, sorted(int(r) for r in order.index[:n])))
    try:
        lay = analyses.parallel_layout(rd.store, run)
    except (QueryError, ValueError, KeyError):  # no layout: the slowest picks alone
        lay = pd.DataFrame()
    dims = [c for c in lay.columns if c != "rank" and not c.endswith("_group")]
    known = set(ranks_of(rd, run))
    for dim in dims:
        for col, key in ((f"{dim}_group", "picks.group"), (dim, "picks.coord")):
            if col not in lay.columns:
                continue
            for v, sub in lay.dropna(subset=[col]).groupby(col):
                rs = sorted(int(r) for r in sub["rank"] if int(r) in known)
                if rs and len(rs) < len(known):
                    out.append((key if len(rs) > 1 else f"{key}_1", {"dim": dim, "v": int(v), "n": len(rs)}, rs))
    return out[:MAX_PICKS]


def slow_ranks(rd: Reader, run: str) -> pd.DataFrame:
    """msprof-analyze's slow-rank vote (``analyses.slow_ranks``): rank, votes, instances, vote_ratio."""
    return analyses.slow_ranks(rd.store, run)


def stragglers(rd: Reader, run: str) -> pd.DataFrame:
    """The arrival-order verdict per rank, with its cause and what-if gain (``analyses.stragglers``)."""
    return analyses.stragglers(rd.store, run)


def blame_chains(rd: Reader, run: str) -> pd.DataFrame:
    """The late collectives with who arrived last, why, and their timeline window (``analyses.blame_chains``)."""
    return analyses.blame_chains(rd.store, run)


def blame_of(rd: Reader, run: str, instance: str) -> pd.DataFrame:
    """The blame row of one collective instance, late or not (``analyses.blame.blame_of``)."""
    return analyses.blame_of(rd.store, run, instance)


def collective_matching(rd: Reader, run: str) -> pd.DataFrame:
    """Per group: what matched across ranks, and why not (``analyses.collective_matching``)."""
    return analyses.collective_matching(rd.store, run)


def last_arrivals(rd: Reader, run: str) -> pd.DataFrame:
    """Per matched collective instance: the rank that arrived last and its margin (``analyses.arrivals``)."""
    a = analyses.arrivals(rd.store, run)
    last = a[a["is_last"].astype(bool)] if not a.empty else a
    return last[["instance", "rank", "margin_ns", "lateness_ns"]].rename(columns={"rank": "last_rank"})


@run_cached
def comm_groups(rd: Reader, run: str) -> pd.DataFrame:
    """Per communication group: members, instances, elapsed split into wait, transit and idle
    (``analyses.comm_group_totals``)."""
    return analyses.comm_group_totals(rd.store, run)


@run_cached
def comm_definition(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per rank: the step breakdown's Communication (mean per step), the definition it follows and
    the producer's own figure (``analyses.step_breakdown``)."""
    sb = analyses.step_breakdown(rd.store, run, _ranks_arg(rd, run, ranks))
    if sb.empty:
        return pd.DataFrame(columns=["rank", "definition", "communication_ns", "producer_communication_ns"])
    return (
        sb.assign(
            communication_ns=sb["communication_ns"].astype("float64"),
            producer_communication_ns=sb["producer_communication_ns"].astype("float64"),
        )
        .groupby("rank")
        .agg(
            definition=("communication_definition", "first"),
            communication_ns=("communication_ns", "mean"),
            producer_communication_ns=("producer_communication_ns", "mean"),
        )
        .reset_index()
    )


@run_cached
def comm_per_rank(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per rank: operations, elapsed, wait, transit, bytes (``analyses.comm_per_rank``)."""
    return analyses.comm_per_rank(rd.store, run, _ranks_arg(rd, run, ranks))


@run_cached
def comm_bandwidth(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Per (rank, transport): bytes, transit, bandwidth, min / max over ops (``analyses.transport_bandwidth``)."""
    return analyses.transport_bandwidth(rd.store, run, _ranks_arg(rd, run, ranks))


@run_cached
def comm_matrix(rd: Reader, run: str, ranks: Sequence[int] | None) -> pd.DataFrame:
    """Rank x rank links summed over op types and steps (``analyses.rank_pairs``) with their labels
    ``src`` / ``dst``: the global rank as text, or ``L<k>`` (local rank k of the group) when the
    group's layout is unknown."""
    # not None for every rank: the pairs of ranks asked for leave out those with no known end
    m = analyses.rank_pairs(rd.store, run, None if ranks is None else sorted({int(r) for r in ranks}))
    m["src"] = [_end_label(g, lo) for g, lo in zip(m["src_rank"], m["src_local"])]
    m["dst"] = [_end_label(g, lo) for g, lo in zip(m["dst_rank"], m["dst_local"])]
    return m


def _end_label(global_rank: Any, local: Any) -> str:
    if pd.notna(global_rank):
        return str(int(global_rank))
    return f"L{int(local)}" if pd.notna(local) else "?"


def collectives(
    rd: Reader, run: str, ranks: Sequence[int] | None, limit: int = MAX_GRID_ROWS
) -> tuple[pd.DataFrame, int]:
    """The ``limit`` slowest collective instances over the selected ranks (``analyses.collective_instances``)
    and how many there are; ``members`` lists each one's (rank, ts_ns, dur_ns), each on its rank's clock."""
    return _collectives(rd, run, _ranks_arg(rd, run, ranks), limit)


@run_cached
def _collectives(rd: Reader, run: str, ranks: list[int] | None, limit: int) -> tuple[pd.DataFrame, int]:
    df = analyses.collective_instances(rd.store, run, ranks)
    out = df.head(limit).reset_index(drop=True)
    s = analyses.communication_summary(rd.store, run)
    if ranks is not None:
        s = s[s["rank"].isin(list(ranks))]
    key = s["instance"].astype(object).where(s["instance"].notna(), s["name"].astype(str) + "#" + s["rank"].astype(str))
    kept = s[key.isin(set(out["instance"]))]
    members: dict[Any, list[tuple[Any, Any, Any]]] = {}  # one pass over the rows (a group per instance cost seconds)
    for k, r, ts, d in zip(
        key[kept.index].tolist(),
        kept["rank"].astype(int).tolist(),
        pd.to_numeric(kept["ts_ns"]).tolist(),
        pd.to_numeric(kept["dur_ns"]).tolist(),
    ):
        members.setdefault(k, []).append((r, ts, d))
    out["members"] = [members.get(k, []) for k in out["instance"]]
    last = last_arrivals(rd, run).set_index("instance")
    out["last_rank"] = out["instance"].map(last["last_rank"]).astype("Int64")
    out["late_ns"] = out["instance"].map(last["margin_ns"]).astype("Int64")
    return out, len(df)


# ---------------------------------------------------------------------------------------------
# two runs compared, and runs over time (analyzer.analyses: kept per content of the runs by them)
# ---------------------------------------------------------------------------------------------


def run_diff(
    rd: Reader, base: str, new: str, base_step: int | None = None, new_step: int | None = None
) -> analyses.RunDiff:
    """``new`` compared with ``base`` (``analyses.run_diff``, what `analyze diff` prints)."""
    return analyses.run_diff(rd.store, resolve_run(rd, base), resolve_run(rd, new), base_step, new_step)


def trend(rd: Reader, metric: str = "step_time", last: int | None = 50) -> pd.DataFrame:
    """A metric over the runs, oldest ingested first, with their baselines and tags (``analyses.trend``)."""
    return analyses.trend(rd.store, metric, last=last)
