"""The timeline's counter tracks: per rank, the memory allocators' totals (``memory_samples``:
allocated bytes of PTA / GE / APP / Kineto's allocator, not the driver modules) and the producer's
counter events (``counters``: NPU memory, HBM / LLC bandwidth, AI Core frequency, queue depths ...),
each drawn as a step line under its rank.

A track's samples are read once per rank and kept (``cache.per_rank``); a view asks for the tracks
of its ranks over its window, and gets per track at most ``n`` buckets (minimum, maximum, last
value) plus the value held when the window opens, so an answer is bounded whatever the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.errors import QueryError

from . import cache
from .reader import Reader

TOP_TRACKS_PER_RANK = 16  # the tracks a rank shows at first (``top``); the others on the user's demand
MAX_BUCKETS = 2000
DRIVER_SOURCES = ("npu_module_mem", "NPU_MODULE_MEM")  # per driver module, reserved only: the Memory page's

MEMORY_ROWS = f"""
SELECT rank, false AS memory,
       component || CASE WHEN coalesce(device, '') = '' THEN '' ELSE ' (' || device || ')' END AS label,
       'bytes' AS unit, ts_ns, allocated_bytes::DOUBLE AS value
FROM {{source}}
WHERE run = $run AND list_contains($ranks, rank) AND ts_ns IS NOT NULL AND allocated_bytes IS NOT NULL
  AND coalesce(source, '') NOT IN {DRIVER_SOURCES}
"""
COUNTER_ROWS = """
SELECT rank, coalesce(process, '') ILIKE '%mem%' AS memory,
       CASE WHEN coalesce(process, '') = '' OR name LIKE process || '%' THEN name ELSE process || ' · ' || name END
         AS label,
       coalesce(series, '') AS unit, ts_ns, value
FROM {source}
WHERE run = $run AND list_contains($ranks, rank) AND ts_ns IS NOT NULL AND value IS NOT NULL
"""
SOURCES = ((MEMORY_ROWS, "memory_samples"), (COUNTER_ROWS, "counters"))
SAMPLES_SQL = "SELECT rank, label, unit, ts_ns, value FROM ({rows}) ORDER BY rank, label, unit, ts_ns"
LIST_SQL = """
SELECT rank, label, unit, bool_or(memory) AS memory, min(value) AS min, max(value) AS max, count(*) AS n,
       min(ts_ns) AS first, max(ts_ns) AS last
FROM ({rows}) GROUP BY rank, label, unit
"""


@dataclass(frozen=True)
class Track:
    """One counter of one rank: its samples in time order."""

    key: str  # "{rank}.c{k}": the k-th track of the rank
    rank: int
    label: str  # names from the trace: text
    unit: str  # "bytes" for memory, else the producer's series name (MHz, KB, Read(MB/s) ...)
    ts: np.ndarray  # int64 ns, the rank's own clock
    values: np.ndarray  # float64


def _codes(at: pa.Table, column: str) -> tuple[np.ndarray, list[str]]:
    """A text column as integer codes and the texts they stand for (Arrow's dictionary encoding:
    comparing codes, not Python strings, is what splits the samples into tracks)."""
    if column not in at.column_names:
        return np.zeros(at.num_rows, dtype=np.int32), ["bytes"]
    enc = pc.fill_null(at.column(column), "None").combine_chunks().dictionary_encode()
    return enc.indices.to_numpy(zero_copy_only=False), [str(x) for x in enc.dictionary.to_pylist()]


def _split(rank: np.ndarray, label: np.ndarray, unit: np.ndarray) -> dict[int, list[tuple[int, int, slice]]]:
    """Per rank, (label code, unit code, rows) of each run of equal (rank, label, unit)."""
    out: dict[int, list[tuple[int, int, slice]]] = {}
    if not len(rank):
        return out
    change = np.ones(len(rank), dtype=bool)
    change[1:] = (rank[1:] != rank[:-1]) | (label[1:] != label[:-1]) | (unit[1:] != unit[:-1])
    starts = np.flatnonzero(change)
    ends = np.r_[starts[1:], len(rank)]
    for a, b in zip(starts, ends):
        out.setdefault(int(rank[a]), []).append((int(label[a]), int(unit[a]), slice(int(a), int(b))))
    return out


def catalog(rd: Reader, run: str, ranks: Sequence[int]) -> dict[int, list[dict[str, object]]]:
    """Per rank, the counter tracks the timeline lays out (key, rank, label, unit, value range,
    samples, first and last sample; from aggregates, no sample is kept): the allocators' memory
    first, largest peak first; then the counters of memory processes, then the others, by name.
    Every track is listed; the first ``TOP_TRACKS_PER_RANK`` of a rank are its ``top`` ones (shown
    at first), the rest are there for the user to open (a job can record hundreds of counters)."""

    def load(missing: list[int]) -> dict[int, list[dict[str, object]]]:
        found: dict[int, list[dict[str, object]]] = {r: [] for r in missing}
        for rows, table in SOURCES:
            if not rd.has_files(run, missing, table):
                continue
            sql = LIST_SQL.format(rows=rows.format(source=rd.source(run, missing, table)))
            df = _df(rd.catalog(), sql, {"run": run, "ranks": missing})
            order = ["rank", "max", "label"] if table == "memory_samples" else ["rank", "memory", "label", "unit"]
            asc = [True, False, True] if table == "memory_samples" else [True, False, True, True]
            for row in df.sort_values(order, ascending=asc, kind="stable").to_dict("records"):
                r = int(row["rank"])
                found[r].append(
                    {
                        "key": f"{r}.c{len(found[r])}",
                        "rank": r,
                        "label": str(row["label"]),
                        "unit": str(row["unit"]),
                        "min": float(row["min"]),
                        "max": float(row["max"]),
                        "n": int(row["n"]),
                        "first": int(row["first"]),
                        "last": int(row["last"]),
                        "top": len(found[r]) < TOP_TRACKS_PER_RANK,
                    }
                )
        return found

    return cache.per_rank(rd, run, "counter_catalog", list(ranks), (), load)


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object]) -> pd.DataFrame:
    try:
        return con.execute(sql, params).df()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc


def tracks(rd: Reader, run: str, ranks: Sequence[int]) -> dict[int, list[Track]]:
    """The samples of the tracks ``catalog`` lists for ``ranks`` (read when a view first asks for
    them, then kept per rank)."""
    listed = catalog(rd, run, ranks)

    def load(missing: list[int]) -> dict[int, list[Track]]:
        samples: dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]] = {}
        for rows, table in SOURCES:
            if not rd.has_files(run, missing, table):
                continue
            sql = SAMPLES_SQL.format(rows=rows.format(source=rd.source(run, missing, table)))
            try:
                at = rd.catalog().sql(sql, params={"run": run, "ranks": missing}).to_arrow_table()
            except duckdb.Error as exc:
                raise QueryError(str(exc).strip().splitlines()[0]) from exc
            cols = {c: at.column(c).to_numpy(zero_copy_only=False) for c in ("rank", "ts_ns", "value")}
            label_codes, labels = _codes(at, "label")
            unit_codes, units = _codes(at, "unit")
            for r, parts in _split(cols["rank"], label_codes, unit_codes).items():
                for li, ui, sl in parts:
                    samples[(r, labels[li], units[ui])] = (
                        cols["ts_ns"][sl].astype(np.int64),
                        cols["value"][sl].astype(np.float64),
                    )
        out: dict[int, list[Track]] = {}
        for r in missing:
            out[r] = []
            for c in listed.get(r) or []:
                ts, v = samples.get((r, str(c["label"]), str(c["unit"])), (np.empty(0, np.int64), np.empty(0)))
                out[r].append(Track(str(c["key"]), r, str(c["label"]), str(c["unit"]), ts, v))
        return out

    return cache.per_rank(rd, run, "counter_tracks", list(ranks), (), load)


def window(track: Track, lo: int, hi: int, n: int) -> dict[str, list[float]]:
    """The track over [lo, hi) of its rank's clock in ``n`` equal buckets: per bucket with samples its
    start (ns after ``lo``), minimum, maximum and last value; ``held``: the value before ``lo``."""
    n = max(1, min(int(n), MAX_BUCKETS))
    i0, i1 = np.searchsorted(track.ts, [lo, hi], side="left")
    held = None if i0 == 0 else float(track.values[i0 - 1])
    ts, v = track.ts[i0:i1], track.values[i0:i1]
    if not len(ts):
        return {"held": held, "t": [], "lo": [], "hi": [], "last": []}
    width = max(1.0, (hi - lo) / n)
    b = np.minimum(((ts - lo) / width).astype(np.int64), n - 1)
    cuts = np.r_[0, np.flatnonzero(np.diff(b)) + 1]
    last_idx = np.r_[cuts[1:], len(b)] - 1
    return {
        "held": held,
        "t": (b[cuts] * width).round().tolist(),
        "lo": np.minimum.reduceat(v, cuts).tolist(),
        "hi": np.maximum.reduceat(v, cuts).tolist(),
        "last": v[last_idx].tolist(),
    }
