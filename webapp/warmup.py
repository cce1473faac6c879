"""Warm-up: when a page of a run is opened, compute in the background what the pages of that run
ask for (the timeline's lane indexes, then every analysis of ``analyzer.analyses.ANALYSES``; for a
run whose analyses the ingest stored, only those), so the next clicks find them cached
(``webapp.cache``, the analyses' own cache). ``RANKSCOPE_WEB_WARMUP=0``
turns it off. :func:`preload` does the process's one-time work (imports, Plotly's validators) when
the app is built, before the first request, and before ``analyze serve --workers`` forks.

A warm-up thread is a daemon, but one still inside DuckDB when the interpreter finalises is killed
there and aborts the process ("FATAL: exception not rethrown", exit code 134, after a clean stop of
the server or a passed test run). So at exit the threads are told to stop and are waited for
(``_stop_at_exit``): each ends after the job it is in (one analysis or one set of lane indexes).
A server's exit is therefore held back by the warm-up's current job, for at most ``EXIT_WAIT_S``
in all; a thread still busy after that is left to the interpreter."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from analyzer.analyses import ANALYSES, STORED_AT_INGEST
from analyzer.store import Store

from . import data
from .reader import Reader

ENABLED = os.environ.get("RANKSCOPE_WEB_WARMUP", "1") not in ("0", "false", "no")
log = logging.getLogger("webapp")

EXIT_WAIT_S = 120.0  # at exit, how long the warm-up threads are waited for (each ends after its current job)

_started: set[tuple[Any, ...]] = set()  # (store, run, content of the run) warmed up already
_lock = threading.Lock()
_threads: list[threading.Thread] = []  # the warm-up threads started and maybe alive
_stop = threading.Event()  # set at exit: no warm-up job starts after it


def warm_up(rd: Reader, run: str, timeline_ranks: Sequence[int]) -> bool:
    """Start (once per content of the run) a background thread computing what the pages of the run
    will ask for: the timeline's lane indexes of ``timeline_ranks`` and every analysis.
    Returns whether a thread was started."""
    if not ENABLED:
        return False
    key = (str(rd.store.path), run, rd.run_key(run))
    with _lock:
        if key in _started:
            return False
        _started.add(key)
    ranks = list(timeline_ranks)
    stored = _stored(rd, run)
    t = threading.Thread(target=_warm, args=(rd.store, run, ranks, stored), daemon=True, name=f"rankscope-warm-{run}")
    with _lock:
        _threads[:] = [x for x in _threads if x.is_alive()]
        _threads.append(t)
    t.start()
    return True


def _stop_at_exit() -> None:
    """At interpreter exit (``atexit``: daemon threads still run then), stop the warm-up threads
    after their current job and wait for them, so none is inside DuckDB when the interpreter
    finalises."""
    _stop.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    with _lock:
        threads = list(_threads)
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))


atexit.register(_stop_at_exit)


def _stored(rd: Reader, run: str) -> bool:
    """Whether the ingest stored the run's analyses (``analyzer.analyses.stored``: runs of many ranks)."""
    rr = rd.catalog_tables().get("run_results")
    key = rd.run_key(run)
    return rr is not None and any(
        r == run and k == key for r, k in zip(rr["run"].to_pylist(), rr["run_key"].to_pylist())
    )


def _jobs(run: str, ranks: list[int], stored: bool = False) -> list[tuple[str, Callable[[Reader], Any]]]:
    """The timeline's lane indexes first (the heaviest first view), then every analysis — for a run
    whose analyses the ingest stored, only those (read, not computed): the pages' first views ask
    for them; the others match every collective of every rank again and would hold the server's
    interpreter for minutes at hundreds of ranks while it serves, in every server process (one of
    them is computed when a page or a query asks for it)."""
    lanes = ("timeline lanes", lambda r: data.lane_indexes(r, run, ranks, data.lanes(r, run, ranks)))
    wanted = {fn.full_name for fn in STORED_AT_INGEST}  # type: ignore[attr-defined]
    chosen = [
        (name, a) for name, a in ANALYSES.items() if not stored or getattr(a.compute, "full_name", None) in wanted
    ]
    return [lanes] + [(name, lambda r, a=a: a.compute(r.store, run)) for name, a in chosen]


def _warm(store: Store, run: str, ranks: list[int], stored: bool = False) -> None:
    for name, job in _jobs(run, ranks, stored):
        if _stop.is_set():
            return
        try:
            with Reader(store, run, ranks) as r:
                job(r)
        except Exception:
            log.debug("warm-up of %s for run %s failed", name, run, exc_info=True)


def preload() -> None:
    """What the first request of a process would otherwise pay for, whatever the run: the modules
    the pages import on first use (Parquet and datasets of pyarrow, the stored analyses, narwhals'
    pandas support that Plotly converts columns with) and Plotly's validators of the traces the
    pages draw (loaded from a JSON file on first use: ~0.2 s). Built once in the
    server process; a forked worker inherits it."""
    import pandas as pd
    import pyarrow.dataset
    import pyarrow.parquet  # noqa: F401

    import analyzer.analyses.stored  # noqa: F401

    from . import ui

    col = pd.Series([1.0, 2.0])
    fig = ui.figure(xaxis_title="x", yaxis_title="y")
    fig.add_bar(x=col, y=col, name="b", marker_color="#222", customdata=col, hovertemplate="%{y}")
    fig.add_box(y=col, name="b", boxpoints="suspectedoutliers", customdata=col)
    fig.add_scatter(x=col, y=col, mode="markers+text", text=["a", "b"], marker=dict(symbol="diamond", size=10))
    fig.add_heatmap(z=[[1.0, 2.0]], x=[0, 1], y=[0], colorscale="Viridis", colorbar=dict(title="ms"))
    fig.to_plotly_json()


def settle() -> None:
    """Move every object the process holds now out of the garbage collector's sight (``gc.freeze``):
    the imported modules, the app and Plotly's validators, ~150 000 objects that live as long as the
    process. Otherwise every full collection walks them all again (~150 ms of CPU on the 2-core
    bench machine) inside whichever request happened to trigger it: that was the p95 of the cheap
    views (the Profiling page's refresh 34 ms p50, 199 ms p95; the Advisor's kept findings).
    ``serve`` calls it once the app is built, before ``--workers`` forks (a forked worker's
    collections then no longer touch, and copy, those shared pages). Not called by ``create_app``:
    a process that builds many apps (the tests) would never free their cycles."""
    gc.collect()
    gc.freeze()
