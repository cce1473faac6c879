"""Training: the collector's always-on per-step scalars (step time, loss, learning rate, throughput,
any value passed to ``prof.step()``) per rank over steps, as MindInsight's training dashboard shows
them; step-time outliers (``analyses.step_outliers``) marked on the step-time chart and listed; the
steps a profile holds shaded, and a click on one of them (or its link) opens that rank's step in
the timeline. ``scalar=NAME`` chooses the scalar; ``run`` and ``ranks`` as on every page."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from webapp import answers, cache, data, links, page, ui
from webapp.format import fmt_ns
from webapp.labels import page_title, t
from webapp.params import single
from webapp.reader import Reader

dash.register_page(__name__, path="/training", name="Training", title=page_title("training"), order=7)

P = "tr"
STEP_TIME = "step_time_ns"
MAX_OUTLIER_ROWS = 30  # rows of the outlier table (the longest excess first)
MAX_WINDOW_ROWS = 40  # profiled windows listed
MAX_WINDOW_SHADES = 60  # profiled step ranges shaded on the charts
MAX_STEP_LINKS = 12  # step links of one profiled window
CHART_POINTS = 8_000  # points of one chart over all its ranks: each rank's curve is bucketed to its share
MIN_RANK_POINTS = 400  # (outliers are marked from every step, not from the thinned curves)
MAX_RANK_LINES = 8  # more ranks: the lowest, mean and highest value over them per bucket of steps, not a line each
BAND_POINTS = 1000  # buckets of steps of that band (a chart is about 1000 px wide)
MAX_OUTLIER_MARKS = 400  # outliers marked on the chart (the longest excess first; the table and the analysis have all)


def layout(run: Any = None, ranks: Any = None, scalar: Any = None, **_: Any) -> Any:
    return page.layout(t("nav.training"), run, ranks, lambda v: _layout(v, scalar))


def scalar_label(name: str) -> str:
    """A scalar's name for people: ``step_time_ns`` → ``step time (ms)``; other names as written."""
    return t("tr.step_time") if name == STEP_TIME else name


def _layout(v: page.View, scalar_q: Any) -> html.Div:
    names = data.scalar_names(v.rd, v.run)
    want = single("scalar", scalar_q)
    options = [{"label": scalar_label(str(n)), "value": str(n)} for n in names["name"]]
    known = {o["value"] for o in options}
    if want is not None and want not in known:
        v.notes.append(ui.message(t("tr.no_scalar", scalar=repr(want))))
        want = None
    return html.Div(
        [
            ui.header(
                t("nav.training"),
                t("tr.subtitle"),
            ),
            html.Div(
                [
                    ui.run_control(P, v.runs, v.run),
                    ui.ranks_control(P, v.all_ranks, v.selected),
                    html.Div(
                        [
                            html.Label(t("tr.scalar"), htmlFor=f"{P}-scalar"),
                            ui.dropdown(
                                id=f"{P}-scalar",
                                options=options,
                                value=want or _default_scalar(list(known)),
                                clearable=False,
                                className="dd dd-small",
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(v.notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-want-scalar", data=want),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
            html.Div(id=f"{P}-click", className="note"),
        ],
        className="page",
    )


def _default_scalar(names: list[str]) -> str | None:
    """The loss when the job records one, else the step time."""
    for n in names:
        if n.lower() == "loss":
            return n
    return STEP_TIME if STEP_TIME in names else (names[0] if names else None)


# ---------------------------------------------------------------------------------------------
# content (pure functions: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def windows(prof: pd.DataFrame) -> pd.DataFrame:
    """Contiguous profiled step ranges per rank: rank, first, last, steps (list)."""
    rows = []
    for rank, g in prof.sort_values(["rank", "step"]).groupby("rank"):
        steps = [int(s) for s in g["step"]]
        start = 0
        for i in range(1, len(steps) + 1):
            if i == len(steps) or steps[i] != steps[i - 1] + 1:
                rows.append({"rank": int(rank), "first": steps[start], "last": steps[i - 1], "steps": steps[start:i]})
                start = i
    return pd.DataFrame(rows, columns=["rank", "first", "last", "steps"])


def _shade(fig: Any, prof: pd.DataFrame) -> None:
    """Shade the step ranges some selected rank's profile holds (union over the ranks)."""
    if prof.empty:
        return
    steps = sorted({int(s) for s in prof["step"]})
    ranges: list[list[int]] = []
    for s in steps:
        if ranges and s == ranges[-1][1] + 1:
            ranges[-1][1] = s
        else:
            ranges.append([s, s])
    # one layout update for every range (add_vrect per range re-validates the layout each time: ~5 ms a range)
    shade = dict(type="rect", xref="x", yref="paper", y0=0, y1=1, fillcolor="#5bc0de", opacity=0.18, layer="below")
    fig.update_layout(
        shapes=[{**shade, "x0": a - 0.5, "x1": b + 0.5, "line": {"width": 0}} for a, b in ranges[:MAX_WINDOW_SHADES]]
    )


def scalar_figure(
    sc: pd.DataFrame, name: str, prof: pd.DataFrame, outliers: pd.DataFrame | None, band: pd.DataFrame | None = None
) -> Any:
    """One scalar per rank over steps (``sc``), or, for many ranks, its lowest / mean / highest
    value over them per bucket of steps (``band``); profiled steps shaded; ``outliers`` (step time)
    marked. Each rank's trace names its rank in ``meta`` (:func:`chart` keeps them for the click
    into the timeline: a list of customdata per point costs plotly ~30 µs a point); an outlier's
    marker carries [rank, ratio] as customdata."""
    scale = 1e6 if name == STEP_TIME else 1.0
    label = scalar_label(name)
    fig = ui.figure(height=340, xaxis_title=t("tr.step"), yaxis_title=label, title=label)
    if band is not None:
        ui.add_band(fig, band, scale)
    for rank, g in sc.groupby("rank", sort=True):
        fig.add_scatter(
            x=g["step"].to_numpy(),  # arrays: plotly validates a pandas Series ~2x slower
            y=(g["value"] / scale).to_numpy(),
            mode="lines+markers" if len(g) <= 60 else "lines",
            name=t("ui.rank_n", rank=int(rank)),
            meta=int(rank),
            hovertemplate=t("tr.rank_hover", rank=int(rank)) + "<extra></extra>",
        )
    if outliers is not None and not outliers.empty:
        top = outliers.head(MAX_OUTLIER_MARKS)
        fig.add_scatter(
            x=top["step"],
            y=top["step_time_ns"] / 1e6,
            mode="markers",
            marker=dict(symbol="x", size=11, color="#d9534f", line=dict(width=2)),
            name=t("tr.outlier_step"),
            customdata=[[int(r), round(float(q), 2)] for r, q in zip(top["rank"], top["ratio"].fillna(0))],
            hovertemplate=t("tr.outlier_hover") + "<extra>" + t("tr.outlier") + "</extra>",
        )
    _shade(fig, prof)
    if not sc.empty and sc["step"].nunique() <= 20:
        fig.update_xaxes(dtick=1)
    return fig


def chart(id_: str, fig: Any) -> list[Any]:
    """The graph and, beside it, the rank of each of its traces (None: not one rank's)."""
    ranks = [t.meta if isinstance(t.meta, int) else None for t in fig.data]
    return [ui.graph(id_, fig), dcc.Store(id=f"{id_}-ranks", data=ranks)]


def _outlier_table(run: str, out: pd.DataFrame) -> Any:
    if out.empty:
        return html.P(t("tr.no_outlier"), className="note", id=f"{P}-outliers")
    rows = []
    for r in out.head(MAX_OUTLIER_ROWS).itertuples():
        url = links.timeline_url(run, [int(r.rank)], step=int(r.step)) if r.profiled else None
        rows.append(
            html.Tr(
                [
                    html.Td(str(int(r.rank))),
                    html.Td(str(int(r.step))),
                    html.Td(fmt_ns(r.step_time_ns)),
                    html.Td(fmt_ns(r.median_ns)),
                    html.Td(f"{r.ratio:.2f}×"),
                    html.Td(dcc.Link(t("tr.timeline"), href=url) if url else t("tr.not_profiled")),
                ]
            )
        )
    head = [t(f"tr.oc.{c}") for c in ("rank", "step", "time", "median", "ratio", "profile")]
    more = len(out) - MAX_OUTLIER_ROWS
    return html.Div(
        [
            html.Table(
                [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)], className="tbl", id=f"{P}-outliers"
            ),
            html.P(t("tr.more", n=more), className="note") if more > 0 else None,
        ]
    )


def _window_table(run: str, prof: pd.DataFrame) -> Any:
    w = windows(prof)
    if w.empty:
        return html.P(
            t("tr.no_window"),
            className="note",
            id=f"{P}-windows",
        )
    rows = []
    for r in w.head(MAX_WINDOW_ROWS).itertuples():
        steps = list(r.steps)
        step_links: list[Any] = []
        for s in steps[:MAX_STEP_LINKS]:
            if step_links:
                step_links.append(" · ")
            step_links.append(dcc.Link(str(s), href=links.timeline_url(run, [int(r.rank)], step=s)))
        if len(steps) > MAX_STEP_LINKS:
            step_links.append(" " + t("tr.more", n=len(steps) - MAX_STEP_LINKS))
        span = f"{r.first}" if r.first == r.last else f"{r.first}..{r.last}"
        rows.append(html.Tr([html.Td(str(int(r.rank))), html.Td(span), html.Td(step_links)]))
    return html.Table(
        [html.Thead(html.Tr([html.Th(t(f"tr.wc.{h}")) for h in ("rank", "steps", "open")])), html.Tbody(rows)],
        className="tbl",
        id=f"{P}-windows",
    )


def render(rd: Reader, run: str, ranks: list[int], all_ranks: list[int], scalar: str | None) -> list[Any]:
    names = data.scalar_names(rd, run)
    if names.empty:
        return [
            ui.message(
                t("tr.no_scalars"),
                "info",
            )
        ]
    known = [str(n) for n in names["name"]]
    scalar = scalar if scalar in known else _default_scalar(known)
    sel = None if sorted(ranks) == sorted(all_ranks) else ranks
    prof = data.profiled_steps(rd, run, sel)
    outliers = data.step_outliers(rd, run)
    outliers = outliers[outliers["rank"].isin(ranks)] if not outliers.empty else outliers
    per_rank = max(MIN_RANK_POINTS, CHART_POINTS // max(1, len(ranks)))
    many = len(ranks) > MAX_RANK_LINES
    shown = [n for n in dict.fromkeys([scalar, STEP_TIME]) if n in known]
    # a few ranks: the curves of both charts' scalars in one pass over their records
    curves = None if many else data.scalars(rd, run, sel, shown, per_rank)

    def series(name: str) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        if curves is None:
            return pd.DataFrame(columns=["rank", "name", "step", "value"]), data.scalar_band(
                rd, run, sel, name, BAND_POINTS
            )
        return curves[curves["name"] == name], None

    steps_row = names.set_index("name")
    first, last = int(steps_row["first_step"].min()), int(steps_row["last_step"].max())
    summary = t(
        "tr.summary",
        first=first,
        last=last,
        n=len(known),
        names=", ".join(known),
        outliers=len(outliers),
        in_profile=t("tr.in_profile", n=int(outliers["profiled"].sum())) if len(outliers) else "",
        pairs=len(prof),
    )
    cards: list[Any] = [html.P(summary, className="note", id=f"{P}-summary")]
    if scalar is not None and scalar != STEP_TIME:
        sc, band = series(scalar)
        cards.append(
            html.Div(
                [html.H2(scalar_label(scalar)), *chart(f"{P}-chart", scalar_figure(sc, scalar, prof, None, band))],
                className="card",
            )
        )

    def step_cards() -> list[Any]:
        """The step-time chart and the two tables: the same whichever scalar is chosen beside them."""
        st, st_band = series(STEP_TIME) if STEP_TIME in known else (pd.DataFrame(), None)
        out: list[Any] = []
        if not st.empty or st_band is not None:
            out.append(
                html.Div(
                    [
                        html.H2(t("tr.steptime_title")),
                        *chart(f"{P}-steptime", scalar_figure(st, STEP_TIME, prof, outliers, st_band)),
                        html.P(
                            t("tr.outlier_rule"),
                            className="note",
                        ),
                    ],
                    className="card",
                )
            )
        out.append(html.Div([html.H2(t("tr.outliers_title")), _outlier_table(run, outliers)], className="card"))
        out.append(html.Div([html.H2(t("tr.profiled_title")), _window_table(run, prof)], className="card"))
        return out

    key = (run, tuple(ranks), tuple(all_ranks), many, per_rank)
    return cards + cache.rendered(rd, "training.steps", key, step_cards)


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-scalar", "options"),
        Output(f"{P}-scalar", "value"),
        Input(f"{P}-run", "value"),
        State(f"{P}-scalar", "value"),
        State(f"{P}-want-scalar", "data"),
        prevent_initial_call=True,
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def run_changed(run: str, current: Any, want: Any) -> Any:
        with page.view(run, None, ("scalars",), check_run=False) as v:
            known = [str(n) for n in data.scalar_names(v.rd, run)["name"]]
        value = next((s for s in (current, want) if s in known), None) or _default_scalar(known)
        return [{"label": scalar_label(n), "value": n} for n in known], value

    @app.callback(
        Output(f"{P}-content", "children"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-scalar", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def update(run: str, ranks: Any, scalar: Any) -> Any:
        with page.view(run, ranks, ("scalars",)) as v:
            content = render(v.rd, run, v.selected, v.all_ranks, scalar if isinstance(scalar, str) else None)
            params = {"run": run, "ranks": ui.ranks_param(v.selected, v.all_ranks), "scalar": scalar or None}
        return content, ui.page_url("/training", params)

    for graph in (f"{P}-chart", f"{P}-steptime"):  # one callback per chart: either may be absent

        @app.callback(
            Output("navigate", "href", allow_duplicate=True),
            Output(f"{P}-click", "children", allow_duplicate=True),
            Input(graph, "clickData"),
            State(f"{P}-run", "value"),
            State(f"{graph}-ranks", "data"),
            prevent_initial_call=True,
        )
        def open_step(click: Any, run: str, trace_ranks: Any) -> Any:
            return step_link(click, run, trace_ranks)


def step_link(click: Any, run: str, trace_ranks: Any = None) -> tuple[Any, Any]:
    """A click on a chart's point: that rank's step in the timeline when a profile holds it, else a
    sentence saying it is not profiled."""
    if not click or not click.get("points"):
        return dash.no_update, dash.no_update
    pt = click["points"][0]
    rank, step = pt.get("customdata"), pt.get("x")
    if isinstance(rank, list):  # an outlier's marker: [rank, ratio]
        rank = rank[0] if rank else None
    elif rank is None and isinstance(trace_ranks, list):  # a rank's curve: its trace says which
        cn = pt.get("curveNumber")
        rank = trace_ranks[cn] if isinstance(cn, int) and 0 <= cn < len(trace_ranks) else None
    if rank is None or step is None:
        return dash.no_update, dash.no_update
    rank, step = int(rank), int(round(float(step)))
    with page.view(run, [rank]) as v:
        prof = data.profiled_steps(v.rd, run, [rank])
    if ((prof["rank"] == rank) & (prof["step"] == step)).any():
        return links.timeline_url(run, [rank], step=step), ""
    return dash.no_update, t("tr.not_in_profile", step=step, rank=rank)
