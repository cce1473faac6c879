"""Advisor: every finding of the advisor (``analyzer.analyses.advise``) with its severity, the
sentence with the numbers, the measured value against the rule's threshold, the ranks it names, and
every evidence row with links to it (the timeline window, the collective on all its ranks, the
operator, the rank on the layout grid). Filters: severity, rule, ranks; ``finding=N`` opens one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash
import pandas as pd
from dash import Dash, Input, Output, State, dcc, html

from webapp import answers, cache, data, findings, links, page, ui
from webapp.errors import BadParameter, WebappError
from webapp.labels import page_title, t
from webapp.params import format_ranks, parse_int, single
from webapp.reader import Reader

dash.register_page(__name__, path="/advisor", name="Advisor", title=page_title("advisor"), order=5)

P = "adv"
MAX_RANK_LINKS = 16  # ranks of a finding linked one by one


def layout(
    run: Any = None, ranks: Any = None, severity: Any = None, rule: Any = None, finding: Any = None, **_: Any
) -> Any:
    return page.layout(t("nav.advisor"), run, ranks, lambda v: _layout(v, severity, rule, finding))


def _layout(v: page.View, severity_q: Any, rule_q: Any, finding_q: Any) -> html.Div:
    notes = v.notes
    sev = list(findings.SEVERITIES)
    rule = None
    want = None
    try:
        text = single("severity", severity_q)
        if text is not None:
            asked = [s.strip() for s in text.split(",") if s.strip() and s.strip() != "none"]
            bad = [s for s in asked if s not in findings.SEVERITIES]
            if bad:
                raise BadParameter(
                    "severity",
                    text,
                    t("adv.bad_severity", value=", ".join(bad), choices=", ".join(findings.SEVERITIES)),
                )
            sev = asked
    except WebappError as exc:
        notes.append(ui.message(t("ui.showing", problem=exc, shown=t("adv.every_severity"))))
    try:
        rule = single("rule", rule_q)
        if rule is not None and rule not in findings.RULES:
            raise BadParameter("rule", rule, t("err.one_of", choices=", ".join(findings.RULES)))
    except WebappError as exc:
        notes.append(ui.message(t("ui.showing", problem=exc, shown=t("adv.every_rule"))))
        rule = None
    try:
        want = parse_int("finding", finding_q, minimum=0)
    except WebappError as exc:
        notes.append(ui.message(str(exc)))
    return html.Div(
        [
            ui.header(t("nav.advisor"), t("adv.subtitle")),
            html.Div(
                [
                    ui.run_control(P, v.runs, v.run),
                    ui.ranks_control(P, v.all_ranks, [] if v.selected == v.all_ranks else v.selected),
                    html.Div(
                        [
                            html.Label(t("adv.severity"), htmlFor=f"{P}-severity"),
                            dcc.Checklist(
                                id=f"{P}-severity",
                                options=[
                                    {"label": findings.severity_label(s), "value": s} for s in findings.SEVERITIES
                                ],
                                value=sev,
                                inline=True,
                                className="checks",
                            ),
                        ],
                        className="control",
                    ),
                    html.Div(
                        [
                            html.Label(t("adv.rule"), htmlFor=f"{P}-rule"),
                            ui.dropdown(
                                id=f"{P}-rule",
                                options=[{"label": findings.rule_label(k), "value": k} for k in findings.RULES],
                                value=rule,
                                placeholder=t("adv.every_rule"),
                                className="dd dd-small",
                            ),
                        ],
                        className="control",
                    ),
                ],
                className="controls",
            ),
            html.Div(notes, id=f"{P}-notes"),
            dcc.Store(id=f"{P}-want", data=None if want is None else {"run": v.run, "finding": want}),
            dcc.Loading(html.Div(id=f"{P}-content"), type="dot", delay_show=300),
        ],
        className="page",
    )


# ---------------------------------------------------------------------------------------------
# content (a pure function of the store: unit tests call it directly)
# ---------------------------------------------------------------------------------------------


def render(
    rd: Reader,
    run: str,
    ranks: Sequence[int] | None,
    severities: Sequence[str],
    rule: str | None,
    opened: int | None,
) -> list[Any]:
    """The findings of ``run`` that touch ``ranks`` (None: every finding), of the given severities
    and rule, each as a card; finding ``opened`` (its index in the advisor's list) opened and marked."""
    adv = data.advice(rd, run)
    if adv.empty:
        return [ui.message(t("adv.none"), "info", id=f"{P}-none")]
    counts = adv["severity"].value_counts()
    keep = adv["severity"].isin(list(severities))
    if rule:
        keep &= adv["rule"] == rule
    if ranks is not None:
        sel = set(ranks)
        keep &= adv["ranks"].map(lambda rs: rs is None or len(rs) == 0 or bool(sel & {int(r) for r in rs}))
    shown = adv[keep]
    summary = ", ".join(
        t("adv.count", n=int(counts[s]), severity=findings.severity_label(s))
        for s in findings.SEVERITIES
        if s in counts.index
    )
    head = html.P(
        t("adv.summary" if len(adv) != 1 else "adv.summary_1", n=len(adv), counts=summary, shown=len(shown)),
        className="status",
        id=f"{P}-summary",
    )
    if shown.empty:
        return [head, ui.message(t("adv.no_match"), "info")]
    cards = cache.rendered(rd, "advisor.cards", (run, opened), lambda: _cards(rd, run, adv, opened))
    return [head, *(cards[int(i)] for i in shown.index)]


def _cards(rd: Reader, run: str, adv: pd.DataFrame, opened: int | None) -> dict[int, Any]:
    """Every finding's card by its index, built once per catalog state, run, opened finding and
    language (``cache.rendered``) whatever the filters: a filter then picks cards instead of building
    them (the 64 findings of a 64-rank run are ~6 000 components; building them was the page's p95)."""
    bounds = data.time_bounds(rd, run, None)
    origin = bounds[0] if bounds else None
    has_instances = any("instance" in e for ev in adv["evidence"] for e in (ev if ev is not None else []))
    colls = data.collectives(rd, run, None)[0] if has_instances else None
    return {int(i): _card(int(i), f.to_dict(), run, origin, colls, opened) for i, f in adv.iterrows()}


def _card(i: int, f: dict[str, Any], run: str, origin: int | None, colls: pd.DataFrame | None, opened: Any) -> Any:
    value, threshold = findings.measured(f)
    ranks = [int(r) for r in (f.get("ranks") if f.get("ranks") is not None else [])]
    ev = findings.evidence(f)
    current = opened is not None and int(opened) == i
    return html.Div(
        [
            html.H2(
                [
                    *findings.heading(f),
                    html.Span(" · " + findings.rule_label(f["rule"]), className="muted"),
                ]
            ),
            html.P(findings.text(f, "detail"), className="note"),
            html.Div(
                [
                    ui.stat(t("adv.measured"), value, id_=f"{P}-value-{i}"),
                    ui.stat(t("adv.threshold"), threshold, id_=f"{P}-threshold-{i}"),
                    html.Div(
                        [
                            html.Div(
                                findings.joined(
                                    [dcc.Link(str(r), href=links.layout_url(run, r)) for r in ranks[:MAX_RANK_LINKS]]
                                    + ([f"… ({format_ranks(ranks)})"] if len(ranks) > MAX_RANK_LINKS else []),
                                    ", ",
                                )
                                or "-",
                                className="stat-value",
                                id=f"{P}-ranks-{i}",
                            ),
                            html.Div(t("adv.ranks_layout"), className="stat-label"),
                        ],
                        className="stat",
                    ),
                    ui.stat(t("adv.evidence_rows"), str(len(ev))),
                ],
                className="stats",
            ),
            html.Details(
                [
                    html.Summary(t("adv.evidence_n", n=len(ev))),
                    findings.evidence_table(
                        run, f, origin, colls, id_=f"{P}-ev-{i}", rank_url=lambda r: links.layout_url(run, r)
                    )
                    if ev
                    else html.P(t("adv.no_rows"), className="note"),
                ],
                open=current or len(ev) <= 5,
            ),
            dcc.Link(t("adv.link"), href=_finding_url(run, i), className="note", id=f"{P}-link-{i}"),
        ],
        className="card finding" + (" current" if current else ""),
        id=f"{P}-f-{i}",
    )


def _finding_url(run: str, i: int) -> str:
    return ui.page_url("/advisor", {"run": run, "finding": i})


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------

# the finding a link names, scrolled into view once the cards are in
_SCROLL_JS = """
function(children) {
    var el = document.querySelector('.finding.current');
    if (el) { el.scrollIntoView({block: 'start'}); }
    return window.dash_clientside.no_update;
}
"""


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-content", "children"),
        Output(f"{P}-ranks", "options"),
        Output("view-url", "data", allow_duplicate=True),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-severity", "value"),
        Input(f"{P}-rule", "value"),
        State(f"{P}-want", "data"),
        prevent_initial_call="initial_duplicate",
    )
    @answers.kept
    @ui.guard(3, message_index=0)
    def update(run: str, ranks: Any, severity: Any, rule: Any, want: Any) -> Any:
        sev = [s for s in (severity or []) if s in findings.SEVERITIES]
        with page.view(run, ranks) as v:
            asked = None if v.selected == v.all_ranks else v.selected
            # the finding a link opened stays open while the run is the one it was named in
            opened = want.get("finding") if isinstance(want, dict) and want.get("run") == run else None
            content = render(v.rd, run, asked, sev, rule or None, opened)
        url = ui.page_url(
            "/advisor",
            {
                "run": run,
                "ranks": ui.ranks_param(v.selected, v.all_ranks),
                "severity": None if sorted(sev) == sorted(findings.SEVERITIES) else ",".join(sev) or "none",
                "rule": rule or None,
                "finding": opened,
            },
        )
        return content, ui.rank_options(v.all_ranks), url

    app.clientside_callback(
        _SCROLL_JS, Output(f"{P}-want", "clear_data"), Input(f"{P}-content", "children"), prevent_initial_call=True
    )
