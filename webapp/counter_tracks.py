"""The timeline's counter tracks: per rank, the memory allocators' totals (``memory_samples``:
allocated bytes of PTA / GE / APP / Kineto's allocator, not the driver modules) and the producer's
counter events (``counters``: NPU memory, HBM / LLC bandwidth, AI Core frequency, queue depths ...),
each drawn as a step line under its rank (which samples make a track: ``analyzer.tracks``).

A view asks for the tracks of its ranks over its window, and gets per track at most ``n`` buckets
(minimum, maximum, last value) plus the value held when the window opens, so an answer is bounded
whatever the samples. Kept per rank between requests (``cache.per_rank``, bounded in bytes): each
track's catalog row with its samples per bucket of the coarsest stored level, and the samples of the
tracks of at most ``SMALL_TRACK`` samples (drawn from them). A larger track's view is drawn:

- zoomed out, from the curves the ingest stored (``agg_counter_curve``): the coarsest level of
  ``schema.COUNTER_LEVELS`` whose buckets are at most a view bucket wide, each stored bucket counted
  in the view bucket where it starts (the one straddling the window's start in the first: its
  samples are at most one stored bucket, under a view bucket, before the window; the one straddling
  its end, as much after it), the buckets of the rank's collections merged (same grid: minimum of
  minima, maximum of maxima, the latest last sample); the value held is the last one before the
  straddling bucket. Every peak is in the view bucket of its stored bucket;
- zoomed in (at most ``EXACT_PER_BUCKET`` samples per view bucket in the stored buckets overlapping
  the view, bounded first by the coarsest ones; or view buckets finer than the finest level), from
  the window's exact samples and the last one before it, read from the facts (as every view on a
  store ingested before the curves were stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from analyzer import schema
from analyzer.errors import QueryError
from analyzer.tracks import TRACK_SOURCES

from . import cache, data
from .reader import Reader

TOP_TRACKS_PER_RANK = 16  # the tracks a rank shows at first (``top``); the others on the user's demand
MAX_BUCKETS = 2000
EXACT_PER_BUCKET = 4  # a view holding at most this many samples per bucket asked for gets them exactly
# a track of at most this many samples is read whole once and kept (``cache.per_rank``, bounded in
# bytes): its views are drawn from its samples (a producer's counters: tens to thousands of samples)
SMALL_TRACK = 4096
LIST_SQL = """
SELECT rank, label, unit, bool_or(allocator) AS allocator, bool_or(memory) AS memory, min(value) AS min,
       max(value) AS max, count(*) AS n,
       min(ts_ns) AS first, max(ts_ns) AS last
FROM ({rows}) GROUP BY rank, label, unit
"""
# the coarsest level holds every sample once: the catalog of the tracks without reading one, and
# the samples per coarsest bucket of each (the rank's collections merged)
COARSE_LEVEL = max(schema.COUNTER_LEVELS)
STORED_LIST_SQL = f"""
SELECT rank, label, unit, bool_or(allocator) AS allocator, bool_or(memory) AS memory, bucket, min(min_value) AS min,
       max(max_value) AS max, sum(samples) AS n, min(first_ts_ns) AS first, max(last_ts_ns) AS last
FROM {{source}} WHERE level = {COARSE_LEVEL} GROUP BY rank, label, unit, bucket ORDER BY rank, label, unit, bucket
"""
# the stored buckets of level $level of each view (``__views``: key, rank, label, unit, lo, hi and
# the first / last bucket b0 / b1 holding part of it), the rank's collections merged; and per view
# the last value before b0 (the one held), in a row of its own (``before``)
STORED_WINDOW_SQL = """
WITH c AS MATERIALIZED (
  SELECT key, bucket, bucket < b0 AS before, samples, min_value, max_value, last_ts_ns, last_value
  FROM {source} JOIN __views USING (rank, label, unit) WHERE level = $level AND bucket <= b1)
SELECT key, bucket, false AS before, sum(samples) AS samples, min(min_value) AS lo, max(max_value) AS hi,
       arg_max(last_value, (last_ts_ns, last_value)) AS last
FROM c WHERE NOT before GROUP BY key, bucket
UNION ALL
SELECT key, 0, true, 0, NULL, NULL, arg_max(last_value, (last_ts_ns, last_value)) FROM c WHERE before GROUP BY key
ORDER BY key, before DESC, bucket
"""
# the exact samples of each view in [lo, hi), and the last one before lo (of equal times the largest
# value: the tracks' order is by time, then value)
EXACT_WINDOW_SQL = """
WITH r AS MATERIALIZED (
  SELECT key, ts_ns, value, ts_ns < lo AS before FROM ({rows}) JOIN __views USING (rank, label, unit) WHERE ts_ns < hi)
SELECT key, ts_ns, value FROM r WHERE NOT before
UNION ALL
SELECT key, max(ts_ns), arg_max(value, (ts_ns, value)) FROM r WHERE before GROUP BY key
ORDER BY key, ts_ns, value
"""


@dataclass(frozen=True)
class View:
    """One track (its catalog row's key, rank, label, unit; ``table``: where its samples are, how
    many) over [lo, hi) of its rank's clock."""

    key: str
    rank: int
    label: str
    unit: str
    table: str
    samples: int
    lo: int
    hi: int

    @classmethod
    def of(cls, track: dict[str, object], lo: int, hi: int) -> View:
        """The view [lo, hi) of a track as ``catalog`` lists it."""
        table = "memory_samples" if track["allocator"] else "counters"
        key, rank, label, unit = str(track["key"]), int(track["rank"]), str(track["label"]), str(track["unit"])
        return cls(key, rank, label, unit, table, int(track["n"]), lo, hi)


def stored(rd: Reader, run: str) -> bool:
    """Whether every collection of ``run`` with memory samples or counters has its curves stored
    (``agg_counter_curve``: a store ingested before has none, nor a collection whose memory samples
    are all the driver modules' and that has no counter)."""
    return cache.cached(
        rd,
        run,
        "counter_curves_stored",
        (),
        lambda: all(data.all_stored(rd, run, t, "agg_counter_curve") for _, t in TRACK_SOURCES),
    )


def catalog(rd: Reader, run: str, ranks: Sequence[int]) -> dict[int, list[dict[str, object]]]:
    """Per rank, the counter tracks the timeline lays out (key, rank, label, unit, value range,
    samples, first and last sample; from the stored curves when there are, no sample is kept): the
    allocators' memory first, largest peak first; then the counters of memory processes, then the
    others, by name. Every track is listed; the first ``TOP_TRACKS_PER_RANK`` of a rank are its
    ``top`` ones (shown at first), the rest are there for the user to open (a job can record
    hundreds of counters)."""
    return {r: listed for r, (listed, _) in _catalog(rd, run, ranks).items()}


Coarse = dict[str, tuple[np.ndarray, np.ndarray]]  # per track key: its coarsest buckets and their samples


def _catalog(rd: Reader, run: str, ranks: Sequence[int]) -> dict[int, tuple[list[dict[str, object]], Coarse]]:
    """``catalog``, and per track its samples per bucket of the coarsest stored level (empty
    without stored curves), kept per rank."""

    def load(missing: list[int]) -> dict[int, tuple[list[dict[str, object]], Coarse]]:
        coarse: dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]] = {}
        if stored(rd, run):
            rows = _df(rd.catalog(), STORED_LIST_SQL.format(source=rd.source(run, missing, "agg_counter_curve")))
            # the rows of each track (in order of rank, label, unit, bucket) reduced to its catalog row
            key = rows["rank"].astype(str) + "\0" + rows["label"] + "\0" + rows["unit"]
            starts = np.flatnonzero(key.ne(key.shift()).to_numpy())
            ends = np.r_[starts[1:], len(rows)]
            bucket, count = rows["bucket"].to_numpy(np.int64), rows["n"].to_numpy(np.int64)
            firsts = rows.iloc[starts]
            for r, label, unit, a, b in zip(firsts["rank"], firsts["label"], firsts["unit"], starts, ends):
                coarse[(int(r), str(label), str(unit))] = (bucket[a:b], count[a:b])

            def per_track(col: str, fn: Any) -> np.ndarray:
                return fn.reduceat(rows[col].to_numpy(), starts) if len(rows) else np.empty(0)

            dfs = [
                pd.DataFrame(
                    {
                        "rank": firsts["rank"].to_numpy(),
                        "label": firsts["label"].to_numpy(),
                        "unit": firsts["unit"].to_numpy(),
                        "allocator": per_track("allocator", np.logical_or),
                        "memory": per_track("memory", np.logical_or),
                        "min": per_track("min", np.minimum),
                        "max": per_track("max", np.maximum),
                        "n": per_track("n", np.add),
                        "first": per_track("first", np.minimum),
                        "last": per_track("last", np.maximum),
                    }
                )
            ]
        else:
            dfs = [
                _df(rd.catalog(), LIST_SQL.format(rows=rows.format(source=rd.source(run, missing, table))))
                for rows, table in TRACK_SOURCES
                if rd.has_files(run, missing, table)
            ]
        found: dict[int, tuple[list[dict[str, object]], Coarse]] = {r: ([], {}) for r in missing}
        for df in dfs:
            alloc = df["allocator"].astype(bool)
            ordered = pd.concat(
                [
                    df[alloc].sort_values(["rank", "max", "label"], ascending=[True, False, True], kind="stable"),
                    df[~alloc].sort_values(
                        ["rank", "memory", "label", "unit"], ascending=[True, False, True, True], kind="stable"
                    ),
                ]
            )
            for row in ordered.to_dict("records"):
                r = int(row["rank"])
                listed, per_key = found[r]
                key = f"{r}.c{len(listed)}"
                listed.append(
                    {
                        "key": key,
                        "rank": r,
                        "label": str(row["label"]),
                        "unit": str(row["unit"]),
                        "allocator": bool(row["allocator"]),
                        "min": float(row["min"]),
                        "max": float(row["max"]),
                        "n": int(row["n"]),
                        "first": int(row["first"]),
                        "last": int(row["last"]),
                        "top": len(listed) < TOP_TRACKS_PER_RANK,
                    }
                )
                got = coarse.get((r, str(row["label"]), str(row["unit"])))
                if got is not None:
                    per_key[key] = got
        return found

    return cache.per_rank(rd, run, "counter_catalog", list(ranks), (), load)


def _small_tracks(rd: Reader, run: str, ranks: Sequence[int]) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per rank, the samples (time order) of its tracks of at most ``SMALL_TRACK`` samples, read
    once for the ranks not kept yet."""
    listed = catalog(rd, run, ranks)

    def load(missing: list[int]) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
        views = [
            View.of(c, -(1 << 62), 1 << 62) for r in missing for c in listed.get(r) or [] if int(c["n"]) <= SMALL_TRACK
        ]  # type: ignore[arg-type]
        got = _read_exact(rd, run, views)
        return {r: {v.key: got[v.key] for v in views if v.rank == r and v.key in got} for r in missing}

    return cache.per_rank(rd, run, "counter_small_tracks", list(ranks), (), load)


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object] | None = None) -> pd.DataFrame:
    try:
        return con.execute(sql, params or {}).df()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc


def _arrow(rd: Reader, sql: str, views: pa.Table, params: dict[str, object] | None = None) -> pa.Table:
    """``sql`` over ``__views`` (the request's views, as Arrow: DuckDB scans no Python objects)."""
    con = rd.catalog()
    con.register("__views", views)
    try:
        return con.sql(sql, params=params or {}).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc
    finally:
        con.unregister("__views")


def level_for(width: float) -> int | None:
    """The coarsest level of ``schema.COUNTER_LEVELS`` whose buckets are at most ``width`` ns wide
    (None: the finest is wider)."""
    fit = [z for z in schema.COUNTER_LEVELS if (1 << z) <= width]
    return max(fit) if fit else None


def _views_table(views: Sequence[View], level: int | None = None) -> pa.Table:
    cols: dict[str, list[object]] = {
        "key": [v.key for v in views],
        "rank": [v.rank for v in views],
        "label": [v.label for v in views],
        "unit": [v.unit for v in views],
        "lo": [v.lo for v in views],
        "hi": [v.hi for v in views],
    }
    if level is not None:
        cols["b0"] = [v.lo >> level for v in views]
        cols["b1"] = [(v.hi - 1) >> level for v in views]
    return pa.table(
        cols,
        schema=pa.schema(
            [("key", pa.string()), ("rank", pa.int32()), ("label", pa.string()), ("unit", pa.string())]
            + [(c, pa.int64()) for c in cols if c not in ("key", "rank", "label", "unit")]
        ),
    )


def _groups(at: pa.Table) -> dict[str, slice]:
    """The rows of each key of ``at`` (sorted by key)."""
    keys = at.column("key").to_pylist()
    out: dict[str, slice] = {}
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            out[str(keys[start])] = slice(start, i)
            start = i
    return out


def _read_exact(rd: Reader, run: str, views: Sequence[View]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per view, its samples in [lo, hi) and the last one before lo (time order), from the facts."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for rows, table in TRACK_SOURCES:
        mine = [v for v in views if v.table == table]
        ranks = sorted({v.rank for v in mine})
        if not mine or not rd.has_files(run, ranks, table):
            continue
        sql = EXACT_WINDOW_SQL.format(rows=rows.format(source=rd.source(run, ranks, table)))
        at = _arrow(rd, sql, _views_table(mine))
        ts = at.column("ts_ns").to_numpy(zero_copy_only=False).astype(np.int64)
        val = at.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
        for key, sl in _groups(at).items():
            out[key] = (ts[sl], val[sl])
    return out


def _in_view(coarse: tuple[np.ndarray, np.ndarray] | None, lo: int, hi: int) -> int | None:
    """At most how many samples a track has in [lo, hi): those of its coarsest buckets overlapping it."""
    if coarse is None:
        return None
    buckets, counts = coarse
    i0, i1 = np.searchsorted(buckets, [lo >> COARSE_LEVEL, ((hi - 1) >> COARSE_LEVEL) + 1])
    return int(counts[i0:i1].sum())


def windows(rd: Reader, run: str, views: Sequence[View], n: int) -> dict[str, dict[str, object]]:
    """Each view's track over its window in ``n`` equal buckets (``window``'s answer), from the
    stored curves when zoomed out, else from the exact samples (see the module doc)."""
    n = max(1, min(int(n), MAX_BUCKETS))
    few = EXACT_PER_BUCKET * n
    ranks = sorted({v.rank for v in views})
    small = _small_tracks(rd, run, ranks)
    out: dict[str, dict[str, object]] = {}
    for v in views:
        if v.samples <= SMALL_TRACK:
            ts, val = small.get(v.rank, {}).get(v.key, (np.empty(0, np.int64), np.empty(0)))
            out[v.key] = window(ts, val, v.lo, v.hi, n)
    big = [v for v in views if v.samples > SMALL_TRACK]
    level = level_for(min(v.hi - v.lo for v in big) / n) if big else None
    coarse = {k: c for r, (_, per_key) in _catalog(rd, run, ranks).items() for k, c in per_key.items()}
    exact: list[View] = []
    many: list[View] = []
    for v in big:
        bound = _in_view(coarse.get(v.key), v.lo, v.hi)
        (exact if level is None or bound is None or bound <= few else many).append(v)
    if many:
        sql = STORED_WINDOW_SQL.format(source=rd.source(run, sorted({v.rank for v in many}), "agg_counter_curve"))
        at = _arrow(rd, sql, _views_table(many, level), {"level": level})
        groups = _groups(at)
        cols = {
            c: at.column(c).to_numpy(zero_copy_only=False) for c in ("bucket", "before", "samples", "lo", "hi", "last")
        }
        for v in many:
            sl = groups.get(v.key, slice(0, 0))
            before = cols["before"][sl].astype(bool)
            if int(cols["samples"][sl].sum()) <= few:  # few in view after all: exactly
                exact.append(v)
                continue
            held = float(cols["last"][sl][0]) if before.any() else None
            inside = np.flatnonzero(~before) + sl.start
            out[v.key] = _bucketed(
                np.maximum(cols["bucket"][inside].astype(np.int64) << level, v.lo),
                cols["lo"][inside], cols["hi"][inside], cols["last"][inside], v.lo, v.hi, n, held,
            )  # fmt: skip
    got = _read_exact(rd, run, exact) if exact else {}
    for v in exact:
        ts, val = got.get(v.key, (np.empty(0, np.int64), np.empty(0)))
        out[v.key] = window(ts, val, v.lo, v.hi, n)
    return {v.key: out[v.key] for v in views}


def _bucketed(
    start: np.ndarray, lo: np.ndarray, hi: np.ndarray, last: np.ndarray, a: int, b: int, n: int, held: float | None
) -> dict[str, object]:
    """Stored buckets (their starts in the window, ascending; minima, maxima, last values) counted in
    ``n`` equal buckets of [a, b), each in the one where it starts."""
    if not len(start):
        return {"held": held, "t": [], "lo": [], "hi": [], "last": []}
    width = max(1.0, (b - a) / n)
    k = np.minimum(((start - a) / width).astype(np.int64), n - 1)
    return _reduced(k, width, lo.astype(np.float64), hi.astype(np.float64), last.astype(np.float64), held)


def _reduced(
    k: np.ndarray, width: float, lo: np.ndarray, hi: np.ndarray, last: np.ndarray, held: float | None
) -> dict[str, object]:
    """Rows in view-bucket order ``k`` (ascending) reduced per view bucket."""
    cuts = np.r_[0, np.flatnonzero(np.diff(k)) + 1]
    last_idx = np.r_[cuts[1:], len(k)] - 1
    return {
        "held": held,
        "t": (k[cuts] * width).round().tolist(),
        "lo": np.minimum.reduceat(lo, cuts).tolist(),
        "hi": np.maximum.reduceat(hi, cuts).tolist(),
        "last": last[last_idx].tolist(),
    }


def window(ts: np.ndarray, values: np.ndarray, lo: int, hi: int, n: int) -> dict[str, object]:
    """Samples (time order) over [lo, hi) in ``n`` equal buckets: per bucket with samples its start
    (ns after ``lo``), minimum, maximum and last value; ``held``: the last value before ``lo``."""
    n = max(1, min(int(n), MAX_BUCKETS))
    i0, i1 = np.searchsorted(ts, [lo, hi], side="left")
    held = None if i0 == 0 else float(values[i0 - 1])
    ts, v = ts[i0:i1], values[i0:i1]
    if not len(ts):
        return {"held": held, "t": [], "lo": [], "hi": [], "last": []}
    width = max(1.0, (hi - lo) / n)
    k = np.minimum(((ts - lo) / width).astype(np.int64), n - 1)
    return _reduced(k, width, v, v, v, held)
