"""Warm-up: when a page of a run is opened, compute in the background what the pages of that run
ask for (the timeline's lane indexes, then every analysis of ``analyzer.analyses.ANALYSES``), so the
next clicks find them cached (``webapp.cache``, the analyses' own cache). ``RANKSCOPE_WEB_WARMUP=0``
turns it off."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from analyzer.analyses import ANALYSES
from analyzer.store import Store

from . import data
from .reader import Reader

ENABLED = os.environ.get("RANKSCOPE_WEB_WARMUP", "1") not in ("0", "false", "no")
log = logging.getLogger("webapp")

_started: set[tuple[Any, ...]] = set()  # (store, run, content of the run) warmed up already
_lock = threading.Lock()


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
    threading.Thread(target=_warm, args=(rd.store, run, ranks), daemon=True, name=f"rankscope-warm-{run}").start()
    return True


def _jobs(run: str, ranks: list[int]) -> list[tuple[str, Callable[[Reader], Any]]]:
    """The timeline's lane indexes first (the heaviest first view), then every analysis."""
    lanes = ("timeline lanes", lambda r: data.lane_indexes(r, run, ranks, data.lanes(r, run, ranks)))
    return [lanes] + [(name, lambda r, a=a: a.compute(r.store, run)) for name, a in ANALYSES.items()]


def _warm(store: Store, run: str, ranks: list[int]) -> None:
    for name, job in _jobs(run, ranks):
        try:
            with Reader(store, run, ranks) as r:
                job(r)
        except Exception:
            log.debug("warm-up of %s for run %s failed", name, run, exc_info=True)
