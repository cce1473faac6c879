"""Operators: host operators or device kernels with count, total, self, avg, min, max, grouped by
type / name / name and input shape, per rank or across ranks (with the spread between ranks); a
top-N chart; select a row to drill into that operator across ranks (MindSpore's ``op_analyse``)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import dash
import dash_ag_grid as dag
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import Dash, Input, Output, Patch, State, dcc, html

from webapp import answers, data, links, page, ui
from webapp.errors import WebappError
from webapp.format import fmt_int, fmt_ns, shorten
from webapp.labels import grid_locale, page_title, t
from webapp.params import format_ranks, parse_choice, parse_int, single
from webapp.reader import Reader

dash.register_page(__name__, path="/operators", name="Operators", title=page_title("operators"), order=2)

P = "op"
SOURCES = ("operators", "kernels")  # labels: op.src.KEY
GROUPS = ("type", "name", "shape")  # op.grp.KEY
SCOPES = ("across", "rank")  # op.scp.KEY
METRICS = ("total_ns", "self_ns", "avg_ns", "max_ns", "count", "spread_pct")  # op.m.KEY
SLOW_SPREAD_PCT = 5.0  # drill bars: the slowest rank is marked when its total is this much above the fastest
_MS = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}
_INT = {"function": "params.value == null ? '' : d3.format(',')(params.value)"}
_PCT = {"function": "params.value == null ? '' : d3.format('.1f')(params.value) + ' %'"}


def layout(
    run: Any = None,
    ranks: Any = None,
    source: Any = None,
    group: Any = None,
    scope: Any = None,
    q: Any = None,
    op: Any = None,
    shape: Any = None,
    top: Any = None,
    **_: Any,
) -> Any:
    return page.layout(t("nav.operators"), run, ranks, lambda v: _layout(v, source, group, scope, q, op, shape, top))


def _layout(
    v: page.View, source_q: Any, group_q: Any, scope_q: Any, q_q: Any, op_q: Any, shape_q: Any, top_q: Any
) -> html.Div:
    rd, run, notes = v.rd, v.run, v.notes
    default_source = "kernels" if _has_kernels(rd, run) else "operators"
    values: dict[str, Any] = {}
    for key, raw, choices, default in (
        ("source", source_q, data.SOURCES, default_source),
        ("group", group_q, data.GROUPINGS, "name"),
        ("scope", scope_q, SCOPES, "across"),
    ):
        try:
            values[key] = parse_choice(key, raw, choices, default)
        except WebappError as exc:
            notes.append(ui.message(t("op.using", problem=exc, default=default)))
            values[key] = default
    try:
        top = parse_int("top", top_q, minimum=1, maximum=100) or 15
    except WebappError as exc:
        notes.append(ui.message(str(exc)))
        top = 15
    drill = (
        {
            "op": single("op", op_q),
            "shape": single("shape", shape_q) if values["group"] == "shape" else None,
            "group": values["group"],
        }
        if single("op", op_q)
        else None
    )
    return html.Div(
        [
            ui.header(t("nav.operators"), t("op.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, [] if v.selected == v.all_ranks else v.selected),
                    _radio("source", "op.src", SOURCES, values["source"]),
                    _radio("group", "op.grp", GROUPS, values["group"]),
                    _radio("scope", "op.scp", SCOPES, values["scope"]),
                    html.Div(
                        [
                            html.Label(t("op.search"), htmlFor=f"{P}-search"),
                            dcc.Input(
                                id=f"{P}-search",
                                type="search",
                                value=single("q", q_q) or "",
                                debounce=0.3,
                                placeholder=t("op.search_ph"),
                                className="search",
                                style={"width": "240px"},
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-want-drill", data=drill),
            dcc.Store(id=f"{P}-drill-key"),
            dcc.Store(
                id=f"{P}-shown-texts",
                data={k: t(f"op.shown.{k}") for k in ("search", "filters")} | {"shown": t("op.shown")},
            ),
            html.Div([html.Span(id=f"{P}-status"), html.Span(id=f"{P}-shown")], className="status"),
            dag.AgGrid(
                id=f"{P}-grid",
                rowData=[],
                columnDefs=[],
                defaultColDef={
                    "sortable": True,
                    "filter": True,
                    "resizable": True,
                    "floatingFilter": True,
                    "minWidth": 90,
                },
                dashGridOptions={
                    "localeText": grid_locale(),
                    "rowSelection": {"mode": "singleRow", "enableClickSelection": True, "checkboxes": False},
                    "pagination": True,
                    "paginationPageSize": 20,
                    "paginationPageSizeSelector": [20, 50, 100],
                    "quickFilterText": single("q", q_q) or "",
                    "animateRows": False,
                    "domLayout": "autoHeight",
                    "tooltipShowDelay": 300,
                },
                getRowId="params.data.id",
                className="ag-theme-alpine",
            ),
            html.Div(
                [
                    html.Div(
                        [
                            html.Div(
                                [
                                    html.H2(t("op.top"), id=f"{P}-top-title"),
                                    html.Div(
                                        [
                                            ui.dropdown(
                                                id=f"{P}-metric",
                                                options=[{"label": t(f"op.m.{k}"), "value": k} for k in METRICS],
                                                value="total_ns",
                                                clearable=False,
                                                className="dd dd-small",
                                            ),
                                            dcc.Input(
                                                id=f"{P}-top",
                                                type="number",
                                                min=1,
                                                max=100,
                                                value=top,
                                                className="num",
                                                style={"width": "80px"},
                                            ),
                                        ],
                                        className="inline",
                                    ),
                                ],
                                className="card-head",
                            ),
                            dcc.Loading(html.Div(id=f"{P}-topn"), type="dot", delay_show=300),
                        ],
                        className="card",
                    ),
                    html.Div(
                        [
                            html.H2(t("op.across")),
                            dcc.Loading(
                                html.Div(
                                    html.P(t("op.select"), className="note"),
                                    id=f"{P}-drill",
                                ),
                                type="dot",
                                delay_show=300,
                            ),
                        ],
                        className="card",
                    ),
                ],
                className="row2 eq",
            ),
        ],
        className="page",
    )


def _radio(name: str, prefix: str, keys: Sequence[str], value: str) -> html.Div:
    return html.Div(
        [
            html.Label(t(f"op.{name}"), htmlFor=f"{P}-{name}"),
            dcc.RadioItems(
                id=f"{P}-{name}",
                options=[{"label": t(f"{prefix}.{k}"), "value": k} for k in keys],
                value=value,
                inline=True,
                className="radios",
            ),
        ],
        className="control",
    )


def _has_kernels(rd: Reader, run: str) -> bool:
    cols = data.collections(rd, run)
    return any("kernels" in (c if c is not None else []) for c in cols["capabilities"])


# ---------------------------------------------------------------------------------------------
# content (pure functions)
# ---------------------------------------------------------------------------------------------


def grid(
    rd: Reader, run: str, source: str, group: str, ranks: Sequence[int], across: bool
) -> tuple[list[dict], list[dict], str]:
    """(rowData, columnDefs, status line) of the operators grid."""
    df, n = data.operator_stats(rd, run, source, group, ranks, across)
    what = t(f"op.what.{source}")
    if df.empty:
        hint = t("op.no_kernels") if source == "kernels" else ""
        return [], [], t("op.none", what=what, hint=hint)
    key_title = t(
        {"type": "op.col.type" if source == "kernels" else "op.col.category", "name": "op.col.name"}.get(
            group, "op.col.name"
        )
    )
    cols: list[dict[str, Any]] = [
        {
            "field": "key",
            "headerName": key_title,
            "filter": "agTextColumnFilter",
            "tooltipField": "key",
            "pinned": "left",
        },
    ]
    if group == "shape":
        cols.append(
            {
                "field": "shape",
                "headerName": t("op.col.shape"),
                "filter": "agTextColumnFilter",
                "maxWidth": 260,
                "tooltipField": "shape",
            }
        )
    if not across:
        cols.append(
            {"field": "rank", "headerName": t("op.col.rank"), "filter": "agNumberColumnFilter", "valueFormatter": _INT}
        )
    cols += [
        {"field": "count", "headerName": t("op.col.count"), "filter": "agNumberColumnFilter", "valueFormatter": _INT},
        {
            "field": "total_ms",
            "headerName": t("op.col.total_ms"),
            "filter": "agNumberColumnFilter",
            "valueFormatter": _MS,
            "sort": "desc",
        },
    ]
    if source == "operators":
        cols.append(
            {
                "field": "self_ms",
                "headerName": t("op.col.self_ms"),
                "filter": "agNumberColumnFilter",
                "valueFormatter": _MS,
            }
        )
    cols += [
        {"field": "avg_ms", "headerName": t("op.col.avg_ms"), "filter": "agNumberColumnFilter", "valueFormatter": _MS},
        {"field": "min_ms", "headerName": t("op.col.min_ms"), "filter": "agNumberColumnFilter", "valueFormatter": _MS},
        {"field": "max_ms", "headerName": t("op.col.max_ms"), "filter": "agNumberColumnFilter", "valueFormatter": _MS},
    ]
    if across:
        cols += [
            {
                "field": "ranks",
                "headerName": t("op.col.ranks"),
                "filter": "agNumberColumnFilter",
                "valueFormatter": _INT,
            },
            {
                "field": "rank_min_ms",
                "headerName": t("op.col.rank_min_ms"),
                "filter": "agNumberColumnFilter",
                "valueFormatter": _MS,
            },
            {
                "field": "rank_max_ms",
                "headerName": t("op.col.rank_max_ms"),
                "filter": "agNumberColumnFilter",
                "valueFormatter": _MS,
            },
            {
                "field": "spread_pct",
                "headerName": t("op.col.spread_pct"),
                "filter": "agNumberColumnFilter",
                "valueFormatter": _PCT,
                "headerTooltip": t("op.col.spread_tip"),
            },
            {"field": "max_rank", "headerName": t("op.col.max_rank"), "filter": "agNumberColumnFilter"},
        ]
    cols.append(
        {
            "field": "timeline",
            "headerName": t("op.col.timeline"),
            "cellRenderer": "markdown",
            "sortable": False,
            "filter": False,
            "maxWidth": 100,
            "headerTooltip": t("op.col.timeline_tip"),
        }
    )
    out = pd.DataFrame({"key": df["key"].astype(str)})
    out["shape"] = df["shape"].astype(object).where(df["shape"].notna(), None)
    for c in ("total", "self", "avg", "min", "max", "rank_min", "rank_max"):
        if f"{c}_ns" in df:
            out[f"{c}_ms"] = (pd.to_numeric(df[f"{c}_ns"], errors="coerce").astype("float64") / 1e6).round(6)
    out["count"] = df["count"].astype("int64")
    for c in ("rank", "ranks", "max_rank", "min_rank"):
        if c in df:
            out[c] = df[c].astype("int64")
    if "spread_pct" in df:
        out["spread_pct"] = pd.to_numeric(df["spread_pct"], errors="coerce").round(2)
    # the slowest call in the timeline; the link text is ours (a rank), never a name from the trace
    out["timeline"] = [
        f"[{t('ui.rank_n', rank=int(r))}]({links.call_url(run, int(r), int(ts), int(d))})"
        if pd.notna(ts) and pd.notna(d)
        else ""
        for r, ts, d in zip(df["slowest_rank"], df["slowest_ts_ns"], df["max_ns"])
    ]
    token = format(zlib.crc32(repr((run, source, group, tuple(ranks), across, n)).encode()), "x")
    out["id"] = [f"{token}-{i}" for i in range(len(out))]
    rows = out.replace({np.nan: None}).to_dict("records")
    # the name column pinned and as wide as the names, as far as the other columns leave room in a
    # 1400 px window (the tooltip has the rest)
    cols = ui.fit_columns(cols, rows, max_px=420, budget_px=1340)
    cut = t("op.cut", n=f"{len(df):,}", total=f"{n:,}") if n > len(df) else ""
    scope = t("op.scope_across", ranks=format_ranks(ranks) or "") if across else t("op.scp.rank")
    return rows, cols, t("op.status", n=f"{len(df):,}", what=what, group=t(f"op.grp.{group}"), scope=scope, cut=cut)


def top_chart(rows: list[dict], metric: str, n: int, source: str) -> Any:
    if not rows:
        return ui.message(t("op.nothing"), "info")
    df = pd.DataFrame(rows)
    col = {
        "total_ns": "total_ms",
        "self_ns": "self_ms",
        "avg_ns": "avg_ms",
        "max_ns": "max_ms",
        "count": "count",
        "spread_pct": "spread_pct",
    }[metric]
    if col not in df or df[col].isna().all():
        return ui.message(t("op.not_available", metric=t(f"op.m.{metric}")), "info")
    label = df["key"].astype(str)
    if "shape" in df and df["shape"].notna().any():
        label = label + " " + df["shape"].fillna("").astype(str)
    if "rank" in df:
        label = "r" + df["rank"].astype(str) + " " + label
    df = df.assign(label=label).sort_values(col, ascending=False).head(n)
    unit = {"count": t("op.unit.calls"), "spread_pct": "%"}.get(col, "ms")
    fig = ui.figure(height=max(260, 28 * len(df) + 80), showlegend=False, xaxis_title=f"{t(f'op.m.{metric}')} ({unit})")
    fig.update_layout(margin=dict(l=10, r=20, t=10, b=40))
    fig.add_bar(
        x=df[col],
        y=[shorten(s, 60) for s in df["label"]],
        orientation="h",
        marker_color=ui.COLORS["computing"],
        hovertext=[shorten(s, 200) for s in df["label"]],
        hovertemplate="%{hovertext}<br>%{x:,.3f}<extra></extra>",
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return ui.graph(f"{P}-topn-graph", fig)


def drill(
    rd: Reader, run: str, source: str, group: str, key: str, shape: str | None, ranks: Sequence[int]
) -> list[Any]:
    """One operator across ranks: distribution per rank (box from quantiles) and per-rank totals."""
    df = data.operator_drill(rd, run, source, group, key, shape, ranks)
    title = key + ((f" {shape}" if shape is not None else t("op.all_shapes")) if group == "shape" else "")
    if df.empty:
        return [ui.message(t("op.not_found", name=title), "info", id=f"{P}-drill-missing")]
    for c in ("total_ns", "avg_ns", "min_ns", "p25_ns", "p50_ns", "p75_ns", "p99_ns", "max_ns", "self_ns"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    x = [t("ui.rank_n", rank=r) for r in df["rank"]]
    fig = ui.figure(height=300, showlegend=False, yaxis_title=t("op.per_call_axis"))
    fig.update_layout(margin=dict(l=60, r=20, t=10, b=40))
    fig.add_trace(
        go.Box(
            x=x,
            q1=df["p25_ns"] / 1e6,
            median=df["p50_ns"] / 1e6,
            q3=df["p75_ns"] / 1e6,
            lowerfence=df["min_ns"] / 1e6,
            upperfence=df["max_ns"] / 1e6,
            mean=df["avg_ns"] / 1e6,
            marker_color=ui.COLORS["computing"],
            name=t("op.per_call"),
        )
    )
    tot = ui.figure(height=220, showlegend=False, yaxis_title=t("op.total_axis"))
    tot.update_layout(margin=dict(l=60, r=20, t=10, b=40))
    fastest = float(df["total_ns"].min())
    # the slowest rank in red only when it stands out (more than SLOW_SPREAD_PCT above the fastest)
    slowest = float(df["total_ns"].max())
    stands_out = len(df) > 1 and fastest > 0 and (slowest - fastest) / fastest * 100 > SLOW_SPREAD_PCT
    colors = [
        ui.COLORS["comm_not_overlapped"] if stands_out and v == slowest else ui.COLORS["computing"]
        for v in df["total_ns"]
    ]
    tot.add_bar(x=x, y=df["total_ns"] / 1e6, marker_color=colors, hovertemplate="%{x}: %{y:.3f} ms<extra></extra>")
    rows = [
        [
            int(r["rank"]),
            fmt_int(r["count"]),
            fmt_ns(r["total_ns"]),
            fmt_ns(r["avg_ns"]),
            fmt_ns(r["min_ns"]),
            fmt_ns(r["p50_ns"]),
            fmt_ns(r["p99_ns"]),
            fmt_ns(r["max_ns"]),
            f"{r['total_ns'] / fastest:.2f}×" if fastest > 0 else "-",
        ]
        for r in df.to_dict("records")
    ]
    spread = (
        (df["total_ns"].max() - df["total_ns"].min()) / df["total_ns"].mean() * 100 if df["total_ns"].mean() > 0 else 0
    )
    return [
        html.P(
            [html.Strong(title, id=f"{P}-drill-name"), t("op.drill_title", n=len(df), spread=f"{spread:.1f}")],
            className="drill-title",
        ),
        ui.graph(f"{P}-drill-box", fig),
        ui.graph(f"{P}-drill-total", tot),
        ui.table(
            [t(f"op.dc.{c}") for c in ("rank", "calls", "total", "avg", "min", "median", "p99", "max", "fastest")],
            rows,
            id_=f"{P}-drill-table",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


# How many of the loaded rows the grid shows after its search box and column filters (the status
# line counts what was loaded): computed in the browser, where the grid filters.
_SHOWN_JS = """
function(shown, rows, q, filters, texts) {
    if (!rows || !rows.length || !Array.isArray(shown) || !texts) { return ''; }
    var why = [];
    var put = function(text, key, value) { return text.replace(key, function() { return value; }); };
    if (q) { why.push(put(texts.search, '{q}', q)); }
    if (filters && Object.keys(filters).length) { why.push(texts.filters); }
    if (!why.length && shown.length === rows.length) { return ''; }
    var line = put(texts.shown, '{shown}', shown.length.toLocaleString('en-US'));
    return put(put(line, '{total}', rows.length.toLocaleString('en-US')), '{why}', why.join(', '));
}
"""


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-grid", "rowData"),
        Output(f"{P}-grid", "columnDefs"),
        Output(f"{P}-status", "children"),
        Output(f"{P}-ranks", "options"),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-source", "value"),
        Input(f"{P}-group", "value"),
        Input(f"{P}-scope", "value"),
    )
    @answers.kept
    @ui.guard(4, message_index=2)
    def update_grid(run: str, ranks: Any, source: str, group: str, scope: str) -> Any:
        with page.view(run, ranks) as v:  # binds what it reads: the stored statistics, else the calls
            rows, cols, status = grid(v.rd, run, source, group, v.selected, scope == "across")
        return rows, cols, status, ui.rank_options(v.all_ranks)

    @app.callback(
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-source", "value"),
        Input(f"{P}-group", "value"),
        Input(f"{P}-scope", "value"),
        Input(f"{P}-search", "value"),
        Input(f"{P}-top", "value"),
        Input(f"{P}-drill-key", "data"),
        prevent_initial_call="initial_duplicate",
    )
    def sync_url(run: str, ranks: Any, source: str, group: str, scope: str, q: str, top: Any, drill_key: Any) -> Any:
        params: dict[str, Any] = {
            "run": run,
            "ranks": format_ranks(ranks) if ranks else None,
            "source": source,
            "group": group,
            "scope": scope,
            "q": q or None,
            "top": top if top not in (None, 15) else None,
        }
        if drill_key:
            params["op"] = drill_key.get("op")
            params["shape"] = drill_key.get("shape")
        return ui.page_url("/operators", params)

    app.clientside_callback(
        _SHOWN_JS,
        Output(f"{P}-shown", "children"),
        Input(f"{P}-grid", "virtualRowData"),
        Input(f"{P}-grid", "rowData"),
        Input(f"{P}-search", "value"),
        Input(f"{P}-grid", "filterModel"),
        State(f"{P}-shown-texts", "data"),
    )

    @app.callback(
        Output(f"{P}-grid", "dashGridOptions"),
        Input(f"{P}-search", "value"),
        prevent_initial_call=True,
    )
    def search(q: str) -> Any:
        patch = Patch()
        patch["quickFilterText"] = q or ""
        return patch

    @app.callback(
        Output(f"{P}-topn", "children"),
        Input(f"{P}-grid", "rowData"),
        Input(f"{P}-grid", "virtualRowData"),
        Input(f"{P}-metric", "value"),
        Input(f"{P}-top", "value"),
        State(f"{P}-source", "value"),
    )
    @answers.kept
    @ui.guard(1)
    def update_top(rows: Any, shown: Any, metric: str, top: Any, source: str) -> Any:
        """The top N of the rows the grid shows (after its search and filters)."""
        try:
            n = max(1, min(int(top or 15), 100))
        except (TypeError, ValueError):
            n = 15
        # the grid's filtered rows when they belong to the current data (row ids carry a data token)
        token = str(rows[0]["id"]).split("-")[0] if rows else None
        same = bool(shown) and all(str(r.get("id", "")).split("-")[0] == token for r in shown)
        use = shown if same or (shown == [] and dash.ctx.triggered_id is not None) else rows
        return top_chart(use or [], metric, n, source)

    @app.callback(
        Output(f"{P}-drill", "children"),
        Output(f"{P}-drill-key", "data"),
        Input(f"{P}-grid", "selectedRows"),
        Input(f"{P}-grid", "rowData"),
        State(f"{P}-want-drill", "data"),
        State(f"{P}-drill-key", "data"),
        State(f"{P}-run", "value"),
        State(f"{P}-ranks", "value"),
        State(f"{P}-source", "value"),
        State(f"{P}-group", "value"),
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def update_drill(
        sel: Any, rows: Any, want: Any, current: Any, run: str, ranks: Any, source: str, group: str
    ) -> Any:
        # the URL's operator applies until the page has a drill state of its own ({} once cleared)
        key = drill_key(sel, rows, want if current is None else current, group)
        if not key:
            return html.P(t("op.select"), className="note"), {}
        with page.view(run, ranks) as v:
            content = drill(v.rd, run, source, group, str(key["op"]), key.get("shape"), v.selected)
        # an operator the current run / ranks / source do not have leaves the address (op= would be stale)
        return content, key if drill_found(content) else {}


def drill_found(content: list[Any]) -> bool:
    """Whether ``drill`` found the operator (it answers with a lone message when not)."""
    return not (len(content) == 1 and getattr(content[0], "id", None) == f"{P}-drill-missing")


def _token(row: Any) -> str:
    return str((row or {}).get("id", "")).split("-")[0]


def drill_key(sel: Any, rows: Any, before: Any, group: str) -> dict[str, Any] | None:
    """The operator to drill into: the selected row when it belongs to the grid's current data, else
    the one drilled before (or the URL's), carried over to the grouping now chosen: a name stays
    (every input shape of it when grouping by shape), a type cannot become a name (cleared)."""
    if sel and rows and _token(sel[0]) == _token(rows[0]):
        return {"op": sel[0].get("key"), "shape": sel[0].get("shape") if group == "shape" else None, "group": group}
    if not before or not before.get("op"):
        return None
    was = before.get("group") or group
    if was == group:
        return dict(before, group=group)
    if "type" in (was, group):
        return None
    return {"op": before["op"], "shape": None, "group": group}
