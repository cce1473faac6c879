"""Pieces every page uses: the store of the running app, inline messages, the run / rank
controls, error guarding and figure defaults. No SQL here (that is ``webapp.data``)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html, no_update
from flask import current_app

from analyzer.errors import AnalyzerError
from analyzer.store import Store

from . import answers
from .errors import BadParameter, EmptyStore, WebappError
from .format import plot_safe
from .labels import LABELS, plotly_locale, t
from .params import format_ranks, parse_ranks, query_string

log = logging.getLogger("webapp")

STORE_KEY = "RANKSCOPE_STORE"
CONTROL_KEY = "RANKSCOPE_CONTROL"  # the watched profiler_config.json's folder (analyze serve --control), or None
PAGE_KEYS = ("run", "ranks", "lang")  # parameters every page understands and the navigation carries


def current_store() -> Store:
    """The store of the app serving the current request."""
    return current_app.config[STORE_KEY]


def current_control() -> str | None:
    """The dynamic-profiling folder the app may write into (``analyze serve --control``), or None."""
    return current_app.config.get(CONTROL_KEY)


# ---------------------------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------------------------


def message(text: str, kind: str = "warning", **kw: Any) -> html.Div:
    """An inline message box; ``text`` is rendered as text (never HTML)."""
    return html.Div(text, className=f"msg msg-{kind}", role="status", **kw)


def empty_store(store: Store) -> html.Div:
    """What an empty (or absent) store shows: how to fill it."""
    path = str(store.path)
    return html.Div(
        [
            html.H2(t("ui.empty_title")),
            html.P(t("ui.empty_text")),
            html.Pre(f"analyze ingest path/to/profile_output --store {path}", className="cmd"),
            html.P(
                [
                    t("ui.empty_again"),
                    html.Code("analyze runs --store " + path),
                    t("ui.empty_lists"),
                ]
            ),
        ],
        className="empty-store",
        id="empty-store",
    )


def error_content(exc: BaseException) -> html.Div:
    """An exception as an inline message (unexpected ones are logged with their traceback); the
    answer showing it is not kept (``answers.spoil``)."""
    answers.spoil()
    if isinstance(exc, EmptyStore):
        return empty_store(current_store())
    if isinstance(exc, (WebappError, AnalyzerError)):
        return message(str(exc), "warning")
    log.exception("unexpected error while rendering", exc_info=exc)
    return message(t("ui.internal_error", kind=type(exc).__name__, error=exc), "error")


def guard(n_outputs: int = 1, message_index: int = 0) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a callback so that an error becomes an inline message in output ``message_index``
    and every other output is left unchanged. Never lets a traceback reach the browser."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - shown inline, logged when unexpected
                content = error_content(exc)
                if n_outputs == 1:
                    return content
                out: list[Any] = [no_update] * n_outputs
                out[message_index] = content
                return tuple(out)

        return wrapper

    return deco


def safe_layout(build: Callable[[], Any]) -> Any:
    """Run a page's layout builder; errors become an inline message under the page title."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - shown inline, logged when unexpected
        return html.Div(error_content(exc), className="page")


# ---------------------------------------------------------------------------------------------
# controls
# ---------------------------------------------------------------------------------------------


def run_control(prefix: str, runs: Sequence[str], run: str) -> html.Div:
    return html.Div(
        [
            html.Label(t("ui.run"), htmlFor=f"{prefix}-run"),
            dropdown(
                id=f"{prefix}-run",
                options=[{"label": r, "value": r} for r in runs],
                value=run,
                clearable=False,
                className="dd dd-run",
            ),
        ],
        className="control",
    )


def dropdown(**props: Any) -> dcc.Dropdown:
    """A ``dcc.Dropdown`` with its own texts ("3 selected", "Select All", "Search"...) in the page's
    language (every dropdown of the app is made here: a test checks no page makes one itself)."""
    return dcc.Dropdown(labels={key.removeprefix("dd."): t(key) for key in LABELS if key.startswith("dd.")}, **props)


def rank_options(ranks: Sequence[int]) -> list[dict[str, Any]]:
    """A rank dropdown's options ("rank 3")."""
    return [{"label": t("ui.rank_n", rank=r), "value": r} for r in ranks]


def ranks_control(prefix: str, all_ranks: Sequence[int], selected: Sequence[int], label: str | None = None) -> html.Div:
    return html.Div(
        [
            html.Label(label or t("ui.ranks"), htmlFor=f"{prefix}-ranks"),
            dropdown(
                id=f"{prefix}-ranks",
                options=rank_options(all_ranks),
                value=list(selected),
                multi=True,
                placeholder=t("ui.all_ranks"),
                className="dd dd-ranks",
            ),
        ],
        className="control",
    )


def pick_control(prefix: str, options: Sequence[dict[str, Any]] = ()) -> html.Div:
    """Ready-made rank choices (``data.rank_picks``: the N slowest, a group or a coordinate of the
    parallel layout), each value the ranks it picks as text; ``pick_ranks`` puts them in the ranks control."""
    return html.Div(
        [
            html.Label(t("ov.pick"), htmlFor=f"{prefix}-pick"),
            dropdown(
                id=f"{prefix}-pick",
                options=list(options),
                placeholder=t("ov.pick_ph"),
                className="dd dd-pick",
            ),
        ],
        className="control",
    )


def pick_options(picks: Sequence[tuple[str, dict[str, Any], Sequence[int]]]) -> list[dict[str, Any]]:
    """``data.rank_picks``' (label key, its values, ranks) as dropdown options in the page's language."""
    return [{"label": t(key, **values), "value": format_ranks(rs)} for key, values, rs in picks]


def pick_ranks(value: Any) -> Any:
    """The ranks a pick chooses, for the ranks control (no_update for no pick or a bad value)."""
    if not value:
        return no_update
    try:
        return parse_ranks("pick", value) or no_update
    except BadParameter:
        return no_update


def rank_list(value: Any, all_ranks: Sequence[int]) -> list[int]:
    """A rank dropdown's value as a list (empty = all ranks)."""
    if value is None or value == []:
        return list(all_ranks)
    if isinstance(value, (int, float, str)):
        value = [value]
    return sorted({int(v) for v in value})


def hint_ranks(value: Any) -> list[int] | None:
    """The ranks a dropdown value names, to open the store for just those (None: every rank)."""
    try:
        rs = rank_list(value, [])
    except (TypeError, ValueError):
        return None
    return rs or None


def default_ranks(all_ranks: Sequence[int], limit: int) -> list[int]:
    return list(all_ranks[:limit])


def page_url(path: str, params: dict[str, Any]) -> str:
    return path + query_string(params)


def ranks_param(selected: Sequence[int], all_ranks: Sequence[int]) -> str | None:
    """What goes in the URL for a rank selection (nothing when it is every rank)."""
    if sorted(selected) == sorted(all_ranks):
        return None
    return format_ranks(selected)


def header(title: str, subtitle: str | None = None) -> html.Div:
    kids: list[Any] = [html.H1(title)]
    if subtitle:
        kids.append(html.P(subtitle, className="subtitle"))
    return html.Div(kids, className="page-header")


# Only a real zoom / pan reaches the server: Plotly also
# reports autosize and hover-layer changes, and a server call answering "nothing to do" would
# supersede a figure update still in flight.
ZOOM_JS = """
function(rl) {
    var nu = window.dash_clientside.no_update;
    if (!rl) { return nu; }
    if (rl['xaxis.autorange']) { return {auto: true, at: Date.now()}; }
    var a = rl['xaxis.range[0]'], b = rl['xaxis.range[1]'];
    if ((a === undefined || b === undefined) && Array.isArray(rl['xaxis.range'])) {
        a = rl['xaxis.range'][0]; b = rl['xaxis.range'][1];
    }
    if (a === undefined || b === undefined) { return nu; }
    return {a: Number(a), b: Number(b), at: Date.now()};
}
"""

# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------

COLORS = {
    "computing": "#2f6fb0",
    "comm_not_overlapped": "#d9534f",
    "overlapped": "#9b59b6",
    "free": "#b8c2cc",
    "preparing": "#f0ad4e",
    "bubble": "#5bc0de",
    "allocated": "#2f6fb0",
    "reserved": "#e67e22",
    "active": "#27ae60",
    "wait": "#d9534f",
    "transit": "#2f6fb0",
    "other": "#b8c2cc",
}


_AXIS = dict(gridcolor="#e6ebf1", linecolor="#c5ced8", zerolinecolor="#d5dde6", ticks="", automargin=True)
_BASE_LAYOUT = dict(
    template="none",
    paper_bgcolor="white",
    plot_bgcolor="white",
    xaxis=_AXIS,
    yaxis=_AXIS,
    colorway=[
        "#2f6fb0",
        "#e67e22",
        "#27ae60",
        "#d9534f",
        "#9b59b6",
        "#8c564b",
        "#e377c2",
        "#7f7f7f",
        "#bcbd22",
        "#17becf",
    ],
    hoverlabel=dict(font_size=12),
)


class Figure(go.Figure):
    """A Plotly figure whose every string from a trace shows literally in the browser: its JSON goes
    through ``format.plot_safe`` (every string but the templates escaped) when it is sent."""

    def to_plotly_json(self) -> dict[str, Any]:
        return plot_safe(super().to_plotly_json())


def figure(height: int = 360, **layout: Any) -> Figure:
    """Every figure of the web app starts here (a test checks no page builds one otherwise)."""
    # an explicit light style instead of a named template: copying plotly_white costs ~50 ms a figure;
    # a copy of the base figure, validated once, and only the figure's own settings applied: ~3 ms a
    # figure instead of ~7 ms (the base's settings validated again every time)
    fig = Figure(_base_figure())
    fig.update_layout(height=height, **layout)
    return fig


@functools.cache
def _base_figure() -> Figure:
    """What every figure starts from (copied, never changed)."""
    return Figure(
        layout={
            **_BASE_LAYOUT,
            "margin": dict(l=60, r=20, t=36, b=40),
            "font": dict(family="system-ui, -apple-system, Segoe UI, sans-serif", size=12),
            "legend": dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
        }
    )


def add_band(fig: go.Figure, band: Any, scale: float = 1.0) -> None:
    """Draw a scalar's spread over ranks (``data.scalar_band``: columns step, lo, mid, hi) on ``fig``:
    the lo-hi band filled and the mean as a line, values divided by ``scale``. Arrays, not pandas
    Series: plotly validates a Series ~2x slower."""
    x = band["step"].to_numpy()
    fig.add_scatter(
        x=x, y=(band["lo"] / scale).to_numpy(), mode="lines", line=dict(width=0), hoverinfo="skip", showlegend=False
    )
    fig.add_scatter(
        x=x,
        y=(band["hi"] / scale).to_numpy(),
        mode="lines",
        line=dict(width=0),
        fill="tonexty",
        fillcolor="rgba(47,111,176,0.25)",
        name=t("tr.band"),
        hovertemplate=t("tr.band_hover") + "<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=(band["mid"] / scale).to_numpy(),
        mode="lines",
        name=t("tr.mean"),
        line=dict(color="#2f6fb0"),
        hovertemplate=t("tr.mean_hover") + "<extra></extra>",
    )


def graph(id_: str | dict[str, Any], fig: go.Figure, config: dict[str, Any] | None = None, **kw: Any) -> dcc.Graph:
    return dcc.Graph(id=id_, figure=fig, config={"displaylogo": False, **plotly_locale(), **(config or {})}, **kw)


def stat(label: str, value: str, id_: str | None = None) -> html.Div:
    kw = {"id": id_} if id_ else {}
    return html.Div(
        [html.Div(value, className="stat-value", **kw), html.Div(label, className="stat-label")], className="stat"
    )


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], id_: str | None = None, class_name: str = "tbl"
) -> html.Table:
    """A small static table; every cell is rendered as text."""
    kw = {"id": id_} if id_ else {}
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(c) for c in columns])),
            html.Tbody([html.Tr([html.Td("" if v is None else str(v)) for v in r]) for r in rows]),
        ],
        className=class_name,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# grids
# ---------------------------------------------------------------------------------------------

GRID_CHAR_PX = 7.4  # ag-theme-alpine's 13 px font, average glyph
GRID_CELL_PAD_PX = 36  # a cell's padding
GRID_HEADER_PAD_PX = 54  # a header's padding and its sort / menu icons


def _cell_text(v: Any, pct: bool) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.1f} %" if pct else f"{v:,.3f}"
    return str(v)


def fit_columns(
    cols: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]] = (),
    max_px: int = 440,
    sample: int = 400,
    budget_px: int | None = None,
) -> list[dict[str, Any]]:
    """Column widths from their content (header words and the first ``sample`` rows' values), so
    that a grid shows its key columns without a horizontal scroll; headers wrap onto two lines.
    A column is at most ``max_px`` wide (its tooltip shows the whole value); a column with
    ``flex`` keeps it and grows into the space left, never below its content width. ``budget_px``:
    the first (name) column gives up width, down to 200 px, until the whole row fits in it. A text
    column narrower than its content wraps its cells (the whole name shows, on several lines)."""
    out = []
    for c in cols:
        c = dict(c)
        field, header = c.get("field"), str(c.get("headerName") or c.get("field") or "")
        fn = str((c.get("valueFormatter") or {}).get("function", ""))
        pct, signed = "%" in fn, "format('+" in fn  # d3.format('+...'): "+" before a positive value
        # the header may wrap onto three lines, never inside a word
        head = max(max((len(w) for w in header.split()), default=0), -(-len(header) // 3))
        chars = 0
        for r in rows[:sample]:
            v = r.get(field)
            plus = signed and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            chars = max(chars, len(_cell_text(v, pct)) + plus)
        need = max(head * GRID_CHAR_PX + GRID_HEADER_PAD_PX, chars * GRID_CHAR_PX + GRID_CELL_PAD_PX, 64)
        width = int(min(need, c.get("maxWidth", max_px), max_px))
        # a header is never narrower than its longest word (the CSS keeps words whole)
        c["minWidth"] = width if c.get("flex") else min(width, max(64, int(head * GRID_CHAR_PX + GRID_CELL_PAD_PX)))
        c["width"] = width
        c.setdefault("wrapHeaderText", True)
        c.setdefault("autoHeaderHeight", True)
        c["_need"] = chars * GRID_CHAR_PX + GRID_CELL_PAD_PX
        out.append(c)
    if budget_px and out:
        over = sum(c["width"] for c in out) - budget_px
        if over > 0:
            first = out[0]
            first["width"] = max(200, first["width"] - over)
            first["minWidth"] = min(first["minWidth"], first["width"])
    for c in out:
        # text longer than its column (a long name, a cut key column) wraps instead of being cut
        if c.pop("_need") > c["width"] and c.get("filter") != "agNumberColumnFilter" and not c.get("cellRenderer"):
            c.setdefault("wrapText", True)
            c.setdefault("autoHeight", True)
            c.setdefault("cellClass", "cell-wrap")
    return out
