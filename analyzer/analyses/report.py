"""``analyze report``: every cluster analysis of one run, as tables or one JSON document."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from ..store import Store
from ._run import resolve
from .advisor import advise
from .clock_alignment import clock_offsets
from .communication import comm_group_totals, communication_summary
from .parallel_layout import parallel_dims, parallel_layout
from .slow_link import slow_link_analysis
from .slow_rank import slow_rank_analysis
from .step_breakdown import step_breakdown

SECTIONS = (
    "step_breakdown", "communication_groups", "communication", "slow_ranks", "slow_rank_evidence", "slow_links",
    "slow_link_evidence", "parallel_dims", "parallel_layout", "clock_offsets", "advice",
)


def build_report(store: Store, run: str | None = None) -> dict[str, Any]:
    """{"run": name, <section>: DataFrame, ...} for every section of ``SECTIONS``."""
    run = resolve(store, run)
    votes, evidence, skipped = slow_rank_analysis(store, run)
    links, link_evidence = slow_link_analysis(store, run)
    return {
        "run": run,
        "step_breakdown": step_breakdown(store, run),
        "communication_groups": comm_group_totals(store, run),
        "communication": communication_summary(store, run),
        "slow_ranks": votes,
        "slow_rank_evidence": evidence,
        "slow_rank_skipped_groups": skipped,
        "slow_links": links,
        "slow_link_evidence": link_evidence,
        "parallel_dims": parallel_dims(store, run),
        "parallel_layout": parallel_layout(store, run),
        "clock_offsets": clock_offsets(store, run),
        "advice": advise(store, run),
    }


def _plain(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    return v


def report_json(report: dict[str, Any]) -> str:
    out: dict[str, Any] = {}
    for k, v in report.items():
        if isinstance(v, pd.DataFrame):
            out[k] = [{c: _plain(x) for c, x in row.items()} for row in v.to_dict("records")]
        else:
            out[k] = _plain(v)
    return json.dumps(out, indent=2, default=str)


def _ms(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{float(v) / 1e6:.3f}"


def print_report(report: dict[str, Any], console: Any) -> None:
    """Render the report as rich tables (times in ms)."""
    from rich.table import Table

    console.print(f"run [bold]{report['run']}[/]")
    sb = report["step_breakdown"]
    if not sb.empty:
        t = Table(title="Step breakdown (ms, mean over steps; msprof-analyze definitions)")
        cols = ["step_ns", "computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns", "free_ns",
                "preparing_ns", "stage_ns", "bubble_ns"]
        for c in ["rank", "steps", "mode"] + [c.removesuffix("_ns") for c in cols]:
            t.add_column(c)
        for rank, g in sb.groupby("rank"):
            means = g[cols].astype("float64").mean()
            t.add_row(str(rank), str(len(g)), str(g["mode"].iloc[0]), *[_ms(means[c]) for c in cols])
        console.print(t)
    cg = report["communication_groups"]
    if not cg.empty:
        t = Table(title="Communication groups (ms, summed over ranks)")
        for c in ("group", "role", "ranks", "ops", "instances", "elapsed", "wait", "transit", "wait ratio"):
            t.add_column(c)
        for r in cg.itertuples():
            t.add_row(str(r.group_name), r.pg_name if isinstance(r.pg_name, str) else "-", str(list(r.ranks)), ",".join(r.op_types), str(r.instances),
                      _ms(r.elapsed_ns), _ms(r.wait_ns), _ms(r.transit_ns),
                      "-" if r.wait_ratio is None or pd.isna(r.wait_ratio) else f"{r.wait_ratio:.1%}")
        console.print(t)
    sr = report["slow_ranks"]
    if not sr.empty:
        t = Table(title="Slow rank votes (msprof-analyze: shortest elapsed per collective, Dixon 99.5 % / 3σ)")
        for c in ("rank", "votes", "collectives judged"):
            t.add_column(c)
        for r in sr.itertuples():
            t.add_row(str(r.rank), str(r.votes), str(r.instances))
        console.print(t)
    sl = report["slow_links"]
    if not sl.empty:
        slow = sl[sl["slow"]]
        console.print(f"slow links: {len(slow)} of {len(sl)} judged bandwidth sets are slow (> 5 % gap)")
    pdims = report["parallel_dims"]
    if not pdims.empty:
        console.print("parallel layout: " + ", ".join(f"{r.dim.upper()}={r.size} ({r.source})" for r in pdims.itertuples()),
                      markup=False)
    co = report["clock_offsets"]
    if not co.empty:
        t = Table(title="Clock offsets to the reference rank (ms)")
        for c in ("rank", "status", "offset", "residual", "collectives"):
            t.add_column(c)
        for r in co.itertuples():
            t.add_row(str(r.rank), r.status, _ms(r.offset_ns), _ms(r.residual_ns), str(r.n_collectives))
        console.print(t)
        for w in co["warning"].dropna():
            console.print(f"[yellow]warning:[/] {w}")
    adv = report["advice"]
    console.print(f"[bold]advice[/]: {len(adv)} finding(s)")
    for r in adv.itertuples():
        colour = {"high": "red", "medium": "yellow"}.get(r.severity, "cyan")
        console.print(f"  [{colour}]{r.severity:<6}[/] {r.title}")
        console.print(f"         {r.detail}", markup=False, style="dim")
