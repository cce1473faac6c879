"""Links into the timeline from what the other pages name: an operator or kernel call, a collective
instance on all its member ranks, a memory peak, a rank and step, an advisor finding's evidence;
and to an operator on the Operators page, a rank on the Cluster page, two runs on the Compare page.

A link names the ranks to show and the ranges to highlight (``hl=RANK:START_NS:END_NS,...``, each on
that rank's own clock); the timeline opens on the highlighted ranges (on the aligned clock when the
rank's offset is known), draws them, and selects the slice that matches the first one, so its
details are on screen at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analyzer.format import is_missing

from .params import format_ranks, query_string

MAX_HIGHLIGHTS = 64  # ranges in one link (a collective of more ranks highlights its slowest members)


def timeline_url(
    run: str,
    ranks: Iterable[int] | None = None,
    highlights: Iterable[tuple[int, int, int]] = (),
    step: int | None = None,
) -> str:
    """``/timeline?...`` showing ``ranks`` (None: the page's default), highlighting each (rank,
    start_ns, end_ns) and opening on them, or on ``step`` when no range is given."""
    hl = [(int(r), int(a), max(int(b), int(a))) for r, a, b in list(highlights)[:MAX_HIGHLIGHTS]]
    return _timeline_url(run, ranks, hl, step)


def _timeline_url(run: str, ranks: Iterable[int] | None, hl: list[tuple[int, int, int]], step: int | None) -> str:
    """``timeline_url`` of highlights already (rank, start, end) integers, end >= start, at most
    ``MAX_HIGHLIGHTS``."""
    params: dict[str, Any] = {"run": run}
    if ranks is not None:
        params["ranks"] = format_ranks(ranks)
    if hl:
        params["hl"] = ",".join(f"{r}:{a}:{b}" for r, a, b in hl)
    elif step is not None:
        params["step"] = int(step)
    return "/timeline" + query_string(params)


def call_url(run: str, rank: int, ts_ns: int, dur_ns: int | None) -> str:
    """One call of an operator or kernel (or any slice) on its rank."""
    dur = 0 if is_missing(dur_ns) else int(dur_ns)  # type: ignore[arg-type]
    return timeline_url(run, [int(rank)], [(int(rank), int(ts_ns), int(ts_ns) + dur)])


def collective_url(run: str, members: Sequence[tuple[int, int, int | None]]) -> str:
    """A collective instance: every member rank with its own (entry, duration), the slowest first
    when there are more than ``MAX_HIGHLIGHTS``."""
    # a page writes one per collective instance (hundreds, of up to thousands of members): plain
    # integers, what the data layer gives, skip the test for a missing value
    rows = [
        (int(r), int(t), d if type(d) is int else 0 if is_missing(d) else int(d))  # type: ignore[arg-type]
        for r, t, d in members
        if type(t) is int or not is_missing(t)
    ]
    rows.sort(key=lambda x: -x[2])
    rows = rows[:MAX_HIGHLIGHTS]
    return _timeline_url(
        run, sorted({r for r, _, _ in rows}), [(r, t, t + d if d > 0 else t) for r, t, d in rows], None
    )


def instant_url(run: str, rank: int, ts_ns: int) -> str:
    """A moment on a rank (a memory peak): the timeline opens on the millisecond around it."""
    return timeline_url(run, [int(rank)], [(int(rank), int(ts_ns), int(ts_ns))])


def evidence_url(run: str, evidence: Mapping[str, Any]) -> str | None:
    """The timeline view of one row of an advisor finding's evidence, when it names a rank and a
    time (a range, a call, a moment) or a rank and a step; None when it names neither."""
    rank = evidence.get("rank")
    if is_missing(rank):
        return None
    r = int(rank)
    start, end = evidence.get("start_ns"), evidence.get("end_ns")
    ts, dur = evidence.get("ts_ns"), evidence.get("dur_ns")
    if not is_missing(start) and not is_missing(end):
        return timeline_url(run, [r], [(r, int(start), int(end))])
    if not is_missing(ts):
        return call_url(run, r, int(ts), None if is_missing(dur) else int(dur))
    if not is_missing(evidence.get("step")):
        return timeline_url(run, [r], step=int(evidence["step"]))
    return None


def operator_url(run: str, source: str, name: str) -> str:
    """An operator (``source``: operators) or kernel (kernels) by name on the Operators page,
    drilled into across ranks."""
    return "/operators" + query_string({"run": run, "source": source, "group": "name", "op": name})


def layout_url(run: str, rank: int) -> str:
    """A rank on the Cluster page's layout grid (its cell marked)."""
    return "/cluster" + query_string({"run": run, "rank": int(rank)})


def compare_url(base: str, new: str, base_step: int | None = None, new_step: int | None = None) -> str:
    """Two runs side by side on the Compare page (the steps compared: None, aligned by number)."""
    return "/compare" + query_string({"base": base, "new": new, "base_step": base_step, "new_step": new_step})
