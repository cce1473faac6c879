"""What each rank was busy with, per step, for the analyses: the activity intervals of
``breakdown.activity`` (its module text says what counts as what), per run and cached, and the
host steps as frames."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from ..breakdown import activity as core
from ..breakdown.activity import DEVICE_PRODUCERS, RankActivity, StepActivity
from ..store import Store
from .cache import per_run

__all__ = [
    "DEVICE_PRODUCERS",
    "RankActivity",
    "StepActivity",
    "host_steps",
    "load",
    "run_activity",
    "run_host_steps",
    "step_of",
    "steps_at",
]


def host_steps(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """Host step ranges per rank: ProfilerStep / STEP_TIME rows (collector rows only if nothing else)."""
    return con.execute(core.HOST_STEPS_SQL, {"run": run}).df()


@per_run
def run_host_steps(store: Store, run: str) -> pd.DataFrame:
    """``host_steps`` of a run, cached per run content (the clock alignment, the arrivals, the blame
    and the pipeline all start from them: one query)."""
    with store.read_connection(run=run) as con:
        return host_steps(con, run)


def step_of(steps: pd.DataFrame, ts: pd.Series) -> pd.Series:
    """The step (of ``steps``: step, start_ns, end_ns) each time falls in, else NA."""
    st = steps.sort_values("start_ns")
    t = pd.to_numeric(ts, errors="coerce").fillna(-1).to_numpy(np.int64)
    ok, vals = steps_at(st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64), st["step"].to_numpy(), t)
    return pd.Series(pd.array(np.where(ok, vals, 0), dtype="Int64"), index=ts.index).where(ok)


def steps_at(starts: np.ndarray, ends: np.ndarray, steps: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``step_of`` on arrays (``starts`` sorted, not empty): whether each time ``t`` falls in a step,
    and that step (meaningless where it does not)."""
    k = np.searchsorted(starts, t, side="right") - 1
    ok = (k >= 0) & (t < ends[np.maximum(k, 0)])
    return ok, steps[np.maximum(k, 0)]


def load(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int] | None = None) -> dict[int, RankActivity]:
    """Activity intervals of every rank of a run (or of the given ranks), grouped by step (``breakdown.activity``)."""
    return core.load(con, run, ranks)


@per_run
def run_activity(store: Store, run: str, ranks: list[int] | None = None) -> dict[int, RankActivity]:
    """``load`` for a run, cached per run content (treat the result as read-only)."""
    with store.read_connection(run=run, ranks=ranks) as con:
        return load(con, run, ranks)
