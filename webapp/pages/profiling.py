"""Profiling: dynamic profiling from the browser. Off unless the server was started with
``analyze serve --control CONFIG_DIR`` (the folder of a training job's watched
``profiler_config.json``, the collector's ``dynamic_param.config_path``), which also needs a token.

The page shows the file as it is, the collector's maintenance log (``rankscope_dynamic.log``) and
each collector process's state read from it (watching, armed for a window, recording, done,
stopped: ``collector.dynamic.rank_states``), refreshed every few seconds; and it asks for "steps
N..M on ranks R with these switches": the edit keeps the file's other values, goes through the
collector's own validation (``collector.dynamic.parse_request``) and is written atomically
(``collector.dynamic.write_config``). The collector reads it at its next step boundary and says in
the log what it did with it (accepted, or rejected and why: a start step already past, ...)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import dash
from dash import Dash, Input, Output, State, dcc, html

from collector.config import LEVELS, ProfileOptions
from collector.dynamic import LOG_NAME, config_location, rank_states, read_log, write_config
from webapp import ui
from webapp.errors import BadParameter, WebappError
from webapp.labels import page_title, t
from webapp.params import parse_ranks

dash.register_page(__name__, path="/profiling", name="Profiling", title=page_title("profiling"), order=8)

P = "pf"
REFRESH_MS = 2000  # the file, the log and the states are read again this often
LOG_LINES = 200  # log lines shown (the last ones)
SWITCHES = ("with_stack", "record_shapes", "with_memory", "with_modules", "with_flops", "with_cpu", "with_device")


class ControlOff(WebappError):
    """Dynamic profiling from the browser is not turned on for this server."""


def _paths() -> tuple[Path, Path]:
    folder = ui.current_control()
    if folder is None:
        raise ControlOff(t("pf.off"))
    return config_location(folder)


def layout(**_: Any) -> Any:
    return ui.safe_layout(_layout)


def _layout() -> html.Div:
    head = ui.header(t("nav.profiling"), t("pf.subtitle"))
    try:
        _, path = _paths()
    except ControlOff as exc:
        return html.Div([head, ui.message(str(exc), "info", id=f"{P}-off")], className="page")
    current = _read_json(path)
    opts = current if isinstance(current, dict) else {}
    level = opts.get("level") if opts.get("level") in LEVELS else ProfileOptions().level
    on = [s for s in SWITCHES if opts.get(s, getattr(ProfileOptions(), s)) is True]
    ask = html.Div(
        [
            html.H2(t("pf.ask")),
            html.Div(
                [
                    _field(t("pf.first"), dcc.Input(id=f"{P}-start", type="number", min=1, step=1, debounce=True)),
                    _field(t("pf.last"), dcc.Input(id=f"{P}-end", type="number", min=1, step=1, debounce=True)),
                    _field(t("ui.ranks"), dcc.Input(id=f"{P}-ranks", type="text", placeholder=t("pf.ranks_ph"))),
                    _field(
                        t("pf.level"),
                        ui.dropdown(
                            id=f"{P}-level",
                            options=[{"label": lv, "value": lv} for lv in LEVELS],
                            value=level,
                            clearable=False,
                            className="dd dd-small",
                        ),
                    ),
                ],
                className="controls",
            ),
            dcc.Checklist(
                id=f"{P}-switches",
                options=[{"label": f" {s}: {t(f'pf.sw.{s}')}", "value": s} for s in SWITCHES],
                value=on,
                className="checklist",
            ),
            html.Button(t("pf.write"), id=f"{P}-write", n_clicks=0, className="button"),
            html.Div(id=f"{P}-result"),
        ],
        className="card",
    )
    return html.Div(
        [
            head,
            html.P(t("pf.watched", path=path), className="note", id=f"{P}-path"),
            ask,
            html.Div([html.H2(t("pf.collectors")), html.Div(id=f"{P}-states")], className="card"),
            html.Div([html.H2(path.name), html.Pre(id=f"{P}-config", className="pre")], className="card"),
            html.Div([html.H2(LOG_NAME), html.Pre(id=f"{P}-log", className="pre")], className="card"),
            dcc.Interval(id=f"{P}-tick", interval=REFRESH_MS),
        ],
        className="page",
    )


def _field(label: str, control: Any) -> html.Div:
    return html.Div([html.Label(label, htmlFor=control.id), control], className="control")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# content (pure functions: unit tests call them directly)
# ---------------------------------------------------------------------------------------------


def window_request(
    current: Any, first: Any, last: Any, ranks_text: Any, level: Any, switches: Any
) -> tuple[dict[str, Any] | None, list[str]]:
    """The edited file for "steps ``first``..``last`` on ranks ``ranks_text`` with ``switches`` on
    (the others off) at ``level``": the current file's other values kept; steps written the way the
    file already counts them (MindSpore's start_step..stop_step when it has stop_step, else
    torch_npu's start_step + active). Returns (file, problems); the collector's validation comes
    after (``write_config``)."""
    problems: list[str] = []
    data = dict(current) if isinstance(current, dict) else {}
    try:
        a = int(first)
        b = int(last) if last not in (None, "") else a
    except (TypeError, ValueError):
        return None, [t("pf.whole_steps")]
    mindspore = "stop_step" in data  # the file counts steps MindSpore's way: start_step..stop_step, 0 allowed
    if b < a:
        problems.append(t("pf.last_before", last=b, first=a))
    if a < 0 or (a == 0 and not mindspore):
        problems.append(t("pf.step_zero", step=a))
    try:
        ranks = parse_ranks("ranks", ranks_text)
    except WebappError as exc:
        problems.append(str(exc.problem) if isinstance(exc, BadParameter) else str(exc))
        ranks = None
    if problems:
        return None, problems
    for k in ("is_rank", "rank_list"):  # torch_npu's spelling of the ranks: ours replaces it
        data.pop(k, None)
    data["start_step"] = a
    if mindspore:
        data["stop_step"] = b
        data.pop("active", None)
    else:
        data["active"] = b - a + 1
    data["ranks"] = [-1] if ranks is None else ranks
    data["level"] = level if level in LEVELS else ProfileOptions().level
    on = set(switches or [])
    for s in SWITCHES:
        data[s] = s in on
    return data, []


def states_table(lines: list[Any]) -> Any:
    states = rank_states(lines)
    if not states:
        return html.P(t("pf.no_log"), className="note")
    rows = []
    for s in states:
        text = t(f"pf.st.{s.state}") + (f" {s.window}" if s.window else "")
        rows.append(
            html.Tr(
                [
                    html.Td("?" if s.rank is None else str(s.rank)),
                    html.Td(s.state, className=f"state-{s.state.replace(' ', '-')}"),
                    html.Td(text),
                    html.Td(t("pf.pid", host=s.host, pid=s.pid)),
                    html.Td(s.since),
                ],
                className="armed" if s.state in ("armed", "recording") else None,
            )
        )
    armed = sorted({s.rank for s in states if s.state in ("armed", "recording") and s.rank is not None})
    watching = [s for s in states if s.state != "stopped"]
    summary = t(
        "pf.running",
        n=len(watching),
        armed=", ".join(t("ui.rank_n", rank=r) for r in armed) if armed else t("pf.none"),
    )
    head = [t(f"pf.col.{c}") for c in ("rank", "state", "said", "process", "since")]
    return html.Div(
        [
            html.P(summary, className="note", id=f"{P}-armed"),
            html.Table([html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)], className="tbl"),
        ]
    )


# ---------------------------------------------------------------------------------------------
# callbacks
# ---------------------------------------------------------------------------------------------


def register_callbacks(app: Dash) -> None:
    @app.callback(
        Output(f"{P}-config", "children"),
        Output(f"{P}-log", "children"),
        Output(f"{P}-states", "children"),
        Input(f"{P}-tick", "n_intervals"),
        Input(f"{P}-result", "children"),
    )
    @ui.guard(3, message_index=2)
    def refresh(_tick: Any, _written: Any) -> Any:
        folder, path = _paths()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = t("pf.no_file", name=path.name)
        lines = read_log(folder / LOG_NAME)
        shown = lines[-LOG_LINES:]
        log_text = "\n".join(
            f"{ln.time} {ln.host} pid={ln.pid} rank={'?' if ln.rank is None else ln.rank} {ln.message}"
            if ln.pid
            else ln.message
            for ln in shown
        )
        return text, log_text or t("pf.no_log_file", name=LOG_NAME), states_table(lines)

    @app.callback(
        Output(f"{P}-result", "children"),
        Input(f"{P}-write", "n_clicks"),
        State(f"{P}-start", "value"),
        State(f"{P}-end", "value"),
        State(f"{P}-ranks", "value"),
        State(f"{P}-level", "value"),
        State(f"{P}-switches", "value"),
        prevent_initial_call=True,
    )
    @ui.guard(1)
    def write(n: Any, first: Any, last: Any, ranks: Any, level: Any, switches: Any) -> Any:
        if not n:
            return dash.no_update
        _, path = _paths()
        data, problems = window_request(_read_json(path), first, last, ranks, level, switches)
        if data is not None:
            problems = write_config(path, data)  # the collector's own validation, then an atomic replace
        if problems:
            return ui.message(t("pf.not_written", problems="; ".join(problems)), id=f"{P}-problems")
        return ui.message(
            t("pf.written", time=time.strftime("%H:%M:%S"), name=path.name, first=first, last=last or first),
            "info",
            id=f"{P}-written",
        )
