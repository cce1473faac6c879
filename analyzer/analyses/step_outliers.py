"""Step-time outliers: the steps that took much longer than their neighbours, from the collector's
always-on per-step scalars (``scalars``, name ``step_time_ns``: every step, profiled or not).

A step of a rank is an **outlier** when its wall time exceeds the *local median* (the median of
the rank's step times over the ``WINDOW`` steps centred on it: a run whose step time drifts, with
a growing sequence length or a learning-rate warm-up, is compared with its own recent past) by
more than ``SIGMAS`` robust standard deviations (1.4826 × the median absolute deviation of the
rank's step times from their local medians) and by at least ``MIN_EXCESS`` of the local median
(steps of near-identical length have a tiny deviation: a 10 % wobble is not an outlier). The first
step, with its one-off set-up, usually is one.

Each outlier says whether that rank's profile holds the step (a ``steps`` row of any producer):
then the timeline can open on it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import Store
from .cache import per_run

WINDOW = 51  # steps in the local median (centred)
SIGMAS = 5.0  # robust standard deviations above the local median
MIN_EXCESS = 0.25  # and at least this share of the local median
MAD_SIGMA = 1.4826  # MAD -> standard deviation of a normal distribution
COLUMNS = [
    "rank",
    "step",
    "ts_ns",
    "step_time_ns",
    "median_ns",
    "threshold_ns",
    "excess_ns",
    "ratio",
    "profiled",
]

SQL = """
SELECT rank, step, max(ts_ns) AS ts_ns, max(value) AS step_time_ns
FROM scalars WHERE run = $run AND name = 'step_time_ns' AND step IS NOT NULL AND value IS NOT NULL
GROUP BY rank, step ORDER BY rank, step
"""
PROFILED_SQL = "SELECT DISTINCT rank, step FROM steps WHERE run = $run AND step IS NOT NULL"


def flag_outliers(times: pd.Series) -> pd.DataFrame:
    """For one rank's step times (indexed by step, in step order): ``median_ns``, ``threshold_ns``
    and ``outlier`` per step (see the module doc)."""
    v = times.astype("float64")
    med = v.rolling(min(WINDOW, len(v)), center=True, min_periods=1).median()
    dev = (v - med).abs()
    sigma = MAD_SIGMA * float(dev.median()) if len(dev) else 0.0
    threshold = np.maximum(med + SIGMAS * sigma, med * (1 + MIN_EXCESS))
    return pd.DataFrame({"median_ns": med, "threshold_ns": threshold, "outlier": v > threshold}, index=times.index)


@per_run
def step_outliers(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per outlier step of a rank: its wall time, the local median and the threshold it
    exceeded, the excess and the ratio to the median, and whether the rank's profile holds that
    step. Longest excess first."""
    with store.read_connection(run=run, tables=["scalars", "steps"]) as con:
        sc = con.execute(SQL, {"run": run}).df()
        profiled = con.execute(PROFILED_SQL, {"run": run}).df()
    if sc.empty:
        return pd.DataFrame(columns=COLUMNS)
    have = {(int(r), int(s)) for r, s in zip(profiled["rank"], profiled["step"])}
    parts = []
    for rank, g in sc.groupby("rank", sort=True):
        f = flag_outliers(g.set_index("step")["step_time_ns"])
        out = g.set_index("step").join(f)
        out = out[out["outlier"]].reset_index()
        if not out.empty:
            parts.append(out.assign(rank=int(rank)))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.concat(parts, ignore_index=True)
    df["step_time_ns"] = df["step_time_ns"].round().astype("int64")
    df["median_ns"] = df["median_ns"].round().astype("int64")
    df["threshold_ns"] = df["threshold_ns"].round().astype("int64")
    df["excess_ns"] = df["step_time_ns"] - df["median_ns"]
    df["ratio"] = df["step_time_ns"] / df["median_ns"].where(df["median_ns"] > 0)
    df["profiled"] = [(int(r), int(s)) in have for r, s in zip(df["rank"], df["step"])]
    df["rank"] = df["rank"].astype("int64")
    df["step"] = df["step"].astype("int64")
    df["ts_ns"] = df["ts_ns"].astype("Int64")
    df = df.sort_values(["excess_ns", "rank", "step"], ascending=[False, True, True])
    return df[COLUMNS].reset_index(drop=True)
