"""The advisor's findings (``analyzer.analyses.advise``) on a page: what the Overview's card and the
Advisor page share — a finding's heading (severity, title), its measured value against the rule's
threshold, and the links of each evidence row (timeline, collective, operator, rank on the layout).

Everything a trace wrote (operator and task names) is rendered as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from dash import dcc, html

from analyzer.format import is_missing

from . import links
from .format import fmt_bytes, fmt_int, fmt_ns
from .labels import LABELS, cause_name, said, said_term, t
from .params import query_string

SEVERITIES = ("high", "medium", "low")
RULES = (
    "straggler",
    "slow_rank",
    "slow_link",
    "high_free",
    "host_bound",
    "small_packets",
    "aicpu",
)  # the advisor's rules


def rule_label(rule: str) -> str:
    """What a rule looks at ("slow rank"; the advisor's module docstring has the full rules)."""
    return t(f"rule.{rule}") if f"rule.{rule}" in LABELS else rule


def severity_label(severity: str) -> str:
    return t(f"sev.{severity}") if severity in SEVERITIES else severity


MAX_OVERVIEW_LINKS = 5  # evidence links per finding on the Overview card


def heading(f: Mapping[str, Any]) -> list[Any]:
    """Severity badge and title."""
    sev = str(f["severity"])
    return [html.Span(severity_label(sev), className=f"sev sev-{sev}"), " ", html.B(text(f, "title"))]


def text(f: Mapping[str, Any], part: str) -> str:
    """A finding's ``title`` or ``detail`` in the request's language (from its message; the English
    sentence when it has none)."""
    msg = f.get(f"{part}_msg")
    return said(msg) if isinstance(msg, Mapping) else str(f[part])


def measured(f: Mapping[str, Any]) -> tuple[str, str]:
    """(value, threshold) of a finding as people read them: a share or spread in %, the slow-rank
    vote as a count of votes, AI CPU time as a duration (the threshold: the shortest task counted)."""
    v, thr, rule = f.get("value"), f.get("threshold"), str(f.get("rule"))
    if is_missing(v):
        return "-", "-"
    if rule == "aicpu":
        return t("fd.in_total", time=fmt_ns(v)), t("fd.tasks_longer", time=fmt_ns(thr))
    if rule == "slow_rank" and not is_missing(thr) and float(thr) >= 1:
        return t("fd.votes" if int(v) != 1 else "fd.vote", n=int(v)), t("fd.at_least_votes", n=int(thr))
    return f"{float(v):.1%}", "-" if is_missing(thr) else f"{float(thr):.0%}"


def evidence(f: Mapping[str, Any]) -> list[dict[str, Any]]:
    ev = f.get("evidence")
    return [dict(e) for e in ev] if ev is not None and len(ev) else []


def evidence_links(
    run: str, f: Mapping[str, Any], row: Mapping[str, Any], collectives: pd.DataFrame | None = None
) -> list[tuple[str, str]]:
    """(label, href) for one evidence row: the timeline at its time (a gap, a task, a rank's step),
    the collective instance on all its ranks (``collectives``: ``data.collectives`` rows with
    ``instance`` and ``members``), the operator on the Operators page, the rank on the Cluster page."""
    out: list[tuple[str, str]] = []
    url = links.evidence_url(run, row)
    if url:
        out.append((t("fd.timeline"), url))
    inst = row.get("instance")
    if not is_missing(inst) and collectives is not None and not collectives.empty:
        hit = collectives[collectives["instance"].astype(str) == str(inst)]
        if not hit.empty:
            out.append((t("fd.collective"), links.collective_url(run, list(hit["members"].iloc[0]))))
    op = next((row.get(k) for k in ("name", "next_task", "task_after") if not is_missing(row.get(k))), None)
    if op is not None and str(f.get("rule")) in ("aicpu", "host_bound", "high_free"):
        out.append((t("fd.operator"), links.operator_url(run, "kernels", str(op))))
    return out


def _cell(key: str, v: Any, origin: int | None) -> str:
    """An evidence value as text: times relative to the run's start, durations, sizes, rates."""
    if is_missing(v) if not isinstance(v, (list, dict, tuple)) else False:
        return ""
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_cell(key, x, origin)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(key, x, origin) for x in v)
    if isinstance(v, bool):
        return str(v)
    if key == "cause" and isinstance(v, str):
        return cause_name(v)
    if key in ("start_ns", "end_ns", "ts_ns", "launch_ns") and origin is not None:
        return f"+{(int(v) - origin) / 1e6:,.3f} ms"
    if key.endswith("_ns") and isinstance(v, (int, float)):
        return fmt_ns(v)
    if key == "bytes" or key.endswith("_bytes"):
        return fmt_bytes(v)
    if key.endswith("bytes_per_s") and isinstance(v, (int, float)):
        return f"{float(v) / 1e9:,.2f} GB/s"
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int):
        return fmt_int(v) if key not in ("rank", "step", "src_rank", "dst_rank", "slow_rank") else str(v)
    return str(v)


def joined(items: Sequence[Any], sep: str) -> list[Any]:
    """``items`` with ``sep`` between them (the children of one element)."""
    return [x for k, item in enumerate(items) for x in ((sep, item) if k else (item,))]


def evidence_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of the rows, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r))


def evidence_table(
    run: str,
    f: Mapping[str, Any],
    origin: int | None,
    collectives: pd.DataFrame | None,
    id_: str,
    rank_url: Any = None,
) -> html.Table:
    """The evidence rows of a finding with their links (``rank_url(rank)``: a link for the rank cell)."""
    rows = evidence(f)
    cols = evidence_columns(rows)
    body = []
    for r in rows:
        cells: list[Any] = []
        for c in cols:
            text = _cell(c, r.get(c), origin)
            if c == "rank" and rank_url is not None and not is_missing(r.get(c)):
                cells.append(html.Td(dcc.Link(text, href=rank_url(int(r[c])))))
            else:
                cells.append(html.Td(text))
        cells.append(
            html.Td(joined([dcc.Link(label, href=url) for label, url in evidence_links(run, f, r, collectives)], " · "))
        )
        body.append(html.Tr(cells))
    return html.Table(
        [
            html.Thead(
                html.Tr(
                    [html.Th(said_term("evidence", c, c.removesuffix("_ns").replace("_", " "))) for c in cols]
                    + [html.Th(t("fd.see"))]
                )
            ),
            html.Tbody(body),
        ],
        className="tbl tbl-evidence",
        id=id_,
    )


def overview_card(adv: pd.DataFrame, run: str, prefix: str) -> html.Div:
    """The Overview's card: each finding's heading and sentence with up to five links into the
    timeline, and a link to the Advisor page for the numbers and every piece of evidence."""
    more = dcc.Link(t("fd.advisor_page"), href="/advisor" + query_string({"run": run}), id=f"{prefix}-to-advisor")
    if adv.empty:
        return html.Div(
            [html.H2(t("fd.findings")), html.P([t("fd.none_fired"), more, t("fd.none_fired_end")], className="note")],
            className="card",
        )
    items = []
    for i, f in enumerate(adv.to_dict("records")):
        urls = [u for u in (links.evidence_url(run, e) for e in evidence(f)) if u]
        kids: list[Any] = [*heading(f), html.Div(text(f, "detail"), className="note")]
        if urls:
            kids.append(
                html.Div(
                    [t("fd.in_timeline")]
                    + joined(
                        [
                            dcc.Link(t("fd.evidence_k", k=k + 1), href=u, id=f"{prefix}-ev-{i}-{k}")
                            for k, u in enumerate(urls[:MAX_OVERVIEW_LINKS])
                        ],
                        ", ",
                    )
                    + ([t("fd.and_more", n=len(urls) - MAX_OVERVIEW_LINKS)] if len(urls) > MAX_OVERVIEW_LINKS else []),
                    className="note",
                )
            )
        items.append(html.Li(kids))
    return html.Div(
        [
            html.H2(t("fd.findings_n", n=len(adv))),
            html.Ul(items, className="findings"),
            html.P([t("fd.every_finding"), more, t("fd.every_finding_end")], className="note"),
        ],
        className="card",
    )
