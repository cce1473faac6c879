"""The analyses as SQL tables: ``analyze query "SELECT * FROM analysis.step_breakdown"``.

Each analysis of ``ANALYSES`` is a table of the ``analysis`` schema in `analyze query`; a query computes
only the analyses it names, for the ``--run`` given or for every run of the store (the ``run``
column says which), with the same functions, columns and units as ``analyze report --json``.

The comparisons of two runs (``COMPARISONS``: ``analysis.diff``, ``analysis.diff_operators``, ...) are
tables of the two runs named by ``base`` and ``new`` (`analyze query --base A --new B`); their
``base_run`` and ``new_run`` columns say which. A query that names one without both runs is an error
saying how to name them.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pyarrow as pa

from ..errors import QueryError
from ..format import json_ready
from ..store import (
    DEFAULT_LIMITS,
    Limits,
    QueryResult,
    Store,
    check_read_only,
    execute,
    resolve_ref,
    resolve_run,
    run_names,
)
from . import ANALYSES, COMPARISONS

SCHEMA = "analysis"


_STRING = re.compile(r"'(?:[^']|'')*'")
_REF = re.compile(rf'\b{SCHEMA}\s*\.\s*"?([A-Za-z_][A-Za-z0-9_]*)"?', re.IGNORECASE)


def referenced(sql: str) -> list[str]:
    """The analysis tables a query names (``analysis.<name>``), in order; an unknown name is an error."""
    names: list[str] = []
    for m in _REF.finditer(_STRING.sub("''", sql)):  # not inside string literals
        name = m.group(1).lower()
        if name not in ANALYSES and name not in COMPARISONS:
            there = ", ".join(f"{SCHEMA}.{n}" for n in (*ANALYSES, *COMPARISONS))
            raise QueryError(f"no analysis table {SCHEMA}.{name}; there are: {there}")
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


def _first(df: pd.DataFrame, cols: dict[str, str]) -> pd.DataFrame:
    """``df`` with the columns ``cols`` (name -> value) first."""
    rest = df.drop(columns=list(cols), errors="ignore")
    return rest.assign(**cols)[[*cols, *rest.columns]]


def analysis_tables(
    store: Store, sql: str, run: str | None = None, base: str | None = None, new: str | None = None
) -> dict[str, pa.Table]:
    """``{"analysis.<name>": table}`` for every analysis the query names: an analysis of one run over
    ``run`` or every run (a ``run`` column first), a comparison of ``base`` with ``new``."""
    names = referenced(sql)
    if not names:
        return {}
    runs = [run] if run is not None else sorted(run_names(store))
    out: dict[str, pa.Table] = {}
    for name in names:
        if name in COMPARISONS:
            if base is None or new is None:
                raise QueryError(
                    f"{SCHEMA}.{name} compares two runs: name them with --base NAME --new NAME "
                    "(a baseline as --base baseline:NAME)"
                )
            df = COMPARISONS[name].compute(store, base, new)
            out[f"{SCHEMA}.{name}"] = to_arrow(_first(df, {"base_run": base, "new_run": new}))
            continue
        fn = ANALYSES[name].compute
        parts = [_first(fn(store, r), {"run": r}) for r in runs]
        out[f"{SCHEMA}.{name}"] = to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"run": []}))
    return out


def query(
    store: Store,
    sql: str,
    run: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    base: str | None = None,
    new: str | None = None,
) -> QueryResult:
    """`analyze query` (and any other front end taking users' SQL): one read-only statement over the
    fact tables (of ``run`` only, when given: an unknown run is an error, not an empty result) and the
    ``analysis.<name>`` tables it names (comparisons of ``base`` with ``new``: run names, or
    ``baseline:NAME``), computed first, then run under the store's lock-down (``analyzer.store.query``)
    and ``limits``."""
    check_read_only(sql)  # before any analysis is computed for it
    store.require()
    if run is not None:
        resolve_run(store, run)
    if base is not None:
        base = resolve_ref(store, base)
    if new is not None:
        new = resolve_ref(store, new)
    tables = analysis_tables(store, sql, run, base, new)
    return execute(store, sql, run=run, tables=tables, limits=limits)
