"""Communication: per rank the communication time split into wait and transit (as the producer
measured it), bandwidth per transport, the rank x rank matrix (bytes, time, bandwidth) and a table
of every collective with its slowest and fastest rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash
import dash_ag_grid as dag
import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from analyzer.format import is_missing
from webapp import answers, cache, data, links, page, ui
from webapp.errors import WebappError
from webapp.format import fmt_bytes, fmt_int, fmt_ns, fmt_rate
from webapp.labels import cause_label, cause_name, grid_locale, page_title, said_notes, said_term, t
from webapp.params import format_ranks, parse_choice
from webapp.reader import Reader

dash.register_page(__name__, path="/communication", name="Communication", title=page_title("communication"), order=4)

P = "cm"
MATRIX_METRICS = ("bytes", "transit_ns", "bandwidth_bytes_per_s")  # labels: cm.mx.METRIC
_MS = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}
_INT = {"function": "params.value == null ? '' : d3.format(',')(params.value)"}


def layout(run: Any = None, ranks: Any = None, matrix: Any = None, **_: Any) -> Any:
    return page.layout(t("nav.communication"), run, ranks, lambda v: _layout(v, matrix))


def _layout(v: page.View, matrix_q: Any) -> html.Div:
    run, notes = v.run, v.notes
    try:
        metric = parse_choice("matrix", matrix_q, MATRIX_METRICS, "bytes")
    except WebappError as exc:
        notes.append(ui.message(t("ui.showing", problem=exc, shown=t("cm.showing_bytes"))))
        metric = "bytes"
    return html.Div(
        [
            ui.header(t("nav.communication"), t("cm.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, [] if v.selected == v.all_ranks else v.selected),
                    html.Div(
                        [
                            html.Label(t("cm.matrix"), htmlFor=f"{P}-metric"),
                            dcc.RadioItems(
                                id=f"{P}-metric",
                                options=[{"label": t(f"cm.mx.{k}"), "value": k} for k in MATRIX_METRICS],
                                value=metric,
                                inline=True,
                                className="radios",
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
            html.Div(
                [
                    html.H2(t("cm.collectives")),
                    html.Div(id=f"{P}-ops-status", className="status"),
                    html.Div(id=f"{P}-matching"),
                    dag.AgGrid(
                        id=f"{P}-ops",
                        rowData=[],
                        columnDefs=_op_columns(),
                        defaultColDef={
                            "sortable": True,
                            "filter": True,
                            "resizable": True,
                            "floatingFilter": True,
                            "minWidth": 90,
                        },
                        dashGridOptions={
                            "localeText": grid_locale(),
                            "pagination": True,
                            "paginationPageSize": 20,
                            "animateRows": False,
                            "domLayout": "autoHeight",
                            "rowSelection": {"mode": "singleRow", "enableClickSelection": True, "checkboxes": False},
                        },
                        getRowId="params.data.id",
                        className="ag-theme-alpine",
                    ),
                    html.Div(
                        html.P(t("cm.select"), className="note"),
                        id=f"{P}-blame",
                    ),
                ],
                className="card",
            ),
        ],
        className="page",
    )


def _op_columns() -> list[dict[str, Any]]:
    num = {"filter": "agNumberColumnFilter"}
    return [
        {"field": "name", "headerName": t("cm.col.name"), "maxWidth": 320, "tooltipField": "name", "pinned": "left"},
        {
            "field": "timeline",
            "headerName": t("cm.col.timeline"),
            "cellRenderer": "markdown",
            "sortable": False,
            "filter": False,
            "maxWidth": 140,
            "headerTooltip": t("cm.tip.timeline"),
        },
        {"field": "op_type", "headerName": t("cm.col.op_type"), "maxWidth": 120, "tooltipField": "op_type"},
        {"field": "group_name", "headerName": t("cm.col.group_name"), "maxWidth": 110, "tooltipField": "group_name"},
        {"field": "step", "headerName": t("cm.col.step"), **num},
        {"field": "ranks", "headerName": t("cm.col.ranks"), **num},
        {"field": "calls", "headerName": t("cm.col.calls"), **num, "valueFormatter": _INT},
        {"field": "max_ms", "headerName": t("cm.col.max_ms"), **num, "valueFormatter": _MS, "sort": "desc"},
        {"field": "min_ms", "headerName": t("cm.col.min_ms"), **num, "valueFormatter": _MS},
        {"field": "avg_ms", "headerName": t("cm.col.avg_ms"), **num, "valueFormatter": _MS},
        {"field": "slowest_rank", "headerName": t("cm.col.slowest_rank"), **num},
        {"field": "fastest_rank", "headerName": t("cm.col.fastest_rank"), **num},
        {
            "field": "last_rank",
            "headerName": t("cm.col.last_rank"),
            **num,
            "headerTooltip": t("cm.tip.last_rank"),
        },
        {
            "field": "late_ms",
            "headerName": t("cm.col.late_ms"),
            **num,
            "valueFormatter": _MS,
            "headerTooltip": t("cm.tip.late_ms"),
        },
        {"field": "max_wait_ms", "headerName": t("cm.col.max_wait_ms"), **num, "valueFormatter": _MS},
        {
            "field": "wait_source",
            "headerName": t("cm.col.wait_source"),
            "maxWidth": 130,
            "headerTooltip": t("cm.tip.wait_source"),
        },
        {"field": "mib", "headerName": t("cm.col.mib"), **num, "valueFormatter": _MS},
    ]


# ---------------------------------------------------------------------------------------------
# content (pure functions)
# ---------------------------------------------------------------------------------------------


def per_rank(df: pd.DataFrame, votes: pd.DataFrame) -> list[Any]:
    if df.empty:
        return [
            html.H2(t("cm.per_rank")),
            ui.message(t("cm.no_ops"), "info"),
        ]
    for c in ("elapsed_ns", "wait_ns", "transit_ns", "bytes"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    x = [t("ui.rank_n", rank=r) for r in df["rank"]]
    split = bool(df["wait_ns"].notna().any() and df["transit_ns"].notna().any())
    sources = sorted({s for lst in df["wait_sources"] for s in (lst if lst is not None else [])})
    fig = ui.figure(height=340, barmode="stack", yaxis_title="ms")
    if split:
        other = (df["elapsed_ns"] - df["wait_ns"].fillna(0) - df["transit_ns"].fillna(0)).clip(lower=0)
        fig.add_bar(
            name=t("cm.transit"),
            x=x,
            y=df["transit_ns"] / 1e6,
            marker_color=ui.COLORS["transit"],
            hovertemplate="%{x}: " + t("cm.transit") + " %{y:.3f} ms<extra></extra>",
        )
        fig.add_bar(
            name=t("cm.wait"),
            x=x,
            y=df["wait_ns"] / 1e6,
            marker_color=ui.COLORS["wait"],
            hovertemplate="%{x}: " + t("cm.wait") + " %{y:.3f} ms<extra></extra>",
        )
        if (other > 0).any():
            fig.add_bar(
                name=t("cm.other"),
                x=x,
                y=other / 1e6,
                marker_color=ui.COLORS["other"],
                hovertemplate="%{x}: " + t("cm.other_short") + " %{y:.3f} ms<extra></extra>",
            )
        if sources == ["producer"]:
            note = t("cm.note_producer")
        else:
            note = t("cm.note_estimated")
    else:
        fig.add_bar(
            name=t("cm.elapsed"),
            x=x,
            y=df["elapsed_ns"] / 1e6,
            marker_color=ui.COLORS["comm_not_overlapped"],
            hovertemplate="%{x}: %{y:.3f} ms<extra></extra>",
        )
        note = t("cm.note_elapsed")
    voted = votes[votes["votes"] > 0] if not votes.empty else votes
    rows = [
        [
            int(r["rank"]),
            fmt_int(r["ops"]),
            fmt_ns(r["elapsed_ns"]),
            fmt_ns(r["wait_ns"]),
            fmt_ns(r["transit_ns"]),
            fmt_bytes(r["bytes"]),
        ]
        for r in df.to_dict("records")
    ]
    kids: list[Any] = [
        html.H2(t("cm.per_rank")),
        ui.graph(f"{P}-rank-graph", fig),
        html.P(note, className="note"),
    ]
    if not voted.empty:
        kids.append(
            html.P(
                t(
                    "cm.vote",
                    ranks=", ".join(
                        t("cm.vote_rank", rank=int(r["rank"]), votes=int(r["votes"]), n=int(r["instances"]))
                        for r in voted.to_dict("records")
                    ),
                ),
                className="note slow",
                id=f"{P}-slow",
            )
        )
    elif not votes.empty:
        kids.append(
            html.P(
                t("cm.vote_none", n=int(votes["instances"].max())),
                className="note",
                id=f"{P}-slow",
            )
        )
    kids.append(
        html.Details(
            [
                html.Summary(t("cm.numbers")),
                ui.table(
                    [t(f"cm.rc.{c}") for c in ("rank", "ops", "elapsed", "wait", "transit", "size")],
                    rows,
                    id_=f"{P}-rank-table",
                ),
                html.P(
                    t("cm.size_note"),
                    className="note",
                ),
            ],
            open=len(df) <= 8,
        )
    )
    return kids


def bandwidth(df: pd.DataFrame) -> list[Any]:
    head = html.H2(t("cm.bw"))
    if df.empty:
        return [
            head,
            ui.message(t("cm.no_bw"), "info"),
        ]
    fig = ui.figure(height=320, barmode="group", yaxis_title="GB/s")
    for transport, g in df.groupby("transport", sort=True):
        fig.add_bar(
            name=str(transport),
            x=[t("ui.rank_n", rank=r) for r in g["rank"]],
            y=pd.to_numeric(g["bandwidth_bytes_per_s"], errors="coerce") / 1e9,
            hovertemplate="%{x}: %{y:.3f} GB/s<extra>%{fullData.name}</extra>",
        )
    rows = [
        [
            int(r["rank"]),
            str(r["transport"]),
            fmt_bytes(r["bytes"]),
            fmt_ns(r["transit_ns"]),
            fmt_rate(r["bandwidth_bytes_per_s"]),
            fmt_rate(r["min_bandwidth_bytes_per_s"]),
            fmt_rate(r["max_bandwidth_bytes_per_s"]),
        ]
        for r in df.to_dict("records")
    ]
    return [
        head,
        ui.graph(f"{P}-bw-graph", fig),
        html.P(t("cm.bw_note"), className="note"),
        html.P(t("cm.bw_bytes_note"), className="note", id=f"{P}-bw-note"),
        html.Details(
            [
                html.Summary(t("cm.numbers")),
                ui.table(
                    [t(f"cm.bc.{c}") for c in ("rank", "transport", "bytes", "transit", "bandwidth", "min", "max")],
                    rows,
                    id_=f"{P}-bw-table",
                ),
            ]
        ),
    ]


def _label_key(v: str) -> tuple[int, int]:
    return (1, int(v[1:])) if v.startswith("L") and v[1:].isdigit() else ((0, int(v)) if v.isdigit() else (2, 0))


def matrix(df: pd.DataFrame, metric: str) -> list[Any]:
    head = html.H2(t("cm.matrix_title"))
    if df.empty:
        return [
            head,
            ui.message(t("cm.no_matrix"), "info"),
        ]
    ys = sorted(set(df["src"]), key=_label_key)
    xs = sorted(set(df["dst"]), key=_label_key)
    yi, xi = {r: i for i, r in enumerate(ys)}, {r: i for i, r in enumerate(xs)}
    v = pd.to_numeric(df[metric], errors="coerce").to_numpy(dtype="float64")
    scale, unit = {"bytes": (2**20, "MiB"), "transit_ns": (1e6, "ms"), "bandwidth_bytes_per_s": (1e9, "GB/s")}[metric]
    # a rank's link to itself is a copy inside the device (transport LOCAL, ~400 GB/s): drawn apart in
    # grey, so the colour scale is the one of the links between ranks
    local = ((df["src"] == df["dst"]) | (df["transport"].astype(str).str.upper() == "LOCAL")).to_numpy()
    z = np.full((len(ys), len(xs)), np.nan)
    z_local = np.full((len(ys), len(xs)), np.nan)
    rows_i, cols_i = df["src"].map(yi).to_numpy(), df["dst"].map(xi).to_numpy()
    z[rows_i[~local], cols_i[~local]] = v[~local] / scale
    z_local[rows_i[local], cols_i[local]] = v[local] / scale
    labels = ys + xs
    fig = ui.figure(height=max(260, min(900, 110 + 26 * len(ys))), xaxis_title=t("cm.dst"), yaxis_title=t("cm.src"))
    # the scale starts at 0: links that differ by 1 % look alike instead of opposite ends of the scale
    finite = z[np.isfinite(z)]
    top = float(finite.max()) if finite.size else 1.0
    fig.add_heatmap(
        z=z,
        x=xs,
        y=ys,
        colorscale="Viridis",
        zmin=0,
        zmax=top if top > 0 else 1.0,
        colorbar=dict(title=unit),
        hovertemplate="%{y} → %{x}: %{z:.3f} " + unit + "<extra></extra>",
    )
    if np.isfinite(z_local).any():
        fig.add_heatmap(
            z=z_local,
            x=xs,
            y=ys,
            colorscale=[[0, "#d5dbe1"], [1, "#d5dbe1"]],
            showscale=False,
            name=t("cm.local"),
            hovertemplate="%{y} → %{x} " + t("cm.local_hover") + ": %{z:.3f} " + unit + "<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    label = t(f"cm.mx.{metric}")
    note = t("cm.matrix_note", metric=label[:1].upper() + label[1:])
    if finite.size:
        note += t("cm.matrix_range", lo=f"{finite.min():,.3f}", hi=f"{finite.max():,.3f}", unit=unit)
    else:
        note += t("cm.matrix_end")
    if np.isfinite(z_local).any():
        lv = z_local[np.isfinite(z_local)]
        note += t("cm.grey", lo=f"{lv.min():,.3f}", hi=f"{lv.max():,.3f}", unit=unit)
    if any(str(x).startswith("L") for x in labels):
        note += t("cm.local_rank")
    return [head, ui.graph(f"{P}-matrix", fig), html.P(note, className="note")]


def op_rows(df: pd.DataFrame, run: str, token: str = "0") -> list[dict]:
    """The collectives grid's rows; ``timeline`` links each instance's window on all its ranks;
    ``id`` = ``token``-position (the token tells rows of one rendering from the next)."""
    if df.empty:
        return []
    group = df["pg_name"].astype(object).where(df["pg_name"].notna(), df["group_name"].astype(object))
    out = pd.DataFrame(
        {
            "name": df["name"].astype(str),
            "op_type": df["op_type"].astype(object),
            "group_name": group,
            "step": pd.to_numeric(df["step"], errors="coerce").astype("Int64").astype(object),
            "ranks": df["ranks"].astype("int64"),
            "calls": df["calls"].astype("int64"),
            "wait_source": [None if is_missing(v) else said_term("wait_source", v) for v in df["wait_source"]],
            "slowest_rank": df["slowest_rank"].astype("int64"),
            "fastest_rank": df["fastest_rank"].astype("int64"),
        }
    )
    for c in ("max", "min", "avg", "max_wait"):
        out[f"{c}_ms"] = (pd.to_numeric(df[f"{c}_ns"], errors="coerce") / 1e6).round(6)
    if "last_rank" in df:
        out["last_rank"] = df["last_rank"].astype("Int64").astype(object)
        out["late_ms"] = (pd.to_numeric(df["late_ns"], errors="coerce") / 1e6).round(6)
    out["instance"] = df["instance"].astype(object)
    out["id"] = [f"{token}-{i}" for i in range(len(out))]
    out["mib"] = (pd.to_numeric(df["bytes"], errors="coerce") / 2**20).round(6)
    rows = out.astype(object).where(out.notna(), None).to_dict("records")
    for row, members in zip(rows, df["members"]):
        n = len({r for r, _, _ in members})
        # the text is ours (a count), never a name from the trace: markdown stays a plain link
        text = t("cm.on_ranks", n=n) if n != 1 else t("cm.on_rank")
        row["timeline"] = f"[{text}]({links.collective_url(run, members)})" if n else ""
    return rows


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    _register_selection(app)

    @app.callback(
        Output(f"{P}-content", "children"),
        Output(f"{P}-ops", "rowData"),
        Output(f"{P}-ops", "columnDefs"),
        Output(f"{P}-ops-status", "children"),
        Output(f"{P}-matching", "children"),
        Output(f"{P}-ranks", "options"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-metric", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(7, message_index=0)
    def update(run: str, ranks: Any, metric: str) -> Any:
        with page.view(run, ranks) as v:
            all_ranks, selected = v.all_ranks, v.selected
            metric = metric if metric in MATRIX_METRICS else "bytes"
            content = render(v.rd, run, selected, metric)
            rows, columns, status, notes = cache.rendered(
                v.rd, "communication ops", (run, tuple(selected)), lambda: collectives_part(v.rd, run, selected)
            )
        url = ui.page_url(
            "/communication",
            {
                "run": run,
                "ranks": format_ranks(ranks) if ranks else None,
                "matrix": None if metric == "bytes" else metric,
            },
        )
        return content, rows, columns, status, notes, ui.rank_options(all_ranks), url


def collectives_part(rd: Reader, run: str, ranks: Sequence[int]) -> tuple[list[dict], list[dict], str, list[Any]]:
    """The collectives grid of ``ranks`` (whatever the matrix shows): its rows, its columns (as wide
    as their content: the slowest / fastest rank stay in view), the status line above it and the
    notes on what could not be matched."""
    ops, n = data.collectives(rd, run, ranks)
    notes = matching_notes(data.collective_matching(rd, run))
    cut = t("cm.cut", n=f"{len(ops):,}", total=f"{n:,}") if n > len(ops) else ""
    status = t("cm.status", n=f"{len(ops):,}", ranks=format_ranks(ranks), cut=cut) if len(ops) else t("cm.no_ops_short")
    rows = op_rows(ops, run, _token(run, ranks))
    return rows, ui.fit_columns(_op_columns(), rows), status, notes


def _register_selection(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-blame", "children"),
        Input(f"{P}-ops", "selectedRows"),
        Input(f"{P}-ops", "rowData"),
        State(f"{P}-run", "value"),
    )
    @answers.kept
    @ui.guard(1)
    def update_blame(sel: Any, rows: Any, run: str) -> Any:
        row = sel[0] if sel else None
        token = str((rows or [{}])[0].get("id", "")).split("-")[0] if rows else None
        if not row or str(row.get("id", "")).split("-")[0] != token or not row.get("instance"):
            return blame_panel(pd.DataFrame(), run, None)
        with page.view(run, None) as v:
            return blame_panel(data.blame_of(v.rd, run, str(row["instance"])), run, str(row["instance"]))


def _token(run: str, ranks: Sequence[int]) -> str:
    """A short tag of the data a grid shows (run and ranks), carried in its row ids."""
    import hashlib

    return hashlib.sha1(f"{run}|{format_ranks(ranks)}".encode()).hexdigest()[:8]


def matching_notes(cm: pd.DataFrame) -> list[Any]:
    """Why some communication could not be matched across ranks (``collective_matching``)."""
    if cm.empty or not cm["note"].notna().any():
        return []
    items = []
    for r in cm.to_dict("records"):
        note = said_notes(r)
        if note:
            g = (
                t("cm.no_group")
                if r["group_name"] is None or pd.isna(r["group_name"])
                else t("cm.group", group=r["group_name"])
            )
            items.append(html.Li([html.Span(t("cm.who", who=g), className="who"), note]))
    return [html.Ul(items, className="missing", id=f"{P}-matching-notes")]


def blame_panel(b: pd.DataFrame, run: str, instance: str | None) -> html.Div:
    """Who arrived last at one collective, by how much, and what it did since the group's previous
    collective compared with its peers (``analyses.blame_of``), with that window in the timeline."""
    if b.empty:
        return html.Div(
            html.P(
                t("cm.no_blame") if instance else t("cm.select"),
                className="note",
            )
        )
    r = b.iloc[0]
    rows = [
        [cause_name(c), fmt_ns(v)] for c, v in sorted(r["excess_by_cause"].items(), key=lambda kv: -kv[1]) if v != 0
    ]
    ops = [[op["name"], fmt_ns(op["excess_ns"]), fmt_ns(op["ns"])] for op in (r["top_ops"] or [])]
    chain = " → ".join(
        t(
            "cm.chain_rank",
            rank=c["rank"],
            cause=cause_name(c["cause"]),
            waited=t("cm.waited", time=fmt_ns(c["waited_ns"])) if c.get("waited_ns") else "",
        )
        for c in r["chain"]
    )
    hl = [tuple(h) for h in r["highlights"]]
    kids: list[Any] = [
        html.H3(t("cm.blame_title", op=r["op_type"], group=r["group_name"], step=r["step"])),
        html.P(
            t(
                "cm.blame_text",
                rank=int(r["last_rank"]),
                lateness=fmt_ns(r["lateness_ns"]),
                margin=fmt_ns(r["margin_ns"]),
                spent=fmt_ns(int(r["end_ns"]) - int(r["start_ns"])),
                peers=fmt_ns(r["peer_interval_ns"]),
                cause=cause_label(r["cause"], "cause.unexplained"),
            ),
            className="note",
            id=f"{P}-blame-text",
        ),
        ui.table([t("cm.bl.cause"), t("cm.bl.excess")], rows, id_=f"{P}-blame-causes"),
    ]
    if ops and r["cause"] == "compute":
        kids.append(
            ui.table([t("cm.bl.operator"), t("cm.bl.op_excess"), t("cm.bl.its_time")], ops, id_=f"{P}-blame-ops")
        )
    kids.append(html.P(t("cm.chain", chain=chain), className="note"))
    kids.append(
        html.Div(
            [
                t("cm.in_timeline"),
                dcc.Link(
                    t("cm.interval"),
                    href=links.timeline_url(run, sorted({int(h[0]) for h in hl}), hl),
                    id=f"{P}-blame-link",
                ),
            ],
            className="note",
        )
    )
    return html.Div(kids)


def groups(df: pd.DataFrame, defs: pd.DataFrame) -> list[Any]:
    """Per group: elapsed split into wait, transit and idle (the part of the ops in which the rank
    neither waits for a peer nor moves data); per rank: which Communication the step breakdown
    counts, beside the producer's own figure."""
    kids: list[Any] = [html.H2(t("cm.groups"))]
    if df.empty:
        kids.append(ui.message(t("cm.no_groups"), "info"))
    else:
        rows = [
            [
                str(r["group_name"]),
                r["pg_name"] if isinstance(r["pg_name"], str) else "-",
                ", ".join(str(x) for x in r["ranks"]),
                fmt_int(r["instances"]),
                fmt_ns(r["elapsed_ns"]),
                fmt_ns(r["wait_ns"]),
                fmt_ns(r["transit_ns"]),
                fmt_ns(r["idle_ns"]),
                "-" if r["idle_ratio"] is None or pd.isna(r["idle_ratio"]) else f"{r['idle_ratio']:.1%}",
            ]
            for r in df.to_dict("records")
        ]
        kids += [
            ui.table(
                [
                    t(f"cm.gc.{c}")
                    for c in ("group", "role", "ranks", "instances", "elapsed", "wait", "transit", "idle", "idle_share")
                ],
                rows,
                id_=f"{P}-group-table",
            ),
            html.P(
                t("cm.groups_note"),
                className="note",
            ),
        ]
    if not defs.empty and defs["producer_communication_ns"].notna().any():
        rows = [
            [
                int(r["rank"]),
                said_term("comm_definition", r["definition"]),
                fmt_ns(r["communication_ns"]),
                fmt_ns(r["producer_communication_ns"]),
            ]
            for r in defs.to_dict("records")
        ]
        kids += [
            ui.table(
                [t(f"cm.dc.{c}") for c in ("rank", "definition", "ours", "producer")],
                rows,
                id_=f"{P}-definition-table",
            ),
            html.P(
                t("cm.def_note"),
                className="note",
            ),
        ]
    return kids


def render(rd: Reader, run: str, ranks: Sequence[int], metric: str) -> list[Any]:
    """The page's cards: those the matrix metric leaves as they are built once per run and ranks
    (``cache.rendered``), the matrix once per metric too."""
    key = (run, tuple(ranks))
    ranks_part = cache.rendered(rd, "communication ranks", key, lambda: _ranks_part(rd, run, ranks))
    grid = cache.rendered(rd, "communication matrix", (*key, metric), lambda: _matrix(rd, run, ranks, metric))
    return [*ranks_part, grid]


def _ranks_part(rd: Reader, run: str, ranks: Sequence[int]) -> list[Any]:
    return [
        html.Div(
            [
                html.Div(per_rank(data.comm_per_rank(rd, run, ranks), data.slow_ranks(rd, run)), className="card"),
                html.Div(bandwidth(data.comm_bandwidth(rd, run, ranks)), className="card"),
            ],
            className="row2 eq",
        ),
        html.Div(groups(data.comm_groups(rd, run), data.comm_definition(rd, run, ranks)), className="card"),
    ]


def _matrix(rd: Reader, run: str, ranks: Sequence[int], metric: str) -> html.Div:
    return html.Div(matrix(data.comm_matrix(rd, run, ranks), metric), className="card")
