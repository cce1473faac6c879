"""Timeline: all selected ranks at once, one swim-lane group per rank (host threads, device streams,
communication), zoom and pan, jump to a step, click an event for its details.

The browser never receives a whole trace: for the visible window the server sends the exact slices
when at most ``data.MAX_EXACT_SLICES`` overlap it, else each lane's occupancy per pixel bucket (the
share of the bucket covered by the lane's slices, as an interval union, and the event count).
Clicking a bucket zooms in; clicking a slice shows its details.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

import dash
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dcc, html

from webapp import data, page, ui
from webapp.errors import BadParameter, NotFound
from webapp.format import fmt_ns, plot_text, shorten
from webapp.params import parse_int, single
from webapp.reader import reader

dash.register_page(__name__, path="/timeline", name="Timeline", title="rankscope · timeline", order=1)

P = "tl"
DEFAULT_RANKS = 8
MAX_DEPTH = 16  # nesting levels drawn per lane in the exact view (deeper slices share the last level)
ROW_PX = 20
BUCKETS = 900  # occupancy buckets per lane over the window: about one per pixel of the plot
GROUPS = ("host", "device", "communication", "overlap", "other")
DEFAULT_GROUPS = ("host", "device", "communication", "overlap")
PALETTE = (
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
    "#1f77b4",
    "#2ca02c",
    "#8c564b",
    "#17becf",
)


def layout(
    run: Any = None,
    ranks: Any = None,
    step: Any = None,
    start_ns: Any = None,
    end_ns: Any = None,
    groups: Any = None,
    **_: Any,
) -> Any:
    return page.layout(
        "Timeline",
        run,
        ranks,
        lambda v: _layout(v, step, start_ns, end_ns, groups),
        default_ranks=DEFAULT_RANKS,
    )


def _layout(v: page.View, step_q: Any, start_q: Any, end_q: Any, groups_q: Any) -> html.Div:
    store, run, selected, notes = v.rd, v.run, v.selected, v.notes
    groups = list(DEFAULT_GROUPS)
    g = single("groups", groups_q)
    if g:
        asked_groups = [x.strip() for x in g.split(",") if x.strip()]
        bad = [x for x in asked_groups if x not in GROUPS]
        if bad:
            notes.append(
                ui.message(f"URL parameter groups: unknown lane group {', '.join(bad)} (known: {', '.join(GROUPS)})")
            )
        groups = [x for x in asked_groups if x in GROUPS] or groups
    want: dict[str, Any] = {}
    st = data.steps(store, run, selected)
    known_steps = [int(x) for x in st["step"]]
    try:
        step = parse_int("step", step_q)
        a = parse_int("start_ns", start_q, minimum=0)
        b = parse_int("end_ns", end_q, minimum=0)
        if (a is None) != (b is None):
            raise BadParameter("start_ns" if a is None else "end_ns", None, "start_ns and end_ns go together")
        if a is not None and b is not None:
            if b <= a:
                raise BadParameter("end_ns", b, "must be after start_ns")
            bounds = data.time_bounds(store, run, selected)
            if bounds is not None and (b <= bounds[0] or a >= bounds[1]):
                raise BadParameter(
                    "start_ns",
                    a,
                    f"the window {a}–{b} ns lies outside the selected ranks' events ({bounds[0]}–{bounds[1]} ns)",
                )
            want = {"start_ns": str(a), "end_ns": str(b)}
        elif step is not None:
            if step not in known_steps:
                have = (
                    f"they have steps {known_steps[0]}–{known_steps[-1]}"
                    if len(known_steps) > 1
                    else f"they have step {known_steps[0]}"
                    if known_steps
                    else "the run has no steps"
                )
                raise BadParameter("step", step, f"the selected ranks have no step {step} ({have})")
            want = {"step": step}
    except BadParameter as exc:
        notes.append(ui.message(f"{exc}; showing the whole run.", id=f"{P}-url-note"))
    return html.Div(
        [
            ui.header(
                "Timeline", "Host threads, device streams and communication of every selected rank, on one time axis."
            ),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, selected),
                    html.Div(
                        [
                            html.Label("Jump to step", htmlFor=f"{P}-step"),
                            dcc.Dropdown(
                                id=f"{P}-step",
                                options=_step_options(known_steps),
                                value=want.get("step"),
                                placeholder="step…",
                                className="dd dd-step",
                            ),
                        ],
                        className="control",
                    ),
                    html.Div(
                        [
                            html.Label("Lanes", htmlFor=f"{P}-groups"),
                            dcc.Checklist(
                                id=f"{P}-groups",
                                options=[{"label": x, "value": x} for x in GROUPS],
                                value=groups,
                                inline=True,
                                className="checks",
                            ),
                        ],
                        className="control",
                    ),
                    html.Div(
                        [
                            html.Button("Whole run", id=f"{P}-reset", n_clicks=0, className="btn"),
                            html.Button("Zoom out", id=f"{P}-out", n_clicks=0, className="btn"),
                        ],
                        className="control buttons",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-want", data=want),
            dcc.Store(id=f"{P}-zoom"),  # the x range the user zoomed / panned to (from the graph, in the browser)
            dcc.Store(id=f"{P}-bucket"),  # the occupancy bucket the user clicked
            dcc.Store(id=f"{P}-window"),
            html.Div(id=f"{P}-status", className="status"),
            html.Div(
                ui.graph(
                    f"{P}-graph",
                    ui.figure(height=200),
                    clear_on_unhover=True,
                    config={
                        "displaylogo": False,
                        "scrollZoom": True,
                        "doubleClick": "reset",
                        "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
                    },
                ),
                className="timeline-box",
            ),
            html.Div(
                html.P("Click a slice for its details; click a shaded bucket to zoom into it.", className="note"),
                id=f"{P}-detail",
                className="card detail",
            ),
        ],
        className="page",
    )


def _step_options(steps: Sequence[int]) -> list[dict[str, Any]]:
    return [{"label": f"step {int(s)}", "value": int(s)} for s in steps]


# ---------------------------------------------------------------------------------------------
# window arithmetic (relative ns: the browser keeps no absolute ns, they do not fit a double)
# ---------------------------------------------------------------------------------------------


def full_window(store: Any, run: str, ranks: Sequence[int]) -> tuple[int, int, int]:
    """(origin_ns, start_rel, end_rel): origin is the run's first timestamp (all ranks)."""
    run_bounds = data.time_bounds(store, run, None)
    sel = data.time_bounds(store, run, ranks)
    if run_bounds is None or sel is None:
        raise NotFound(f"run {run!r} has no timed events for the selected ranks")
    origin = run_bounds[0]
    return origin, sel[0] - origin, max(sel[1] - origin, sel[0] - origin + 1)


def step_window(store: Any, run: str, ranks: Sequence[int], step: int, origin: int) -> tuple[int, int]:
    st = data.steps(store, run, ranks)
    row = st[st["step"] == step]
    if row.empty:
        raise NotFound(f"the selected ranks have no step {step}")
    a, b = int(row["start_ns"].iloc[0]) - origin, int(row["end_ns"].iloc[0]) - origin
    pad = max((b - a) // 50, 1)
    return a - pad, b + pad


# ---------------------------------------------------------------------------------------------
# figure (pure functions: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def _color(name: str) -> str:
    return PALETTE[zlib.crc32(name.encode("utf-8", "replace")) % len(PALETTE)]


def _depths(sl: pd.DataFrame) -> np.ndarray:
    """Nesting depth of each slice within its row (slices sorted by row, ts, -dur)."""
    depth = np.zeros(len(sl), dtype=np.int64)
    rows = sl["row"].to_numpy()
    ts = sl["ts_ns"].to_numpy()
    end = ts + sl["dur_ns"].to_numpy()
    stack: list[int] = []
    prev_row = None
    for i in range(len(sl)):
        if rows[i] != prev_row:
            stack = []
            prev_row = rows[i]
        while stack and stack[-1] <= ts[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


def lane_label(r: dict[str, Any]) -> str:
    proc = str(r.get("process") or "")
    lane = str(r.get("lane") or "")
    text = lane if not proc or proc in lane else f"{proc} · {lane}"
    return f"r{r['rank']} {r['lane_group']} · {shorten(text, 48)}"


def build_figure(win: data.Window, origin: int, groups: Sequence[str]) -> tuple[go.Figure, str]:
    """The timeline figure of a window and a one-line description of what it shows."""
    lanes = win.lanes
    lanes = lanes[lanes["lane_group"].isin(list(groups))] if not lanes.empty else lanes
    rows = lanes.drop_duplicates("row").sort_values("row") if not lanes.empty else lanes
    x0, x1 = (win.start_ns - origin) / 1e6, (win.end_ns - origin) / 1e6
    if rows.empty:
        fig = ui.figure(height=160)
        fig.update_xaxes(range=[x0, x1], title="ms since the run's first event")
        return fig, "No lanes for the selected ranks and lane groups."
    keep_rows = set(rows["row"])
    # y layout: each lane gets one band per nesting level (exact view) or one band (occupancy view)
    levels = {int(r): 1 for r in rows["row"]}
    sl = pd.DataFrame()
    if win.mode == "exact":
        sl = win.slices[win.slices["row"].isin(keep_rows)].sort_values(
            ["row", "ts_ns", "dur_ns"], ascending=[True, True, False]
        )
        sl = sl.reset_index(drop=True)
        sl["depth"] = np.minimum(_depths(sl), MAX_DEPTH - 1)
        for r, d in sl.groupby("row")["depth"].max().items():
            levels[int(r)] = int(d) + 1
    y0: dict[int, float] = {}
    pos = 0.0
    tickvals, ticktext, rank_lines, rank_marks = [], [], [], []
    prev_rank = None
    for r in rows.to_dict("records"):
        row = int(r["row"])
        if prev_rank is not None and r["rank"] != prev_rank:
            rank_lines.append(pos - 0.1)
            pos += 0.4
        if r["rank"] != prev_rank:
            rank_marks.append((pos, int(r["rank"])))
        prev_rank = r["rank"]
        y0[row] = pos
        tickvals.append(pos + 0.4)
        ticktext.append(plot_text(lane_label(r)))
        pos += levels[row]
    total = pos
    px = ROW_PX if win.mode == "exact" else max(4, min(ROW_PX, 3600 // max(1, len(rows))))
    height = int(min(70 + px * total, 4000))
    fig = ui.figure(
        height=max(height, 220),
        showlegend=False,
        bargap=0,
        hovermode="closest",
        uniformtext=dict(minsize=8, mode="hide"),
        dragmode="zoom",
    )
    fig.update_layout(margin=dict(l=260, r=20, t=60, b=44))
    fig.update_yaxes(
        range=[total + 0.2, -0.4],
        tickvals=tickvals,
        ticktext=ticktext,
        showgrid=False,
        zeroline=False,
        fixedrange=True,
        tickfont=dict(size=10),
    )
    fig.update_xaxes(range=[x0, x1], title="ms since the run's first event", showgrid=True, zeroline=False, side="top")
    # the same axis again below the lanes (it follows zoom and pan): a tall figure keeps a time axis in sight
    fig.update_layout(
        xaxis2=dict(
            matches="x",
            overlaying="x",
            side="bottom",
            showgrid=False,
            zeroline=False,
            showline=True,
            linecolor="#c5ced8",
            ticks="outside",
            ticklen=4,
        )
    )
    fig.update_layout(
        shapes=[
            dict(type="line", xref="paper", x0=0, x1=1, y0=y, y1=y, line=dict(color="#889", width=1))
            for y in rank_lines
        ]
    )
    if win.mode == "exact":
        desc = _exact_traces(fig, sl, y0, origin, win, lanes)
    elif win.mode == "occupancy":
        desc = _occupancy_trace(fig, win, rows, y0, origin)
    else:
        desc = "No event in this window."
    # an invisible trace on the bottom axis, after the data traces: plotly draws an axis only with a trace on it
    fig.add_scatter(
        x=[x0, x1],
        y=[0, 0],
        xaxis="x2",
        mode="markers",
        marker=dict(opacity=0),
        hoverinfo="skip",
        showlegend=False,
        name="axis",
    )
    return fig, desc


def _exact_traces(
    fig: go.Figure, sl: pd.DataFrame, y0: dict[int, float], origin: int, win: data.Window, lanes: pd.DataFrame
) -> str:
    if sl.empty:
        return "No event in this window."
    span = win.end_ns - win.start_ns
    min_w = span / 1500.0  # instant and tiny events stay visible
    # bars are clipped to the window so that their labels (anchored at the bar's start) stay in view
    ts = sl["ts_ns"].to_numpy(dtype="int64")
    end = ts + sl["dur_ns"].to_numpy(dtype="int64")
    vis_a = np.maximum(ts, win.start_ns)
    vis_b = np.minimum(end, win.end_ns)
    start_ms = (vis_a - origin) / 1e6
    dur_vis = np.maximum((vis_b - vis_a).astype("float64"), min_w) / 1e6
    y = np.array([y0[int(r)] for r in sl["row"]]) + sl["depth"].to_numpy() + 0.4
    lane_names = lanes.drop_duplicates("row").set_index("row")
    names = sl["name"].fillna("").astype(str)
    text = [plot_text(shorten(n, 40)) if d >= span / 25 else "" for n, d in zip(names, vis_b - vis_a)]
    hover = [
        f"<b>{plot_text(shorten(n, 120))}</b>"
        f"<br>{plot_text(lane_label(lane_names.loc[int(r)].to_dict() | {'rank': rk}))}"
        f"<br>start {(t - origin) / 1e6:.3f} ms · dur {plot_text(fmt_ns(d))}<br>{plot_text(c or '')}"
        for n, r, rk, t, d, c in zip(names, sl["row"], sl["rank"], sl["ts_ns"], sl["dur_ns"], sl["category"])
    ]
    fig.add_trace(
        go.Bar(
            orientation="h",
            base=start_ms,
            x=dur_vis,
            y=y,
            width=0.88,
            marker=dict(color=[_color(n) for n in names], line=dict(width=0)),
            text=text,
            textposition="inside",
            insidetextanchor="start",
            textfont=dict(size=10, color="white"),
            hovertext=hover,
            hoverinfo="text",
            customdata=np.stack(
                [sl["rank"].astype(str), sl["collection_id"].astype(str), sl["event_id"].astype(str)], axis=1
            ),
            name="slices",
        )
    )
    return f"Exact view: {len(sl):,} slices in this window."


def _occupancy_trace(fig: go.Figure, win: data.Window, rows: pd.DataFrame, y0: dict[int, float], origin: int) -> str:
    order = [int(r) for r in rows["row"]]
    pos = {r: i for i, r in enumerate(win.rows)}
    take = [pos[r] for r in order if r in pos]
    # compact cells (1 + 2 bytes): busy in whole percent, 0 only where the bucket is empty
    busy = win.busy[take]
    n = win.events[take]
    pct = np.ceil(busy * 100).astype(np.uint8)
    pct[(pct == 0) & (n > 0)] = 1
    x = ((win.start_ns - origin) + (np.arange(win.n_buckets) + 0.5) * win.bucket_ns) / 1e6
    y = [y0[r] + 0.4 for r in order if r in pos]
    fig.add_trace(
        go.Heatmap(
            z=pct,
            x=x,
            y=y,
            customdata=np.minimum(n, 65535).astype(np.uint16),
            zmin=0,
            zmax=100,
            colorscale=[[0, "#ffffff"], [0.01, "#eaf1fb"], [0.3, "#9ecae1"], [1, "#08519c"]],
            showscale=True,
            colorbar=dict(title="busy %", len=0.5, thickness=10),
            hovertemplate="%{x:.3f} ms<br>busy %{z} %<br>%{customdata} slices start here<extra></extra>",
            xgap=0,
            ygap=2,
            name="occupancy",
        )
    )
    return (
        f"Occupancy view: about {win.n_events:,} slices in this window, shown per lane as the busy share of "
        f"{win.n_buckets} buckets of {fmt_ns(win.bucket_ns)}. "
        "Zoom in (drag, scroll, or click a bucket) for single events."
    )


def detail_panel(d: dict[str, Any] | None, origin: int) -> Any:
    """The details of one slice, every program-written string rendered as text."""
    if d is None:
        return ui.message("That event is no longer in the store (re-ingested?).")
    rows: list[tuple[str, Any]] = [
        ("name", d.get("name")),
        ("rank", d.get("rank")),
        ("lane", " · ".join(str(x) for x in (d.get("lane_group"), d.get("process"), d.get("lane")) if x)),
        ("category", d.get("category")),
        ("step", d.get("step")),
        ("start", f"{(int(d['ts_ns']) - origin) / 1e6:.6f} ms after the run's first event (t = {d['ts_ns']} ns)"),
        ("duration", fmt_ns(d.get("dur_ns"))),
    ]
    if d.get("self_ns") is not None:
        rows.append(("self time", fmt_ns(d.get("self_ns"))))
    for key, label in (
        ("op_type", "kernel type"),
        ("core_type", "core type"),
        ("block_dim", "block dim"),
        ("input_shapes", "input shapes"),
        ("input_types", "input types"),
        ("input_formats", "input formats"),
        ("output_shapes", "output shapes"),
        ("output_types", "output types"),
    ):
        v = d.get(key)
        if v not in (None, ""):
            # kernel tables quote shapes ("32,3,224,224"): the quotes are the file's, not the shape's
            rows.append((label, v.strip('"') if isinstance(v, str) and key.endswith("shapes") else v))
    body = [html.Tr([html.Th(k), html.Td("" if v is None else str(v))]) for k, v in rows]
    kids: list[Any] = [
        html.H2("Event", className="detail-title"),
        html.Table(html.Tbody(body), className="tbl kv", id=f"{P}-detail-table"),
    ]
    args = d.get("args")
    if args:
        pretty = _pretty_args(args)
        kids += [html.H3("Arguments"), html.Pre(pretty[:20000], className="args", id=f"{P}-detail-args")]
    stack = d.get("call_stack")
    title = "Call stack" + (f" ({d['call_stack_source']})" if d.get("call_stack_source") else "")
    kids += [
        html.H3(title),
        html.Pre(stack[:20000], className="stack", id=f"{P}-detail-stack")
        if stack
        else html.P("not recorded (with_stack was off or the producer gives none)", className="note"),
    ]
    return kids


def _pretty_args(args: str) -> str:
    """Event arguments one per line, each value on one line (shapes stay readable)."""
    try:
        obj = json.loads(args)
    except (TypeError, ValueError):
        return str(args)
    if not isinstance(obj, dict):
        return json.dumps(obj, ensure_ascii=False)
    return "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in obj.items())


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


# a click on an occupancy bucket (a slice click only opens its details)
BUCKET_JS = """
function(cd) {
    var nu = window.dash_clientside.no_update;
    if (!cd || !cd.points || !cd.points.length) { return nu; }
    var p = cd.points[0];
    if (typeof p.customdata !== 'number') { return nu; }
    return {x: p.x, at: Date.now()};
}
"""


def register_callbacks(app: Dash) -> None:
    app.clientside_callback(
        ui.ZOOM_JS, Output(f"{P}-zoom", "data"), Input(f"{P}-graph", "relayoutData"), prevent_initial_call=True
    )
    app.clientside_callback(
        BUCKET_JS, Output(f"{P}-bucket", "data"), Input(f"{P}-graph", "clickData"), prevent_initial_call=True
    )

    @app.callback(
        Output(f"{P}-ranks", "options"),
        Output(f"{P}-step", "options"),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
    )
    @ui.guard(2, message_index=0)
    def options(run: str, ranks: Any) -> Any:
        with page.view(run, ranks, ("steps",), check_run=False) as v:
            st = data.steps(v.rd, run, v.selected)
        return [{"label": f"rank {r}", "value": r} for r in v.all_ranks], _step_options(st["step"])

    @app.callback(
        Output(f"{P}-graph", "figure"),
        Output(f"{P}-status", "children"),
        Output(f"{P}-window", "data"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-groups", "value"),
        Input(f"{P}-step", "value"),
        Input(f"{P}-reset", "n_clicks"),
        Input(f"{P}-out", "n_clicks"),
        Input(f"{P}-zoom", "data"),
        Input(f"{P}-bucket", "data"),
        State(f"{P}-window", "data"),
        State(f"{P}-want", "data"),
        prevent_initial_call="initial_duplicate",
    )
    @ui.guard(4, message_index=1)
    def update(
        run: str,
        ranks: Any,
        groups: Any,
        step: Any,
        _reset: Any,
        _out: Any,
        zoom: Any,
        bucket: Any,
        window: Any,
        want: Any,
    ) -> Any:
        with page.view(run, ranks, ("steps", "lanes", "slices")) as v:
            return _update(v, groups, step, zoom, bucket, window, want)

    def _update(v: page.View, groups: Any, step: Any, zoom: Any, bucket: Any, window: Any, want: Any) -> Any:
        store, run, all_ranks, selected = v.rd, v.run, v.all_ranks, v.selected
        groups = [g for g in (groups or []) if g in GROUPS]
        origin, full_a, full_b = full_window(store, run, selected)
        trig = ctx.triggered_id
        a, b = full_a, full_b
        same_run = bool(window) and window.get("run") == run and window.get("origin") == str(origin)
        if same_run:
            a, b = int(window["start"]), int(window["end"])
        url_step = None
        if not window:
            # first render (every input counts as changed then, so triggered_id says nothing):
            # the URL's window or step, checked by the layout
            want = want or {}
            if want.get("start_ns"):
                a, b = int(want["start_ns"]) - origin, int(want["end_ns"]) - origin
            elif want.get("step") is not None:
                a, b = step_window(store, run, selected, int(want["step"]), origin)
                url_step = int(want["step"])
        elif trig == f"{P}-step" and step is not None:
            a, b = step_window(store, run, selected, int(step), origin)
            url_step = int(step)
        elif trig == f"{P}-reset" or (trig == f"{P}-run" and not same_run):
            a, b = full_a, full_b
        elif trig == f"{P}-out":
            mid, half = (a + b) / 2, (b - a) * 2
            a, b = int(max(mid - half, full_a)), int(min(mid + half, full_b))
        elif trig == f"{P}-zoom" and zoom:
            if zoom.get("auto"):
                a, b = full_a, full_b
            else:
                a, b = int(float(zoom["a"]) * 1e6), int(float(zoom["b"]) * 1e6)
        elif trig == f"{P}-bucket" and bucket:
            xm = float(bucket["x"]) * 1e6
            half = (b - a) / 20
            a, b = int(xm - half), int(xm + half)
        elif (
            trig in (f"{P}-ranks", f"{P}-groups", f"{P}-run")
            and same_run
            and window.get("step") is not None
            and step == window["step"]
        ):
            # the window is still that step (over the ranks now selected, when they have it)
            try:
                a, b = step_window(store, run, selected, int(step), origin)
                url_step = int(step)
            except NotFound:
                pass
        if b <= a:
            b = a + 1
        win = data.timeline_window(store, run, selected, origin + a, origin + b, n_buckets=BUCKETS)
        fig, desc = build_figure(win, origin, groups)
        params = {
            "run": run,
            "ranks": ui.ranks_param(selected, all_ranks),
            "groups": None if sorted(groups) == sorted(DEFAULT_GROUPS) else ",".join(groups),
        }
        if url_step is not None:
            params["step"] = url_step
        elif (a, b) != (full_a, full_b):
            params.update(start_ns=str(origin + a), end_ns=str(origin + b))
        status = html.Span(
            [desc, " ", html.Span(f"window {fmt_ns(b - a)}", className="muted")],
            id=f"{P}-status-text",
            **{"data-mode": win.mode},
        )
        return (
            fig,
            status,
            {"run": run, "origin": str(origin), "start": a, "end": b, "step": url_step},
            ui.page_url("/timeline", params),
        )

    @app.callback(
        Output(f"{P}-detail", "children"),
        Input(f"{P}-graph", "clickData"),
        State(f"{P}-run", "value"),
        State(f"{P}-window", "data"),
        prevent_initial_call=True,
    )
    @ui.guard(1)
    def detail(click: Any, run: str, window: Any) -> Any:
        pt = (click or {}).get("points", [{}])[0]
        cd = pt.get("customdata")
        if not isinstance(cd, list) or len(cd) != 3:
            return dash.no_update
        origin = int(window["origin"]) if window else 0
        with reader(ui.current_store(), run, [int(cd[0])], ("slices", "lanes", "operators", "steps")) as rd:
            return detail_panel(data.slice_detail(rd, run, int(cd[0]), str(cd[1]), int(cd[2])), origin)
