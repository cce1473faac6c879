"""What ``analyze diff``, ``check`` and ``trend`` print: tables for people, one JSON document for programs.

Every name that comes from a trace (operators, kernels, groups, runs) goes into the tables as plain
text (``rich.text.Text`` of ``terminal.visible``): never read as rich markup, control characters shown
as escapes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
from rich.table import Table
from rich.text import Text

from ..format import fmt_bytes, fmt_ns, is_missing, json_ready
from ..terminal import visible
from .diff import TOTAL, RunDiff
from .rules import RuleResult
from .run_metrics import LABELS, Metric
from .run_pairing import Pairing, fmt_steps

MAX_RANK_ROWS = 16  # rank rows printed before "… N more, see --json"
SHOWN = ("step_ns", "computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "free_ns", "preparing_ns")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{c: json_ready(v) for c, v in r.items()} for r in df.to_dict("records")]


def pairing_json(p: Pairing) -> dict[str, Any]:
    return {
        "base": p.base,
        "new": p.new,
        "base_steps": list(p.base_steps),
        "new_steps": list(p.new_steps),
        "step_mode": p.step_mode,
        "match": p.match,
        "groups": [
            {"label": g.label, "base_ranks": list(g.base_ranks), "new_ranks": list(g.new_ranks)} for g in p.groups
        ],
        "unmatched_base": list(p.unmatched_base),
        "unmatched_new": list(p.unmatched_new),
        "notes": list(p.notes),
    }


def diff_json(d: RunDiff) -> dict[str, Any]:
    return {
        "verdict": d.verdict,
        **pairing_json(d.pairing),
        "producers": {"base": list(d.producers[0]), "new": list(d.producers[1])},
        "findings": _records(d.findings),
        "breakdown": _records(d.breakdown),
        "operators": _records(d.operators),
        "communication": _records(d.communication),
        "memory": _records(d.memory),
        "stragglers": _records(d.stragglers),
    }


def _delta_ns(v: Any) -> str:
    if is_missing(v):
        return "-"
    return ("+" if float(v) >= 0 else "−") + fmt_ns(abs(float(v)))


def _pct(v: Any) -> str:
    if is_missing(v):
        return "-"
    return f"{float(v):+.1f} %"


def _text(value: Any, style: str | None = None) -> Text:
    """A table cell or line: literal text, control characters visible."""
    return Text(visible(value), style=style or "")


def _say(console: Any, text: str, style: str | None = None) -> None:
    console.print(_text(text, style))


def print_diff(d: RunDiff, console: Any, top: int = 10) -> None:
    p = d.pairing
    _say(console, d.verdict, "bold")
    _say(console, f"steps: {p.base} {fmt_steps(p.base_steps)}; {p.new} {fmt_steps(p.new_steps)} (values per step)")
    for note in p.notes:
        _say(console, f"note: {note}", "dim")

    bd = d.breakdown
    t = Table(title=_text(f"Step breakdown per step, {p.base} → {p.new}"))
    t.add_column("ranks")
    for col in SHOWN:
        t.add_column(_text(LABELS[col]))
    t.add_column("noise")
    labels = [g.label for g in p.groups]
    shown = labels if len(labels) <= MAX_RANK_ROWS else labels[:MAX_RANK_ROWS]
    for label in [*shown, TOTAL]:
        rows = bd[bd["label"] == label].set_index("metric")
        cells = [_text(label)]
        for col in SHOWN:
            if col not in rows.index:
                cells.append(_text("-"))
                continue
            r = rows.loc[col]
            text = f"{fmt_ns(r['base_value'])} → {fmt_ns(r['new_value'])}"
            if col == "step_ns":
                text += f" ({_pct(r['delta_pct'])})"
            else:
                text += f" ({_delta_ns(r['delta'])})"
            cells.append(_text(text))
        sig = rows.loc["step_ns", "significant"] if "step_ns" in rows.index else None
        cells.append(_text("-" if is_missing(sig) else ("beyond" if sig else "within")))
        t.add_row(*cells, style="bold" if label == TOTAL else None)
    console.print(t)
    if len(labels) > MAX_RANK_ROWS:
        _say(console, f"… {len(labels) - MAX_RANK_ROWS} more rank rows, see --json")

    ops = d.operators
    for kind, title in (("operator", "Operators"), ("kernel", "Kernels")):
        rows = ops[(ops["kind"] == kind) & (ops["grouping"] == "name") & (ops["status"] != "same")]
        if rows.empty:
            continue
        t = Table(title=_text(f"{title} whose time per rank and step changed most"))
        for c in ("name", "status", "calls", "time", "change"):
            t.add_column(c)
        for r in rows.head(top).to_dict("records"):
            t.add_row(
                _text(r["name"]),
                _text(r["status"]),
                _text(f"{r['base_calls']:g} → {r['new_calls']:g}"),
                _text(f"{fmt_ns(r['base_ns'])} → {fmt_ns(r['new_ns'])}"),
                _text(f"{_delta_ns(r['delta_ns'])} ({_pct(r['delta_pct'])})"),
            )
        console.print(t)
        if len(rows) > top:
            _say(console, f"… {len(rows) - top} more changed, see --json (by name + input shapes too)")

    comm = d.communication
    if not comm.empty:
        t = Table(title=_text("Communication per rank and step"))
        for c in ("op", "group", "calls", "bytes per call", "elapsed", "wait", "transit", "bandwidth"):
            t.add_column(c)
        for r in comm.to_dict("records"):
            t.add_row(
                _text(r["op_type"]),
                _text(r["group"]),
                _text(f"{r['base_calls']:g} → {r['new_calls']:g}"),
                _text(f"{fmt_bytes(r['base_bytes_per_call'])} → {fmt_bytes(r['new_bytes_per_call'])}"),
                _text(f"{fmt_ns(r['base_elapsed_ns'])} → {fmt_ns(r['new_elapsed_ns'])}"),
                _text(f"{fmt_ns(r['base_wait_ns'])} → {fmt_ns(r['new_wait_ns'])}"),
                _text(f"{fmt_ns(r['base_transit_ns'])} → {fmt_ns(r['new_transit_ns'])}"),
                _text(f"{_gbps(r['base_bandwidth_bytes_per_s'])} → {_gbps(r['new_bandwidth_bytes_per_s'])}"),
            )
        console.print(t)

    mem = d.memory[d.memory["metric"] == "peak_allocated_bytes"]
    if not mem.empty:
        parts = [
            f"{r['label']} {fmt_bytes(r['base_value'])} → {fmt_bytes(r['new_value'])}" for r in mem.to_dict("records")
        ]
        _say(console, "peak allocated memory: " + "; ".join(parts))
    st = d.stragglers
    for side, run in (("base", p.base), ("new", p.new)):
        s = st[st["side"] == side]
        who = ", ".join(f"rank {int(r)} ({int(v)} votes)" for r, v in zip(s["rank"], s["votes"])) or "none"
        _say(console, f"stragglers of {run}: {who}")


def _gbps(v: Any) -> str:
    return "-" if is_missing(v) else f"{float(v) / 1e9:.3g} GB/s"


def check_json(p: Pairing, results: Sequence[RuleResult], verdict: str | None) -> dict[str, Any]:
    return {
        "passed": not any(r.failed for r in results),
        **pairing_json(p),
        "rules": [json_ready(r.record()) for r in results],
        "verdict": verdict,
    }


def print_check(p: Pairing, results: Sequence[RuleResult], verdict: str | None, console: Any) -> None:
    failed = [r for r in results if r.failed]
    _say(console, f"{p.new} against {p.base} ({fmt_steps(p.new_steps)} vs {fmt_steps(p.base_steps)}):")
    for r in results:
        _say(console, "  " + r.explanation, "red" if r.failed else None)
    for note in p.notes:
        _say(console, f"note: {note}", "dim")
    if failed:
        _say(console, f"check failed: {len(failed)} of {len(results)} rule(s) broken", "bold red")
        if verdict:
            _say(console, "diff: " + verdict)
    else:
        _say(console, f"check passed: {len(results)} rule(s) hold", "bold green")


def trend_json(df: pd.DataFrame, metric: Metric) -> dict[str, Any]:
    return {"metric": metric.text, "label": metric.label, "unit": metric.unit, "runs": _records(df)}


def print_trend(df: pd.DataFrame, metric: Metric, console: Any) -> None:
    if df.empty:
        _say(console, "no run to show (analyze ingest one; --tag keeps the runs carrying that tag)")
        return
    t = Table(title=_text(f"{metric.label} per run ({metric.text})"))
    for c in ("run", "ingested (UTC)", "collected", "value", "change", "", "names"):
        t.add_column(c)
    top = df["value"].abs().max()
    for r in df.to_dict("records"):
        v = r["value"]
        value = "-" if is_missing(v) else (fmt_bytes(v) if metric.unit == "bytes" else fmt_ns(v))
        bar = "" if is_missing(v) or not top else "█" * max(1, round(20 * abs(float(v)) / float(top)))
        names = [f"baseline:{b}" for b in r["baselines"]] + [f"#{t}" for t in r["tags"]]
        t.add_row(
            _text(r["run"]),
            _text(str(r["ingested_at"])[:19]),
            _text("-" if is_missing(r["collected_at"]) else str(r["collected_at"])[:19]),
            _text(value),
            _text(_pct(r["change_pct"])),
            _text(bar),
            _text(", ".join(names)),
        )
    console.print(t)


def dumps(obj: Any) -> str:
    return json.dumps(json_ready(obj), indent=2, default=str)
