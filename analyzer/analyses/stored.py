"""Analyses of a whole run stored with it at ingest (the catalog's ``run_results``).

Some analyses match every collective across the ranks (arrival order, stragglers, the slow-rank
vote) or read every step of every rank (step-time outliers): a first view computing them from the
facts takes seconds to minutes at hundreds of ranks, in every server process. The ingest computes
them once the run is committed, where it reads collections (a local pool process, a Dask worker:
``compute_run``), writes each result as a Parquet file and lists it in ``run_results`` under the
content of the run it was computed from (``run_key``). ``cache.per_run`` then serves the stored
rows while the run is that content; an ingest that changes the run removes them and stores new ones.

The rows are the analysis' own DataFrame: its columns and dtypes come back as they were (Arrow's
pandas metadata; object columns of lists and records go through MessagePack).

A stored result is also keyed by the code that computed it (``analyzer.versions``: a
digest of the analysis' own module and of the analyzer modules it imports, directly or not, in the
file's metadata): rows stored by another version of that code (an older column, a fixed rule, a
changed way of storing) are never served; the analysis is computed from the facts instead, as for a
run without stored results. A change elsewhere (a reader, the CLI, the web app, another analysis)
keeps them. :func:`current` says which analyses of a run a reader would be served.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..store import FACTS_DIR, Store, slug, utcnow
from ..versions import VERSION_KEY, analysis_version, written_version

_OBJECT_COLUMNS = b"rankscope.object_columns"
_PACKED_COLUMNS = b"rankscope.msgpack_columns"


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """The DataFrame as an Arrow table (its index dropped): object columns of lists or records are
    stored as MessagePack (Arrow's nested types would give every record of a column the same keys;
    JSON would turn integer keys into text), named in the table's metadata."""
    df = df.reset_index(drop=True)
    objects, encoded = [], []
    for c in df.columns:
        if df[c].dtype != object:
            continue
        objects.append(str(c))
        if any(v is not None and not isinstance(v, str) for v in df[c]):
            df[c] = [None if v is None else _PACK.encode(v) for v in df[c]]
            encoded.append(str(c))
    tbl = pa.Table.from_pandas(df, preserve_index=False)
    meta = {_OBJECT_COLUMNS: json.dumps(objects).encode(), _PACKED_COLUMNS: json.dumps(encoded).encode()}
    return tbl.replace_schema_metadata({**(tbl.schema.metadata or {}), **meta})


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise NotImplementedError(f"{type(v).__name__} is not stored")


_PACK = msgspec.msgpack.Encoder(enc_hook=_plain)
_UNPACK = msgspec.msgpack.Decoder()


def from_arrow(tbl: pa.Table) -> pd.DataFrame:
    """The DataFrame ``to_arrow`` stored: its object columns object again, MessagePack decoded."""
    meta = tbl.schema.metadata or {}
    encoded = set(json.loads(meta.get(_PACKED_COLUMNS, b"[]")))
    df = tbl.to_pandas()
    for c in json.loads(meta.get(_OBJECT_COLUMNS, b"[]")):  # object columns stay object (None, not NaN)
        values = tbl.column(c).to_pylist()
        if c in encoded:
            values = [None if v is None else _UNPACK.decode(v) for v in values]
        df[c] = pd.Series(values, index=df.index, dtype=object)
    return df


def listed(catalog: dict[str, pa.Table], run: str, key: str) -> dict[str, str]:
    """The stored analyses of ``run`` computed from its content ``key``: their paths by name."""
    rr = catalog.get("run_results")
    if rr is None or not rr.num_rows:
        return {}
    hit = rr.filter(pc.and_(pc.equal(rr["run"], run), pc.equal(rr["run_key"], key)))
    return dict(zip(hit["analysis"].to_pylist(), hit["path"].to_pylist()))


def read_stored(
    store: Store, catalog: dict[str, pa.Table], run: str, key: str, fn: Callable[..., Any]
) -> pd.DataFrame | None:
    """The stored rows of analysis ``fn`` (a ``per_run`` function) of ``run`` computed from its content
    ``key`` by this version of its code; None: none stored (or by another version)."""
    path = listed(catalog, run, key).get(fn.full_name)  # type: ignore[attr-defined]
    if path is None:
        return None
    try:
        tbl = pq.read_table(store.path / path)
    except (OSError, pa.ArrowException):  # a file removed meanwhile (a newer ingest): computed instead
        return None
    if (tbl.schema.metadata or {}).get(VERSION_KEY) != analysis_version(fn).encode():
        return None  # computed by another version of the analysis: computed again
    return from_arrow(tbl)


def current(
    store: Store, catalog: dict[str, pa.Table], run: str, key: str, analyses: list[Callable[..., Any]]
) -> set[str]:
    """The full names of ``analyses`` whose rows stored with ``run`` would be served (computed from
    its content ``key`` by this version of their code): read from their files' footers only."""
    paths = listed(catalog, run, key)
    names = {fn.full_name: fn for fn in analyses if fn.full_name in paths}  # type: ignore[attr-defined]
    return {n for n, fn in names.items() if written_version(store.path / paths[n]) == analysis_version(fn)}


def compute_run(store_path: str, run: str, analyses: list[Callable[..., Any]]) -> list[dict[str, Any]]:
    """Compute ``analyses`` (``per_run`` functions) of the committed ``run`` from its facts and write
    each result; their ``run_results`` rows (without run and run_key, which the driver adds). An
    analysis that fails is left out (a page computing it will say why); the others are kept."""
    store = Store(store_path)
    folder = Path(FACTS_DIR) / "run_results" / f"run={slug(run)}"
    (store.path / folder).mkdir(parents=True, exist_ok=True)
    rows = []
    for fn in analyses:
        t = time.perf_counter()
        try:
            df = fn(store, run)  # through the cache: analyses that share a matching compute it once
            tbl = to_arrow(df)
            meta = {**(tbl.schema.metadata or {}), VERSION_KEY: analysis_version(fn).encode()}
            tbl = tbl.replace_schema_metadata(meta)
        except Exception:  # noqa: BLE001 - the run is committed: a page computing it says what went wrong
            continue
        name: str = fn.full_name  # type: ignore[attr-defined]
        path = folder / f"{name.rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:10]}.parquet"
        pq.write_table(tbl, store.path / path)
        rows.append(
            {
                "analysis": name,
                "path": str(path),
                "rows": tbl.num_rows,
                "seconds": time.perf_counter() - t,
                "computed_at": utcnow(),
            }
        )
    return rows
