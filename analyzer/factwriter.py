"""Writes one collection's facts to Parquet, conforming every batch to the schema.

Readers hand over Arrow tables (or dicts of columns) holding only the columns they know; the
writer adds ``run`` / ``rank`` / ``collection_id``, fills missing columns with nulls, casts to the
declared types and appends to one Parquet file per table. Files get fresh names: they are not part
of the store until the ingest commits them to the catalog.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import schema
from .store import FACTS_DIR, slug

_KEY = ("run", "rank", "collection_id")


def conform(table: str, data: pa.Table | pa.RecordBatch | Mapping[str, Any], key: Mapping[str, Any]) -> pa.Table:
    """Return ``data`` as a table with exactly the schema of ``table`` (key columns filled in)."""
    sch = schema.arrow_schema(table)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    elif not isinstance(data, pa.Table):
        cols = {}
        for name, values in data.items():
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                cols[name] = values
            else:
                cols[name] = pa.array(values, type=sch.field(name).type if name in sch.names else None)
        data = pa.table(cols)
    unknown = set(data.column_names) - set(sch.names)
    if unknown:
        raise ValueError(f"columns {sorted(unknown)} are not in the schema of {table}")
    n = data.num_rows
    arrays = []
    for field in sch:
        if field.name in _KEY:
            arrays.append(pa.repeat(pa.scalar(key[field.name], type=field.type), n))
        elif field.name in data.column_names:
            col = data.column(field.name)
            if col.type != field.type:
                col = pc.cast(col, field.type)
            arrays.append(col)
        else:
            arrays.append(pa.nulls(n, type=field.type))
    return pa.Table.from_arrays(arrays, schema=sch)


ROW_GROUP_ROWS = 64 * 1024


_STATS = {"run", "rank", "collection_id", "step", "ts_ns", "start_ns", "end_ns", "alloc_ns", "event_id", "kernel_id"}


def _statistics_columns(table: str) -> list[str]:
    """Min/max statistics where queries filter (run, rank, collection, step, time window, ids);
    computing them for every text column costs time and prunes nothing."""
    return [c.name for c in schema.TABLES[table].columns if c.name in _STATS]


def _delta_columns(table: str) -> dict[str, str]:
    """Integer columns are delta-encoded (times, ids and sizes move in small steps): less to
    compress, smaller files, and DuckDB reads them natively."""
    return {c.name: "DELTA_BINARY_PACKED" for c in schema.TABLES[table].columns if c.type in ("BIGINT", "INTEGER")}


def _dictionary_columns(table: str) -> list[str]:
    """Columns worth dictionary encoding: text with repeats (names, ids, categories). Not numbers
    (times, sizes: mostly distinct) nor JSON documents — trying costs time and saves nothing."""
    return [c.name for c in schema.TABLES[table].columns if c.type == "VARCHAR"]


_IN_FLIGHT = 2  # row groups handed to the background thread and not yet written


class FactWriter:
    """Appends facts of one collection to per-table Parquet files under the store.

    ``background``: row groups are encoded and written by a thread of their own (Parquet encoding
    and compression release the GIL), so a reader with a spare core decodes the next block
    meanwhile; at most ``_IN_FLIGHT`` row groups wait for it, so memory stays bounded.
    """

    def __init__(self, store_path: str | Path, run: str, rank: int, collection_id: str, background: bool = False):
        self.store_path = Path(store_path)
        self.run = run
        self.rank = rank
        self.collection_id = collection_id
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._pending: dict[str, list[pa.Table]] = {}
        self._pending_rows: dict[str, int] = {}
        self._paths: dict[str, Path] = {}
        self.rows: dict[str, int] = {}
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self.steps: set[int] = set()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="parquet") if background else None
        self._in_flight: deque[Future[None]] = deque()

    def _new_path(self, table: str) -> Path:
        return (
            self.store_path
            / FACTS_DIR
            / table
            / f"run={slug(self.run)}"
            / f"rank={self.rank}"
            / f"{self.collection_id}-{uuid.uuid4().hex[:10]}.parquet"
        )

    def write(self, table: str, data: pa.Table | pa.RecordBatch | Mapping[str, Any]) -> int:
        """Append rows to ``table``; returns the number of rows written. Rows are gathered into
        row groups of ``ROW_GROUP_ROWS`` before they are encoded (fewer, fuller row groups: less
        encoding work, better compression), so at most one row group per table is held."""
        key = {"run": self.run, "rank": self.rank, "collection_id": self.collection_id}
        tbl = conform(table, data, key)
        if tbl.num_rows == 0:
            return 0
        self._track(table, tbl)
        pending = self._pending.setdefault(table, [])
        pending.append(tbl)
        self._pending_rows[table] = self._pending_rows.get(table, 0) + tbl.num_rows
        if self._pending_rows[table] >= ROW_GROUP_ROWS:
            self._flush(table)
        self.rows[table] = self.rows.get(table, 0) + tbl.num_rows
        return tbl.num_rows

    def _flush(self, table: str) -> None:
        pending = self._pending.pop(table, None)
        self._pending_rows.pop(table, None)
        if not pending:
            return
        tbl = pending[0] if len(pending) == 1 else pa.concat_tables(pending)
        if self._thread is None:
            self._write(table, tbl)
            return
        while len(self._in_flight) >= _IN_FLIGHT:
            self._in_flight.popleft().result()
        self._in_flight.append(self._thread.submit(self._write, table, tbl))

    def _drain(self) -> None:
        while self._in_flight:
            self._in_flight.popleft().result()

    def _write(self, table: str, tbl: pa.Table) -> None:
        w = self._writers.get(table)
        if w is None:
            path = self._new_path(table)
            path.parent.mkdir(parents=True, exist_ok=True)
            w = pq.ParquetWriter(
                str(path),
                tbl.schema,
                compression="zstd",
                compression_level=1,
                use_dictionary=_dictionary_columns(table),
                write_statistics=_statistics_columns(table),
                column_encoding=_delta_columns(table),
            )
            self._writers[table] = w
            self._paths[table] = path
        w.write_table(tbl, row_group_size=ROW_GROUP_ROWS)

    def _track(self, table: str, tbl: pa.Table) -> None:
        names = tbl.column_names
        if "ts_ns" in names:
            ts = tbl.column("ts_ns")
            lo = pc.min(ts).as_py()
            if lo is not None and table != "scalars":
                self.start_ns = lo if self.start_ns is None else min(self.start_ns, lo)
                end = pc.add(ts, pc.fill_null(tbl.column("dur_ns"), 0)) if "dur_ns" in names else ts
                hi = pc.max(end).as_py()
                self.end_ns = hi if self.end_ns is None else max(self.end_ns, hi)
        if table == "steps":
            self.steps.update(s for s in tbl.column("step").to_pylist() if s is not None)

    def tally(self) -> dict[str, Any]:
        """What this writer wrote, for a writer of the same collection to ``adopt`` (a part read by
        another process)."""
        return {"rows": dict(self.rows), "start_ns": self.start_ns, "end_ns": self.end_ns, "steps": set(self.steps)}

    def adopt(self, tally: dict[str, Any]) -> None:
        """Count what another writer of this collection wrote (``tally``) as written here."""
        for table, n in tally["rows"].items():
            self.rows[table] = self.rows.get(table, 0) + n
        for key, pick in (("start_ns", min), ("end_ns", max)):
            v = tally[key]
            if v is not None:
                cur = getattr(self, key)
                setattr(self, key, v if cur is None else pick(cur, v))
        self.steps |= tally["steps"]

    def has(self, table: str) -> bool:
        return self.rows.get(table, 0) > 0

    def close(self) -> list[dict[str, Any]]:
        """Close all files; return ``fact_files`` rows for the catalog."""
        for table in list(self._pending):
            self._flush(table)
        try:
            self._drain()
        finally:
            if self._thread is not None:
                self._thread.shutdown()
        for w in self._writers.values():
            w.close()
        self._writers.clear()
        out = []
        for table, path in self._paths.items():
            out.append(
                {
                    "run": self.run,
                    "collection_id": self.collection_id,
                    "rank": self.rank,
                    "table_name": table,
                    "path": str(path.relative_to(self.store_path)),
                    "rows": self.rows.get(table, 0),
                    "size_bytes": path.stat().st_size,
                }
            )
        return out

    def abort(self) -> None:
        self._pending.clear()
        self._pending_rows.clear()
        if self._thread is not None:
            for fut in self._in_flight:
                fut.cancel()
            self._thread.shutdown(wait=True)
            self._in_flight.clear()
        for w in self._writers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
        self._writers.clear()
        for p in self._paths.values():
            p.unlink(missing_ok=True)
        self._paths.clear()

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())
