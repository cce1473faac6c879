"""Pipeline: for a pipeline-parallel job, each stage's forward and backward micro-batches and the
bubbles between them in one step, read off the send/recv traffic without instrumentation
(``analyses.pipeline``; msprof-analyze's ``pp_chart`` needs mstx marks for the same chart), on the
aligned clock; per stage the micro-batches, forward / backward / bubble time. The address holds the
run, the step and the pipeline group (``group``); a bar opens that stretch in the timeline."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from webapp import data, links, page, ui
from webapp.errors import WebappError
from webapp.format import fmt_ns, plot_text
from webapp.params import parse_int
from webapp.reader import Reader

dash.register_page(__name__, path="/pipeline", name="Pipeline", title="rankscope · pipeline", order=1.5)

P = "pp"
KINDS = {  # segment kind -> (label, colour, short mark on the bar)
    "forward": ("forward", "#2f6fb0", "F"),
    "backward": ("backward", "#27ae60", "B"),
    "forward+backward": ("forward + backward (no marker between)", "#17becf", "F+B"),
    "bubble": ("bubble (blocked in send / recv)", "#d9534f", ""),
    "other": ("other work", "#b8c2cc", ""),
}


def layout(run: Any = None, step: Any = None, group: Any = None, **_: Any) -> Any:
    return page.layout("Pipeline", run, None, lambda v: _layout(v, step, group))


def _layout(v: page.View, step_q: Any, group_q: Any) -> html.Div:
    notes = list(v.notes)
    st = data.pipeline_stages(v.rd, v.run)
    steps, groups = _choices(st)
    step = group = None
    try:
        step = parse_int("step", step_q)
        if step is not None and step not in steps:
            raise WebappError(f"URL parameter step={step}: the pipeline has steps {_span(steps)}")
    except WebappError as exc:
        notes.append(ui.message(f"{exc}; showing step {default_step(st)}."))
        step = None
    try:
        group = parse_int("group", group_q, minimum=0)
        if group is not None and group not in groups:
            raise WebappError(f"URL parameter group={group}: the run has pipeline groups {_span(groups)}")
    except WebappError as exc:
        notes.append(ui.message(f"{exc}; showing group {groups[0] if groups else 0}."))
        group = None
    step = default_step(st) if step is None else step
    group = (groups[0] if groups else None) if group is None else group
    return html.Div(
        [
            ui.header(
                "Pipeline",
                "Each pipeline stage's forward and backward micro-batches and the bubbles between them, from the "
                "send/recv pairs (no instrumentation), on the aligned clock.",
            ),
            html.Div(
                [
                    ui.run_control(P, v.runs, v.run),
                    _dropdown("step", "Step", [{"label": f"step {s}", "value": s} for s in steps], step),
                    _dropdown("group", "Pipeline group", _group_options(st), group),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
        ],
        className="page",
    )


def _dropdown(name: str, label: str, options: list[dict[str, Any]], value: Any) -> html.Div:
    return html.Div(
        [
            html.Label(label, htmlFor=f"{P}-{name}"),
            dcc.Dropdown(id=f"{P}-{name}", options=options, value=value, clearable=False, className="dd dd-small"),
        ],
        className="control",
    )


def _span(values: list[int]) -> str:
    return f"{values[0]}–{values[-1]}" if len(values) > 1 else str(values[0]) if values else "none"


def _choices(st: pd.DataFrame) -> tuple[list[int], list[int]]:
    steps = sorted({int(s) for s in st["step"].dropna()}) if not st.empty else []
    groups = sorted({int(g) for g in st["pp_group"]}) if not st.empty else []
    return steps, groups


def _group_options(st: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for g, sub in st.groupby("pp_group", sort=True) if not st.empty else []:
        ranks = " → ".join(str(int(r)) for r in sub.sort_values("stage").drop_duplicates("stage")["rank"])
        out.append({"label": f"group {int(g)}: ranks {ranks}", "value": int(g)})
    return out


def default_step(st: pd.DataFrame) -> int | None:
    """The step the page opens on: the one whose bubble share (mean over stages) is the median one,
    a typical step rather than the warm-up."""
    if st.empty or st["step"].isna().all():
        return None
    share = st.dropna(subset=["step"]).groupby("step")["bubble_pct"].mean().sort_values(kind="stable")
    return int(share.index[(len(share) - 1) // 2])


# ---------------------------------------------------------------------------------------------
# content (pure functions: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def figure(seg: pd.DataFrame) -> Any:
    """Per stage (a row, the first stage on top), the step's segments as bars on the aligned clock,
    in ms after the group's first segment; a bar's customdata is (rank, start_ns, end_ns) on the
    rank's own clock (the timeline link)."""
    rows = seg.drop_duplicates("rank").sort_values(["stage", "rank"])
    labels = {int(r): f"stage {int(s)} · rank {int(r)}" for r, s in zip(rows["rank"], rows["stage"])}
    t0 = int(seg["aligned_start_ns"].min())
    fig = ui.figure(height=max(220, 90 + 46 * len(rows)), xaxis_title="ms (aligned clock)", barmode="overlay")
    for kind, (label, colour, mark) in KINDS.items():
        sub = seg[seg["kind"] == kind]
        if sub.empty:
            continue
        mb = sub["micro_batch"]
        text = [
            (f"{mark}{'' if pd.isna(k) else int(k)}" if mark else "")
            if kind != "forward+backward" or pd.isna(op)
            else str(op).replace("forward ", "F").replace("backward ", "B").replace(" + ", "+")
            for k, op in zip(mb, sub["op"])
        ]
        hover = [
            f"{label}" + ("" if pd.isna(k) else f" · micro-batch {int(k)}") + f"<br>{fmt_ns(d)}"
            + ("" if pd.isna(op) else f"<br>{plot_text(op)}") + ("" if pd.isna(p) else f" · peer rank {int(p)}")
            for k, d, op, p in zip(mb, sub["dur_ns"], sub["op"], sub["peer"])
        ]  # fmt: skip
        fig.add_bar(
            name=label,
            orientation="h",
            y=[labels[int(r)] for r in sub["rank"]],
            x=(sub["dur_ns"] / 1e6).tolist(),
            base=((sub["aligned_start_ns"] - t0) / 1e6).tolist(),
            marker=dict(color=colour, line=dict(color="white", width=1)),
            text=text,
            textposition="inside",
            insidetextanchor="middle",
            customdata=list(zip(sub["rank"].astype(int), sub["start_ns"].astype(str), sub["end_ns"].astype(str))),
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
        )
    fig.update_yaxes(categoryorder="array", categoryarray=[labels[int(r)] for r in rows["rank"]][::-1])
    return fig


def stage_rows(st: pd.DataFrame) -> list[list[Any]]:
    out = []
    for r in st.sort_values(["stage", "rank"]).to_dict("records"):
        out.append(
            [
                int(r["stage"]),
                int(r["rank"]),
                int(r["forward_micro_batches"]),
                int(r["backward_micro_batches"]),
                fmt_ns(r["forward_ns"]),
                fmt_ns(r["backward_ns"]),
                fmt_ns(r["forward_backward_ns"]),
                fmt_ns(r["bubble_ns"]),
                "" if pd.isna(r["bubble_pct"]) else f"{r['bubble_pct']:.1f} %",
            ]
        )
    return out


def render(rd: Reader, run: str, step: int | None, group: int | None) -> list[Any]:
    st = data.pipeline_stages(rd, run)
    if st.empty:
        return [
            html.Div(
                html.P(
                    "No pipeline found in this run: no send was paired with a recv between neighbouring stages of "
                    "a pipeline group (the inferred layout has no PP dimension, or the ranks exchanged no "
                    "point-to-point messages).",
                    className="note",
                    id=f"{P}-none",
                ),
                className="card",
            )
        ]
    seg = data.pipeline_segments(rd, run)
    here = (seg["pp_group"] == group) & (seg["step"] == step if step is not None else seg["step"].isna())
    seg = seg[here]
    mine = st[(st["pp_group"] == group) & ((st["step"] == step) if step is not None else st["step"].isna())]
    if seg.empty:
        return [html.Div(html.P("Nothing in this group and step.", className="note", id=f"{P}-none"), className="card")]
    n_stages = int(mine["n_stages"].max())
    share = mine["bubble_pct"].mean()
    ranks = sorted(int(r) for r in seg["rank"].unique())
    summary = (
        f"{n_stages} stages, {int(mine['forward_micro_batches'].max())} micro-batches forward and "
        f"{int(mine['backward_micro_batches'].max())} backward; the stages spend {share:.1f} % of the pipeline "
        f"phase in bubbles (mean over stages)."
    )
    every = st[st["pp_group"] == group].groupby("stage")[["bubble_pct"]].mean()
    over_steps = ", ".join(f"stage {int(s)}: {p:.1f} %" for s, p in zip(every.index, every["bubble_pct"]))
    return [
        html.Div(
            [
                html.H2(f"Group {group}, step {step}"),
                html.P(summary, className="note", id=f"{P}-summary"),
                ui.graph(f"{P}-chart", figure(seg)),
                html.P(
                    [
                        "Click a bar: that stretch in the timeline. ",
                        dcc.Link(
                            "Open the step in the timeline",
                            href=links.timeline_url(run, ranks, step=step),
                            id=f"{P}-timeline-link",
                        ),
                    ],
                    className="note",
                ),
            ],
            className="card",
        ),
        html.Div(
            [
                html.H2("Per stage"),
                ui.table(
                    [
                        "stage",
                        "rank",
                        "forward µb",
                        "backward µb",
                        "forward",
                        "backward",
                        "forward+backward",
                        "bubble",
                        "bubble share",
                    ],
                    stage_rows(mine),
                    id_=f"{P}-stages",
                ),  # fmt: skip
                html.P(f"Bubble share over every step: {over_steps}.", className="note", id=f"{P}-over-steps"),
                html.P(
                    "A bubble is the time from calling a send or recv to its end: the stage waits for its "
                    "neighbour. Work before a send belongs to that send's micro-batch; work after a recv up to "
                    "the next one consumed it; on the last stage a forward and the backward after it have no "
                    "marker between them and show as one bar.",
                    className="note",
                ),
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
        Input(f"{P}-step", "value"),
        Input(f"{P}-group", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @ui.guard(2, message_index=0)
    def update(run: str, step: Any, group: Any) -> Any:
        with page.view(run, None) as v:
            st = data.pipeline_stages(v.rd, run)
            steps, groups = _choices(st)
            step = int(step) if step is not None and int(step) in steps else default_step(st)
            group = int(group) if group is not None and int(group) in groups else (groups[0] if groups else None)
            content = render(v.rd, run, step, group)
        return content, ui.page_url("/pipeline", {"run": run, "step": step, "group": group})

    @app.callback(
        Output(f"{P}-step", "options"),
        Output(f"{P}-group", "options"),
        Input(f"{P}-run", "value"),
        prevent_initial_call=True,
    )
    @ui.guard(2, message_index=0)
    def options(run: str) -> Any:
        with page.view(run, None) as v:
            st = data.pipeline_stages(v.rd, run)
        steps, _ = _choices(st)
        return [{"label": f"step {s}", "value": s} for s in steps], _group_options(st)

    @app.callback(
        Output("navigate", "href", allow_duplicate=True),
        Input(f"{P}-chart", "clickData"),
        State(f"{P}-run", "value"),
        prevent_initial_call=True,
    )
    def open_bar(click: Any, run: str) -> Any:
        if not click or not click.get("points"):
            return dash.no_update
        cd = click["points"][0].get("customdata")
        if not isinstance(cd, (list, tuple)) or len(cd) != 3:
            return dash.no_update
        rank, a, b = int(cd[0]), int(cd[1]), int(cd[2])
        return links.timeline_url(run, [rank], [(rank, a, b)])
