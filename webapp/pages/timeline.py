"""Timeline: every selected rank on one canvas and one (aligned) clock, host threads, device streams,
communication and overlap analysis per rank; details of an event beside it.

The drawing is done in the browser (``assets/timeline.js``) from tiles the server sends
(``webapp/tiles.py``, ``webapp/timeline_api.py``): zoom and pan redraw locally, and the browser never
gets a whole trace. This module lays out the page from its URL (run, ranks, step or window, lane
groups, clock, folded and pinned lanes, highlighted ranges, the selected event), checks it, passes
it to the renderer, and renders the details of the event the renderer selects (as Dash components:
names from traces are text).
"""

from __future__ import annotations

import json
import re
from typing import Any

import dash
import pandas as pd
from dash import Dash, Input, Output, dcc, html

from webapp import answers, data, lang, links, page, timeline_api, ui
from webapp.errors import BadParameter
from webapp.format import fmt_bytes, fmt_ns
from webapp.labels import LABELS, page_title, t
from webapp.params import parse_int, single
from webapp.reader import reader

dash.register_page(__name__, path="/timeline", name="Timeline", title=page_title("timeline"), order=1)

P = "tl"
DEFAULT_RANKS = timeline_api.DEFAULT_RANKS
GROUPS = ("host", "device", "communication", "overlap", "other", "counters")
DEFAULT_GROUPS = ("host", "device", "communication", "overlap")
FLOW_KINDS = ("launch", "p2p", "collective")  # labels: tl.flow.KIND
_HL = re.compile(r"^(\d+):(-?\d+):(-?\d+)$")
_SEL = re.compile(r"^(\d+):([^:]+):(\d+)$")
_KEY = re.compile(r"^\d+(\.[a-z0-9]+)?$")


def layout(
    run: Any = None,
    ranks: Any = None,
    step: Any = None,
    start_ns: Any = None,
    end_ns: Any = None,
    groups: Any = None,
    clock: Any = None,
    flows: Any = None,
    fold: Any = None,
    pin: Any = None,
    hl: Any = None,
    sel: Any = None,
    **_: Any,
) -> Any:
    query = {
        "step": step,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "groups": groups,
        "clock": clock,
        "flows": flows,
        "fold": fold,
        "pin": pin,
        "hl": hl,
        "sel": sel,
    }

    return page.layout(t("nav.timeline"), run, ranks, lambda v: _layout(v, query), default_ranks=DEFAULT_RANKS)


def _layout(v: page.View, q: dict[str, Any]) -> html.Div:
    cfg, notes = view_config(v.rd, v.run, v.selected, q)
    st = data.steps(v.rd, v.run, v.selected)
    return html.Div(
        [
            ui.header(t("nav.timeline"), t("tl.subtitle")),
            controls(v.run, v.runs, v.all_ranks, v.selected, [int(s) for s in st["step"]], cfg),
            html.Div([ui.pick_control(P, ui.pick_options(data.rank_picks(v.rd, v.run)))], className="controls"),
            html.Div(v.notes + notes, id=f"{P}-notes"),
            html.Div(id=f"{P}-status-note", className="tl-note"),
            html.Div(
                [
                    html.Div(id=f"{P}-box", className="tl-box"),
                    html.Div(
                        [
                            html.Div(
                                html.P(t("tl.click"), className="note"),
                                id=f"{P}-detail",
                            ),
                            html.Div(id=f"{P}-range", className="tl-range", hidden=True),
                        ],
                        className="tl-side",
                        id=f"{P}-side",
                    ),
                ],
                className="tl-wrap",
            ),
            dcc.Store(id=f"{P}-config", data=cfg),
            dcc.Store(id=f"{P}-selected"),
            dcc.Store(id=f"{P}-mounted"),
            dcc.Store(id=f"{P}-sink"),
        ],
        className="page",
    )


def controls(
    run: str, runs: list[str], all_ranks: list[int], selected: list[int], steps: list[int], cfg: dict[str, Any]
) -> html.Div:
    """The page's controls: run, ranks, step, lane groups, clock; whole run, zoom out, search."""
    step = html.Div(
        [
            html.Label(t("tl.jump"), htmlFor=f"{P}-step"),
            ui.dropdown(
                id=f"{P}-step",
                options=_step_options(steps),
                value=cfg["step"],
                placeholder=t("tl.step_ph"),
                className="dd dd-step",
            ),
        ],
        className="control",
    )
    groups = html.Div(
        [
            html.Label(t("tl.lanes"), htmlFor=f"{P}-groups"),
            dcc.Checklist(
                id=f"{P}-groups",
                options=[{"label": t(f"tl.grp.{x}"), "value": x} for x in GROUPS],
                value=cfg["groups"],
                inline=True,
                className="checks",
            ),
        ],
        className="control",
    )
    clock = html.Div(
        [
            html.Label(t("tl.clock"), htmlFor=f"{P}-clock"),
            dcc.Checklist(
                id=f"{P}-clock",
                options=[{"label": t("tl.aligned"), "value": "aligned"}],
                value=["aligned"] if cfg["clock"] == "aligned" else [],
                inline=True,
                className="checks",
            ),
        ],
        className="control",
        title=t("tl.clock_tip"),
    )
    arrows = html.Div(
        [
            html.Label(t("tl.arrows"), htmlFor=f"{P}-flows"),
            dcc.Checklist(
                id=f"{P}-flows",
                options=[{"label": t(f"tl.flow.{k}"), "value": k} for k in FLOW_KINDS],
                value=cfg["flows"],
                inline=True,
                className="checks",
            ),
            html.Span(id=f"{P}-flows-note", className="tl-note"),
        ],
        className="control",
        title=t("tl.arrows_tip"),
    )
    search = html.Div(
        [
            dcc.Input(id=f"{P}-search", type="text", placeholder=t("tl.search_ph"), style={"width": "220px"}),
            html.Button("◀", id=f"{P}-search-prev", className="btn", title=t("tl.prev")),
            html.Button("▶", id=f"{P}-search-next", className="btn", title=t("tl.next")),
            html.Span(id=f"{P}-search-count", className="tl-note"),
        ],
        className="tl-search",
    )
    keys = html.Span(t("tl.keys"), className="tl-keys", title=t("tl.keys_tip"))
    return html.Div(
        [
            html.Div(
                [ui.run_control(P, runs, run), ui.ranks_control(P, all_ranks, selected), step, groups, clock, arrows],
                className="controls",
            ),
            html.Div(
                [
                    html.Button(t("tl.whole"), id=f"{P}-reset", n_clicks=0, className="btn"),
                    html.Button(t("tl.zoom_out"), id=f"{P}-out", n_clicks=0, className="btn"),
                    search,
                    keys,
                    dcc.Link(
                        t("tl.pipeline"),
                        href=ui.page_url("/pipeline", {"run": run, "step": cfg["step"]}),
                        id=f"{P}-pipeline-link",
                        className="tl-keys",
                        title=t("tl.pipeline_tip"),
                    ),
                    html.Span(id=f"{P}-status-text", className="status"),
                ],
                className="tl-bar",
            ),
        ]
    )


def _step_options(steps: list[int]) -> list[dict[str, Any]]:
    return [{"label": t("tl.step_n", step=int(s)), "value": int(s)} for s in steps]


def _list(name: str, value: Any) -> list[str]:
    text = single(name, value)
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def renderer_texts() -> dict[str, str]:
    """The labels the renderer (``assets/timeline.js``) draws, ``tl.js.KEY`` → KEY, in the request's language."""
    return {key.removeprefix("tl.js."): t(key) for key in LABELS if key.startswith("tl.js.")}


def view_config(rd: data.Reader, run: str, selected: list[int], q: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The view the URL asks for, checked (what is wrong becomes a note and is left out), as the
    renderer's config: run, ranks, window or step, lane groups, clock, folded and pinned lanes,
    highlighted ranges and the selected event."""
    notes: list[Any] = []
    cfg: dict[str, Any] = {
        "run": run,
        "ranks": list(selected),
        "step": None,
        "start_ns": None,
        "end_ns": None,
        "groups": list(DEFAULT_GROUPS),
        "clock": "aligned",
        "flows": [],
        "fold": None,
        "pin": [],
        "hl": [],
        "sel": None,
        "lang": lang.chosen(),  # the language the URL chose: the renderer keeps it in the address it writes
        "texts": renderer_texts(),  # the renderer's labels in the request's language
    }

    def note(exc: Exception, then: str) -> None:
        notes.append(ui.message(t("tl.note", problem=exc, then=then), id=f"{P}-url-note"))

    asked_groups = _list("groups", q.get("groups"))
    if asked_groups:
        bad = [x for x in asked_groups if x not in GROUPS]
        if bad:
            notes.append(ui.message(t("tl.bad_groups", bad=", ".join(bad), known=", ".join(GROUPS))))
        cfg["groups"] = [x for x in asked_groups if x in GROUPS] or cfg["groups"]
    try:
        clock = single("clock", q.get("clock"))
        if clock not in (None, "aligned", "raw"):
            raise BadParameter("clock", clock, t("tl.clock_values"))
        cfg["clock"] = clock or "aligned"
    except BadParameter as exc:
        note(exc, t("tl.then_aligned"))
    asked_flows = _list("flows", q.get("flows"))
    bad_flows = [x for x in asked_flows if x not in FLOW_KINDS]
    if bad_flows:
        notes.append(ui.message(t("tl.bad_flows", bad=", ".join(bad_flows), known=", ".join(FLOW_KINDS))))
    cfg["flows"] = [x for x in FLOW_KINDS if x in asked_flows]
    fold = single("fold", q.get("fold"))
    if fold is not None:
        cfg["fold"] = [] if fold == "none" else [x for x in _list("fold", fold) if _KEY.match(x)]
    cfg["pin"] = [x for x in _list("pin", q.get("pin")) if _KEY.match(x)]
    try:
        for part in _list("hl", q.get("hl")):
            m = _HL.match(part)
            if not m:
                raise BadParameter("hl", part, t("tl.hl_format"))
            r, a, b = int(m.group(1)), m.group(2), m.group(3)
            if r not in selected:
                raise BadParameter("hl", part, t("tl.not_shown", rank=r))
            cfg["hl"].append([r, a, b])
    except BadParameter as exc:
        note(exc, t("tl.then_no_hl"))
        cfg["hl"] = []
    sel = single("sel", q.get("sel"))
    if sel:
        m = _SEL.match(sel)
        if m and int(m.group(1)) in selected:
            cfg["sel"] = {"rank": int(m.group(1)), "collection_id": m.group(2), "event": int(m.group(3))}
        else:
            notes.append(ui.message(t("tl.bad_sel", sel=repr(sel))))
    st = data.steps(rd, run, selected)
    known = [int(x) for x in st["step"]]
    try:
        step = parse_int("step", q.get("step"))
        a = parse_int("start_ns", q.get("start_ns"), minimum=0)
        b = parse_int("end_ns", q.get("end_ns"), minimum=0)
        if (a is None) != (b is None):
            raise BadParameter("start_ns" if a is None else "end_ns", None, t("tl.together"))
        if a is not None and b is not None:
            if b <= a:
                raise BadParameter("end_ns", b, t("tl.after"))
            bounds = data.time_bounds(rd, run, selected)
            if bounds is not None and (b <= bounds[0] or a >= bounds[1]):
                raise BadParameter(
                    "start_ns",
                    a,
                    t("tl.outside", a=a, b=b, lo=bounds[0], hi=bounds[1]),
                )
            cfg["start_ns"], cfg["end_ns"] = str(a), str(b)
        elif step is not None:
            if step not in known:
                have = (
                    t("tl.have_steps", first=known[0], last=known[-1])
                    if len(known) > 1
                    else t("tl.have_step", step=known[0])
                    if known
                    else t("tl.no_steps")
                )
                raise BadParameter("step", step, t("tl.no_step", step=step, have=have))
            cfg["step"] = step
    except BadParameter as exc:
        note(exc, t("tl.then_whole"))
    return cfg, notes


# ---------------------------------------------------------------------------------------------
# details of the selected event
# ---------------------------------------------------------------------------------------------

_KERNEL_FIELDS = (  # labels: tl.k.FIELD
    "op_type",
    "core_type",
    "block_dim",
    "input_shapes",
    "input_types",
    "input_formats",
    "output_shapes",
    "output_types",
)


def _at(ns: int, origin: int) -> str:
    return f"{(int(ns) - origin) / 1e6:.6f} ms"


def detail_panel(
    d: dict[str, Any] | None, origin: int, offset: int = 0, members: pd.DataFrame | None = None, run: str = ""
) -> Any:
    """The details of one slice, every program-written string rendered as text: the event, its
    kernel row (a device task), the members of its collective on every rank, arguments, call stack."""
    if d is None:
        return ui.message(t("tl.gone"))
    start = int(d["ts_ns"])
    when = t("tl.when", at=_at(start, origin), rank=d.get("rank"), start=start)
    if offset:
        when += t("tl.when_aligned", at=_at(start - offset, origin))
    rows: list[tuple[str, Any]] = [
        (t("tl.d.name"), d.get("name")),
        (t("tl.d.rank"), d.get("rank")),
        (t("tl.d.lane"), " · ".join(str(x) for x in (d.get("lane_group"), d.get("process"), d.get("lane")) if x)),
        (t("tl.d.category"), d.get("category")),
        (t("tl.d.step"), d.get("step")),
        (t("tl.d.start"), when),
        (t("tl.d.duration"), fmt_ns(d.get("dur_ns"))),
    ]
    if d.get("self_ns") is not None:
        rows.append((t("tl.d.self"), fmt_ns(d.get("self_ns"))))
    is_kernel = d.get("op_type") is not None or d.get("core_type") is not None
    if not is_kernel:
        for key in ("input_shapes", "input_types"):
            if d.get(key) not in (None, ""):
                rows.append((t(f"tl.k.{key}"), d[key]))
    kids: list[Any] = [
        html.H2(t("tl.event"), className="detail-title"),
        _kv(rows, f"{P}-detail-table"),
    ]
    if is_kernel:
        krows = []
        for key in _KERNEL_FIELDS:
            v = d.get(key)
            if v not in (None, ""):
                # kernel tables quote shapes ("32,3,224,224"): the quotes are the file's, not the shape's
                krows.append((t(f"tl.k.{key}"), v.strip('"') if isinstance(v, str) and key.endswith("shapes") else v))
        kids += [html.H3(t("tl.kernel")), _kv(krows, f"{P}-detail-kernel")]
    if members is not None and not members.empty:
        kids += collective_section(members, origin, int(d["rank"]), run)
    args = d.get("args")
    if args:
        kids += [html.H3(t("tl.args")), html.Pre(_pretty_args(args)[:20000], className="args", id=f"{P}-detail-args")]
    stack = d.get("call_stack")
    title = t("tl.stack_src", source=d["call_stack_source"]) if d.get("call_stack_source") else t("tl.stack")
    kids += [
        html.H3(title),
        html.Pre(stack[:20000], className="stack", id=f"{P}-detail-stack")
        if stack
        else html.P(t("tl.no_stack"), className="note"),
    ]
    return kids


def _kv(rows: list[tuple[str, Any]], id_: str) -> html.Table:
    body = [html.Tr([html.Th(k), html.Td("" if v is None else str(v))]) for k, v in rows]
    return html.Table(html.Tbody(body), className="tbl kv", id=id_)


def collective_section(members: pd.DataFrame, origin: int, rank: int, run: str) -> list[Any]:
    """A collective's members on every rank: when each entered (its own clock), how long it took,
    its wait and transit; and a link to the instance on all of them."""
    first = int(pd.to_numeric(members["ts_ns"]).min())
    head = members.iloc[0]
    rows = []
    for r in members.to_dict("records"):
        rows.append(
            html.Tr(
                [
                    html.Td(str(int(r["rank"]))),
                    html.Td(_at(int(r["ts_ns"]), origin)),
                    html.Td("+" + fmt_ns(int(r["ts_ns"]) - first)),
                    html.Td(fmt_ns(r["dur_ns"])),
                    html.Td(fmt_ns(r["wait_ns"])),
                    html.Td(fmt_ns(r["transit_ns"])),
                ],
                className="here" if int(r["rank"]) == rank else None,
            )
        )
    url = links.collective_url(run, list(zip(members["rank"], members["ts_ns"], members["dur_ns"])))
    size = "" if pd.isna(head.get("bytes")) else f", {fmt_bytes(head['bytes'])}"
    return [
        html.H3(t("tl.collective", op=head["op_type"], n=len(members), total=int(head["n_members"]), size=size)),
        html.Table(
            [
                html.Thead(
                    html.Tr(
                        [html.Th(t(f"tl.m.{x}")) for x in ("rank", "entered", "after", "duration", "wait", "transit")]
                    )
                ),
                html.Tbody(rows),
            ],
            className="tbl tl-members",
            id=f"{P}-members",
        ),
        html.P(
            [
                t("tl.own_clock"),
                dcc.Link(t("tl.show_all"), href=url, id=f"{P}-members-link"),
            ],
            className="note",
        ),
    ]


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

MOUNT_JS = """
function(cfg) {
    if (cfg && window.rankscopeTimeline) { window.rankscopeTimeline.mount(cfg); }
    return window.dash_clientside.no_update;
}
"""

# the controls Dash draws drive the renderer (it keeps them in step with the view it shows)
CONTROLS_JS = """
function(run, ranks, groups, step, clock, flows) {
    var tl = window.rankscopeTimeline, t = window.dash_clientside.callback_context.triggered;
    if (!tl || !t || !t.length) { return window.dash_clientside.no_update; }
    var what = t[0].prop_id.split('.')[0];
    if (what === 'tl-run') { tl.setRun(run); }
    if (what === 'tl-ranks') { tl.setRanks(ranks || []); }
    if (what === 'tl-groups') { tl.setGroups(groups || []); }
    if (what === 'tl-step') { tl.jumpToStep(step); }
    if (what === 'tl-clock') { tl.setClock((clock || []).indexOf('aligned') >= 0); }
    if (what === 'tl-flows') { tl.setFlows(flows || []); }
    return window.dash_clientside.no_update;
}
"""


def register_callbacks(app: Dash) -> None:
    timeline_api.register(app.server)
    app.clientside_callback(MOUNT_JS, Output(f"{P}-mounted", "data"), Input(f"{P}-config", "data"))
    app.clientside_callback(
        CONTROLS_JS,
        Output(f"{P}-sink", "data"),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        Input(f"{P}-groups", "value"),
        Input(f"{P}-step", "value"),
        Input(f"{P}-clock", "value"),
        Input(f"{P}-flows", "value"),
        prevent_initial_call=True,
    )

    # a pick (the N slowest, a group, a coordinate of the layout) sets the ranks control, which moves
    # the renderer (CONTROLS_JS) and so the address
    app.callback(Output(f"{P}-ranks", "value"), Input(f"{P}-pick", "value"), prevent_initial_call=True)(ui.pick_ranks)

    @app.callback(
        Output(f"{P}-ranks", "options"),
        Output(f"{P}-step", "options"),
        Input(f"{P}-run", "value"),
        Input(f"{P}-ranks", "value"),
        prevent_initial_call=True,
    )
    @answers.kept
    @ui.guard(2, message_index=0)
    def options(run: str, ranks: Any) -> Any:
        with page.view(run, ranks) as v:
            st = data.steps(v.rd, v.run, v.selected)
        return ui.rank_options(v.all_ranks), _step_options(list(st["step"]))

    @app.callback(
        Output(f"{P}-detail", "children"),
        Input(f"{P}-selected", "data"),
        prevent_initial_call=True,
    )
    @answers.kept
    @ui.guard(1)
    def detail(sel: Any) -> Any:
        if not isinstance(sel, dict) or sel.get("event") is None:
            return dash.no_update
        run, rank = str(sel["run"]), int(sel["rank"])
        with reader(ui.current_store(), run, [rank], ("slices", "lanes", "operators", "kernels", "steps")) as rd:
            d = data.slice_detail(rd, run, rank, str(sel["collection_id"]), int(sel["event"]))
            members = None
            if d is not None and d.get("ts_ns") is not None:
                members = data.collective_members(rd, run, rank, str(d.get("name")), int(d["ts_ns"]))
        return detail_panel(d, int(sel.get("origin") or 0), int(sel.get("offset") or 0), members, run)
