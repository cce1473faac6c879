"""The CANN family's summary CSVs (docs/formats.md §1.7, §1.8, §1.12, §3.2): ``operator_details.csv``
(device time per framework op), ``step_trace_time.csv`` (msprof-analyze's step breakdown),
``op_statistic.csv`` / ``api_statistic.csv`` (and msprof's ``op_statistic_*``, ``api_statistic_*``,
``communication_statistic_*``). Times are exact µs strings, stored as ns.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..base import ReadContext
from ..common.csvfile import iter_csv, read_csv
from .trace_view import stack_text

OPDETAIL_COLS = {
    "name": ("Name",),
    "shapes": ("Input Shapes",),
    "stack": ("Call Stack",),
    "host_self": ("Host Self Duration(us)",),
    "host_total": ("Host Total Duration(us)",),
    "dev_self": ("Device Self Duration(us)",),
    "dev_total": ("Device Total Duration(us)",),
}


STEP_TRACE_COLS = {
    "device": ("Device_id",),
    "step": ("Step", "Step Id", "Step ID"),
    "computing": ("Computing",),
    "comm_not_overlapped": ("Communication(Not Overlapped)",),
    "overlapped": ("Overlapped",),
    "communication": ("Communication",),
    "free": ("Free",),
    "stage": ("Stage",),
    "bubble": ("Bubble",),
    "comm_not_overlapped_excl_receive": ("Communication(Not Overlapped and Exclude Receive)",),
    "preparing": ("Preparing",),
}


OP_STAT_COLS = {
    "type": ("OP Type",),
    "core": ("Core Type",),
    "count": ("Count",),
    "total": ("Total Time(us)",),
    "min": ("Min Time(us)",),
    "avg": ("Avg Time(us)",),
    "max": ("Max Time(us)",),
    "ratio": ("Ratio(%)",),
}


API_STAT_COLS = {
    "level": ("Level",),
    "name": ("API Name",),
    "total": ("Time(us)",),
    "count": ("Count",),
    "avg": ("Avg(us)",),
    "min": ("Min(us)",),
    "max": ("Max(us)",),
    "variance": ("Variance",),
}


COMM_STAT_COLS = {
    "type": ("OP Type",),
    "count": ("Count",),
    "total": ("Total Time(us)",),
    "min": ("Min Time(us)",),
    "avg": ("Avg Time(us)",),
    "max": ("Max Time(us)",),
    "ratio": ("Ratio(%)",),
}


def read_op_details(ctx: ReadContext, path: Path, keep_text: bool) -> pa.Table | None:
    """operator_details.csv's rows numbered per name in file (= start) order, for the join with the
    trace's ops; shapes and stacks only with ``keep_text`` (when there is no trace to take them from).
    None when the file cannot be read."""
    details: pa.Table | None = None
    with ctx.reading(path, "operator_details.csv") as outcome:
        seen: Counter[str | None] = Counter()
        parts: list[pa.Table] = []
        for t in iter_csv(path, "operator_details.csv", OPDETAIL_COLS, required=("name", "host_total")):
            outcome.warn_all(t.warnings)
            names = t.text("name")
            rn: list[int] = []
            for nm in names:
                rn.append(seen[nm])
                seen[nm] += 1
            parts.append(
                pa.table(
                    {
                        "name": pa.array(names, pa.string()),
                        "rn": pa.array(rn, pa.int64()),
                        "host_self_ns": pa.array(t.ns_from_us("host_self"), pa.int64()),
                        "host_total_ns": pa.array(t.ns_from_us("host_total"), pa.int64()),
                        "device_self_ns": pa.array(t.ns_from_us("dev_self"), pa.int64()),
                        "device_total_ns": pa.array(t.ns_from_us("dev_total"), pa.int64()),
                        "input_shapes": pa.array(t.text("shapes") if keep_text else [None] * t.n_rows, pa.string()),
                        "call_stack": pa.array(
                            [stack_text(x) for x in t.text("stack")] if keep_text else [None] * t.n_rows, pa.string()
                        ),
                    }
                )
            )
            outcome.rows += t.n_rows
        details = pa.concat_tables(parts)
    return details


def read_step_trace_time(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "step_trace_time.csv") as outcome:
        t = read_csv(path, "step_trace_time.csv", STEP_TRACE_COLS, required=("computing", "communication", "free"))
        cols: dict[str, Any] = {"step": t.ints("step")}
        for key, col in (
            ("computing", "computing_ns"),
            ("comm_not_overlapped", "comm_not_overlapped_ns"),
            ("overlapped", "overlapped_ns"),
            ("communication", "communication_ns"),
            ("free", "free_ns"),
            ("stage", "stage_ns"),
            ("bubble", "bubble_ns"),
            ("comm_not_overlapped_excl_receive", "comm_not_overlapped_excl_receive_ns"),
            ("preparing", "preparing_ns"),
        ):
            cols[col] = t.ns_from_us(key)
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write("step_trace", cols)


def read_op_statistic(ctx: ReadContext, path: Path, kind: str = "op_statistic.csv") -> None:
    with ctx.reading(path, kind) as outcome:
        t = read_csv(path, kind, OP_STAT_COLS, required=("type", "count", "total"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["op_statistic"] * t.n_rows,
                "name": t.text("type"),
                "core_type": t.text("core"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "ratio_pct": t.floats("ratio"),
            },
        )


def read_api_statistic(ctx: ReadContext, path: Path, kind: str = "api_statistic.csv") -> None:
    with ctx.reading(path, kind) as outcome:
        t = read_csv(path, kind, API_STAT_COLS, required=("name", "count", "total"))
        outcome.warn_all(t.warnings)
        var = t.floats("variance")
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["api_statistic"] * t.n_rows,
                "level": t.text("level"),
                "name": t.text("name"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "variance_ns2": [v * 1e6 if v is not None else None for v in var],
            },
        )


def read_comm_statistic(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "communication_statistic") as outcome:
        t = read_csv(path, "communication_statistic CSV", COMM_STAT_COLS, required=("type", "count", "total"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["communication_statistic"] * t.n_rows,
                "name": t.text("type"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "ratio_pct": t.floats("ratio"),
            },
        )
