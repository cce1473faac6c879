"""Memory: allocated / reserved / active curves per rank (downsampled on the server, peaks kept and
marked), the peak of every rank side by side, and the largest operator allocations with their
lifetimes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash
import dash_ag_grid as dag
import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, ctx, dcc, html

from webapp import answers, data, links, page, ui
from webapp.errors import BadParameter
from webapp.format import fmt_bytes
from webapp.labels import grid_locale, page_title, t
from webapp.params import format_ranks, parse_int, single
from webapp.reader import Reader

dash.register_page(__name__, path="/memory", name="Memory", title=page_title("memory"), order=3)

P = "mem"
DEFAULT_RANKS = 8
SERIES = ("allocated", "reserved", "active")
DASH = {"allocated": "solid", "reserved": "dash", "active": "dot"}
_MS = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}
_MIB = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}


def layout(
    run: Any = None,
    ranks: Any = None,
    component: Any = None,
    series: Any = None,
    start_ns: Any = None,
    end_ns: Any = None,
    **_: Any,
) -> Any:
    return page.layout(
        t("nav.memory"),
        run,
        ranks,
        lambda v: _layout(v, component, series, start_ns, end_ns),
        tables=("agg_memory_curve",),
        default_ranks=DEFAULT_RANKS,
    )


def _url_window(rd: Reader, run: str, start_q: Any, end_q: Any) -> dict[str, str]:
    """The time window the URL asks for (same parameters as the timeline), checked against the run."""
    a = parse_int("start_ns", start_q, minimum=0)
    b = parse_int("end_ns", end_q, minimum=0)
    if a is None and b is None:
        return {}
    if a is None or b is None:
        raise BadParameter("start_ns" if a is None else "end_ns", None, t("mem.together"))
    if b <= a:
        raise BadParameter("end_ns", b, t("mem.after"))
    bounds = data.time_bounds(rd, run, None)
    if bounds is not None and (b <= bounds[0] or a >= bounds[1]):
        raise BadParameter("start_ns", a, t("mem.outside", a=a, b=b, lo=bounds[0], hi=bounds[1]))
    return {"start_ns": str(a), "end_ns": str(b)}


def _layout(v: page.View, component_q: Any, series_q: Any, start_q: Any = None, end_q: Any = None) -> html.Div:
    rd, run, selected, notes = v.rd, v.run, v.selected, v.notes
    comps = data.memory_components(rd, run, None)
    options = component_options(comps)
    comp_names = [o["value"] for o in options if not o.get("disabled")]
    component = single("component", component_q)
    if component is not None and component not in comp_names:
        notes.append(
            ui.message(t("mem.no_counter", component=repr(component), have=", ".join(comp_names) or t("mem.none")))
        )
        component = None
    if component is None and comp_names:
        component = _default_component(comp_names)
    series = [s for s in (single("series", series_q) or ",".join(SERIES)).split(",") if s in SERIES] or list(SERIES)
    want: dict[str, str] = {}
    try:
        want = _url_window(rd, run, start_q, end_q)
    except BadParameter as exc:
        notes.append(ui.message(t("mem.whole_note", problem=exc), id=f"{P}-url-note"))
    return html.Div(
        [
            ui.header(t("nav.memory"), t("mem.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, selected, label=t("mem.ranks_curves")),
                    html.Div(
                        [
                            html.Label(t("mem.counter"), htmlFor=f"{P}-component"),
                            ui.dropdown(
                                id=f"{P}-component",
                                options=options,
                                value=component,
                                clearable=False,
                                className="dd dd-small",
                            ),
                        ],
                        className="control",
                    ),
                    html.Div(
                        [
                            html.Label(t("mem.series"), htmlFor=f"{P}-series"),
                            dcc.Checklist(
                                id=f"{P}-series",
                                options=[{"label": t(f"mem.series.{s}"), "value": s} for s in SERIES],
                                value=series,
                                inline=True,
                                className="checks",
                            ),
                        ],
                        className="control",
                    ),
                    html.Div(
                        html.Button(t("mem.whole"), id=f"{P}-reset", n_clicks=0, className="btn"),
                        className="control buttons",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            html.Div(id=f"{P}-status", className="status"),
            dcc.Store(id=f"{P}-window"),
            dcc.Store(id=f"{P}-want", data=want),  # the URL's window, for the first render
            dcc.Store(id=f"{P}-zoom"),
            html.Div(
                [
                    html.H2(t("mem.over_time")),
                    ui.graph(f"{P}-curves", ui.figure(height=380), config={"scrollZoom": True}),
                ],
                className="card",
            ),
            html.Div(
                [
                    html.Div(
                        [
                            html.H2(t("mem.peak_per_rank")),
                            dcc.Loading(html.Div(id=f"{P}-peaks"), type="dot", delay_show=300),
                        ],
                        className="card",
                    ),
                    html.Div(
                        [
                            html.H2(t("mem.largest")),
                            html.Div(id=f"{P}-blocks-status", className="status"),
                            dag.AgGrid(
                                id=f"{P}-blocks",
                                rowData=[],
                                columnDefs=_block_columns(),
                                defaultColDef={
                                    "sortable": True,
                                    "filter": True,
                                    "resizable": True,
                                    "floatingFilter": True,
                                    "minWidth": 64,
                                },
                                dashGridOptions={
                                    "localeText": grid_locale(),
                                    "pagination": True,
                                    "paginationPageSize": 15,
                                    "paginationPageSizeSelector": [15, 50, 100],
                                    "animateRows": False,
                                    "domLayout": "autoHeight",
                                },
                                className="ag-theme-alpine",
                            ),
                        ],
                        className="card",
                    ),
                ],
                className="row2 wide-right",  # the allocations table needs the room more than the peak bars
            ),
        ],
        className="page",
    )


COUNTER_GROUPS = ("allocators", "modules", "zero")  # labels: mem.group.GROUP


def component_options(comps: pd.DataFrame) -> list[dict[str, Any]]:
    """The memory counters as dropdown options, in groups, each group's largest peak first: the
    allocators' counters (they record allocated memory: PTA, GE, Kineto's allocator, ...), then
    the process and driver-module counters (npu_module_mem: reserved only) that ever rose above
    0, then those that never did. A group starts with a disabled heading; a label names the peak."""
    if comps.empty:
        return []
    per = (
        comps.assign(component=comps["component"].astype(str))
        .groupby("component", sort=False)
        .agg(allocates=("has_allocated", "any"), peak=("peak_bytes", "max"))
        .reset_index()
    )
    per["peak"] = pd.to_numeric(per["peak"], errors="coerce").fillna(0)
    per["group"] = np.where(per["peak"] <= 0, "zero", np.where(per["allocates"], "allocators", "modules"))
    out: list[dict[str, Any]] = []
    for group in COUNTER_GROUPS:
        heading = t(f"mem.group.{group}")
        g = per[per["group"] == group].sort_values(["peak", "component"], ascending=[False, True])
        if g.empty:
            continue
        out.append(
            {"label": t("mem.group_heading", heading=heading, n=len(g)), "value": f"\0{group}", "disabled": True}
        )
        out += [
            {"label": c if p <= 0 else t("mem.with_peak", counter=c, peak=fmt_bytes(p)), "value": c}
            for c, p in zip(g["component"], g["peak"])
        ]
    return out


def _default_component(names: Sequence[str]) -> str:
    for pref in ("PTA+GE", "PTA", "allocator", "APP"):
        if pref in names:
            return pref
    return names[0]


def _block_columns() -> list[dict[str, Any]]:
    return [
        {"field": "rank", "headerName": t("mem.col.rank"), "filter": "agNumberColumnFilter"},
        {"field": "name", "headerName": t("mem.col.name"), "maxWidth": 200, "flex": 1, "tooltipField": "name"},
        {
            "field": "size_mib",
            "headerName": t("mem.col.size"),
            "filter": "agNumberColumnFilter",
            "valueFormatter": _MIB,
            "sort": "desc",
        },
        {
            "field": "alloc_ms",
            "headerName": t("mem.col.alloc"),
            "filter": "agNumberColumnFilter",
            "valueFormatter": _MS,
        },
        {
            "field": "lifetime_ms",
            "headerName": t("mem.col.lifetime"),
            "filter": "agNumberColumnFilter",
            "valueFormatter": _MS,
        },
        {
            "field": "released",
            "headerName": t("mem.col.released"),
            "maxWidth": 150,
            "headerTooltip": t("mem.col.released_tip"),
        },
        {"field": "device", "headerName": t("mem.col.device"), "maxWidth": 110},
    ]


# ---------------------------------------------------------------------------------------------
# content (pure functions)
# ---------------------------------------------------------------------------------------------


def curves_figure(
    curves: pd.DataFrame, peaks: pd.DataFrame, series: Sequence[str], origin: int, window: tuple[int, int]
) -> Any:
    fig = ui.figure(height=380, yaxis_title="MiB", xaxis_title=t("mem.x"), hovermode="x unified")
    fig.update_xaxes(range=[(window[0] - origin) / 1e6, (window[1] - origin) / 1e6])
    if curves.empty:
        return fig
    palette = (
        "#4e79a7",
        "#f28e2b",
        "#59a14f",
        "#e15759",
        "#76b7b2",
        "#edc948",
        "#b07aa1",
        "#ff9da7",
        "#9c755f",
        "#bab0ac",
    )
    # a series that never rose above 0 over the whole run was not recorded (reserved on a CPU run):
    # no flat 0 line for it (judged on the exact peaks, so a window where a counter sits at 0 still draws)
    recorded = {
        (r["rank"], r["device"], s)
        for r in peaks.to_dict("records")
        for s in SERIES
        if pd.notna(r.get(f"peak_{s}_bytes")) and float(r[f"peak_{s}_bytes"]) > 0
    }
    for i, ((rank, device), g) in enumerate(curves.groupby(["rank", "device"], sort=True)):
        color = palette[i % len(palette)]
        x = (g["ts_ns"].astype("int64") - origin) / 1e6
        for s in series:
            y = pd.to_numeric(g[f"{s}_bytes"], errors="coerce")
            if (rank, device, s) not in recorded or y.isna().all():
                continue
            label = t(
                "mem.curve",
                rank=rank,
                device=f" {device}" if device and curves["device"].nunique() > 1 else "",
                series=t(f"mem.series.{s}"),
            )
            fig.add_scatter(
                x=x,
                y=y / 2**20,
                mode="lines" if len(x) > 2 else "lines+markers",  # a lone sample still shows
                name=label,
                line=dict(color=color, dash=DASH[s], width=1.6),
                line_shape="hv",
                hovertemplate="%{y:.2f} MiB<extra>%{fullData.name}</extra>",
            )
    # peaks (exact, from the full series, not the downsampled one)
    for _, r in peaks.iterrows():
        for s in series:
            v, at = r.get(f"peak_{s}_bytes"), r.get(f"peak_{s}_ns")
            if v is None or pd.isna(v) or at is None or pd.isna(at) or float(v) <= 0:
                continue
            fig.add_scatter(
                x=[(int(at) - origin) / 1e6],
                y=[float(v) / 2**20],
                mode="markers",
                showlegend=False,
                marker=dict(symbol="triangle-down", size=10, color="#b03030"),
                hovertemplate=t("mem.peak_hover", rank=r["rank"], series=t(f"mem.series.{s}"), value=fmt_bytes(v))
                + "<extra></extra>",
            )
    return fig


def _peak(v: Any) -> str:
    """A peak in bytes; "-" for a counter that never rose above 0 (not recorded, e.g. reserved on CPU)."""
    n = pd.to_numeric(v, errors="coerce")
    return "-" if pd.isna(n) or n <= 0 else fmt_bytes(n)


def peaks_figure(peaks: pd.DataFrame, selected: Sequence[int], run: str = "") -> Any:
    """The peak of every rank side by side, and a table with a link to each allocated peak in the timeline."""
    if peaks.empty:
        return ui.message(t("mem.no_samples_counter"), "info")
    per = (
        peaks.groupby("rank")
        .agg(
            allocated=("peak_allocated_bytes", "max"),
            reserved=("peak_reserved_bytes", "max"),
            active=("peak_active_bytes", "max"),
        )
        .reset_index()
    )
    fig = ui.figure(height=320, barmode="group", yaxis_title=t("mem.peak_axis"))
    x = [t("ui.rank_n", rank=r) for r in per["rank"]]
    for s in SERIES:
        if (pd.to_numeric(per[s], errors="coerce").fillna(0) > 0).any():  # a counter never above 0 was not recorded
            fig.add_bar(
                name=t("mem.peak_series", series=t(f"mem.series.{s}")),
                x=x,
                y=pd.to_numeric(per[s], errors="coerce") / 2**20,
                marker_color=ui.COLORS[s],
                hovertemplate="%{x}: %{y:.2f} MiB<extra>%{fullData.name}</extra>",
            )
    top = per.loc[pd.to_numeric(per["allocated"], errors="coerce").idxmax()] if per["allocated"].notna().any() else None
    # when each rank's allocated peak happened (on the device holding it)
    at = peaks.assign(_v=pd.to_numeric(peaks["peak_allocated_bytes"], errors="coerce")).dropna(subset=["_v"])
    at = at.sort_values("_v").groupby("rank")["peak_allocated_ns"].last() if not at.empty else pd.Series(dtype=object)
    rows = [
        html.Tr(
            [
                html.Td(str(int(r["rank"]))),
                html.Td(_peak(r["allocated"])),
                html.Td(_peak(r["reserved"])),
                html.Td(_peak(r["active"])),
                html.Td(
                    dcc.Link(t("mem.at_peak"), href=links.instant_url(run, int(r["rank"]), int(at[r["rank"]])))
                    if run and r["rank"] in at.index and pd.notna(at[r["rank"]])
                    else ""
                ),
            ]
        )
        for r in per.to_dict("records")
    ]
    kids: list[Any] = [ui.graph(f"{P}-peaks-graph", fig)]
    if top is not None and len(per) > 1:
        kids.append(
            html.P(
                t(
                    "mem.highest",
                    rank=int(top["rank"]),
                    value=fmt_bytes(top["allocated"]),
                    lowest=fmt_bytes(per["allocated"].min()),
                ),
                className="note",
            )
        )
    kids.append(
        html.Details(
            [
                html.Summary(t("mem.numbers")),
                html.Table(
                    [
                        html.Thead(
                            html.Tr(
                                [
                                    html.Th(t(f"mem.pc.{c}"))
                                    for c in ("rank", "allocated", "reserved", "active", "timeline")
                                ]
                            )
                        ),
                        html.Tbody(rows),
                    ],
                    className="tbl",
                    id=f"{P}-peaks-table",
                ),
            ],
            open=len(per) <= 8,
        )
    )
    return kids


def blocks(rd: Reader, run: str, ranks: Sequence[int], origin: int) -> tuple[list[dict], str]:
    df, n = data.operator_memory(rd, run, ranks)
    if df.empty:
        return [], t("mem.no_blocks")
    out = pd.DataFrame(
        {
            "rank": df["rank"].astype("int64"),
            "name": df["name"].astype(object).where(df["name"].notna(), t("mem.unknown")),
            "size_mib": (pd.to_numeric(df["size_bytes"], errors="coerce") / 2**20).round(6),
            "alloc_ms": ((pd.to_numeric(df["alloc_ns"], errors="coerce") - origin) / 1e6).round(6),
            "lifetime_ms": (pd.to_numeric(df["duration_ns"], errors="coerce") / 1e6).round(6),
            "released": np.where(df["release_ns"].isna(), t("mem.no"), t("mem.yes")),
            "device": df["device"].astype(object),
        }
    )
    cut = t("mem.cut", n=f"{len(df):,}", total=f"{n:,}") if n > len(df) else ""
    status = t("mem.blocks_status", n=f"{len(df):,}", cut=cut, ranks=format_ranks(ranks))
    return out.replace({np.nan: None}).to_dict("records"), status


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    app.clientside_callback(
        ui.ZOOM_JS, Output(f"{P}-zoom", "data"), Input(f"{P}-curves", "relayoutData"), prevent_initial_call=True
    )

    @app.callback(
        Output(f"{P}-curves", "figure"),
        Output(f"{P}-status", "children"),
        Output(f"{P}-window", "data"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-component", "value"),
        Input(f"{P}-series", "value"),
        Input(f"{P}-reset", "n_clicks"),
        Input(f"{P}-zoom", "data"),
        State(f"{P}-window", "data"),
        State(f"{P}-want", "data"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(4, message_index=1)
    def update_curves(
        run: str, ranks: Any, component: Any, series: Any, _reset: Any, zoom: Any, window: Any, want: Any = None
    ) -> Any:
        with page.view(run, ranks, ("agg_memory_curve",)) as v:
            rd, all_ranks, selected = v.rd, v.all_ranks, v.selected
            series = [s for s in (series or []) if s in SERIES]
            bounds = data.time_bounds(rd, run, None)
            params = {
                "run": run,
                "ranks": ui.ranks_param(selected, ui.default_ranks(all_ranks, DEFAULT_RANKS)),
                "component": component,
                "series": None if sorted(series) == sorted(SERIES) else ",".join(series),
            }
            url = ui.page_url("/memory", params)
            if bounds is None or not component:
                return (
                    ui.figure(height=200),
                    ui.message(t("mem.no_samples"), "info"),
                    None,
                    url,
                )
            origin = bounds[0]
            peaks = data.memory_peaks(rd, run, selected, component)
            if not peaks.empty and peaks["first_ns"].notna().any():  # the samples' own extent, not the run's
                lo, hi = int(peaks["first_ns"].min()), int(peaks["last_ns"].max())
                pad = max((hi - lo) // 50, 1000)
                bounds = (lo - pad, hi + pad)
            a, b = bounds
            trig = ctx.triggered_id
            if not window:  # first render (every input counts as changed): the URL's window
                if (want or {}).get("start_ns"):
                    a, b = int(want["start_ns"]), int(want["end_ns"])
            elif window.get("run") == run and trig not in (f"{P}-reset", f"{P}-run"):
                a, b = origin + int(window["start"]), origin + int(window["end"])
            if window and trig == f"{P}-zoom" and zoom:
                if zoom.get("auto"):
                    a, b = bounds
                else:
                    a, b = origin + int(float(zoom["a"]) * 1e6), origin + int(float(zoom["b"]) * 1e6)
            if (a, b) != tuple(bounds):
                params.update(start_ns=str(a), end_ns=str(b))
                url = ui.page_url("/memory", params)
            curves = data.memory_curves(rd, run, selected, component, a, max(b, a + 1), n_buckets=1000)
        fig = curves_figure(curves, peaks, series, origin, (a, b))
        n = int(curves["samples"].sum()) if not curves.empty else 0
        status = t("mem.status", counter=component, n=f"{n:,}", ranks=format_ranks(selected)) + t(
            "mem.from_stored" if curves.attrs.get("stored") else "mem.from_samples"
        )
        return fig, status, {"run": run, "start": a - origin, "end": b - origin}, url

    @app.callback(
        Output(f"{P}-peaks", "children"),
        Output(f"{P}-blocks", "rowData"),
        Output(f"{P}-blocks", "columnDefs"),
        Output(f"{P}-blocks-status", "children"),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-component", "value"),
    )
    @answers.kept
    @ui.guard(4, message_index=0)
    def update_tables(run: str, ranks: Any, component: Any) -> Any:
        with page.view(run, ranks, ("agg_memory_curve", "operator_memory"), open_all=True) as v:
            rd, all_ranks, selected = v.rd, v.all_ranks, v.selected
            bounds = data.time_bounds(rd, run, None)
            peaks = data.memory_peaks(rd, run, all_ranks, component) if component else pd.DataFrame()
            rows, status = blocks(rd, run, selected, bounds[0] if bounds else 0)
        return peaks_figure(peaks, selected, run), rows, ui.fit_columns(_block_columns(), rows), status
