"""The prologue every page shares: open the request's view of the store, resolve the run, parse
the ranks, and turn what cannot be shown into a message.

A page layout is ``page.layout(title, run, ranks, build)``: ``build(view)`` gets a :class:`View`
once the run is known (an empty store shows how to fill it, an unknown run says so, a bad ``ranks``
parameter becomes a note and the default ranks are shown). A callback opens its view with
``with page.view(run, ranks, tables) as v``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from dash import html

from analyzer.messages import message

from . import answers, data, ui, warmup
from .errors import NotFound, WebappError
from .labels import said, t
from .params import format_ranks, parse_ranks, single
from .reader import Reader, reader

WARM_UP_RANKS = 8  # timeline ranks whose lane indexes the warm-up builds


@dataclass
class View:
    """A run of the store as one request sees it."""

    rd: Reader
    run: str
    all_ranks: list[int]  # the ranks of the run
    selected: list[int]  # the ranks the request asks for (checked)
    runs: list[str] = field(default_factory=list)  # every run, most recently ingested first (layouts)
    notes: list[Any] = field(default_factory=list)  # messages on URL parameters that were not used (layouts)


def layout(
    title: str,
    run_q: Any,
    ranks_q: Any,
    build: Callable[[View], Any],
    *,
    tables: Sequence[str] = (),
    default_ranks: int | None = None,
    unknown_run: Callable[[Reader], list[Any]] | None = None,
) -> Any:
    """A page layout from its URL parameters ``run`` and ``ranks``: ``build(view)`` once the run is
    resolved; ``default_ranks`` caps the ranks shown when the URL names none (None: every rank);
    ``unknown_run(rd)`` adds content under the message for a run the store does not have.
    Errors become an inline message under the page title (``ui.safe_layout``)."""

    def render() -> Any:
        answers.keep()  # a function of the URL, the store's content and the language
        with reader(ui.current_store(), single("run", run_q), None, tables) as rd:
            names = data.run_names(rd)
            if not names:
                return html.Div([ui.header(title), ui.empty_store(rd.store)], className="page")
            try:
                run = data.resolve_run(rd, single("run", run_q))
            except NotFound as exc:
                extra = unknown_run(rd) if unknown_run is not None else []
                return html.Div([ui.header(title), ui.message(str(exc)), *extra], className="page")
            all_ranks = data.ranks_of(rd, run)
            warmup.warm_up(rd, run, all_ranks[:WARM_UP_RANKS])  # what the pages of this run will ask for first
            default = all_ranks if default_ranks is None else all_ranks[:default_ranks]
            v = View(rd, run, all_ranks, default, runs=names)
            try:
                asked = parse_ranks("ranks", ranks_q)
                if asked is not None:
                    v.selected = data.check_ranks(rd, run, asked)
            except WebappError as exc:
                shown = (
                    t("ui.all_ranks")
                    if default_ranks is None or not default
                    else t("ui.ranks_list", ranks=format_ranks(default))
                )
                v.notes.append(ui.message(t("ui.showing", problem=exc, shown=shown)))
            return build(v)

    return ui.safe_layout(render)


@contextlib.contextmanager
def view(
    run: str, ranks: Any, tables: Sequence[str] = (), *, open_all: bool = False, check_run: bool = True
) -> Iterator[View]:
    """A callback's view of ``run`` with the ranks of a rank dropdown (none: every rank).
    The store is opened for the selected ranks and ``tables`` (every rank with ``open_all``).
    ``check_run``: a run the store no longer has is an error (else the view has no ranks)."""
    with reader(ui.current_store(), run, None if open_all else ui.hint_ranks(ranks), tables) as rd:
        all_ranks = data.ranks_of(rd, run)
        if check_run and not all_ranks:
            raise NotFound(said(message("error.no_run", run=repr(run), runs="")))
        selected = [r for r in ui.rank_list(ranks, all_ranks) if r in set(all_ranks)] or all_ranks
        yield View(rd, run, all_ranks, selected)
