"""Warm-up: when a page of a run is opened, compute in the background what the pages of that run
ask for (the timeline's lane indexes and every analysis of ``analyzer.analyses.ANALYSES`` — for a
run whose analyses the ingest stored, only those: read first those this version of their code
stored, computed later those another version stored — then the timeline's whole-run rows
and the Communication page's whole-run roll-ups), so the next clicks find them cached
(``webapp.cache``, the analyses' own cache). ``RANKSCOPE_WEB_WARMUP=0`` turns it off.

The warm-up gives way to requests: a job starts when no request of the process is being served
(``install`` counts them), or after ``YIELD_S`` of waiting, so it fills the time a user reads a page
rather than sharing the interpreter with the request being served (a request asking for a value the
warm-up is computing waits for it rather than computing it too).

:func:`preload` does the process's one-time work (imports, Plotly's validators) when the app is
built, before the first request, and before ``analyze serve --workers`` forks.

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

from flask import Flask

from analyzer.analyses import ANALYSES, STORED_AT_INGEST
from analyzer.store import Store

from . import data, timeline_api
from .reader import Reader

ENABLED = os.environ.get("RANKSCOPE_WEB_WARMUP", "1") not in ("0", "false", "no")
log = logging.getLogger("webapp")

EXIT_WAIT_S = 120.0  # at exit, how long the warm-up threads are waited for (each ends after its current job)
YIELD_S = 1.0  # how long a warm-up job waits for the requests being served to end before it starts anyway

_started: set[tuple[Any, ...]] = set()  # (store, run, content of the run) warmed up already
_lock = threading.Lock()
_threads: list[threading.Thread] = []  # the warm-up threads started and maybe alive
_stop = threading.Event()  # set at exit: no warm-up job starts after it
_serving = 0  # requests of this process being served (``install``)
_idle = threading.Condition()  # notified when the last of them ends


def install(server: Flask) -> None:
    """Count the requests ``server`` is serving, so the warm-up gives way to them."""

    @server.before_request
    def _begin() -> None:
        global _serving
        with _idle:
            _serving += 1

    @server.teardown_request
    def _end(_exc: BaseException | None) -> None:
        global _serving
        with _idle:
            _serving = max(0, _serving - 1)
            if not _serving:
                _idle.notify_all()


def _give_way(limit: float = YIELD_S) -> None:
    """Wait until no request is being served (at most ``limit`` seconds, or until the exit)."""
    deadline = time.monotonic() + limit
    with _idle:
        while _serving and not _stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            _idle.wait(min(left, 0.1))


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


def _stored(rd: Reader, run: str) -> set[str] | None:
    """None when the ingest stored no analyses for the run's content (``analyzer.analyses.stored``:
    runs of many ranks only); else the full names of those it would serve: computed from that
    content by this version of their code (``stored.current``)."""
    from analyzer.analyses.stored import current, listed

    key = rd.run_key(run)
    catalog = rd.catalog_tables()
    if not listed(catalog, run, key):
        return None
    return current(rd.store, catalog, run, key, list(STORED_AT_INGEST))


def _jobs(run: str, ranks: list[int], stored: set[str] | None = None) -> list[tuple[str, Callable[[Reader], Any]]]:
    """The timeline's lane indexes first (the heaviest first view), then every analysis — for a run
    whose analyses the ingest stored (``stored`` not None), only those: the ones it serves first
    (read, not computed; the page being opened asks for them at once), those stored by another
    version of their code after the timeline's rows (computed from the facts: the pages ask for
    them too). The others match every collective of every rank again and would hold the server's
    interpreter for minutes at hundreds of ranks while it serves, in every server process (one of
    them is computed when a page or a query asks for it). Then the whole-run parts of the other
    pages' first views: the timeline's rows of every lane (``timeline_api.context``), the
    Communication page's collectives and per-rank roll-ups of every rank."""
    lanes = ("timeline lanes", lambda r: data.lane_indexes(r, run, ranks, data.lanes(r, run, ranks)))
    timeline = ("timeline page", lambda r: timeline_api.context(r.store, run))
    communication = ("communication page", _communication(run))

    def job(a: Any) -> tuple[str, Callable[[Reader], Any]]:
        return a.name, lambda r: a.compute(r.store, run)

    if stored is None:
        return [lanes, *(job(a) for a in ANALYSES.values()), timeline, communication]
    wanted = {fn.full_name for fn in STORED_AT_INGEST}  # type: ignore[attr-defined]
    named = [(getattr(a.compute, "full_name", None), a) for a in ANALYSES.values()]
    served = [job(a) for name, a in named if name in stored]
    stale = [job(a) for name, a in named if name in wanted and name not in stored]
    return [*served, lanes, timeline, *stale, communication]


def _communication(run: str) -> Callable[[Reader], Any]:
    """The Communication page's first view of every rank (its callback asks with these arguments)."""

    def job(r: Reader) -> None:
        every = data.ranks_of(r, run)
        data.collectives(r, run, every)
        data.collective_matching(r, run)
        for fn in (data.comm_per_rank, data.comm_bandwidth, data.comm_definition, data.comm_matrix):
            fn(r, run, every)

    return job


def _warm(store: Store, run: str, ranks: list[int], stored: set[str] | None = None) -> None:
    for name, job in _jobs(run, ranks, stored):
        _give_way()
        if _stop.is_set():
            return
        try:
            with Reader(store, run, ranks) as r:
                job(r)
        except Exception:
            log.debug("warm-up of %s for run %s failed", name, run, exc_info=True)


def preload() -> None:
    """What the first request of a process would otherwise pay for, whatever the run: the modules
    the pages import on first use (Parquet and datasets of pyarrow, the stored analyses and the
    versions of their code, narwhals'
    pandas support that Plotly converts columns with) and Plotly's validators of the traces the
    pages draw (loaded from a JSON file on first use: ~0.2 s). Built once in the
    server process; a forked worker inherits it."""
    import pandas as pd
    import pyarrow.dataset
    import pyarrow.parquet  # noqa: F401

    from analyzer.versions import analysis_version

    from . import ui

    for fn in STORED_AT_INGEST:  # which stored results are served: a digest of their code (~0.3 s once)
        analysis_version(fn)

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
