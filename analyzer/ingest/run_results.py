"""The analyses of a whole run stored with it (``analyzer.analyses.stored``), computed once the run
is committed, by the executor that read its collections (a local pool process or a Dask worker:
the driver never imports pandas), then listed in the catalog by the driver.

Only runs of at least ``MIN_RANKS`` ranks get them: below, a page computes them from the facts in
well under a second on its first view, and an ingest of a few ranks stays as quick as it was.

A stored result is served only to the version of its code that computed it (``analyzer.versions``):
after an upgrade that changed some analyses, the re-ingest of an unchanged folder computes those
again (``refresh_run_results``) and leaves the others; the driver tells them apart from the files
alone (their names and the versions written in them).
"""

from __future__ import annotations

import time
from typing import Any

from ..store import Store, run_key
from ..versions import version_of, written_version
from .pool import Executor

MIN_RANKS = 16


def run_ranks(store: Store, run: str) -> int:
    """The number of ranks of ``run`` in the catalog."""
    return store.catalog_rows("SELECT count(DISTINCT rank) AS n FROM collections WHERE run = ?", [run])[0]["n"]


def store_run_results(store: Store, run: str, executor: Executor, ranks: int) -> tuple[int, float]:
    """Compute and list the stored analyses of the just committed ``run`` of ``ranks`` ranks (call
    under the ingest lock, the catalog not held: the executor reads it); (analyses stored, seconds).
    Nothing when the run has fewer than ``MIN_RANKS`` ranks."""
    t = time.perf_counter()
    if ranks < MIN_RANKS:
        return 0, 0.0
    key = run_key(store.load_catalog(["fact_files", "collections"]), run)
    try:
        rows = executor.call(compute, str(store.path), run)
    except Exception:  # noqa: BLE001 - the run is committed whatever fails here: the pages compute them instead
        return 0, time.perf_counter() - t
    stored = store.commit_run_results(run, key, rows)
    return (len(rows) if stored else 0), time.perf_counter() - t


def stale_results(store: Store, run: str) -> tuple[str, list[str]]:
    """The content of ``run`` (``run_key``) and the full names of the analyses stored with it, from
    that content, by another version of their code than this one."""
    cat = store.load_catalog(["fact_files", "collections", "run_results"])
    key = run_key(cat, run)
    rr = cat["run_results"]
    names = [
        (name, path)
        for r, k, name, path in zip(*(rr[c].to_pylist() for c in ("run", "run_key", "analysis", "path")))
        if r == run and k == key
    ]
    return key, [name for name, path in names if written_version(store.path / path) != version_of(name)]


def refresh_run_results(store: Store, run: str, executor: Executor) -> tuple[int, float]:
    """Compute again and list the analyses stored with the unchanged ``run`` by another version of
    their code (call under the ingest lock, the catalog not held); (analyses stored, seconds).
    Nothing when the run has fewer than ``MIN_RANKS`` ranks (or is not in the store)."""
    t = time.perf_counter()
    if run_ranks(store, run) < MIN_RANKS:
        return 0, 0.0
    key, stale = stale_results(store, run)
    if not stale:
        return 0, time.perf_counter() - t
    try:
        rows = executor.call(compute, str(store.path), run, stale)
    except Exception:  # noqa: BLE001 - the stale ones stay unserved: the pages compute them instead
        return 0, time.perf_counter() - t
    stored = store.commit_run_results(run, key, rows, only=stale)
    if stored:
        store.garbage_collect()  # the files of the results replaced
    return (len(rows) if stored else 0), time.perf_counter() - t


def compute(store_path: str, run: str, names: list[str] | None = None) -> list[dict[str, Any]]:
    """On the executor: every analysis of ``analyses.STORED_AT_INGEST`` (or those of them named by
    their full names) of ``run``, written; their rows."""
    from ..analyses import STORED_AT_INGEST
    from ..analyses.stored import compute_run

    chosen = [fn for fn in STORED_AT_INGEST if names is None or fn.full_name in names]  # type: ignore[attr-defined]
    return compute_run(store_path, run, chosen)
