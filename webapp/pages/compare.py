"""Compare: two runs of the store side by side (``analyzer.analyses.run_diff``, what ``analyze diff``
prints): the verdict in one sentence, each rank's step breakdown in both runs as bars side by side and
as a delta table, the operators and kernels whose time changed most (each row linking to both runs'
timelines at the step where it changed most), communication per collective and group, memory peaks
and the stragglers of each run. The URL holds both runs and the steps compared
(``/compare?base=A&new=B&base_step=N&new_step=M``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash
import dash_ag_grid as dag
import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from analyzer.analyses import RunDiff
from analyzer.analyses.diff import TOTAL
from analyzer.analyses.verdict import row_label, steps_said
from analyzer.format import is_missing
from webapp import data, links, ui
from webapp.errors import BadParameter, NotFound
from webapp.format import fmt_bytes, fmt_ns, plot_text
from webapp.labels import (
    grid_locale,
    joined_list,
    page_title,
    said,
    said_english,
    said_or_text,
    said_sentence,
    said_term,
    t,
)
from webapp.params import parse_int, single
from webapp.reader import Reader, reader

dash.register_page(__name__, path="/compare", name="Compare", title=page_title("compare"), order=5)

P = "cmp"
ALIGNED = "aligned"  # the step dropdowns' "steps aligned by number" choice
SEGMENTS = (  # the bars: computing (overlapped part included) + not overlapped communication + free + preparing
    ("computing_ns", "computing"),
    ("comm_not_overlapped_ns", "comm_not_overlapped"),
    ("free_ns", "free"),
    ("preparing_ns", "preparing"),
)
DELTA_COLUMNS = ("step_ns", "computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "free_ns", "preparing_ns")
TOP_OPERATORS = 200  # rows of the operators grid (the most changed first)
_MS = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}
_DMS = {"function": "params.value == null ? '' : d3.format('+,.3f')(params.value)"}
_PCT = {"function": "params.value == null ? '' : d3.format('+.1f')(params.value) + ' %'"}
_CALLS = {"function": "params.value == null ? '' : d3.format(',.4~g')(params.value)"}


def layout(
    base: Any = None, new: Any = None, base_step: Any = None, new_step: Any = None, run: Any = None, **_: Any
) -> Any:
    return ui.safe_layout(lambda: _layout(base, new, base_step, new_step, run))


def default_pair(runs: Sequence[str], base: str | None, new: str | None) -> tuple[str, str]:
    """The runs compared when the URL leaves one out: ``new`` the most recently ingested run, ``base``
    the run ingested before ``new`` (``runs``: most recent first)."""
    new = new or runs[0]
    if base is None:
        i = runs.index(new) if new in runs else 0
        base = runs[i + 1] if i + 1 < len(runs) else runs[i - 1]
    return base, new


def _layout(base_q: Any, new_q: Any, base_step_q: Any, new_step_q: Any, run_q: Any) -> html.Div:
    with reader(ui.current_store()) as rd:
        runs = data.run_names(rd)
        if not runs:
            return html.Div([ui.header(t("nav.compare")), ui.empty_store(rd.store)], className="page")
        if len(runs) < 2:
            return html.Div(
                [
                    ui.header(t("nav.compare")),
                    ui.message(t("cmp.one_run", run=runs[0]), "info"),
                ],
                className="page",
            )
        notes: list[Any] = []
        named: dict[str, str | None] = {}
        for key, q in (("base", base_q), ("new", new_q)):
            try:
                named[key] = data.resolve_run(rd, single(key, q)) if single(key, q) else None
            except (NotFound, BadParameter) as exc:
                notes.append(ui.message(t("cmp.url_default", name=key, problem=exc), id=f"{P}-url-note-{key}"))
                named[key] = None
        if named["new"] is None and single("run", run_q) in runs:  # from another page: that run is the new one
            named["new"] = single("run", run_q)
        base, new = default_pair(runs, named["base"], named["new"])
        steps: dict[str, Any] = {}
        known = {"base_step": run_steps(rd, base), "new_step": run_steps(rd, new)}
        for key, q, run in (("base_step", base_step_q, base), ("new_step", new_step_q, new)):
            try:
                step = parse_int(key, q, minimum=0)
                if step is not None and step not in known[key]:
                    raise BadParameter(key, step, t("cmp.no_step", run=repr(run), step=step))
                steps[key] = ALIGNED if step is None else step
            except BadParameter as exc:
                notes.append(ui.message(t("cmp.aligned_note", problem=exc), id=f"{P}-url-note-{key}"))
                steps[key] = ALIGNED
    run_options = [{"label": r, "value": r} for r in runs]
    return html.Div(
        [
            ui.header(t("nav.compare"), t("cmp.subtitle")),
            html.Div(
                [
                    _dropdown(t("cmp.base_run"), f"{P}-base", run_options, base, "dd dd-run"),
                    _dropdown(
                        t("cmp.base_step"),
                        f"{P}-base-step",
                        step_options(known["base_step"]),
                        steps["base_step"],
                        "dd dd-step",
                    ),
                    html.Div(
                        html.Button(t("cmp.swap"), id=f"{P}-swap", n_clicks=0, className="btn"),
                        className="control buttons",
                    ),
                    _dropdown(t("cmp.new_run"), f"{P}-new", run_options, new, "dd dd-run"),
                    _dropdown(
                        t("cmp.new_step"),
                        f"{P}-new-step",
                        step_options(known["new_step"]),
                        steps["new_step"],
                        "dd dd-step",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
        ],
        className="page",
    )


def _dropdown(label: str, id_: str, options: list[dict[str, Any]], value: Any, cls: str) -> html.Div:
    return html.Div(
        [
            html.Label(label, htmlFor=id_),
            ui.dropdown(id=id_, options=options, value=value, clearable=False, className=cls),
        ],
        className="control",
    )


def run_steps(rd: Reader, run: str) -> list[int]:
    """The profiled steps of ``run`` the comparison can use (those of its step breakdown)."""
    sb = data.step_breakdown(rd, run)
    return sorted({int(s) for s in sb["step"].dropna()}) if not sb.empty else []


def step_options(steps: Sequence[int]) -> list[dict[str, Any]]:
    return [{"label": t("cmp.aligned"), "value": ALIGNED}] + [
        {"label": t("cmp.step_n", step=s), "value": int(s)} for s in steps
    ]


def _step_arg(v: Any) -> int | None:
    return None if v in (None, "", ALIGNED) else int(v)


# ---------------------------------------------------------------------------------------------
# content (pure functions of a diff: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def render(d: RunDiff, top: int = TOP_OPERATORS) -> list[Any]:
    """The comparison ``d`` as page content."""
    p = d.pairing
    head: list[Any] = [
        html.P(said_sentence(d.verdict_msgs) if d.verdict_msgs else d.verdict, className="verdict", id=f"{P}-verdict"),
        html.P(
            t(
                "cmp.steps",
                base=p.base,
                base_steps=said(steps_said(p.base_steps)),
                new=p.new,
                new_steps=said(steps_said(p.new_steps)),
                match=said_term("match", p.match),
            ),
            className="note",
            id=f"{P}-steps",
        ),
        *[html.P(said_english(n, "pairing"), className="note") for n in p.notes],
    ]
    findings = [html.Li(said(m)) for m in d.verdict_msgs]
    if findings:
        summary = html.Summary(t("cmp.all_findings", n=len(findings)))
        head.append(html.Details([summary, html.Ul(findings)], id=f"{P}-findings"))
    rows, cols = operator_rows(d, top)
    return [
        html.Div(head, className="card"),
        html.Div([html.H2(t("cmp.breakdown")), ui.graph(f"{P}-bars", bars_figure(d))], className="card"),
        html.Div([html.H2(t("cmp.change_per_rank")), delta_table(d)], className="card"),
        html.Div(
            [
                html.H2(t("cmp.ops_title")),
                html.P(t("cmp.ops_note"), className="note"),
                dag.AgGrid(
                    id=f"{P}-ops",
                    rowData=rows,
                    columnDefs=cols,
                    defaultColDef={"sortable": True, "filter": True, "resizable": True, "floatingFilter": True},
                    dashGridOptions={
                        "localeText": grid_locale(),
                        "pagination": True,
                        "paginationPageSize": 15,
                        "paginationPageSizeSelector": [15, 50, 100],
                        "animateRows": False,
                        "domLayout": "autoHeight",
                        "tooltipShowDelay": 300,
                        "suppressColumnVirtualisation": True,  # 13 columns: the links at the right end are rendered too
                    },
                    className="ag-theme-alpine",
                ),
            ],
            className="card",
        ),
        html.Div(
            [
                html.Div([html.H2(t("cmp.comm_title")), comm_table(d)], className="card"),
                html.Div([html.H2(t("cmp.mem_title")), memory_table(d), stragglers(d)], className="card"),
            ],
            className="row2",
        ),
    ]


def _labels(d: RunDiff) -> list[str]:
    return [g.label for g in d.pairing.groups]


def _values(d: RunDiff, label: str) -> pd.DataFrame:
    bd = d.breakdown
    return bd[bd["label"] == label].set_index("metric")


def bars_figure(d: RunDiff) -> Any:
    """Per rank (row of the pairing), the base run's and the new run's step breakdown as stacked bars
    side by side (a two-level axis: rank, then run)."""
    p = d.pairing
    labels = _labels(d)
    fig = ui.figure(height=380, barmode="stack", yaxis_title=t("cmp.ms_per_step"))
    if not labels:
        return fig
    shown = [said_or_text(row_label(lb)) for lb in labels]
    x = [[lb for lb in shown for _ in (0, 1)], [r for _ in labels for r in (p.base, p.new)]]  # escaped when sent
    for col, color in SEGMENTS:
        y: list[float | None] = []
        for lb in labels:
            rows = _values(d, lb)
            for side in ("base_value", "new_value"):
                v = rows[side].get(col) if col in rows.index else None
                y.append(None if is_missing(v) else float(v) / 1e6)
        if all(v is None for v in y):
            continue
        fig.add_bar(
            name=t(f"metric.{col}"),
            x=x,
            y=y,
            marker_color=ui.COLORS[color],
            hovertemplate="%{x}: %{y:.3f} ms<extra>" + plot_text(t(f"metric.{col}")) + "</extra>",
        )
    totals = []
    for lb in labels:
        rows = _values(d, lb)
        for side in ("base_value", "new_value"):
            v = rows[side].get("step_ns") if "step_ns" in rows.index else None
            totals.append(None if is_missing(v) else float(v) / 1e6)
    fig.add_scatter(
        x=x,
        y=totals,
        mode="markers",
        name=t("cmp.step_marker"),
        marker=dict(symbol="line-ew-open", size=18, color="#222", line=dict(width=2)),
        hovertemplate="%{x}: " + plot_text(t("cmp.step_marker")) + " %{y:.3f} ms<extra></extra>",
    )
    return fig


def _delta_cell(r: pd.Series | None) -> str:
    if r is None or is_missing(r.get("delta")):
        return "-"
    d = float(r["delta"])
    pct = r.get("delta_pct")
    sign = "+" if d >= 0 else "−"
    return f"{sign}{fmt_ns(abs(d))}" + ("" if is_missing(pct) else f" ({float(pct):+.1f} %)")


def delta_table(d: RunDiff) -> html.Table:
    """One row per rank (row of the pairing) and the total: step time in both runs, the change and
    whether it is beyond the step-to-step noise, and the change of every breakdown column."""
    head = [
        t("cmp.col.ranks"),
        t("cmp.col.step"),
        t("cmp.col.change"),
        t("cmp.col.noise"),
        *[t(f"metric.{c}") for c in DELTA_COLUMNS[1:]],
    ]
    body = []
    for label in [*_labels(d), TOTAL]:
        rows = _values(d, label)
        if rows.empty:
            continue
        st = rows.loc["step_ns"] if "step_ns" in rows.index else None
        sig = None if st is None else st.get("significant")
        cells = [
            said_or_text(row_label(label)),
            "-" if st is None else f"{fmt_ns(st['base_value'])} → {fmt_ns(st['new_value'])}",
            _delta_cell(st),
            "-" if is_missing(sig) else t("cmp.beyond" if sig else "cmp.within"),
            *[_delta_cell(rows.loc[c] if c in rows.index else None) for c in DELTA_COLUMNS[1:]],
        ]
        body.append(html.Tr([html.Td(str(c)) for c in cells], className="total" if label == TOTAL else None))
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(body)], className="tbl", id=f"{P}-delta"
    )


def _timeline_link(run: str, rank: Any, step: Any, side: str) -> str:
    """A markdown link to ``run``'s timeline on ``rank`` at ``step``; the text is ours (never a trace name)."""
    if is_missing(rank) or is_missing(step):
        return ""
    text = t("cmp.link", side=t(f"cmp.side.{side}"), rank=int(rank), step=int(step))
    return f"[{text}]({links.timeline_url(run, [int(rank)], step=int(step))})"


def operator_columns() -> list[dict[str, Any]]:
    num = {"filter": "agNumberColumnFilter"}
    return [
        {"field": "name", "headerName": t("cmp.op.name"), "tooltipField": "name", "flex": 1, "pinned": "left"},
        {"field": "kind", "headerName": t("cmp.op.kind"), "maxWidth": 110},
        {"field": "grouping", "headerName": t("cmp.op.by"), "maxWidth": 130},
        {"field": "status", "headerName": t("cmp.op.status"), "maxWidth": 110},
        {"field": "delta_ms", "headerName": t("cmp.op.delta_ms"), "valueFormatter": _DMS, **num},
        {"field": "delta_pct", "headerName": t("cmp.op.delta_pct"), "valueFormatter": _PCT, **num},
        {"field": "base_ms", "headerName": t("cmp.op.base_ms"), "valueFormatter": _MS, **num},
        {"field": "new_ms", "headerName": t("cmp.op.new_ms"), "valueFormatter": _MS, **num},
        {"field": "base_link", "headerName": t("cmp.op.base_link"), "cellRenderer": "markdown", "sortable": False},
        {"field": "new_link", "headerName": t("cmp.op.new_link"), "cellRenderer": "markdown", "sortable": False},
        {"field": "base_calls", "headerName": t("cmp.op.base_calls"), "valueFormatter": _CALLS, **num},
        {"field": "new_calls", "headerName": t("cmp.op.new_calls"), "valueFormatter": _CALLS, **num},
        {
            "field": "input_shapes",
            "headerName": t("cmp.op.input_shapes"),
            "tooltipField": "input_shapes",
            "maxWidth": 220,
        },
    ]


def operator_rows(d: RunDiff, top: int = TOP_OPERATORS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``top`` operators and kernels whose time per rank and step changed most (by name and by
    name + input shapes; unchanged ones left out), most changed first, with links into both timelines."""
    ops = d.operators[d.operators["status"] != "same"]
    ops = ops.assign(_abs=ops["delta_ns"].abs()).sort_values("_abs", ascending=False).head(top)
    p = d.pairing
    out = pd.DataFrame(
        {
            "kind": [said_term("kind", k) for k in ops["kind"]],
            "name": ops["name"].astype(str),
            "grouping": np.where(ops["grouping"] == "name", t("cmp.by_name"), t("cmp.by_shapes")),
            "input_shapes": ops["input_shapes"].astype(object).where(ops["input_shapes"].notna(), None),
            "status": [said_term("status", s) for s in ops["status"]],
            "base_calls": pd.to_numeric(ops["base_calls"], errors="coerce").round(4),
            "new_calls": pd.to_numeric(ops["new_calls"], errors="coerce").round(4),
            "base_ms": (pd.to_numeric(ops["base_ns"], errors="coerce") / 1e6).round(6),
            "new_ms": (pd.to_numeric(ops["new_ns"], errors="coerce") / 1e6).round(6),
            "delta_ms": (pd.to_numeric(ops["delta_ns"], errors="coerce") / 1e6).round(6),
            "delta_pct": pd.to_numeric(ops["delta_pct"], errors="coerce").round(2),
        }
    )
    out["base_link"] = [_timeline_link(p.base, r, s, "base") for r, s in zip(ops["base_rank"], ops["base_step"])]
    out["new_link"] = [_timeline_link(p.new, r, s, "new") for r, s in zip(ops["new_rank"], ops["new_step"])]
    rows = out.astype(object).where(out.notna(), None).to_dict("records")
    return rows, ui.fit_columns(operator_columns(), rows, max_px=420, budget_px=1340)


def _pair(a: Any, b: Any, fmt: Any) -> str:
    return f"{'-' if is_missing(a) else fmt(a)} → {'-' if is_missing(b) else fmt(b)}"


def _gbps(v: Any) -> str:
    return f"{float(v) / 1e9:.3g} GB/s"


def comm_table(d: RunDiff) -> Any:
    c = d.communication
    if c.empty:
        return ui.message(t("cmp.no_comm"), "info")
    rows = [
        [
            r["op_type"],
            said_english(r["group"], "label"),
            said_term("status", r["status"]),
            _pair(r["base_calls"], r["new_calls"], lambda v: f"{float(v):g}"),
            _pair(r["base_bytes_per_call"], r["new_bytes_per_call"], fmt_bytes),
            _pair(r["base_elapsed_ns"], r["new_elapsed_ns"], fmt_ns),
            _pair(r["base_wait_ns"], r["new_wait_ns"], fmt_ns),
            _pair(r["base_transit_ns"], r["new_transit_ns"], fmt_ns),
            _pair(r["base_bandwidth_bytes_per_s"], r["new_bandwidth_bytes_per_s"], _gbps),
        ]
        for r in c.to_dict("records")
    ]
    cols = [
        t(f"cmp.cc.{c}") for c in ("op", "group", "status", "calls", "bytes", "elapsed", "wait", "transit", "bandwidth")
    ]
    return ui.table(cols, rows, id_=f"{P}-comm")


def memory_table(d: RunDiff) -> Any:
    m = d.memory
    if m.empty:
        return ui.message(t("cmp.no_mem"), "info")
    rows = [
        [
            said_or_text(row_label(str(r["label"]))),
            said_term("memory", r["metric"]),
            _pair(r["base_value"], r["new_value"], fmt_bytes),
        ]
        for r in m.to_dict("records")
        if _recorded(r["base_value"]) or _recorded(r["new_value"])  # reserved is 0 where it is not recorded (CPU)
    ]
    if not rows:
        return ui.message(t("cmp.no_mem"), "info")
    return ui.table([t("cmp.mc.ranks"), t("cmp.mc.peak"), t("cmp.mc.change")], rows, id_=f"{P}-memory")


def _recorded(v: Any) -> bool:
    return not is_missing(v) and float(v) > 0


def stragglers(d: RunDiff) -> html.Div:
    st, p = d.stragglers, d.pairing
    lines = []
    for side, run in (("base", p.base), ("new", p.new)):
        s = st[st["side"] == side]
        who = joined_list([t("cmp.votes", rank=int(r), n=int(v)) for r, v in zip(s["rank"], s["votes"])])
        lines.append(html.Li(t("cmp.run_slow", run=run, who=who or t("cmp.none"))))
    return html.Div([html.H3(t("cmp.slow_ranks")), html.Ul(lines)], id=f"{P}-stragglers")


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-base", "value"),
        Output(f"{P}-new", "value"),
        Input(f"{P}-swap", "n_clicks"),
        State(f"{P}-base", "value"),
        State(f"{P}-new", "value"),
        prevent_initial_call=True,
    )
    def swap(_n: Any, base: str, new: str) -> tuple[str, str]:
        return new, base

    for side in ("base", "new"):

        @app.callback(
            Output(f"{P}-{side}-step", "options"),
            Output(f"{P}-{side}-step", "value"),
            Input(f"{P}-{side}", "value"),
            State(f"{P}-{side}-step", "value"),
            prevent_initial_call=True,  # the layout has the steps of the runs it opens on
        )
        @ui.guard(2, message_index=0)
        def step_choices(run: str, value: Any) -> tuple[list[dict[str, Any]], Any]:
            with reader(ui.current_store(), run) as rd:
                steps = run_steps(rd, run)
            # a step the run has (or aligned) stays as it is: no second comparison for the same choice
            return step_options(steps), dash.no_update if value in (*steps, ALIGNED) else ALIGNED

    @app.callback(
        Output(f"{P}-content", "children"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-base", "value"),
        Input(f"{P}-new", "value"),
        Input(f"{P}-base-step", "value"),
        Input(f"{P}-new-step", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @ui.guard(2, message_index=0)
    def update(base: str, new: str, base_step: Any, new_step: Any) -> Any:
        bs, ns = _step_arg(base_step), _step_arg(new_step)
        url = links.compare_url(base, new, bs, ns)
        if base == new:
            return ui.message(t("cmp.same_run"), "info"), url
        with reader(ui.current_store()) as rd:
            d = data.run_diff(rd, base, new, bs, ns)
        return render(d), url
