"""Pipeline: for a pipeline-parallel job, each stage's forward and backward micro-batches and the
bubbles between them in one step, read off the send/recv traffic without instrumentation
(``analyses.pipeline``; msprof-analyze's ``pp_chart`` needs mstx marks for the same chart), on the
aligned clock; per stage the micro-batches, forward / backward / bubble time. The address holds the
run, the step and the pipeline group (``group``); a bar opens that stretch in the timeline."""

from __future__ import annotations

import re
from typing import Any

import dash
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from webapp import answers, data, links, page, ui
from webapp.errors import WebappError
from webapp.format import fmt_ns, plot_text
from webapp.labels import page_title, t
from webapp.params import parse_int
from webapp.reader import Reader

dash.register_page(__name__, path="/pipeline", name="Pipeline", title=page_title("pipeline"), order=1.5)

P = "pp"
KINDS = {  # segment kind -> (label key, colour, short mark on the bar)
    "forward": ("pp.k.forward", "#2f6fb0", "F"),
    "backward": ("pp.k.backward", "#27ae60", "B"),
    "forward+backward": ("pp.k.forward_backward", "#17becf", "F+B"),
    "bubble": ("pp.k.bubble", "#d9534f", ""),
    "other": ("pp.k.other", "#b8c2cc", ""),
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
            raise WebappError(t("pp.bad_step", step=step, steps=_span(steps)))
    except WebappError as exc:
        notes.append(ui.message(t("pp.showing_step", error=exc, step=default_step(st))))
        step = None
    try:
        group = parse_int("group", group_q, minimum=0)
        if group is not None and group not in groups:
            raise WebappError(t("pp.bad_group", group=group, groups=_span(groups)))
    except WebappError as exc:
        notes.append(ui.message(t("pp.showing_group", error=exc, group=groups[0] if groups else 0)))
        group = None
    step = default_step(st) if step is None else step
    group = (groups[0] if groups else None) if group is None else group
    return html.Div(
        [
            ui.header(t("nav.pipeline"), t("pp.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, v.run),
                    _dropdown("step", t("pp.step"), _step_options(steps), step),
                    _dropdown("group", t("pp.group"), _group_options(st), group),
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
            ui.dropdown(id=f"{P}-{name}", options=options, value=value, clearable=False, className="dd dd-small"),
        ],
        className="control",
    )


def _step_options(steps: list[int]) -> list[dict[str, Any]]:
    return [{"label": t("pp.step_option", step=s), "value": s} for s in steps]


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
        out.append({"label": t("pp.group_option", group=int(g), ranks=ranks), "value": int(g)})
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


def op_said(op: str) -> str:
    """A segment's p2p op ("send forward", "recv backward 2 + forward 3": the analysis' codes) with
    its directions in the page's language (send / recv stay: the API's names)."""
    return re.sub(r"\b(forward|backward)\b", lambda m: t(f"pp.k.{m.group(1)}"), op)


def figure(seg: pd.DataFrame) -> Any:
    """Per stage (a row, the first stage on top), the step's segments as bars on the aligned clock,
    in ms after the group's first segment; a bar's customdata is (rank, start_ns, end_ns) on the
    rank's own clock (the timeline link)."""
    rows = seg.drop_duplicates("rank").sort_values(["stage", "rank"])
    labels = {int(r): t("pp.row", stage=int(s), rank=int(r)) for r, s in zip(rows["rank"], rows["stage"])}
    t0 = int(seg["aligned_start_ns"].min())
    fig = ui.figure(height=max(220, 90 + 46 * len(rows)), xaxis_title=t("pp.axis"), barmode="overlay")
    for kind, (key, colour, mark) in KINDS.items():
        label = t(key)
        sub = seg[seg["kind"] == kind]
        if sub.empty:
            continue
        mb, chunk = sub["micro_batch"], sub["chunk"]
        text = [
            (f"{mark}{'' if pd.isna(k) else int(k)}{'' if pd.isna(c) else f'·{int(c)}'}" if mark else "")
            if kind != "forward+backward" or pd.isna(op)
            else str(op).replace("forward ", "F").replace("backward ", "B").replace(" + ", "+")
            for k, c, op in zip(mb, chunk, sub["op"])
        ]
        hover = [
            plot_text(label)
            + ("" if pd.isna(k) else " · " + t("pp.micro_batch", k=int(k)))
            + ("" if pd.isna(c) else " · " + t("pp.chunk", c=int(c)))
            + f"<br>{fmt_ns(d)}"
            + ("" if pd.isna(op) else f"<br>{plot_text(op_said(str(op)))}")
            + ("" if pd.isna(p) else " · " + t("pp.peer", rank=int(p)))
            for k, c, d, op, p in zip(mb, chunk, sub["dur_ns"], sub["op"], sub["peer"])
        ]
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
                "" if pd.isna(r["chunks"]) else int(r["chunks"]),
            ]
        )
    return out


def render(rd: Reader, run: str, step: int | None, group: int | None) -> list[Any]:
    st = data.pipeline_stages(rd, run)
    if st.empty:
        return [
            html.Div(
                html.P(t("pp.none"), className="note", id=f"{P}-none"),
                className="card",
            )
        ]
    seg = data.pipeline_segments(rd, run)
    here = (seg["pp_group"] == group) & (seg["step"] == step if step is not None else seg["step"].isna())
    seg = seg[here]
    mine = st[(st["pp_group"] == group) & ((st["step"] == step) if step is not None else st["step"].isna())]
    if seg.empty:
        return [html.Div(html.P(t("pp.nothing"), className="note", id=f"{P}-none"), className="card")]
    n_stages = int(mine["n_stages"].max())
    n_combined = int((seg["kind"] == "forward+backward").sum())
    share = mine["bubble_pct"].mean()
    chunks = int(mine["chunks"].max()) if mine["chunks"].notna().any() else 0
    interleaved = [html.P(t("pp.interleaved", chunks=chunks), className="note", id=f"{P}-interleaved")]
    interleaved = interleaved if chunks else []
    ranks = sorted(int(r) for r in seg["rank"].unique())
    summary = t(
        "pp.summary",
        stages=n_stages,
        forward=int(mine["forward_micro_batches"].max()),
        backward=int(mine["backward_micro_batches"].max()),
        share=f"{share:.1f}",
    )
    every = st[st["pp_group"] == group].groupby("stage")[["bubble_pct"]].mean()
    over_steps = ", ".join(
        t("pp.stage_share", stage=int(s), share=f"{p:.1f}") for s, p in zip(every.index, every["bubble_pct"])
    )
    return [
        html.Div(
            [
                html.H2(t("pp.title", group=group, step=step)),
                html.P(summary, className="note", id=f"{P}-summary"),
                *interleaved,
                ui.graph(f"{P}-chart", figure(seg)),
                *([html.P(t("pp.combined", n=n_combined), className="note", id=f"{P}-combined")] if n_combined else []),
                html.P(
                    [
                        t("pp.click"),
                        dcc.Link(
                            t("pp.open_step"),
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
                html.H2(t("pp.per_stage")),
                ui.table(
                    [
                        t(f"pp.col.{c}")
                        for c in (
                            "stage",
                            "rank",
                            "fwd_mb",
                            "bwd_mb",
                            "forward",
                            "backward",
                            "fwd_bwd",
                            "bubble",
                            "share",
                            "chunks",
                        )
                    ],
                    stage_rows(mine),
                    id_=f"{P}-stages",
                ),  # fmt: skip
                html.P(t("pp.over_steps", shares=over_steps), className="note", id=f"{P}-over-steps"),
                html.P(t("pp.explain"), className="note"),
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
    @answers.kept
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
    @answers.kept
    @ui.guard(2, message_index=0)
    def options(run: str) -> Any:
        with page.view(run, None) as v:
            st = data.pipeline_stages(v.rd, run)
        steps, _ = _choices(st)
        return _step_options(steps), _group_options(st)

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
