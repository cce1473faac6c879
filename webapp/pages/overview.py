"""Overview: the runs in the store and a metric over them (runs over time, baselines and tags marked,
each run linked to its comparison with the run before); for one run its ranks, steps, formats, what
data each rank has (and a plain sentence for what is missing), per-rank step time broken down
msprof-analyze's way with the slowest ranks marked, a rank x step heat map, and the collector's
per-step scalars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash
import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from webapp import answers, cache, data, findings, links, page, ui
from webapp.errors import BadParameter
from webapp.format import fmt_bytes, fmt_int, fmt_ns
from webapp.labels import (
    cause_label,
    cause_name,
    joined_list,
    joined_notes,
    page_title,
    said,
    said_english,
    said_notes,
    said_problems,
    said_term,
    t,
)
from webapp.params import format_ranks, parse_int
from webapp.reader import Reader

dash.register_page(__name__, path="/", name="Overview", title=page_title("overview"), order=0)

P = "ov"
MAX_HEAT_STEPS = 400  # columns of the rank x step heat map
BARS_MAX_RANKS = 32  # one bar per rank up to this many ranks; distributions over the ranks beyond
CAPABILITIES = (
    "steps",
    "operators",
    "kernels",
    "communication",
    "comm_matrix",
    "memory",
    "shapes",
    "stacks",
    "scalars",
)
SEGMENTS = (  # stacked bar segments: they add up to the busy span of the step plus preparing (labels: ov.seg.COL)
    ("computing_excl_ns", "computing"),
    ("overlapped_ns", "overlapped"),
    ("comm_not_overlapped_ns", "comm_not_overlapped"),
    ("free_ns", "free"),
    ("preparing_ns", "preparing"),
)


def _seg(col: str) -> str:
    return t(f"ov.seg.{col}")


def layout(run: Any = None, ranks: Any = None, step: Any = None, **_: Any) -> Any:
    return page.layout(
        t("nav.overview"),
        run,
        ranks,
        lambda v: _layout(v, step),
        unknown_run=lambda rd: [_runs_table(data.runs(rd), None)],
    )


def _layout(v: page.View, step_q: Any) -> html.Div:
    rd, run, notes = v.rd, v.run, v.notes
    step = None
    try:
        step = parse_int("step", step_q, minimum=0)
        if step is not None:
            known = [int(x) for x in data.steps(rd, run, None)["step"]]
            if step not in known:
                have = (
                    t("ov.has_steps", first=known[0], last=known[-1])
                    if len(known) > 1
                    else t("ov.has_step", step=known[0])
                    if known
                    else t("ov.no_steps")
                )
                raise BadParameter("step", step, t("ov.no_step", step=step, have=have))
    except BadParameter as exc:
        notes.append(ui.message(t("ov.mean_note", problem=exc), id=f"{P}-url-note"))
        step = None
    return html.Div(
        [
            ui.header(t("nav.overview"), t("ov.subtitle")),
            _runs_table(data.runs(rd), run),
            _trend_card(len(v.runs)),
            html.Div(
                [
                    ui.run_control(P, v.runs, run),
                    ui.ranks_control(P, v.all_ranks, [] if v.selected == v.all_ranks else v.selected),
                    ui.pick_control(P),
                    html.Div(
                        [
                            html.Label(t("ov.step"), htmlFor=f"{P}-step"),
                            ui.dropdown(
                                id=f"{P}-step",
                                options=[],
                                value="mean" if step is None else step,
                                clearable=False,
                                className="dd dd-step",
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-want-step", data=step),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
            # the advisor runs over the whole run: its own request, so the overview does not wait for it
            dcc.Loading(html.Div(id=f"{P}-findings"), type="dot", delay_show=300),
        ],
        className="page",
    )


def _runs_table(runs: pd.DataFrame, current: str | None) -> html.Div:
    rows = []
    for r in runs.to_dict("records"):
        name = str(r["run"])
        cls = "current" if name == current else None
        rows.append(
            html.Tr(
                [
                    html.Td(dcc.Link(name, href=ui.page_url("/", {"run": name}))),
                    html.Td(fmt_int(r["ranks"])),
                    html.Td(fmt_int(r["steps"])),
                    html.Td(", ".join(str(f) for f in (r["formats"] if r["formats"] is not None else []))),
                    html.Td(said_term("run_status", r["status"])),
                    html.Td(fmt_int(r["problems"])),
                    html.Td(fmt_int(r["rows"])),
                    html.Td(str(r["updated_at"])[:19]),
                ],
                className=cls,
            )
        )
    return html.Div(
        [
            html.H2(t("ov.runs")),
            html.Table(
                [
                    html.Thead(
                        html.Tr(
                            [
                                html.Th(t(f"ov.rc.{h}"))
                                for h in ("run", "ranks", "steps", "formats", "status", "problems", "rows", "ingested")
                            ]
                        )
                    ),
                    html.Tbody(rows),
                ],
                className="tbl",
                id=f"{P}-runs",
            ),
        ],
        className="card",
    )


TREND_METRICS = ("step_time", "computing", "comm_not_overlapped", "free", "peak_memory")  # analyze trend --metric
# (what the runs-over-time chart can follow; labels: ov.tm.METRIC)
TREND_RUNS = 50  # the most recently ingested runs shown over time


def _trend_card(n_runs: int) -> html.Div:
    """Runs over time: a metric of every run (``analyze trend``), filled by its own callback (it
    computes the step breakdown of every run once)."""
    if n_runs < 2:
        return html.Div()  # nothing to follow over runs (and no trend callback fires)
    return html.Div(
        [
            html.H2(t("ov.over_time")),
            html.Div(
                html.Div(
                    [
                        html.Label(t("ov.metric"), htmlFor=f"{P}-trend-metric"),
                        ui.dropdown(
                            id=f"{P}-trend-metric",
                            options=[{"label": t(f"ov.tm.{k}"), "value": k} for k in TREND_METRICS],
                            value="step_time",
                            clearable=False,
                            className="dd dd-run",
                        ),
                    ],
                    className="control",
                ),
                className="controls",
            ),
            dcc.Loading(html.Div(id=f"{P}-trend"), type="dot", delay_show=300),
        ],
        className="card",
        id=f"{P}-trend-card",
    )


def trend_content(df: pd.DataFrame, metric: str, current: str | None) -> list[Any]:
    """The metric of each run (oldest ingested first; ``analyses.trend``) as a line over the runs
    with the baselines and tags written at their run, and a table linking each run's comparison with
    the run before it (the Compare page)."""
    label = t(f"ov.tm.{metric}") if metric in TREND_METRICS else metric
    is_bytes = metric.startswith("peak_")
    scale, unit = (2**20, "MiB") if is_bytes else (1e6, "ms")
    y = [None if pd.isna(v) else float(v) / scale for v in df["value"]]
    names = [
        ", ".join([f"baseline:{b}" for b in bs] + [f"#{tag}" for tag in ts])
        for bs, ts in zip(df["baselines"], df["tags"])
    ]
    x = list(df["run"])  # every string of a figure is escaped when it is sent (ui.Figure)
    fig = ui.figure(height=300, yaxis_title=f"{label} ({unit})", xaxis_title=t("ov.trend_x"))
    fig.add_scatter(
        x=x,
        y=y,
        mode="lines+markers+text",
        text=list(names),
        textposition="top center",
        marker=dict(size=[12 if r == current else 8 for r in df["run"]], color="#2f6fb0"),
        line=dict(color="#9bb7d4"),
        name=label,
        hovertemplate="%{x}: %{y:.3f} " + unit + "<extra>%{text}</extra>",
    )
    fig.update_xaxes(type="category")
    rows = []
    runs = list(df["run"])
    for i, r in enumerate(df.to_dict("records")):
        v = r["value"]
        value = "-" if pd.isna(v) else (fmt_bytes(v) if is_bytes else fmt_ns(v))
        change = "-" if pd.isna(r["change_pct"]) else f"{float(r['change_pct']):+.1f} %"
        link: Any = ""
        if i > 0:
            link = dcc.Link(
                t("ov.vs", run=runs[i - 1]), href=ui.page_url("/compare", {"base": runs[i - 1], "new": r["run"]})
            )
        rows.append(
            html.Tr(
                [html.Td(str(r["run"])), html.Td(value), html.Td(change), html.Td(names[i]), html.Td(link)],
                className="current" if r["run"] == current else None,
            )
        )
    table = html.Table(
        [
            html.Thead(
                html.Tr(
                    [
                        html.Th(h)
                        for h in (t("ov.tc.run"), label, t("ov.tc.change"), t("ov.tc.tags"), t("ov.tc.compare"))
                    ]
                )
            ),
            html.Tbody(rows),
        ],
        className="tbl",
        id=f"{P}-trend-table",
    )
    return [
        ui.graph(f"{P}-trend-graph", fig),
        html.Details([html.Summary(t("ov.numbers")), table], open=len(rows) <= 12),
    ]


# ---------------------------------------------------------------------------------------------
# content (pure functions of the store: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def render(rd: Reader, run: str, ranks: Sequence[int], step: int | None) -> list[Any]:
    """The overview of one run for the selected ranks (step None = mean over steps). Only the step
    bars depend on the step: the other parts are built once per run and ranks (``cache.rendered``;
    at 256 ranks they are ~2/3 of a rendering), so choosing another step builds the bars alone."""
    head, tail = cache.rendered(rd, "overview-run", (run, tuple(ranks)), lambda: _run_parts(rd, run, ranks))
    bd = data.step_breakdown(rd, run)
    bd_sel = bd[bd["rank"].isin(list(ranks))] if not bd.empty else bd
    return [*head, _step_bars(bd_sel, step, run, data.slow_ranks(rd, run), data.stragglers(rd, run)), *tail]


def _run_parts(rd: Reader, run: str, ranks: Sequence[int]) -> tuple[list[Any], list[Any]]:
    """The parts of the overview above and below the step bars (they do not depend on the step)."""
    cols = data.collections(rd, run)
    cols = cols[cols["rank"].isin(list(ranks))]
    head: list[Any] = [_facts(run, cols), _availability(cols)]
    st = data.stragglers(rd, run)
    head.append(straggler_card(st, data.blame_chains(rd, run), data.collective_matching(rd, run), run))
    bd = data.step_breakdown(rd, run)
    bd_sel = bd[bd["rank"].isin(list(ranks))] if not bd.empty else bd
    out: list[Any] = [_heatmap(bd_sel, run, st)]
    out.append(_scalars(rd, run, list(ranks)))
    probs = data.problems(rd, run)
    if not probs.empty:
        out.append(
            html.Div(
                [
                    html.H2(t("ov.problems_n", n=len(probs))),
                    ui.table(
                        [t(f"ov.pc.{c}") for c in ("path", "status", "reader", "problem")],
                        [
                            [path, said_term("file_status", status), reader, said_problems(error)]
                            for path, status, reader, error in probs[["path", "status", "reader", "error"]].values
                        ],
                        id_=f"{P}-problems",
                    ),
                ],
                className="card",
            )
        )
    return head, out


def straggler_card(st: pd.DataFrame, chains: pd.DataFrame, matching: pd.DataFrame, run: str) -> html.Div:
    """Who holds the others back (``analyzer.analyses.stragglers``, arrival order after clock
    alignment): the straggler named with its cause, the figures behind it and its latest late
    collective in the timeline; or why nobody is named, or why nobody can be judged."""
    kids: list[Any] = []
    named = st[st["straggler"].astype(bool)] if not st.empty else st
    if st.empty:
        why = t("ov.st.unmatched")
        notes = [n for n in map(said_notes, matching.to_dict("records")) if n] if not matching.empty else []
        kids = [
            html.H2(t("ov.st.not_judged_title")),
            html.P(
                t("ov.st.unmatched_why", why=why, notes=joined_notes(notes))
                if notes
                else t("ov.st.unmatched_end", why=why),
                className="note",
                id=f"{P}-straggler",
            ),
        ]
        return html.Div(kids, className="card")
    if named.empty:
        judged = st[~st["verdict"].astype(str).str.startswith("not judged")]
        if judged.empty:
            msg = st.iloc[0].get("verdict_msg")  # (none in results stored by an older version)
            why = said(msg["params"]["why"]) if isinstance(msg, dict) else str(st["verdict"].iloc[0])
            text = t("ov.st.not_judged", why=why.removeprefix("not judged: "))
        else:
            ratio = judged["median_gain_ns"] / judged["threshold_ns"].clip(lower=1)
            w = judged.loc[ratio.idxmax()]
            text = t(
                "ov.st.within_noise",
                rank=int(w["rank"]),
                gain=fmt_ns(w["median_gain_ns"]),
                threshold=fmt_ns(w["threshold_ns"]),
            )
        return html.Div(
            [html.H2(t("ov.st.none_title")), html.P(text, className="note", id=f"{P}-straggler")], className="card"
        )
    for r in named.to_dict("records"):
        rank = int(r["rank"])
        ops = ", ".join(f"{op['name']} +{fmt_ns(op['excess_ns'])}" for op in (r["top_ops"] or [])[:3])
        share = (
            ""
            if r["gain_share"] is None or pd.isna(r["gain_share"])
            else t("ov.st.share", share=f"{r['gain_share']:.1%}")
        )
        kids.append(html.H2(t("ov.st.title", rank=rank, cause=cause_label(r["cause"]))))
        kids.append(
            html.P(
                t(
                    "ov.st.text",
                    rank=rank,
                    group=r["group_name"],
                    gain=fmt_ns(r["median_gain_ns"]),
                    threshold=fmt_ns(r["threshold_ns"]),
                    cause=cause_label(r["cause"], "cause.nothing"),
                    ops=f" ({ops})" if ops else "",
                    whatif=fmt_ns(r["whatif_gain_ns"]),
                    share=share,
                    votes=int(r["slow_rank_votes"]),
                ),
                className="note",
                id=f"{P}-straggler",
            )
        )
        mine = chains[chains["last_rank"] == rank] if not chains.empty else chains
        if not mine.empty:
            worst = mine.iloc[0]
            hl = [tuple(h) for h in worst["highlights"]]
            kids.append(
                html.Div(
                    [
                        t("ov.st.in_timeline"),
                        dcc.Link(
                            t("ov.st.latest", step=worst["step"], margin=fmt_ns(worst["margin_ns"])),
                            href=links.timeline_url(run, sorted({int(h[0]) for h in hl}), hl),
                            id=f"{P}-straggler-link-{rank}",
                        ),
                        t("ov.st.interval"),
                    ],
                    className="note",
                )
            )
    return html.Div(kids, className="card")


def _facts(run: str, cols: pd.DataFrame) -> html.Div:
    if cols.empty:
        return ui.message(t("ov.no_collection", run=repr(run)))
    steps = sorted({int(s) for arr in cols["steps"] if arr is not None for s in arr})
    formats = sorted({str(p) for p in cols["producer"].dropna()})
    versions = sorted({str(v) for v in cols["producer_version"].dropna()})
    levels = sorted({str(v) for v in cols["level"].dropna()})
    hosts = sorted({str(v) for v in cols["hostname"].dropna()})
    world = sorted({int(v) for v in cols["world_size"].dropna()})
    span = (cols["end_ns"].max() - cols["start_ns"].min()) if cols["start_ns"].notna().any() else None
    step_text = t("ov.none")
    if steps:
        step_text = f"{len(steps)} ({steps[0]}–{steps[-1]})" if len(steps) > 1 else t("ov.one_step", step=steps[0])
    return html.Div(
        [
            html.H2(t("ov.run_title", run=run)),
            html.Div(
                [
                    ui.stat(t("ov.s.ranks"), format_ranks(sorted(cols["rank"].unique())) or "-", id_=f"{P}-stat-ranks"),
                    ui.stat(t("ov.s.collections"), fmt_int(len(cols))),
                    ui.stat(t("ov.s.steps"), step_text, id_=f"{P}-stat-steps"),
                    ui.stat(t("ov.s.formats"), ", ".join(formats) or "-", id_=f"{P}-stat-formats"),
                    ui.stat(t("ov.s.versions"), ", ".join(versions) or "-"),
                    ui.stat(t("ov.s.level"), ", ".join(levels) or "-"),
                    ui.stat(t("ov.s.world"), ", ".join(map(str, world)) or "-"),
                    ui.stat(t("ov.s.hosts"), ", ".join(hosts) or "-"),
                    ui.stat(t("ov.s.span"), fmt_ns(span)),
                    ui.stat(t("ov.s.rows"), fmt_int(cols["n_rows"].sum())),
                ],
                className="stats",
            ),
        ],
        className="card",
    )


def _availability(cols: pd.DataFrame) -> html.Div:
    if cols.empty:
        return html.Div()
    per_rank: dict[int, set[str]] = {}
    status: dict[int, set[str]] = {}
    producers: dict[int, set[str]] = {}
    missing: dict[str, set[int]] = {}
    for r in cols.to_dict("records"):
        rank = int(r["rank"])
        per_rank.setdefault(rank, set()).update(
            str(c) for c in (r["capabilities"] if r["capabilities"] is not None else [])
        )
        status.setdefault(rank, set()).add(str(r["status"]))
        producers.setdefault(rank, set()).add(str(r["producer"]))
        for sentence in r["missing"] if r["missing"] is not None else []:
            missing.setdefault(str(sentence), set()).add(rank)
    # ranks that recorded the same things share a row (a 1000-rank run stays a short table)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for rank in sorted(per_rank):
        key = (
            tuple(sorted(producers[rank])),
            tuple(sorted(status[rank])),
            tuple(c in per_rank[rank] for c in CAPABILITIES),
        )
        groups.setdefault(key, []).append(rank)
    rows = []
    for (prods, stats, caps), ranks in sorted(groups.items(), key=lambda kv: kv[1][0]):
        rows.append(
            html.Tr(
                [
                    html.Td(format_ranks(ranks)),
                    html.Td(", ".join(prods)),
                    html.Td(joined_list([said_term("run_status", s) for s in stats])),
                ]
                + [html.Td("✓" if c else "—", className="yes" if c else "no") for c in caps]
            )
        )
    kids: list[Any] = [
        html.H2(t("ov.recorded")),
        html.Table(
            [
                html.Thead(
                    html.Tr(
                        [html.Th(t(f"ov.cc.{h}")) for h in ("rank", "format", "status")]
                        + [html.Th(t(f"ov.cap.{c}")) for c in CAPABILITIES]
                    )
                ),
                html.Tbody(rows),
            ],
            className="tbl tbl-caps",
            id=f"{P}-caps",
        ),
    ]
    if missing:
        all_ranks = set(per_rank)
        items = []
        for sentence, rs in sorted(missing.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            who = t("ui.all_ranks") if rs == all_ranks else t("ui.rank_n", rank=format_ranks(sorted(rs)))
            items.append(html.Li([html.Span(t("ov.who", who=who), className="who"), said_english(sentence, "missing")]))
        kids.append(html.Ul(items, className="missing", id=f"{P}-missing"))
    return html.Div(kids, className="card")


def _step_bars(
    bd: pd.DataFrame, step: int | None, run: str, votes: pd.DataFrame, st: pd.DataFrame | None = None
) -> html.Div:
    title = t("ov.bars_step", step=step) if step is not None else t("ov.bars_mean")
    if bd.empty:
        return html.Div(
            [
                html.H2(title),
                ui.message(t("ov.no_step_data"), "info"),
            ],
            className="card",
        )
    df = bd.copy()
    if step is not None:
        df = df[df["step"] == step]
        if df.empty:
            return html.Div([html.H2(title), ui.message(t("ov.no_rank_step", step=step))], className="card")
    elif df["step"].notna().any():
        df = df[df["step"].notna()]
    else:
        title = t("ov.bars_whole")
    num = [
        "step_ns",
        "computing_ns",
        "overlapped_ns",
        "comm_not_overlapped_ns",
        "free_ns",
        "preparing_ns",
        "communication_ns",
    ]
    for c in num:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    per = df.groupby("rank")[num].mean().reset_index()
    per["computing_excl_ns"] = (per["computing_ns"] - per["overlapped_ns"]).clip(lower=0)
    voted = votes[votes["votes"] > 0] if not votes.empty else votes
    slow = [int(r) for r in voted["rank"] if int(r) in set(per["rank"].astype(int))]
    named = st[st["straggler"].astype(bool)] if st is not None and not st.empty else pd.DataFrame()
    marks = _marks(per, voted, named)
    if len(per) > BARS_MAX_RANKS:  # thousands of ranks: distributions, the marked ranks as points
        fig = _distributions(per, marks)
        graph_id = f"{P}-dist-graph"
    else:
        fig = _bars(per, voted, named, slow)
        graph_id = f"{P}-steps-graph"
    mode = ", ".join(sorted({str(m) for m in df["mode"].dropna()}))
    note = t("ov.note_defs") + (t("ov.note_cpu") if "host" in mode else "")
    shown = per
    if len(per) > BARS_MAX_RANKS:
        note += t("ov.note_dist", n=len(per), top=BARS_MAX_RANKS)
        shown = per.sort_values("step_ns", ascending=False, kind="stable").head(BARS_MAX_RANKS)
    if votes.empty:
        note += t("ov.note_no_vote")
    elif voted.empty:
        note += t("ov.note_vote_none", n=int(votes["instances"].max()))
    else:
        note += t("ov.note_marked")
    table_rows = [
        [
            int(r["rank"]),
            fmt_ns(r["step_ns"]),
            fmt_ns(r["computing_ns"]),
            fmt_ns(r["communication_ns"]),
            fmt_ns(r["overlapped_ns"]),
            fmt_ns(r["comm_not_overlapped_ns"]),
            fmt_ns(r["free_ns"]),
            fmt_ns(r["preparing_ns"]),
            marks.get(int(r["rank"]), ""),
        ]
        for r in shown.to_dict("records")
    ]
    return html.Div(
        [
            html.H2(title),
            ui.graph(graph_id, fig),
            html.P(note, className="note"),
            html.Details(
                [
                    html.Summary(t("ov.numbers")),
                    ui.table(
                        [
                            t(f"ov.nc.{c}")
                            for c in (
                                "rank",
                                "step",
                                "computing",
                                "communication",
                                "overlapped",
                                "comm",
                                "free",
                                "preparing",
                            )
                        ]
                        + [""],
                        table_rows,
                        id_=f"{P}-steps-table",
                    ),
                ],
                open=len(per) <= 8,
            ),
        ],
        className="card",
    )


def _bars(per: pd.DataFrame, voted: pd.DataFrame, named: pd.DataFrame, slow: list[int]) -> Any:
    """One stacked bar per rank (a run of at most BARS_MAX_RANKS ranks), slow ranks and stragglers marked."""
    x = [t("ui.rank_n", rank=r) for r in per["rank"]]
    fig = ui.figure(height=380, barmode="stack", yaxis_title="ms", xaxis_title=None)
    for col, color in SEGMENTS:
        label = _seg(col)
        if per[col].notna().any():
            fig.add_bar(
                name=label,
                x=x,
                y=per[col] / 1e6,
                marker_color=ui.COLORS[color],
                hovertemplate="%{x}<br>" + label + ": %{y:.3f} ms<extra></extra>",
            )
    fig.add_scatter(
        name=_seg("step_ns"),
        x=x,
        y=per["step_ns"] / 1e6,
        mode="markers",
        marker=dict(symbol="line-ew-open", size=28, color="#222", line=dict(width=2)),
        hovertemplate="%{x}<br>" + t("ov.hover_step") + ": %{y:.3f} ms<extra></extra>",
    )
    for r in slow:
        n_votes = int(voted.loc[voted["rank"] == r, "votes"].iloc[0])
        _mark_rank(fig, per, int(r), t("ov.slow_votes", n=n_votes), ay=-28, color="#b03030")
    for r in named.to_dict("records"):
        if int(r["rank"]) in set(per["rank"].astype(int)):
            note = t("ov.straggler_cause", cause=cause_name(r["cause"]) if r["cause"] else "?")
            _mark_rank(fig, per, int(r["rank"]), note, ay=-52, color="#8a1c1c")
    return fig


def _mark_rank(fig: Any, per: pd.DataFrame, rank: int, text: str, *, ay: int, color: str) -> None:
    """An arrow with ``text`` over a rank's bar (at the top of its stacked segments or its step time)."""
    i = per.index[per["rank"] == rank][0]
    top = float(np.nansum([per.loc[i, c] for c, _ in SEGMENTS] + [0])) / 1e6
    fig.add_annotation(
        x=t("ui.rank_n", rank=rank),
        y=max(top, float(per.loc[i, "step_ns"]) / 1e6),
        text=text,
        showarrow=True,
        arrowhead=2,
        ay=ay,
        font=dict(color=color),
    )


def _marks(per: pd.DataFrame, voted: pd.DataFrame, named: pd.DataFrame) -> dict[int, str]:
    """The ranks to point out, with why: named stragglers (their cause), then msprof-analyze's slow votes."""
    have = set(per["rank"].astype(int))
    out: dict[int, str] = {}
    for r in named.to_dict("records") if not named.empty else []:
        if int(r["rank"]) in have:
            out[int(r["rank"])] = t("ov.straggler_cause", cause=cause_name(r["cause"]) if r["cause"] else "?")
    for r, n in zip(voted["rank"], voted["votes"]) if not voted.empty else []:
        if int(r) in have and int(r) not in out:
            out[int(r)] = t("ov.slow_votes", n=int(n))
    return out


def _distributions(per: pd.DataFrame, marks: dict[int, str]) -> Any:
    """Per segment, the distribution over ranks of its mean (a box: quartiles, whiskers, outliers),
    the marked ranks drawn on top with their rank and why."""
    fig = ui.figure(height=380, yaxis_title="ms", xaxis_title=None, showlegend=False)
    cols = [(c, _seg(c), color) for c, color in [("step_ns", "computing"), *SEGMENTS] if per[c].notna().any()]
    ranks = per["rank"].to_numpy()  # arrays, not Series: plotly validates a Series ~2x slower
    for col, label, color in cols:
        fig.add_box(
            y=(per[col] / 1e6).to_numpy(),
            name=label,
            marker_color="#222" if col == "step_ns" else ui.COLORS[color],
            boxpoints="suspectedoutliers",
            customdata=ranks,
            hovertemplate=t("ui.rank_n", rank="%{customdata}") + ": %{y:.3f} ms<extra>" + label + "</extra>",
        )
    if marks:
        pts = per[per["rank"].astype(int).isin(list(marks))]
        for col, label, _ in cols:
            fig.add_scatter(
                x=[label] * len(pts),
                y=(pts[col] / 1e6).to_numpy(),
                mode="markers+text",
                text=[t("ui.rank_n", rank=int(r)) for r in pts["rank"]],
                textposition="middle right",
                marker=dict(symbol="diamond", size=10, color="#b03030"),
                customdata=[marks[int(r)] for r in pts["rank"]],
                hovertemplate="%{text}: %{y:.3f} ms<br>%{customdata}<extra></extra>",
            )
    return fig


def _heatmap(bd: pd.DataFrame, run: str, st: pd.DataFrame | None = None) -> html.Div:
    """Step time per rank and step (the stored breakdown), the named stragglers' rows outlined."""
    if bd.empty or not bd["step"].notna().any():
        return html.Div()
    df = bd[bd["step"].notna()].copy()
    df["step_ms"] = pd.to_numeric(df["step_ns"], errors="coerce").astype("float64") / 1e6
    steps = np.sort(df["step"].astype("int64").unique())
    if len(steps) > MAX_HEAT_STEPS:  # bounded: consecutive steps share a column (their mean)
        per = int(np.ceil(len(steps) / MAX_HEAT_STEPS))
        first = {int(st): int(steps[(i // per) * per]) for i, st in enumerate(steps)}
        df["step"] = df["step"].astype("int64").map(first)
    pv = df.pivot_table(index="rank", columns="step", values="step_ms", aggfunc="mean")
    if pv.shape[0] * pv.shape[1] <= 1:
        return html.Div()
    fig = ui.figure(
        height=max(220, min(900, 40 + 18 * pv.shape[0])), xaxis_title=t("ov.heat_step"), yaxis_title=t("ov.heat_rank")
    )
    fig.add_heatmap(
        z=pv.values,
        x=[int(s) for s in pv.columns],
        y=[int(r) for r in pv.index],
        colorscale="Blues",
        colorbar=dict(title="ms"),
        hovertemplate=t("ui.rank_n", rank="%{y}")
        + " · "
        + t("ov.step_n", step="%{x}")
        + ": %{z:.3f} ms<extra></extra>",
    )
    category = pv.shape[0] <= 64
    fig.update_yaxes(autorange="reversed", type="category" if category else "linear")
    fig.update_xaxes(type="category" if pv.shape[1] <= 64 else "linear")
    ranks = [int(r) for r in pv.index]
    named = st[st["straggler"].astype(bool)] if st is not None and not st.empty else pd.DataFrame()
    marked = []
    for r in named.to_dict("records") if not named.empty else []:
        rank = int(r["rank"])
        if rank not in ranks:
            continue
        y = ranks.index(rank) if category else rank  # a category axis places rows by their index
        fig.add_shape(
            type="rect",
            xref="paper",
            x0=0,
            x1=1,
            yref="y",
            y0=y - 0.5,
            y1=y + 0.5,
            line=dict(color="#b03030", width=2),
            fillcolor="rgba(0,0,0,0)",
        )
        fig.add_annotation(
            xref="paper",
            x=1,
            xanchor="left",
            y=y,
            yref="y",
            text=t("ov.straggler"),
            showarrow=False,
            font=dict(color="#b03030"),
        )
        marked.append(t("ov.marked_rank", rank=rank, cause=cause_name(r["cause"]) if r["cause"] else "?"))
    note = t("ov.heat_note")
    if marked:
        note += t("ov.outlined_n" if len(marked) > 1 else "ov.outlined_1", ranks=", ".join(marked))
    return html.Div(
        [
            html.H2(t("ov.heat_title")),
            ui.graph(f"{P}-heatmap", fig),
            html.P(note, className="note", id=f"{P}-heatmap-note"),
        ],
        className="card",
    )


def scalar_label(name: str) -> str:
    """A scalar's name for people: ``step_time_ns`` → ``step time`` (the unit goes beside it)."""
    if name == "step_time_ns":  # the collector's own scalar
        return t("ov.scalar_step_time")
    base = name[:-3] if name.endswith("_ns") else name
    return base.replace("_", " ") if base.replace("_", "").isalnum() else base


SCALAR_CHART_POINTS = 8_000  # points of one scalar's chart over all its ranks: each rank's curve gets its share
SCALAR_RANK_POINTS = 400  # (at least)
SCALAR_RANK_LINES = 8  # more ranks: the lowest, mean and highest value over them per bucket of steps
SCALAR_BAND_POINTS = 1000  # buckets of steps of that band


def _scalars(rd: Reader, run: str, ranks: list[int]) -> html.Div:
    """The collector's scalars, a chart each (at most 8): a curve per rank thinned to the chart's
    share, or for many ranks their band per bucket of steps (as the Training page draws them: a
    chart of 64 ranks x 20 000 steps was 6.7 MB)."""
    names = [str(n) for n in data.scalar_names(rd, run)["name"]]
    many = len(ranks) > SCALAR_RANK_LINES
    per_rank = max(SCALAR_RANK_POINTS, SCALAR_CHART_POINTS // max(1, len(ranks)))
    sc = pd.DataFrame() if many or not names else data.scalars(rd, run, ranks, None, per_rank)
    graphs = []
    for name in names[:8]:
        scale, unit = (1e6, " (ms)") if name.endswith("_ns") else (1.0, "")
        label = scalar_label(name)
        fig = ui.figure(height=260, xaxis_title=t("ov.heat_step"), yaxis_title=label + unit, title=label + unit)
        if many:
            band = data.scalar_band(rd, run, ranks, name, SCALAR_BAND_POINTS)
            if band.empty:
                continue
            ui.add_band(fig, band, scale)
            fig.update_layout(showlegend=False)
            steps = band["step"]
        else:
            d = sc[sc["name"] == name]
            if d.empty:
                continue
            for rank, g in d.groupby("rank"):
                fig.add_scatter(
                    x=g["step"].to_numpy(),
                    y=(g["value"] / scale).to_numpy(),
                    mode="lines+markers" if len(g) <= 50 else "lines",
                    name=t("ui.rank_n", rank=rank),
                )
            steps = d["step"]
        if steps.nunique() <= 20:
            fig.update_xaxes(dtick=1)
        graphs.append(ui.graph({"type": f"{P}-scalar", "name": name}, fig))
    if not graphs:
        return html.Div([html.H2(t("ov.scalars")), ui.message(t("ov.no_scalars"), "info")], className="card")
    return html.Div([html.H2(t("ov.scalars")), html.Div(graphs, className="grid2")], className="card")


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-ranks", "options"),
        Output(f"{P}-step", "options"),
        Output(f"{P}-step", "value"),
        Output(f"{P}-pick", "options"),
        Input(f"{P}-run", "value"),
        State(f"{P}-want-step", "data"),
    )
    @answers.kept
    @ui.guard(4, message_index=0)
    def run_changed(run: str, want_step: Any) -> Any:
        with page.view(run, None, check_run=False) as v:
            all_ranks = v.all_ranks
            steps = data.steps(v.rd, run, None)
            picks = data.rank_picks(v.rd, run) if v.run else []
        opts = [{"label": t("ov.mean_steps"), "value": "mean"}] + [
            {"label": t("ov.step_n", step=int(s)), "value": int(s)} for s in steps["step"]
        ]
        value = want_step if want_step is not None and want_step in set(steps["step"].astype(int)) else "mean"
        return ui.rank_options(all_ranks), opts, value, ui.pick_options(picks)

    app.callback(Output(f"{P}-ranks", "value"), Input(f"{P}-pick", "value"), prevent_initial_call=True)(ui.pick_ranks)

    @app.callback(
        Output(f"{P}-content", "children"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-step", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def update(run: str, ranks: Any, step: Any) -> Any:
        with page.view(run, ranks, ("scalars",), open_all=True) as v:
            step_v = None if step in (None, "mean") else int(step)
            url = ui.page_url("/", {"run": run, "ranks": ui.ranks_param(v.selected, v.all_ranks), "step": step_v})
            content = cache.rendered(
                v.rd, "overview", (run, tuple(v.selected), step_v), lambda: render(v.rd, run, v.selected, step_v)
            )
            return content, url

    @app.callback(Output(f"{P}-findings", "children"), Input(f"{P}-run", "value"))
    @answers.kept
    @ui.guard(1)
    def advice(run: str) -> Any:
        with page.view(run, None) as v:
            return findings.overview_card(data.advice(v.rd, run), run, P)

    @app.callback(
        Output(f"{P}-trend", "children"),
        Input(f"{P}-trend-metric", "value"),
        Input(f"{P}-run", "value"),  # the chosen run is marked
    )
    @answers.kept
    @ui.guard(1)
    def runs_over_time(metric: Any, run: str) -> Any:
        if metric not in TREND_METRICS:
            return dash.no_update
        with page.view(run, None, check_run=False) as v:
            return trend_content(data.trend(v.rd, metric, last=TREND_RUNS), metric, run)

    @app.callback(
        Output("navigate", "href", allow_duplicate=True),
        Input(f"{P}-heatmap", "clickData"),
        State(f"{P}-run", "value"),
        prevent_initial_call=True,
    )
    def open_cell(click: Any, run: str) -> Any:
        if not click or not click.get("points"):
            return dash.no_update
        pt = click["points"][0]
        return ui.page_url("/timeline", {"run": run, "ranks": str(int(pt["y"])), "step": int(pt["x"])})
