"""Metrics of a whole run, by name: what ``analyze check`` gates on and ``analyze trend`` follows.

A metric is written ``[agg(]name[)]``:

- ``name``: a step breakdown column (msprof-analyze's names: ``step_time``, ``computing``,
  ``comm_not_overlapped``, ``overlapped``, ``communication``, ``free``, ``preparing``, ``stage``,
  ``bubble``, ``comm_not_overlapped_excl_receive``, ``memory_not_overlapped``; the ``_ns`` suffix of
  the column may be written), ``peak_memory`` / ``peak_reserved`` (the allocator's peak allocated /
  reserved bytes of a rank), ``op:NAME`` (a host operator's total time per step; ``*`` matches any
  characters) or ``kernel:NAME`` (a device kernel's time per step).
- ``agg``: how the ranks combine — ``mean`` (the default for times), ``max`` (the default for
  memory: the rank with the highest peak), ``min``, ``sum``.

A time metric's value is, per rank, its mean over the compared steps, then ``agg`` over the ranks;
its per-step values (``agg`` over the ranks of each step) are the samples of the noise test
(``noise.yuen``). Peak memory is one value per rank (no per-step samples).

``run_metrics`` (the table ``analysis.run_metrics``, one row per run) holds every breakdown column's
mean and the peaks: ``analyze trend`` reads it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..errors import QueryError
from ..store import Store
from .cache import per_run
from .step_breakdown import step_breakdown

# breakdown metric name -> step_breakdown column (the order of msprof-analyze's step trace)
BREAKDOWN = {
    "step_time": "step_ns",
    "computing": "computing_ns",
    "comm_not_overlapped": "comm_not_overlapped_ns",
    "overlapped": "overlapped_ns",
    "communication": "communication_ns",
    "free": "free_ns",
    "preparing": "preparing_ns",
    "stage": "stage_ns",
    "bubble": "bubble_ns",
    "comm_not_overlapped_excl_receive": "comm_not_overlapped_excl_receive_ns",
    "memory_not_overlapped": "memory_not_overlapped_ns",
}
# how people read each column (msprof-analyze's step_trace_time.csv headers, lower case)
LABELS = {
    "step_ns": "step time",
    "computing_ns": "computing",
    "comm_not_overlapped_ns": "communication not overlapped",
    "overlapped_ns": "overlapped",
    "communication_ns": "communication",
    "free_ns": "free",
    "preparing_ns": "preparing",
    "stage_ns": "stage",
    "bubble_ns": "bubble",
    "comm_not_overlapped_excl_receive_ns": "communication not overlapped, excluding receive",
    "memory_not_overlapped_ns": "memory copies not overlapped",
}
MEMORY = {"peak_memory": "peak_allocated_bytes", "peak_reserved": "peak_reserved_bytes"}
AGGS = ("mean", "max", "min", "sum")
PREFIXES = ("op:", "kernel:")

Steps = Sequence[int | None]  # [None]: a run without step numbers


@dataclass(frozen=True)
class Metric:
    kind: str  # breakdown | memory | op | kernel
    name: str  # the step_breakdown / memory column, or the operator / kernel name pattern
    agg: str
    text: str  # as the user wrote it, normalised (what messages show)

    @property
    def unit(self) -> str:
        return "bytes" if self.kind == "memory" else "ns"

    @property
    def label(self) -> str:
        if self.kind == "breakdown":
            base = LABELS[self.name]
        elif self.kind == "memory":
            base = "peak allocated memory" if self.name == "peak_allocated_bytes" else "peak reserved memory"
        else:
            base = f"{self.kind} {self.name} time"
        default = "max" if self.kind == "memory" else "mean"
        return base if self.agg == default else f"{self.agg} over ranks of {base}"


_AGG = re.compile(r"^(mean|max|min|sum)\s*\((.*)\)$", re.DOTALL)


def metric_names() -> list[str]:
    return [*BREAKDOWN, *MEMORY, "op:NAME", "kernel:NAME"]


def parse_metric(text: str) -> Metric:
    """``[agg(]name[)]`` (see the module doc); QueryError names what is wrong and what exists."""
    raw = (text or "").strip()
    if not raw:
        raise QueryError("no metric given; metrics: " + ", ".join(metric_names()))
    agg = None
    m = _AGG.match(raw)
    if m:
        agg, raw = m.group(1), m.group(2).strip()
    for prefix in PREFIXES:
        if raw.startswith(prefix):
            name = raw[len(prefix) :].strip().strip("'\"")
            if not name:
                raise QueryError(f"{prefix}NAME needs a name, e.g. {prefix}aten::addmm")
            kind = prefix[:-1]
            agg = agg or "mean"
            return Metric(kind, name, agg, f"{agg}({prefix}{name})" if agg != "mean" else f"{prefix}{name}")
    key = raw.lower()
    key = key[:-3] if key.endswith("_ns") and key[:-3] in BREAKDOWN else key
    if key == "step":
        key = "step_time"
    if key in BREAKDOWN:
        agg = agg or "mean"
        return Metric("breakdown", BREAKDOWN[key], agg, key if agg == "mean" else f"{agg}({key})")
    if key in MEMORY:
        agg = agg or "max"
        return Metric("memory", MEMORY[key], agg, key if agg == "max" else f"{agg}({key})")
    near = difflib.get_close_matches(key, [*BREAKDOWN, *MEMORY], n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    raise QueryError(f"unknown metric {raw!r}{hint}; metrics: " + ", ".join(metric_names()))


@dataclass(frozen=True)
class Sample:
    """A metric of one run: its value and its per-step values (empty: none, e.g. peak memory)."""

    value: float | None
    per_step: tuple[float, ...] = ()


def _agg(values: pd.Series, agg: str) -> float | None:
    v = values.dropna()
    if v.empty:
        return None
    return float(getattr(v, agg)())


def _known(steps: Steps) -> list[int]:
    return [int(s) for s in steps if s is not None]


def rows_at(sb: pd.DataFrame, ranks: Sequence[int] | None, steps: Steps | None) -> pd.DataFrame:
    """The step breakdown rows of ``ranks`` (None: all) at ``steps`` (None: all; [None]: the rows
    without a step)."""
    rows = sb if ranks is None else sb[sb["rank"].isin([int(r) for r in ranks])]
    if steps is not None:
        known = _known(steps)
        rows = rows[rows["step"].isin(known)] if known else rows[rows["step"].isna()]
    return rows


def per_rank_step(df: pd.DataFrame, column: str, agg: str) -> Sample:
    """A metric from (rank, step, ``column``) rows: per rank the mean over its steps, ``agg`` over
    the ranks; per step ``agg`` over the ranks."""
    if df.empty:
        return Sample(None)
    d = df[["rank", "step", column]].copy()
    d[column] = pd.to_numeric(d[column], errors="coerce").astype("float64")
    value = _agg(d.groupby("rank")[column].mean(), agg)
    if d["step"].notna().any():
        per_step = tuple(float(x) for x in d.groupby("step")[column].agg(agg).dropna())
    else:
        per_step = ()
    return Sample(value, per_step)


def _rank_means(sb: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per rank the mean over its steps of each of ``columns`` (numeric, NaN where missing): the
    per-rank values ``per_rank_step`` takes, for every column in one grouping."""
    d = sb[["rank", *columns]].copy()
    for c in columns:
        d[c] = pd.to_numeric(d[c], errors="coerce").astype("float64")
    return d.groupby("rank")[columns].mean()


MEMORY_SQL = """
SELECT rank, max(allocated_bytes) AS peak_allocated_bytes,
       max(reserved_bytes) FILTER (WHERE component <> 'APP') AS peak_reserved_bytes
FROM memory_samples
WHERE run = $run AND source NOT IN ('npu_module_mem', 'NPU_MODULE_MEM') AND list_contains($ranks, rank)
GROUP BY rank ORDER BY rank
"""


def memory_peaks(store: Store, run: str, ranks: Sequence[int]) -> pd.DataFrame:
    """Per rank the allocator's peak allocated and reserved bytes over the profile (as ``analyze
    summary``: the driver's npu_module_mem rows and MindSpore's APP totals left out)."""
    with store.read_connection(run=run, ranks=list(ranks), tables=["memory_samples"]) as con:
        return con.execute(MEMORY_SQL, {"run": run, "ranks": [int(r) for r in ranks]}).df()


def like_pattern(pattern: str) -> str:
    """A name pattern (``*`` = any characters, everything else literal) as a SQL LIKE pattern."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def named_time(store: Store, run: str, kind: str, pattern: str, ranks: Sequence[int], steps: Steps) -> pd.DataFrame:
    """Per (rank, step) the total time of the operators (``kind`` op) or kernels matching ``pattern``
    (``*`` = any characters; every compared (rank, step) has a row, 0 when none ran)."""
    table = "operators" if kind == "op" else "kernels"
    like = like_pattern(pattern)
    known = _known(steps)
    where = "list_contains($steps, step)" if known else "step IS NULL"
    with store.read_connection(run=run, ranks=list(ranks), tables=[table]) as con:
        got = con.execute(
            f"SELECT rank, step, sum(dur_ns)::DOUBLE AS value FROM {table} "
            f"WHERE run = $run AND list_contains($ranks, rank) AND {where} AND name LIKE $like ESCAPE '\\' "
            "GROUP BY rank, step",
            {"run": run, "ranks": [int(r) for r in ranks], "steps": known, "like": like},
        ).df()
    grid = pd.DataFrame([(int(r), s) for r in ranks for s in (known or [None])], columns=["rank", "step"]).astype(
        {"step": "Int64"}
    )
    got["step"] = got["step"].astype("Int64")
    out = grid.merge(got, on=["rank", "step"], how="left")
    out["value"] = out["value"].fillna(0.0)
    return out


def metric_sample(
    store: Store, run: str, metric: Metric, ranks: Sequence[int] | None = None, steps: Steps | None = None
) -> Sample:
    """The value of ``metric`` in ``run`` over ``ranks`` and ``steps`` (None: all of the run)."""
    sb = step_breakdown(store, run)
    if ranks is None:
        ranks = sorted({int(r) for r in sb["rank"]})
    if steps is None:
        known = sorted({int(s) for s in sb["step"].dropna()})
        steps = known or [None]
    if metric.kind == "breakdown":
        return per_rank_step(rows_at(sb, ranks, steps), metric.name, metric.agg)
    if metric.kind == "memory":
        peaks = memory_peaks(store, run, ranks)
        return Sample(_agg(pd.to_numeric(peaks[metric.name], errors="coerce"), metric.agg))
    return per_rank_step(named_time(store, run, metric.kind, metric.name, ranks, steps), "value", metric.agg)


RUN_COLUMNS = ["ranks", "steps", "producers", "collected_at", *BREAKDOWN.values(), *MEMORY.values()]


@per_run
def run_metrics(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row: the run's ranks and profiled steps, producers, when it was collected (its earliest
    event), every step breakdown column (mean over ranks of the per-rank mean over steps) and the
    highest peak allocated / reserved memory of a rank."""
    sb = step_breakdown(store, run)
    ranks = sorted({int(r) for r in sb["rank"]})
    co = store.catalog_snapshot()["collections"].to_pandas()
    co = co[co["run"] == run]
    start = pd.to_numeric(co["start_ns"], errors="coerce").min()
    row: dict[str, object] = {
        "ranks": len(set(co["rank"])),
        "steps": int(sb["step"].nunique()),
        "producers": sorted({str(p) for p in co["producer"].dropna()}),
        "collected_at": pd.Timestamp(int(start), unit="ns") if not pd.isna(start) else pd.NaT,
    }
    means = _rank_means(sb, list(BREAKDOWN.values()))
    for col in BREAKDOWN.values():
        row[col] = _agg(means[col], "mean") if not sb.empty else None
    peaks = memory_peaks(store, run, ranks) if ranks else pd.DataFrame(columns=list(MEMORY.values()))
    for col in MEMORY.values():
        row[col] = _agg(pd.to_numeric(peaks[col], errors="coerce"), "max") if not peaks.empty else None
    out = pd.DataFrame([row], columns=RUN_COLUMNS)
    for col in [*BREAKDOWN.values(), *MEMORY.values()]:
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("float64")
    return out
