"""Writes one collection's facts to Parquet, conforming every batch to the schema.

Readers hand over Arrow tables (or dicts of columns) holding only the columns they know; the
writer adds ``run`` / ``rank`` / ``collection_id``, fills missing columns with nulls, casts to the
declared types and appends to one Parquet file per table. Files get fresh names: they are not part
of the store until the ingest commits them to the catalog.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import schema
from .format import safe_text
from .messages import problem
from .store import FACTS_DIR, slug
from .units import INT64_MAX, INT64_MIN, time_problems

_KEY = ("run", "rank", "collection_id")


def conform(
    table: str,
    data: pa.Table | pa.RecordBatch | Mapping[str, Any] | list[Mapping[str, Any]],
    key: Mapping[str, Any],
    notes: list[str] | None = None,
) -> pa.Table:
    """Return ``data`` as a table with exactly the schema of ``table`` (key columns filled in).

    A value its column's type cannot hold (an integer beyond 64 bits, inf or NaN for an integer,
    text that is not UTF-8) does not fail the batch when ``notes`` is given: in a ``*_ns`` column
    it saturates to INT64_MAX / INT64_MIN (``units.time_problems`` then keeps the row out and
    names it), elsewhere it is stored as empty; each such column gets a sentence in ``notes``."""
    sch = schema.arrow_schema(table)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    elif isinstance(data, list):  # rows: columns typed by the schema, not guessed from the values
        names = list(dict.fromkeys(k for row in data for k in row))
        data = {k: [row.get(k) for row in data] for k in names}
    if not isinstance(data, pa.Table):
        cols = {}
        for name, values in data.items():
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                cols[name] = values
            else:
                cols[name] = _array(
                    values, sch.field(name).type if name in sch.names else None, f"{table}.{name}", notes
                )
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
                col = _cast(col, field.type, f"{table}.{field.name}", notes)
            arrays.append(col)
        elif (table, field.name) in DERIVED:  # computed from the other columns the reader gave
            arrays.append(DERIVED[table, field.name](data))
        else:
            arrays.append(pa.nulls(n, type=field.type))
    return pa.Table.from_arrays(arrays, schema=sch)


def slice_links(data: pa.Table) -> pa.Array:
    """``slices.link``: the link id in each slice's JSON args (``schema.LINK_KEYS``, the first
    found, a number or a number as text), as ``schema.LINK_FROM_ARGS_SQL`` reads it from stores
    written before; vectorised (Arrow's regular expressions, only on the args that name one)."""
    n = data.num_rows
    if "args" not in data.column_names or n == 0:
        return pa.nulls(n, type=pa.int64())
    args = data.column("args").combine_chunks()
    if not pa.types.is_string(args.type) and not pa.types.is_large_string(args.type):
        args = args.cast(pa.string())
    out = pa.nulls(n, type=pa.int64())
    # the text of every args cell lies in one buffer: a key absent from all of it is in no cell
    # (one memchr-speed search of the block instead of a substring match per cell and key: the
    # args of CPU traces name none)
    buffer = args.buffers()[2]
    whole = b"" if buffer is None else buffer.to_pybytes()
    for key in reversed(schema.LINK_KEYS):  # the first key wins: filled last
        if f'"{key}"'.encode() not in whole:
            continue
        named = pc.fill_null(pc.match_substring(args, f'"{key}"'), False)
        if not pc.any(named).as_py():
            continue
        found = pc.extract_regex(args.filter(named), rf'"{key}"\s*:\s*"?(?P<v>-?\d{{1,18}})"?\s*[,}}]')
        text = pc.if_else(pc.is_valid(found), pc.struct_field(found, "v"), pa.scalar(None, pa.string()))
        value = pc.coalesce(pc.cast(text, pa.int64()), out.filter(named))
        out = pc.replace_with_mask(out, named, value)
    return out


# columns the writer computes when a reader does not give them
DERIVED: dict[tuple[str, str], Callable[[pa.Table], pa.Array]] = {("slices", "link"): slice_links}


_ARRAY_ERRORS = (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, UnicodeError)


def _array(values: Any, typ: pa.DataType | None, name: str, notes: list[str] | None) -> pa.Array:
    """``pa.array(values, typ)``; values it refuses are made storable (``conform``) when ``notes`` is given."""
    try:
        return pa.array(values, type=typ)
    except _ARRAY_ERRORS:
        if notes is None or typ is None:
            raise
    if isinstance(values, np.ndarray):
        return _cast(pa.array(values), typ, name, notes)
    if pa.types.is_integer(typ):
        fixed, bad = _ints(list(values), name.endswith("_ns"))
    elif pa.types.is_floating(typ):
        fixed, bad = _floats(list(values))
    elif pa.types.is_list(typ) and pa.types.is_integer(typ.value_type):
        fixed, bad = [], []
        for v in values:
            items, wrong = _ints(list(v), False) if isinstance(v, (list, tuple)) else (None, [v])
            fixed.append(items)
            bad += [x for x in wrong if x is not None]
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
        fixed, bad = [_text(v) for v in values], []
        if any(v is not w for v, w in zip(values, fixed)):
            notes.append(problem("not_text", column=name))
    else:
        raise ValueError(f"column {name}: values that are not {typ}")
    _note(notes, name, bad)
    return pa.array(fixed, type=typ)


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return None if v is None else safe_text(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _ints(values: list[Any], saturate: bool) -> tuple[list[int | None], list[Any]]:
    out: list[int | None] = []
    bad: list[Any] = []
    for v in values:
        x = _as_int(v)
        if x is None:
            out.append(None)
            if v is not None:
                bad.append(v)
        elif isinstance(x, int) and INT64_MIN < x < INT64_MAX:
            out.append(x)
        elif saturate:  # a time out of range: kept for time_problems to name
            out.append(INT64_MAX if x > 0 else INT64_MIN)
        else:
            out.append(None)
            bad.append(v)
    return out, bad


def _as_int(v: Any) -> int | float | None:
    """An integer cell as an int (inf as itself, to saturate); None when it is no number."""
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return None if math.isnan(v) else v if math.isinf(v) else round(v)
    if isinstance(v, str):
        try:
            return _as_int(float(v)) if any(c in v for c in ".eEinfINF") else int(v)
        except ValueError:
            return None
    return None


def _floats(values: list[Any]) -> tuple[list[float | None], list[Any]]:
    out: list[float | None] = []
    bad: list[Any] = []
    for v in values:
        try:
            out.append(None if v is None else float(v))
        except (TypeError, ValueError, OverflowError):
            out.append(None)
            bad.append(v)
    return out, bad


def _cast(col: pa.Array | pa.ChunkedArray, typ: pa.DataType, name: str, notes: list[str] | None) -> pa.Array:
    """``pc.cast``; a float column that does not fit an integer one is made storable (``conform``)."""
    try:
        return pc.cast(col, typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if notes is None or not (pa.types.is_integer(typ) and pa.types.is_floating(col.type)):
            raise
    x = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)  # nulls as NaN
    null = pc.is_null(col).to_numpy(zero_copy_only=False)
    fits = np.abs(x) < float(INT64_MAX)  # False for NaN / inf
    out = np.zeros(len(x), dtype=np.int64)
    out[fits] = np.rint(x[fits]).astype(np.int64)
    unfit = ~fits & ~null
    if name.endswith("_ns"):  # saturated: time_problems names the row
        out[unfit & (x > 0)] = INT64_MAX
        out[unfit & ~(x > 0)] = INT64_MIN
        mask = null
    else:
        mask = null | unfit
        _note(notes, name, x[unfit].tolist())
    return pc.cast(pa.array(out, mask=mask), typ)


def _note(notes: list[str], name: str, bad: list[Any]) -> None:
    if bad:
        notes.append(problem("not_numbers", column=name, n=len(bad), example=repr(bad[0])))


ROW_GROUP_ROWS = 64 * 1024


@dataclass(frozen=True)
class Origin:
    """Where each row of one write came from, for rows gathered across files and written after them
    (a reader's staged rows): ``file`` per row, an index its reader gives meaning to (the files it
    read, in order), and ``number`` per row, the row's number in that file (an event's, counted from
    1), or None. A problem with such rows is named on their file, by their number."""

    file: np.ndarray
    number: np.ndarray | None = None
    row: str = "event"


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


def parquet_writer(table: str, path: str | Path, arrow_schema: pa.Schema) -> pq.ParquetWriter:
    """A Parquet writer of ``table``'s rows as every fact file of the store is written: zstd, the
    dictionaries, statistics and delta encodings above."""
    return pq.ParquetWriter(
        str(path),
        arrow_schema,
        compression="zstd",
        compression_level=1,
        use_dictionary=_dictionary_columns(table),
        write_statistics=_statistics_columns(table),
        column_encoding=_delta_columns(table),
    )


_IN_FLIGHT = 2  # row groups handed to the background thread and not yet written


def _per_file(table: str, tbl: pa.Table, keep: pa.Array, origin: Origin) -> list[tuple[int | None, str]]:
    """The time problems of ``tbl``'s rows (those ``keep`` drops), a sentence per file of ``origin``."""
    out: list[tuple[int | None, str]] = []
    bad = ~pc.fill_null(keep, False).to_numpy(zero_copy_only=False)
    for f in np.unique(origin.file[bad]).tolist():
        rows = np.flatnonzero(origin.file == f)
        sub = tbl.take(pa.array(rows))
        numbers = origin.number[rows] if origin.number is not None else None
        _, notes = time_problems(table, sub, row=origin.row if numbers is not None else "row", numbers=numbers)
        out += [(int(f), n) for n in notes]
    return out


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
        # values that could not be stored as given (take_problems): (the file of the rows when the
        # write had an Origin, else None: the file being read; the sentence)
        self.problems: list[tuple[int | None, str]] = []
        self._offered: dict[tuple[str, object], int] = {}  # rows offered per (table, file), kept or not
        self.numbering: object = None  # the file whose rows are offered now (row numbers count per file)

    def _new_path(self, table: str) -> Path:
        return (
            self.store_path
            / FACTS_DIR
            / table
            / f"run={slug(self.run)}"
            / f"rank={self.rank}"
            / f"{self.collection_id}-{uuid.uuid4().hex[:10]}.parquet"
        )

    def write(
        self,
        table: str,
        data: pa.Table | pa.RecordBatch | Mapping[str, Any] | list[Mapping[str, Any]],
        origin: Origin | None = None,
    ) -> int:
        """Append rows to ``table``; returns the number of rows written. Rows are gathered into
        row groups of ``ROW_GROUP_ROWS`` before they are encoded (fewer, fuller row groups: less
        encoding work, better compression), so at most one row group per table is held.

        A row whose time cannot be true is kept out and named (``units.time_problems``): by its
        number among the rows the file being read offered to ``table`` (``numbering``), or, with
        an ``origin``, on its own file by its own number."""
        key = {"run": self.run, "rank": self.rank, "collection_id": self.collection_id}
        notes: list[str] = []
        tbl = conform(table, data, key, notes)
        counted = (table, self.numbering)
        # aggregates are computed from usable rows (``ingest.aggregate``): a difference may be negative
        aggregate = table in schema.AGGREGATES
        keep, bad_times = (None, []) if aggregate else time_problems(table, tbl, self._offered.get(counted, 0))
        self._offered[counted] = self._offered.get(counted, 0) + tbl.num_rows
        self.problems += [(None, n) for n in notes]
        if keep is not None:
            per_file = _per_file(table, tbl, keep, origin) if origin is not None else None
            self.problems += per_file if per_file is not None else [(None, n) for n in bad_times]
            tbl = tbl.filter(keep)
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
            w = parquet_writer(table, path, tbl.schema)
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

    def take_problems(self) -> list[tuple[int | None, str]]:
        """The sentences about values not stored as given since the last call (``write``), each with
        its rows' file when the write named one (``Origin``)."""
        out, self.problems = self.problems, []
        return out

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
