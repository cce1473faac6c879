"""SQL over the store: the SELECT of a fact table over its Parquet files, the statement check of
`analyze query`, and query results as exact DataFrames."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import schema
from ..errors import QueryError
from .layout import is_run_file

if TYPE_CHECKING:  # pandas costs 0.4 s to import: only the query paths load it
    import duckdb
    import pandas as pd
    import pyarrow as pa


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def fact_paths(root: str, fact_files: pa.Table) -> dict[str, list[str]]:
    """The absolute paths of the files of some ``fact_files`` rows, per table, each once: an
    aggregate's run-level file (``layout.is_run_file``) is listed by every collection it holds.
    ``root``: the store folder."""
    out: dict[str, dict[str, None]] = {}
    base = str(root).rstrip(os.sep) + os.sep  # joined as text: a Path per file cost ~10 µs x thousands of files
    for table, path in zip(fact_files["table_name"].to_pylist(), fact_files["path"].to_pylist()):
        out.setdefault(table, {})[base + os.path.normpath(path)] = None
    return {t: list(p) for t, p in out.items()}


def usable_times_sql(table: str) -> str | None:
    """The condition a row of a fact table meets when its times can be placed on a clock and added,
    the rule ``units.time_problems`` applies at ingest: every ``*_ns`` column NULL or in
    [0, schema.MAX_TIME_NS), and a step that ends after it starts. (A time may be NULL: an
    operator of an export that gives no timestamps.) None: the table has no time column, or is an
    aggregate (computed from usable rows; a difference such as Preparing may be negative)."""
    if table in schema.AGGREGATES:
        return None
    cols = [c.name for c in schema.FACTS[table].columns if c.name.endswith("_ns")]
    if not cols:
        return None
    conds = [f'("{c}" IS NULL OR ("{c}" >= 0 AND "{c}" < {schema.MAX_TIME_NS}))' for c in cols]
    if "start_ns" in cols and "end_ns" in cols:
        conds.append('("start_ns" IS NULL OR "end_ns" IS NULL OR "end_ns" >= "start_ns")')
    return " AND ".join(conds)


@functools.lru_cache(maxsize=4096)
def _file_columns(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    """The column names of a Parquet file, from its footer (cached per version of the file)."""
    import pyarrow.parquet as pq

    return frozenset(pq.read_schema(path).names)


def absent_columns(table: str, paths: Sequence[str]) -> set[str]:
    """The columns of ``table`` that none of the files holds: files written before the column was
    added to the schema (any column: a store outlives the version that wrote it). A file's footer
    is read until the files hold them all (the first, in a store written since). A column some of
    the files hold reads NULL from the others (``union_by_name``)."""
    missing = set(schema.FACTS[table].column_names)
    for p in paths:
        st = os.stat(p)
        missing -= _file_columns(p, st.st_mtime_ns, st.st_size)
        if not missing:
            break
    return missing


def _column_sql(c: schema.Column, absent: set[str]) -> str:
    source = (c.derive or "NULL") if c.name in absent else f'"{c.name}"'
    return f'CAST({source} AS {c.type}) AS "{c.name}"'


def run_file_ranks_sql(paths: Sequence[str], ranks: Sequence[int] | None) -> str | None:
    """The condition keeping the rows of ``ranks`` when ``paths`` (chosen for these ranks) hold an
    aggregate's run-level file (``layout.is_run_file``: every rank of its run); else None."""
    if ranks is None or not any(is_run_file(p) for p in paths):
        return None
    return f'"rank" IN ({", ".join(str(int(r)) for r in ranks) or "NULL"})'


def fact_select_sql(
    table: str, paths: Sequence[str], usable_only: bool = False, ranks: Sequence[int] | None = None
) -> str:
    """SELECT over the given Parquet files with the table's columns in schema order; with
    ``usable_only``, only the rows whose times are usable (``usable_times_sql``). A column none
    of the files holds (``absent_columns``: files written before it existed) is computed from the
    others by its ``derive`` SQL, else NULL. ``ranks``: the ranks the files were chosen for; an
    aggregate's run-level file among them (``layout.is_run_file``) holds every rank of its run, of
    which only these rows are read (None: every rank's)."""
    if not paths:
        return schema.empty_select_sql(table)
    t = schema.FACTS[table]
    absent = absent_columns(table, paths)
    cols = ", ".join(_column_sql(c, absent) for c in t.columns)
    # run / rank come from the files, not from the folder names (a run name is slugged there)
    source = f"read_parquet({_sql_list(paths)}, union_by_name=true, hive_partitioning=false)"
    cond = run_file_ranks_sql(paths, ranks)
    if cond:  # the run-level file is sorted by rank: its row groups of other ranks are skipped
        source = f"(SELECT * FROM {source} WHERE {cond})"
    if table in schema.AGGREGATES:
        # an aggregate gains columns as the ingest learns to keep more: files an older version wrote
        # read NULL there (until their collection is read again) instead of failing the whole view
        source = f"({schema.empty_select_sql(table)} UNION ALL BY NAME SELECT * FROM {source})"
    sql = f"SELECT {cols} FROM {source}"
    cond = usable_times_sql(table) if usable_only else None
    return f"SELECT * FROM ({sql}) WHERE {cond}" if cond else sql


def exact_frame(rel: duckdb.DuckDBPyRelation | None) -> pd.DataFrame:
    """A query result as a DataFrame without rounding: DuckDB's HUGEINT (what sum() of BIGINT
    ns returns) would become float64; such columns come as int64 when every value fits, else as
    exact Python ints."""
    import pandas as pd

    if rel is None:  # a statement without a result
        return pd.DataFrame()
    huge = {c for c, t in zip(rel.columns, rel.types) if str(t) in ("HUGEINT", "UHUGEINT")}
    if not huge:
        return rel.df()

    def q(c: str) -> str:
        return '"' + c.replace('"', '""') + '"'

    exprs = ", ".join(f"CAST({q(c)} AS VARCHAR) AS {q(c)}" if c in huge else q(c) for c in rel.columns)
    df = rel.project(exprs).df()
    for c in huge:
        values = [None if v is None else int(v) for v in df[c]]
        fits = all(v is not None and -(2**63) <= v < 2**63 for v in values)
        df[c] = pd.Series(values, dtype="int64" if fits else object, index=df.index)
    return df


def check_read_only(sql: str) -> None:
    """Refuse anything but one statement DuckDB's parser calls SELECT or EXPLAIN. This is the
    friendly first word; what holds a query in is the lock-down of ``store.query`` (an EXPLAIN
    ANALYZE runs its statement, which the lock-down refuses)."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from exc
    if not statements:
        raise QueryError("empty query")
    allowed = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
    for st in statements:
        if st.type not in allowed:
            raise QueryError(f"only read-only SELECT queries are allowed (got {st.type.name})")
    if len(statements) > 1:
        raise QueryError(f"one statement at a time (got {len(statements)})")
