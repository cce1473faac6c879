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

from webapp import data, links, page, ui
from webapp.errors import WebappError
from webapp.format import fmt_bytes, fmt_int, fmt_ns, fmt_rate
from webapp.params import format_ranks, parse_choice
from webapp.reader import Reader

dash.register_page(__name__, path="/communication", name="Communication", title="rankscope · communication", order=4)

P = "cm"
MATRIX_METRICS = {"bytes": "bytes", "transit_ns": "transit time", "bandwidth_bytes_per_s": "bandwidth"}
_MS = {"function": "params.value == null ? '' : d3.format(',.3f')(params.value)"}
_INT = {"function": "params.value == null ? '' : d3.format(',')(params.value)"}


def layout(run: Any = None, ranks: Any = None, matrix: Any = None, **_: Any) -> Any:
    return page.layout("Communication", run, ranks, lambda v: _layout(v, matrix))


def _layout(v: page.View, matrix_q: Any) -> html.Div:
    run, notes = v.run, v.notes
    try:
        metric = parse_choice("matrix", matrix_q, MATRIX_METRICS, "bytes")
    except WebappError as exc:
        notes.append(ui.message(f"{exc}; showing bytes."))
        metric = "bytes"
    return html.Div(
        [
            ui.header(
                "Communication",
                "Where communication time goes on each rank, how fast the links are, and which collectives are slow.",
            ),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, [] if v.selected == v.all_ranks else v.selected),
                    html.Div(
                        [
                            html.Label("Matrix", htmlFor=f"{P}-metric"),
                            dcc.RadioItems(
                                id=f"{P}-metric",
                                options=[{"label": v, "value": k} for k, v in MATRIX_METRICS.items()],
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
                    html.H2("Collectives"),
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
                        html.P("Select a collective to see who arrived last, and why.", className="note"),
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
        {"field": "name", "headerName": "operation", "maxWidth": 320, "tooltipField": "name", "pinned": "left"},
        {
            "field": "timeline",
            "headerName": "timeline",
            "cellRenderer": "markdown",
            "sortable": False,
            "filter": False,
            "maxWidth": 140,
            "headerTooltip": "this instance in the timeline, on every member rank",
        },
        {"field": "op_type", "headerName": "type", "maxWidth": 120, "tooltipField": "op_type"},
        {"field": "group_name", "headerName": "group", "maxWidth": 110, "tooltipField": "group_name"},
        {"field": "step", "headerName": "step", **num},
        {"field": "ranks", "headerName": "ranks", **num},
        {"field": "calls", "headerName": "calls", **num, "valueFormatter": _INT},
        {"field": "max_ms", "headerName": "max (ms)", **num, "valueFormatter": _MS, "sort": "desc"},
        {"field": "min_ms", "headerName": "min (ms)", **num, "valueFormatter": _MS},
        {"field": "avg_ms", "headerName": "avg (ms)", **num, "valueFormatter": _MS},
        {"field": "slowest_rank", "headerName": "slowest rank", **num},
        {"field": "fastest_rank", "headerName": "fastest rank", **num},
        {
            "field": "last_rank",
            "headerName": "last to arrive",
            **num,
            "headerTooltip": "the member that entered last (clocks aligned); the others waited for it",
        },
        {
            "field": "late_ms",
            "headerName": "late by (ms)",
            **num,
            "valueFormatter": _MS,
            "headerTooltip": "how much later than the next-latest member it entered: what the collective would "
            "have started earlier had it arrived with its peers",
        },
        {"field": "max_wait_ms", "headerName": "max wait (ms)", **num, "valueFormatter": _MS},
        {
            "field": "wait_source",
            "headerName": "wait from",
            "maxWidth": 130,
            "headerTooltip": (
                "producer: measured by the profiler; estimated: elapsed minus the shortest elapsed of the collective"
            ),
        },
        {"field": "mib", "headerName": "size (MiB)", **num, "valueFormatter": _MS},
    ]


# ---------------------------------------------------------------------------------------------
# content (pure functions)
# ---------------------------------------------------------------------------------------------


def per_rank(df: pd.DataFrame, votes: pd.DataFrame) -> list[Any]:
    if df.empty:
        return [
            html.H2("Communication time per rank"),
            ui.message(
                "No communication operations for the selected ranks (single process, or the profiler did not "
                "record them).",
                "info",
            ),
        ]
    for c in ("elapsed_ns", "wait_ns", "transit_ns", "bytes"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    x = [f"rank {r}" for r in df["rank"]]
    split = bool(df["wait_ns"].notna().any() and df["transit_ns"].notna().any())
    sources = sorted({s for lst in df["wait_sources"] for s in (lst if lst is not None else [])})
    fig = ui.figure(height=340, barmode="stack", yaxis_title="ms")
    if split:
        other = (df["elapsed_ns"] - df["wait_ns"].fillna(0) - df["transit_ns"].fillna(0)).clip(lower=0)
        fig.add_bar(
            name="transit",
            x=x,
            y=df["transit_ns"] / 1e6,
            marker_color=ui.COLORS["transit"],
            hovertemplate="%{x}: transit %{y:.3f} ms<extra></extra>",
        )
        fig.add_bar(
            name="wait",
            x=x,
            y=df["wait_ns"] / 1e6,
            marker_color=ui.COLORS["wait"],
            hovertemplate="%{x}: wait %{y:.3f} ms<extra></extra>",
        )
        if (other > 0).any():
            fig.add_bar(
                name="other (idle, sync)",
                x=x,
                y=other / 1e6,
                marker_color=ui.COLORS["other"],
                hovertemplate="%{x}: other %{y:.3f} ms<extra></extra>",
            )
        if sources == ["producer"]:
            note = (
                "Elapsed time of the communication operations split as the producer measured it: transit (moving "
                "data), wait (for the peers), other (idle / synchronisation). Long waits point at a slow peer."
            )
        else:
            note = (
                "Wait and transit estimated the way msprof-analyze does when the producer gives only elapsed times "
                "(Kineto, MindSpore on CPU): per collective, transit = the shortest elapsed time among its ranks, "
                "wait = the rest. Long waits point at a slow peer."
            )
    else:
        fig.add_bar(
            name="elapsed",
            x=x,
            y=df["elapsed_ns"] / 1e6,
            marker_color=ui.COLORS["comm_not_overlapped"],
            hovertemplate="%{x}: %{y:.3f} ms<extra></extra>",
        )
        note = (
            "Elapsed time of the communication operations; wait and transit could not be separated (no producer "
            "split and no collective matched on every rank)."
        )
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
        html.H2("Communication time per rank"),
        ui.graph(f"{P}-rank-graph", fig),
        html.P(note, className="note"),
    ]
    if not voted.empty:
        kids.append(
            html.P(
                "Slow rank vote (msprof-analyze: Dixon / 3σ per collective): "
                + ", ".join(
                    f"rank {int(r['rank'])} {int(r['votes'])}/{int(r['instances'])}" for r in voted.to_dict("records")
                ),
                className="note slow",
                id=f"{P}-slow",
            )
        )
    elif not votes.empty:
        kids.append(
            html.P(
                f"Slow rank vote (msprof-analyze: Dixon / 3σ per collective): no rank judged slow over "
                f"{int(votes['instances'].max())} collective(s).",
                className="note",
                id=f"{P}-slow",
            )
        )
    kids.append(
        html.Details(
            [
                html.Summary("numbers"),
                ui.table(
                    ["rank", "operations", "elapsed", "wait", "transit", "data size"], rows, id_=f"{P}-rank-table"
                ),
                html.P(
                    "Data size: the operations' buffers, each counted once per rank (the payload, "
                    "not the traffic it causes on the links).",
                    className="note",
                ),
            ],
            open=len(df) <= 8,
        )
    )
    return kids


def bandwidth(df: pd.DataFrame) -> list[Any]:
    head = html.H2("Bandwidth per transport")
    if df.empty:
        return [
            head,
            ui.message(
                "No per-transport bandwidth in this run (torch_npu / MindSpore communication.json at Level1 or "
                "above records it).",
                "info",
            ),
        ]
    fig = ui.figure(height=320, barmode="group", yaxis_title="GB/s")
    for transport, g in df.groupby("transport", sort=True):
        fig.add_bar(
            name=str(transport),
            x=[f"rank {r}" for r in g["rank"]],
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
        html.P(
            "Bandwidth = bytes moved / transit time summed over the operations; min / max over single operations.",
            className="note",
        ),
        html.P(_BW_BYTES_NOTE, className="note", id=f"{P}-bw-note"),
        html.Details(
            [
                html.Summary("numbers"),
                ui.table(
                    ["rank", "transport", "bytes moved", "transit", "bandwidth", "min", "max"],
                    rows,
                    id_=f"{P}-bw-table",
                ),
            ]
        ),
    ]


_BW_BYTES_NOTE = (
    "Bytes moved: the traffic the profiler counted on that transport, larger than the data size of the per-rank "
    "table: a collective moves its buffer in several pieces to several peers (a ring all-reduce sends about "
    "2(n-1)/n of it), and SDMA, the copy engine behind HCCS and PCIe transfers, counts the same traffic again, so "
    "do not add transports up."
)


def _label_key(v: str) -> tuple[int, int]:
    return (1, int(v[1:])) if v.startswith("L") and v[1:].isdigit() else ((0, int(v)) if v.isdigit() else (2, 0))


def matrix(df: pd.DataFrame, metric: str) -> list[Any]:
    head = html.H2("Rank × rank matrix")
    if df.empty:
        return [
            head,
            ui.message(
                "No communication matrix in this run (torch_npu / MindSpore Level1+ write communication_matrix.json; "
                "Kineto has no per-link data, only matched send/recv pairs).",
                "info",
            ),
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
    fig = ui.figure(
        height=max(260, min(900, 110 + 26 * len(ys))), xaxis_title="destination rank", yaxis_title="source rank"
    )
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
            name="local",
            hovertemplate="%{y} → %{x} (local, inside the device): %{z:.3f} " + unit + "<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    note = (
        f"{MATRIX_METRICS[metric].capitalize()} per (source, destination) link, summed over operation types and steps"
    )
    if finite.size:
        note += f" (from {finite.min():,.3f} to {finite.max():,.3f} {unit}; the colour scale starts at 0)."
    else:
        note += "."
    if np.isfinite(z_local).any():
        lv = z_local[np.isfinite(z_local)]
        note += (
            f" Grey: a rank's copies inside its own device (local links, {lv.min():,.3f}–{lv.max():,.3f} {unit}), "
            "kept out of the colour scale."
        )
    if any(str(x).startswith("L") for x in labels):
        note += (
            " L<k>: local rank k of the group, whose global rank the profiler did not record (its rank was not "
            "profiled)."
        )
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
            "wait_source": df["wait_source"].astype(object),
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
        row["timeline"] = f"[on {n} rank{'s' if n != 1 else ''}]({links.collective_url(run, members)})" if n else ""
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
    @ui.guard(7, message_index=0)
    def update(run: str, ranks: Any, metric: str) -> Any:
        with page.view(run, ranks) as v:
            all_ranks, selected = v.all_ranks, v.selected
            content = render(v.rd, run, selected, metric if metric in MATRIX_METRICS else "bytes")
            ops, n = data.collectives(v.rd, run, selected)
            notes = matching_notes(data.collective_matching(v.rd, run))
        cut = f" (the {len(ops):,} slowest of {n:,})" if n > len(ops) else ""
        status = (
            f"{len(ops):,} collectives (an instance = one call matched across its ranks) over ranks "
            f"{format_ranks(selected)}{cut}."
            if len(ops)
            else "No communication operations."
        )
        url = ui.page_url(
            "/communication",
            {
                "run": run,
                "ranks": format_ranks(ranks) if ranks else None,
                "matrix": None if metric == "bytes" else metric,
            },
        )
        rows = op_rows(ops, run, _token(run, selected))
        # columns as wide as their content: the slowest / fastest rank stay in view
        return (
            content,
            rows,
            ui.fit_columns(_op_columns(), rows),
            status,
            notes,
            [{"label": f"rank {r}", "value": r} for r in all_ranks],
            url,
        )


def _register_selection(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-blame", "children"),
        Input(f"{P}-ops", "selectedRows"),
        Input(f"{P}-ops", "rowData"),
        State(f"{P}-run", "value"),
    )
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
        if isinstance(r["note"], str) and r["note"]:
            g = (
                "ops without a group"
                if r["group_name"] is None or pd.isna(r["group_name"])
                else f"group {r['group_name']}"
            )
            items.append(html.Li([html.Span(g + ": ", className="who"), r["note"]]))
    return [html.Ul(items, className="missing", id=f"{P}-matching-notes")]


def blame_panel(b: pd.DataFrame, run: str, instance: str | None) -> html.Div:
    """Who arrived last at one collective, by how much, and what it did since the group's previous
    collective compared with its peers (``analyses.blame_of``), with that window in the timeline."""
    if b.empty:
        return html.Div(
            html.P(
                "No arrival order for this collective: it was not seen by every profiled member of its group, "
                "or a member's clock cannot be aligned, or it is the first of its group with no step around it."
                if instance
                else "Select a collective to see who arrived last, and why.",
                className="note",
            )
        )
    r = b.iloc[0]
    rows = [[c, fmt_ns(v)] for c, v in sorted(r["excess_by_cause"].items(), key=lambda kv: -kv[1]) if v != 0]
    ops = [[t["name"], fmt_ns(t["excess_ns"]), fmt_ns(t["ns"])] for t in (r["top_ops"] or [])]
    chain = " → ".join(
        f"rank {c['rank']} ({c['cause']}{', waited ' + fmt_ns(c['waited_ns']) if c.get('waited_ns') else ''})"
        for c in r["chain"]
    )
    hl = [tuple(h) for h in r["highlights"]]
    kids: list[Any] = [
        html.H3(f"Blame: {r['op_type']} of group {r['group_name']}, step {r['step']}"),
        html.P(
            f"Rank {int(r['last_rank'])} arrived last, {fmt_ns(r['lateness_ns'])} after the first member and "
            f"{fmt_ns(r['margin_ns'])} after the next-latest: the collective would have started that much earlier "
            f"had it arrived with its peers. Since the group's previous collective it spent "
            f"{fmt_ns(int(r['end_ns']) - int(r['start_ns']))} against its peers' {fmt_ns(r['peer_interval_ns'])} "
            f"(median); the difference went to {r['cause_text']}.",
            className="note",
            id=f"{P}-blame-text",
        ),
        ui.table(["cause", "excess over the peers' median"], rows, id_=f"{P}-blame-causes"),
    ]
    if ops and r["cause"] == "compute":
        kids.append(ui.table(["operator", "excess", "its time"], ops, id_=f"{P}-blame-ops"))
    kids.append(html.P(f"Waiting chain: {chain}", className="note"))
    kids.append(
        html.Div(
            [
                "In the timeline: ",
                dcc.Link(
                    "the interval on every member",
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
    kids: list[Any] = [html.H2("Communication groups")]
    if df.empty:
        kids.append(ui.message("No communication group with matched operations in this run.", "info"))
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
                ["group", "role", "ranks", "instances", "elapsed", "wait", "transit", "idle", "idle share"],
                rows,
                id_=f"{P}-group-table",
            ),
            html.P(
                "Summed over the group's ranks. Idle = elapsed − wait − transit (msprof-analyze's Idle Time: "
                "inside the operation, neither waiting for a peer nor moving data — synchronisation and the "
                "gaps between its tasks); the producer's own figure where it wrote one.",
                className="note",
            ),
        ]
    if not defs.empty and defs["producer_communication_ns"].notna().any():
        rows = [
            [
                int(r["rank"]),
                str(r["definition"]),
                fmt_ns(r["communication_ns"]),
                fmt_ns(r["producer_communication_ns"]),
            ]
            for r in defs.to_dict("records")
        ]
        kids += [
            ui.table(
                ["rank", "definition", "Communication (ours)", "Communication (producer's)"],
                rows,
                id_=f"{P}-definition-table",
            ),
            html.P(
                "The step breakdown's Communication, mean per step: union of the op spans, or of the HCCL "
                "tasks where the producer's own step rows count those (docs/analyses.md §1).",
                className="note",
            ),
        ]
    return kids


def render(rd: Reader, run: str, ranks: Sequence[int], metric: str) -> list[Any]:
    return [
        html.Div(
            [
                html.Div(per_rank(data.comm_per_rank(rd, run, ranks), data.slow_ranks(rd, run)), className="card"),
                html.Div(bandwidth(data.comm_bandwidth(rd, run, ranks)), className="card"),
            ],
            className="row2 eq",
        ),
        html.Div(groups(data.comm_groups(rd, run), data.comm_definition(rd, run, ranks)), className="card"),
        html.Div(matrix(data.comm_matrix(rd, run, ranks), metric), className="card"),
    ]
