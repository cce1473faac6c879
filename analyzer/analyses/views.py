"""The analyses as SQL tables: ``analyze query "SELECT * FROM analysis.step_breakdown"``.

Each analysis of ``ANALYSES`` is a table of the ``analysis`` schema in `analyze query`; a query computes
only the analyses it names, for the ``--run`` given or for every run of the store (the ``run``
column says which), with the same functions, columns and units as ``analyze report --json``.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pyarrow as pa

from ..errors import QueryError
from ..format import json_ready
from ..store import DEFAULT_LIMITS, Limits, QueryResult, Store, check_read_only, execute, resolve_run, run_names
from . import ANALYSES

SCHEMA = "analysis"


_STRING = re.compile(r"'(?:[^']|'')*'")
_REF = re.compile(rf'\b{SCHEMA}\s*\.\s*"?([A-Za-z_][A-Za-z0-9_]*)"?', re.IGNORECASE)


def referenced(sql: str) -> list[str]:
    """The analysis tables a query names (``analysis.<name>``), in order; an unknown name is an error."""
    names: list[str] = []
    for m in _REF.finditer(_STRING.sub("''", sql)):  # not inside string literals
        name = m.group(1).lower()
        if name not in ANALYSES:
            raise QueryError(
                f"no analysis table {SCHEMA}.{name}; there are: " + ", ".join(f"{SCHEMA}.{n}" for n in ANALYSES)
            )
        if name not in names:
            names.append(name)
    return names


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """A frame as an Arrow table; an object column Arrow cannot take as it is (dicts keyed by rank,
    mixed values) goes as plain JSON data (string keys), or failing that as JSON text."""
    cols = {}
    for c in df.columns:
        values = df[c]
        try:
            cols[str(c)] = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            plain = [json_ready(v) for v in values]
            try:
                cols[str(c)] = pa.array(plain)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                cols[str(c)] = pa.array([None if v is None else json.dumps(v, default=str) for v in plain], pa.string())
    return pa.table(cols) if cols else pa.table({"run": pa.array([], pa.string())})


def analysis_tables(store: Store, sql: str, run: str | None = None) -> dict[str, pa.Table]:
    """``{"analysis.<name>": table}`` for every analysis the query names, over ``run`` or every run
    (a ``run`` column first)."""
    names = referenced(sql)
    if not names:
        return {}
    runs = [run] if run is not None else sorted(run_names(store))
    out: dict[str, pa.Table] = {}
    for name in names:
        fn = ANALYSES[name].compute
        parts = []
        for r in runs:
            df = fn(store, r)
            parts.append(
                df.drop(columns=["run"], errors="ignore").assign(run=r)[["run", *[c for c in df.columns if c != "run"]]]
            )
        out[f"{SCHEMA}.{name}"] = to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"run": []}))
    return out


def query(store: Store, sql: str, run: str | None = None, limits: Limits = DEFAULT_LIMITS) -> QueryResult:
    """`analyze query` (and any other front end taking users' SQL): one read-only statement over the
    fact tables (of ``run`` only, when given: an unknown run is an error, not an empty result) and the
    ``analysis.<name>`` tables it names, computed first, then run under the store's lock-down
    (``analyzer.store.query``) and ``limits``."""
    check_read_only(sql)  # before any analysis is computed for it
    store.require()
    if run is not None:
        resolve_run(store, run)
    return execute(store, sql, run=run, tables=analysis_tables(store, sql, run), limits=limits)
