"""Runs: the listing of `analyze runs`, which run a command means, and what identifies a run's content.

``resolve_run`` and ``run_key`` take a Store (they read its catalog snapshot) or catalog tables a
caller already holds (the web app's request): one definition for the CLI, the analyses and the web app.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import NoRunsError, UnknownRunError
from ..messages import message
from .store import Store

if TYPE_CHECKING:
    import pyarrow as pa

Catalog = Mapping[str, "pa.Table"]  # catalog tables by name (Store.load_catalog / catalog_snapshot)

# runs with ranks, collections, steps, formats, status, file problems and rows, most recently ingested first
RUNS_SQL = """
SELECT r.run,
       count(DISTINCT c.rank) AS ranks,
       count(c.collection_id) AS collections,
       (SELECT count(DISTINCT s) FROM (SELECT unnest(c2.steps) AS s FROM collections c2 WHERE c2.run = r.run)) AS steps,
       coalesce(list(DISTINCT c.producer ORDER BY c.producer) FILTER (WHERE c.producer IS NOT NULL), []) AS formats,
       CASE WHEN count(c.collection_id) = 0 THEN 'error'
            WHEN bool_and(c.status = 'complete')
                 AND NOT EXISTS (SELECT 1 FROM source_files f WHERE f.run = r.run AND f.status = 'error')
                 THEN 'complete'
            WHEN bool_or(c.status IN ('complete', 'partial')) THEN 'partial'
            ELSE min(c.status) END AS status,
       (SELECT count(*) FROM source_files f WHERE f.run = r.run AND f.status IN ('warning', 'error')) AS problems,
       sum(c.n_rows)::BIGINT AS rows,
       r.updated_at, r.root_path
FROM runs r LEFT JOIN collections c ON c.run = r.run
GROUP BY r.run, r.updated_at, r.root_path
ORDER BY r.updated_at DESC, r.run
"""

# files with a warning or an error ({where}: "" for every run, "AND f.run = ?" for one)
PROBLEMS_SQL = """
SELECT f.run, f.path, f.status, f.reader, f.error
FROM source_files f
WHERE f.status IN ('warning', 'error') {where}
ORDER BY f.run, f.status DESC, f.path
"""

MAX_NAMED = 20  # runs an error message lists


def _catalog(source: Store | Catalog) -> Catalog:
    return source.catalog_snapshot() if isinstance(source, Store) else source


# what run_names / run_key derive from one catalog snapshot (its tables are never changed in place):
# {id(catalog): (catalog, {what: value})}, the catalog kept so that its id is not reused meanwhile
_DERIVED: dict[int, tuple[Catalog, dict[Any, Any]]] = {}
_DERIVED_KEEP = 16
_DERIVED_LOCK = threading.Lock()


def _derived(catalog: Catalog, what: Any, compute: Any) -> Any:
    with _DERIVED_LOCK:
        hit = _DERIVED.get(id(catalog))
        if hit is None or hit[0] is not catalog:
            while len(_DERIVED) >= _DERIVED_KEEP:
                _DERIVED.pop(next(iter(_DERIVED)))
            hit = _DERIVED[id(catalog)] = (catalog, {})
        memo = hit[1]
        if what in memo:
            return memo[what]
    value = compute()
    with _DERIVED_LOCK:
        memo[what] = value
    return value


def run_names(source: Store | Catalog) -> list[str]:
    """The runs of the store, most recently ingested first (the order of ``RUNS_SQL``)."""
    catalog = _catalog(source)

    def compute() -> list[str]:
        ordered = catalog["runs"].sort_by([("updated_at", "descending"), ("run", "ascending")])
        return [str(r) for r in ordered["run"].to_pylist()]

    return list(_derived(catalog, "run_names", compute))


def resolve_run(source: Store | Catalog, run: str | None) -> str:
    """The named run, checked, or (None) the most recently ingested one. A store without runs is a
    ``NoRunsError``, a run it does not have an ``UnknownRunError`` naming the runs it has."""
    names = run_names(source)
    if not names:
        raise NoRunsError.said("error.no_runs")
    if run is None:
        return names[0]
    if run not in names:
        more = message("error.and_more", n=len(names) - MAX_NAMED) if len(names) > MAX_NAMED else ""
        raise UnknownRunError.said(
            "error.no_run",
            run=repr(run),
            runs=message("error.runs_in_store", shown=", ".join(names[:MAX_NAMED]), more=more),
        )
    return run


def run_key(source: Store | Catalog, run: str) -> str:
    """What identifies the content of ``run`` for a cache of results computed from it: a digest of
    its fact files (fresh names on every ingest) and its collections (id and ingest time)."""
    catalog = _catalog(source)

    def compute() -> str:
        import pyarrow.compute as pc

        ff, co = catalog["fact_files"], catalog["collections"]
        ff = ff.filter(pc.equal(ff["run"], run))
        co = co.filter(pc.equal(co["run"], run))
        files = [str(p) for p in ff["path"].to_pylist()]
        colls = [f"{c}:{t}" for c, t in zip(co["collection_id"].to_pylist(), co["ingested_at"].to_pylist())]
        return hashlib.sha256("\n".join(sorted(files + colls)).encode()).hexdigest()

    return _derived(catalog, ("run_key", run), compute)
