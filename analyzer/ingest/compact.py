"""The aggregates of a run in one file per table (a run-level file), made by the driver before its commit.

The workers write each collection's aggregates as files of their own (``aggregate.build``); a page
over a many-rank run reads an aggregate whole (the overview, the operator statistics) or for a few
ranks (the timeline's pyramid), and one file per (table, collection) costs DuckDB a footer, a scan
and the metadata it keeps per file: 256 files a query at 256 ranks. So before the one catalog
commit of an ingest, the driver merges every aggregate table the commit changes into one new file
of the run (``layout.RUN_FILE_PREFIX``, in the run's folder of the table): the rows of the
collections kept from the run file or files before, and those the workers just wrote, sorted by
rank (row groups of ``ROW_GROUP_ROWS``, with rank statistics: a query of a few ranks skips the
others'). Each collection keeps its own ``fact_files`` row (its rank and row count), pointing at
that file; ``sql.fact_select_sql`` reads only the rows of the ranks asked for. The commit replaces
the run's rows of the table (``Store.commit(run_tables=...)``), and the files no row lists any
more (the workers' per-collection files, the previous run file) are garbage collected after it: a
kill before the commit leaves the store as it was and the new file unreferenced.

A run of fewer than ``MIN_COLLECTIONS`` collections keeps its per-collection files (a few files
cost a query little, and the merge would cost a small ingest a large share of its time), unless it
has run files already; a store written before run files existed is read as it is (its
per-collection files) until an ingest changes the run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import schema
from ..factwriter import parquet_writer
from ..store.layout import FACTS_DIR, RUN_FILE_PREFIX, is_run_file, slug
from ..store.sql import fact_select_sql

# collections of a run from which its aggregates are merged: below, a query reads a few files, and the
# merge (a DuckDB pass and a Parquet file per table) cost a 2-rank ingest ~0.4 s of its ~2.6 s of CPU
MIN_COLLECTIONS = 8
# rows per row group of a run file: at 64 ranks a rank holds ~6 500 rows of the pyramid
# (``agg_lane_occupancy``), ~100 of the operator statistics: a group spans one to a few ranks
ROW_GROUP_ROWS = 8192
# rows of collections sorted at once (in order of rank): what the driver holds of a table
CHUNK_ROWS = 500_000
# after (rank, collection_id), the order of a table's rows as its per-collection files have them
# (the lanes' pyramid per lane and level, the curves per level: the row groups a query skips)
_ORDER = {
    "agg_lane_occupancy": ("pid", "tid", "level", "bucket"),
    "agg_lane_slices": ("pid", "tid", "ts_ns", "dur_ns DESC"),
    "agg_counter_curve": ("level", "label", "unit", "bucket"),
    "agg_scalar_curve": ("level", "name", "bucket"),
    "agg_memory_curve": ("component", "device", "start_ns"),
    "agg_step_breakdown": ("step",),
    "agg_steps": ("step", "source"),
    "agg_lane_list": ("pid", "tid"),
}


def run_files(
    store_path: str | Path,
    run: str,
    previous: Sequence[dict[str, Any]],
    replaced: Sequence[str],
    new: Sequence[dict[str, Any]],
) -> tuple[list[str], list[dict[str, Any]]]:
    """Write the run files of the aggregate tables an ingest's commit changes: ``previous``, the
    run's ``fact_files`` rows before it; ``replaced``, the collections whose rows it drops; ``new``,
    the rows it adds. Returns (the tables made anew, their ``fact_files`` rows: one per collection,
    each naming the table's new run file), for ``Store.commit(run_tables=...)``."""
    gone = set(replaced)
    tables: list[str] = []
    rows: list[dict[str, Any]] = []
    for t in schema.AGGREGATE_TABLES:
        before = [r for r in previous if r["table_name"] == t.name]
        kept = [r for r in before if r["collection_id"] not in gone]
        added = [r for r in new if r["table_name"] == t.name]
        changed = bool(added) or len(kept) < len(before)
        listed = kept + added
        if not changed or not listed:
            continue
        if len(listed) < MIN_COLLECTIONS and not any(is_run_file(r["path"]) for r in listed):
            continue
        tables.append(t.name)
        rows += _write(Path(store_path), run, t.name, listed, {r["collection_id"] for r in kept})
    return tables, rows


def _write(store: Path, run: str, table: str, listed: list[dict[str, Any]], kept: set[str]) -> list[dict[str, Any]]:
    """Write the run file of ``table`` holding the rows of the collections ``listed``; its rows.
    A run file read here gives the rows of the collections ``kept`` only (the others are replaced).
    The collections are taken in order of (rank, collection), ``CHUNK_ROWS`` rows or so at a time,
    each chunk sorted and appended: the driver holds a chunk, whatever the rank count."""
    import duckdb

    listed = sorted(listed, key=lambda r: (r["rank"], r["collection_id"]))
    rel = store / FACTS_DIR / table / f"run={slug(run)}" / f"{RUN_FILE_PREFIX}{uuid.uuid4().hex[:10]}.parquet"
    rel.parent.mkdir(parents=True, exist_ok=True)
    arrow_schema = schema.arrow_schema(table)
    order = ", ".join(("rank", "collection_id", *_ORDER.get(table, ())))
    con = duckdb.connect(":memory:")
    total = 0
    try:
        con.execute("SET enable_progress_bar = false")
        with contextlib.closing(parquet_writer(table, rel, arrow_schema)) as writer:
            for chunk in _chunks(listed):
                sql = f"SELECT * FROM ({_chunk_sql(store, table, chunk, kept)}) ORDER BY {order}"
                for batch in con.sql(sql).to_arrow_reader(ROW_GROUP_ROWS):
                    batch = batch.select(arrow_schema.names).cast(arrow_schema)
                    writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
                    total += batch.num_rows
    except BaseException:
        rel.unlink(missing_ok=True)
        raise
    finally:
        con.close()
    size = rel.stat().st_size
    path = str(rel.relative_to(store))
    # each collection's share of the file's bytes, by its rows (their sum is the file's size)
    out, given = [], 0
    for i, r in enumerate(listed):
        share = size - given if i == len(listed) - 1 else size * int(r["rows"]) // max(total, 1)
        given += share
        out.append({**r, "path": path, "size_bytes": share})
    return out


def _chunks(listed: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``listed`` (in order of rank) cut into runs of about ``CHUNK_ROWS`` rows, a rank never cut."""
    out: list[list[dict[str, Any]]] = []
    rows = 0
    for r in listed:
        if not out or (rows >= CHUNK_ROWS and r["rank"] != out[-1][-1]["rank"]):
            out.append([])
            rows = 0
        out[-1].append(r)
        rows += int(r["rows"])
    return out


def _chunk_sql(store: Path, table: str, chunk: list[dict[str, Any]], kept: set[str]) -> str:
    """The rows of the collections of ``chunk``: their own files whole, a run file's rows of them."""
    own = [str(store / r["path"]) for r in chunk if not is_run_file(r["path"])]
    parts = [fact_select_sql(table, own)] if own else []
    for p in sorted({r["path"] for r in chunk if is_run_file(r["path"])}):
        ids = [r["collection_id"] for r in chunk if r["path"] == p and r["collection_id"] in kept]
        ranks = sorted({int(r["rank"]) for r in chunk if r["path"] == p})
        where = "collection_id IN (" + ", ".join("'" + c.replace("'", "''") + "'" for c in ids) + ")"
        parts.append(f"SELECT * FROM ({fact_select_sql(table, [str(store / p)], ranks=ranks)}) WHERE {where}")
    return " UNION ALL BY NAME ".join(parts)
