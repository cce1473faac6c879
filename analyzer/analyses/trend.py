"""``analyze trend``: one metric over the runs of the store, oldest first, baselines and tags marked.

Runs are ordered by when they were first ingested (``by="ingest"``) or by when they were collected
(``by="collection"``: the earliest event of the run, the producer's own clock); ``tags`` keeps the
runs carrying one of these tags; ``last`` keeps the most recent ones. The metric is any metric of
``run_metrics`` (``step_time``, ``max(free)``, ``peak_memory``, ``op:aten::addmm``, ...), over every
rank and profiled step of each run.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import QueryError
from ..store import BASELINE, TAG, Store, tags_by_run
from .run_metrics import Metric, metric_sample, parse_metric

TREND_COLUMNS = ["run", "ingested_at", "collected_at", "value", "change_pct", "ranks", "baselines", "tags"]
BY = ("ingest", "collection")


def runs_in_order(store: Store, by: str = "ingest") -> pd.DataFrame:
    """Every run with when it was first ingested and collected, oldest first."""
    if by not in BY:
        raise QueryError(f"--by must be one of {', '.join(BY)}")
    cat = store.catalog_snapshot()
    runs = cat["runs"].select(["run", "created_at"]).to_pandas().rename(columns={"created_at": "ingested_at"})
    co = cat["collections"].select(["run", "rank", "start_ns"]).to_pandas()
    first = co.groupby("run")["start_ns"].min()
    ranks = co.groupby("run")["rank"].nunique()
    runs["collected_at"] = pd.to_datetime(runs["run"].map(first), unit="ns")
    runs["ranks"] = runs["run"].map(ranks).fillna(0).astype("int64")
    key = "ingested_at" if by == "ingest" else "collected_at"
    return runs.sort_values([key, "run"], na_position="first").reset_index(drop=True)


def trend(
    store: Store,
    metric: str | Metric = "step_time",
    last: int | None = 20,
    tags: Sequence[str] = (),
    by: str = "ingest",
) -> pd.DataFrame:
    """One row per run (oldest first): the metric's value, its change from the previous run shown,
    the run's baselines and tags."""
    store.require()
    m = parse_metric(metric) if isinstance(metric, str) else metric
    runs = runs_in_order(store, by)
    names = tags_by_run(store)
    if tags:
        want = set(tags)
        runs = runs[[bool(want & set(names.get(r, {}).get(TAG, []))) for r in runs["run"]]]
    if last:
        runs = runs.tail(int(last))
    values = []
    for r in runs["run"]:
        try:
            values.append(metric_sample(store, r, m).value)
        except QueryError:
            values.append(None)
    out = runs.assign(value=pd.to_numeric(pd.Series(values, index=runs.index, dtype="object"), errors="coerce"))
    prev = out["value"].ffill().shift(1)
    out["change_pct"] = (out["value"] - prev) / prev.abs() * 100.0
    out["baselines"] = [sorted(names.get(r, {}).get(BASELINE, [])) for r in out["run"]]
    out["tags"] = [sorted(names.get(r, {}).get(TAG, [])) for r in out["run"]]
    out["value"] = out["value"].astype("float64")
    out["change_pct"] = out["change_pct"].astype("float64")
    return out[TREND_COLUMNS].reset_index(drop=True)
