"""Cluster: the parallel layout the analyses inferred (``analyses.parallel_layout``: TP / CP / EP /
DP / PP as found, declared or from the groups' structure and traffic) as a grid of ranks, each cell
coloured by a chosen per-rank metric; slow links and slow ranks (``analyses.slow_links``) drawn on
the grid; click a cell to open that rank in the timeline. ``rank=N`` marks one rank's cell."""

from __future__ import annotations

import math
from typing import Any

import dash
import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from analyzer.format import is_missing
from webapp import answers, data, links, page, ui
from webapp.errors import BadParameter, WebappError
from webapp.format import fmt_bytes, fmt_ns, plot_text
from webapp.labels import page_title, said_notes, t
from webapp.params import format_ranks, parse_choice, parse_int
from webapp.reader import Reader

dash.register_page(__name__, path="/cluster", name="Cluster", title=page_title("cluster"), order=6)

P = "cl"
DIMS = ("tp", "cp", "ep", "dp", "pp")  # innermost first (Megatron's order)
METRICS = {  # key -> unit (ns / bytes / count); the label is cl.m.KEY in webapp.labels
    "step_ns": "ns",
    "computing_ns": "ns",
    "communication_ns": "ns",
    "comm_not_overlapped_ns": "ns",
    "wait_ns": "ns",
    "free_ns": "ns",
    "peak_memory": "bytes",
    "slow_rank_votes": "count",
    "straggler_lateness_ns": "ns",
}


def metric_label(metric: str) -> str:
    return t(f"cl.m.{metric}")


def layout(run: Any = None, metric: Any = None, rank: Any = None, **_: Any) -> Any:
    return page.layout(t("nav.cluster"), run, None, lambda v: _layout(v, metric, rank))


def _layout(v: page.View, metric_q: Any, rank_q: Any) -> html.Div:
    notes = v.notes
    try:
        metric = parse_choice("metric", metric_q, METRICS, "step_ns")
    except WebappError as exc:
        notes.append(ui.message(t("ui.showing", problem=exc, shown=t("cl.showing_step"))))
        metric = "step_ns"
    mark = None
    try:
        mark = parse_int("rank", rank_q, minimum=0)
        if mark is not None and mark not in set(v.all_ranks):
            raise BadParameter("rank", mark, t("cl.rank_not_in_run", ranks=format_ranks(v.all_ranks)))
    except WebappError as exc:
        notes.append(ui.message(str(exc)))
        mark = None
    return html.Div(
        [
            ui.header(t("nav.cluster"), t("cl.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, v.run),
                    html.Div(
                        [
                            html.Label(t("cl.colour_by"), htmlFor=f"{P}-metric"),
                            ui.dropdown(
                                id=f"{P}-metric",
                                options=[{"label": metric_label(k), "value": k} for k in METRICS],
                                value=metric,
                                clearable=False,
                                className="dd dd-small",
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-mark", data=None if mark is None else {"run": v.run, "rank": mark}),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
        ],
        className="page",
    )


# ---------------------------------------------------------------------------------------------
# content (pure functions: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def grid_cells(lay: pd.DataFrame) -> tuple[pd.DataFrame, str, list[str]]:
    """Each rank's cell (``gx``, ``gy``) from its coordinates: x along the innermost dimension
    found, y over the others (outermost first); without a layout the ranks in order, row by row.
    Returns (rank, gx, gy), the x axis title and the y row labels."""
    dims = [d for d in DIMS if d in lay.columns]
    ranks = lay["rank"].astype("int64").to_numpy()
    if not dims:
        width = max(1, math.ceil(math.sqrt(len(ranks))))
        order = np.argsort(ranks, kind="stable")
        gx, gy = np.empty(len(ranks), np.int64), np.empty(len(ranks), np.int64)
        gx[order], gy[order] = np.arange(len(ranks)) % width, np.arange(len(ranks)) // width
        rows = [
            format_ranks(sorted(int(r) for r in ranks[gy == k])) for k in range(int(gy.max()) + 1 if len(ranks) else 0)
        ]
        return pd.DataFrame({"rank": ranks, "gx": gx, "gy": gy}), t("cl.rank_order"), rows
    x_dim, y_dims = dims[0], dims[1:][::-1]
    coords = lay[dims].astype("Float64")
    placed = coords.notna().all(axis=1).to_numpy()
    gx = coords[x_dim].fillna(-1).astype("int64").to_numpy()
    keys = [tuple(int(coords.iloc[i][d]) for d in y_dims) if placed[i] else None for i in range(len(lay))]
    uniq = sorted({k for k in keys if k is not None})
    index = {k: j for j, k in enumerate(uniq)}
    rows = [" · ".join(f"{d} {c}" for d, c in zip(y_dims, k)) or x_dim for k in uniq]
    gy = np.array([index[k] if k is not None else len(uniq) for k in keys], dtype=np.int64)
    if not placed.all():  # a rank no group placed along every dimension: a row of its own
        rows.append(t("cl.not_placed"))
        n_free = np.cumsum(~placed) - 1
        gx = np.where(placed, gx, n_free)
    return pd.DataFrame({"rank": ranks, "gx": gx, "gy": gy}), t("cl.x_title", dim=x_dim), rows


def metric_values(rd: Reader, run: str, metric: str) -> pd.DataFrame:
    """The layout (every rank of the job) with ``value`` = the metric per rank."""
    if metric in ("peak_memory", "wait_ns"):
        lay = data.layout_metric(rd, run, "step_ns")
        if metric == "peak_memory":
            v = data.memory_peak_per_rank(rd, run, None).set_index("rank")["peak_allocated_bytes"]
        else:
            v = data.comm_per_rank(rd, run, None).set_index("rank")["wait_ns"]
        return lay.assign(metric=metric, value=lay["rank"].map(v.to_dict()))
    return data.layout_metric(rd, run, metric)


def _fmt(v: Any, unit: str) -> str:
    if is_missing(v):
        return t("cl.no_data")
    return fmt_ns(v) if unit == "ns" else fmt_bytes(v) if unit == "bytes" else f"{int(v):,}"


def _scale(unit: str) -> tuple[float, str]:
    return {"ns": (1e6, "ms"), "bytes": (2**20, "MiB"), "count": (1.0, "")}[unit]


def figure(lay: pd.DataFrame, metric: str, judged: pd.DataFrame, mark: int | None = None) -> tuple[Any, list[str], int]:
    """The grid figure, the sentences for the slow links / ranks drawn on it, and how many there are."""
    label, unit = metric_label(metric), METRICS[metric]
    cells, x_title, rows = grid_cells(lay)
    nx, ny = int(cells["gx"].max()) + 1, len(rows)
    div, axis_unit = _scale(unit)
    z = np.full((ny, nx), np.nan)
    text = np.full((ny, nx), "", dtype=object)
    rank_at = np.full((ny, nx), -1, dtype=np.int64)
    values = dict(zip(lay["rank"].astype(int), lay["value"]))
    for r, x, y in cells.itertuples(index=False):
        v = values.get(int(r))
        z[y, x] = np.nan if is_missing(v) else float(v) / div
        text[y, x] = f"{t('ui.rank_n', rank=r)}<br>{_fmt(v, unit)}"
        rank_at[y, x] = int(r)
    fig = ui.figure(height=max(260, min(900, 120 + 70 * ny)), xaxis_title=x_title, yaxis_title=None)
    finite = z[np.isfinite(z)]
    fig.add_heatmap(
        z=z,
        x=list(range(nx)),
        y=list(range(ny)),
        text=text,
        texttemplate="%{text}",
        customdata=rank_at,
        colorscale="YlOrRd",
        zmin=float(finite.min()) if finite.size else 0.0,
        zmax=float(finite.max()) if finite.size and finite.max() > finite.min() else None,
        colorbar=dict(title=axis_unit or t("cl.votes")),
        hovertemplate="%{text}<extra>" + plot_text(label) + "</extra>",
        xgap=3,
        ygap=3,
    )
    pos = {int(r): (int(x), int(y)) for r, x, y in cells.itertuples(index=False)}
    said: list[str] = []
    slow = judged[judged["slow"].astype(bool)] if not judged.empty else judged
    for j in slow.itertuples():
        tr = plot_text(j.transport)
        if j.level == "link" and not is_missing(j.slow_src) and not is_missing(j.slow_dst):
            a, b = pos.get(int(j.slow_src)), pos.get(int(j.slow_dst))
            sentence = t(
                "cl.slow_link",
                transport=j.transport,
                src=int(j.slow_src),
                dst=int(j.slow_dst),
                rate=f"{j.min_bytes_per_s / 1e9:.2f}",
                gap=f"{j.gap_ratio:.1%}",
                n=int(j.n),
            )
            said.append(sentence)
            if a is None or b is None:
                continue
            fig.add_annotation(
                x=b[0], y=b[1], ax=a[0], ay=a[1], xref="x", yref="y", axref="x", ayref="y",
                showarrow=True, arrowhead=3, arrowsize=1.4, arrowwidth=3, arrowcolor="#1f5fbf",
                hovertext=plot_text(sentence), text="",
            )  # fmt: skip
        elif j.level == "rank" and not is_missing(j.slow_rank):
            sentence = t(
                "cl.slow_rank",
                rank=int(j.slow_rank),
                transport=j.transport,
                step=j.step,
                rate=f"{j.min_bytes_per_s / 1e9:.2f}",
                fast=f"{j.max_bytes_per_s / 1e9:.2f}",
                fast_rank=j.fast_rank,
            )
            said.append(sentence)
            p = pos.get(int(j.slow_rank))
            if p is not None:
                fig.add_shape(
                    type="rect", x0=p[0] - 0.5, x1=p[0] + 0.5, y0=p[1] - 0.5, y1=p[1] + 0.5,
                    line=dict(color="#1f5fbf", width=4, dash="dot"), layer="above",
                )  # fmt: skip
                fig.add_annotation(
                    x=p[0], y=p[1] + 0.38, text=t("cl.slow_mark", transport=tr), showarrow=False, font=dict(size=10)
                )
    if mark is not None and mark in pos:
        p = pos[mark]
        fig.add_shape(
            type="rect", x0=p[0] - 0.5, x1=p[0] + 0.5, y0=p[1] - 0.5, y1=p[1] + 0.5,
            line=dict(color="#111", width=3), layer="above",
        )  # fmt: skip
    fig.update_xaxes(tickmode="array", tickvals=list(range(nx)), ticktext=[str(i) for i in range(nx)], showgrid=False)
    fig.update_yaxes(
        tickmode="array", tickvals=list(range(ny)), ticktext=rows, autorange="reversed", showgrid=False, zeroline=False
    )
    return fig, said, len(slow)


def render(rd: Reader, run: str, metric: str, mark: int | None) -> list[Any]:
    lay = metric_values(rd, run, metric)
    dims = data.parallel_dims(rd, run)
    judged = data.slow_links(rd, run)
    fig, said, n_slow = figure(lay, metric, judged, mark)
    if dims.empty:
        found = t("cl.no_dims")
    else:
        found = t("cl.layout", dims=" × ".join(f"{d.upper()} {int(s)}" for d, s in zip(dims["dim"], dims["size"])))
    dim_rows = [
        [str(r["dim"]).upper(), int(r["size"]), int(r["groups"]), "-" if is_missing(r["stride"]) else r["stride"],
         said_notes(r, "source_msgs", "source") or "-"]
        for r in dims.to_dict("records")
    ]  # fmt: skip
    values = pd.to_numeric(lay["value"], errors="coerce")
    label, unit = metric_label(metric), METRICS[metric]
    spread = ""
    if values.notna().sum() >= 2 and values.max() > values.min():
        hi, lo = lay.loc[values.idxmax()], lay.loc[values.idxmin()]
        spread = t(
            "cl.spread",
            hi=int(hi["rank"]),
            hi_value=_fmt(hi["value"], unit),
            lo=int(lo["rank"]),
            lo_value=_fmt(lo["value"], unit),
        )
    if n_slow:
        links_note: Any = html.Ul([html.Li(s) for s in said], id=f"{P}-slow")
    else:
        links_note = html.P(
            t("cl.no_slow", n=len(judged)),
            className="note",
            id=f"{P}-slow",
        )
    return [
        html.Div(
            [
                html.H2(t("cl.ranks_by", metric=label)),
                html.P(found + spread, className="note", id=f"{P}-found"),
                ui.graph(f"{P}-grid", fig),
                html.P(t("cl.click"), className="note"),
            ],
            className="card",
        ),
        html.Div([html.H2(t("cl.slow_title")), links_note], className="card"),
        html.Div(
            [
                html.H2(t("cl.dims_title")),
                ui.table(
                    [t(f"cl.col.{c}") for c in ("dim", "size", "groups", "stride", "how")], dim_rows, id_=f"{P}-dims"
                )
                if dim_rows
                else html.P(t("cl.none_found"), className="note"),
            ],
            className="card",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-content", "children"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-metric", "value"),
        State(f"{P}-mark", "data"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def update(run: str, metric: str, mark: Any) -> Any:
        metric = metric if metric in METRICS else "step_ns"
        rank = mark.get("rank") if isinstance(mark, dict) and mark.get("run") == run else None
        with page.view(run, None) as v:
            content = render(v.rd, run, metric, rank)
        url = ui.page_url("/cluster", {"run": run, "metric": None if metric == "step_ns" else metric, "rank": rank})
        return content, url

    @app.callback(
        Output("navigate", "href", allow_duplicate=True),
        Input(f"{P}-grid", "clickData"),
        State(f"{P}-run", "value"),
        prevent_initial_call=True,
    )
    def open_rank(click: Any, run: str) -> Any:
        if not click or not click.get("points"):
            return dash.no_update
        rank = click["points"][0].get("customdata")
        if rank is None or int(rank) < 0:
            return dash.no_update
        return links.timeline_url(run, [int(rank)])
