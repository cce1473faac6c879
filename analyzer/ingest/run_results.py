"""The analyses of a whole run stored with it (``analyzer.analyses.stored``), computed once the run
is committed, by the executor that read its collections (a local pool process or a Dask worker:
the driver never imports pandas), then listed in the catalog by the driver.

Only runs of at least ``MIN_RANKS`` ranks get them: below, a page computes them from the facts in
well under a second on its first view, and an ingest of a few ranks stays as quick as it was.
"""

from __future__ import annotations

import time
from typing import Any

from ..store import Store, run_key
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


def compute(store_path: str, run: str) -> list[dict[str, Any]]:
    """On the executor: every analysis of ``analyses.STORED_AT_INGEST`` of ``run``, written; their rows."""
    from ..analyses import STORED_AT_INGEST
    from ..analyses.stored import compute_run

    return compute_run(store_path, run, list(STORED_AT_INGEST))
