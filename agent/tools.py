"""The questions an agent asks of the store, as plain functions: ``(settings, ...) -> JSON data``.

Each is a thin shell over a library function the CLI or the web app already answers with (named in
its doc); this module adds only the bounds, the evidence and the links. Every answer is a dict with
the run it is about, its ``rows`` (at most ``limit``, never more than ``Settings.max_rows``) with
``total_rows`` and ``truncated``, what a row is (``row``), and ``links``: deep links into the web
app (``webapp.links``' forms) when ``Settings.url`` names a running ``analyze serve``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analyzer.analyses import ANALYSES
from analyzer.format import is_missing, json_ready, json_records
from analyzer.store import SHARED_LIMITS, Limits, Store, resolve_run
from webapp import data, links
from webapp.params import format_ranks, query_string
from webapp.reader import reader

DEFAULT_ROWS = 50  # rows an answer carries unless asked for more
MAX_ROWS = 1000  # rows an answer carries at most
MAX_EVIDENCE = 20  # evidence rows kept per advisor finding / convicting collective
MAX_WINDOW_SLICES = 200_000  # slices of a time window looked at (as the timeline's measured range)


class AgentError(Exception):
    """A question the store cannot answer as asked (bad arguments); the message says why."""


@dataclass(frozen=True)
class Settings:
    """What every tool of a server shares: the store (fixed at start), the web app's URL for
    links (None: no links), the row and SQL limits."""

    store: Store
    url: str | None = None
    max_rows: int = MAX_ROWS
    sql_limits: Limits = field(default_factory=lambda: SHARED_LIMITS)

    def link(self, path: str | None) -> str | None:
        if path is None or not self.url:
            return None
        return self.url.rstrip("/") + path

    def links(self, *pairs: tuple[str, str | None]) -> list[dict[str, str]]:
        """``[{"label", "url"}]`` of the pairs with a path, when a URL is configured."""
        out = []
        for label, path in pairs:
            url = self.link(path)
            if url is not None:
                out.append({"label": label, "url": url})
        return out

    def bound(self, limit: int | None) -> int:
        n = DEFAULT_ROWS if limit is None else int(limit)
        if n < 1:
            raise AgentError(f"limit must be at least 1 (got {n})")
        return min(n, self.max_rows)


def _rows(df: pd.DataFrame, limit: int) -> dict[str, Any]:
    return {"rows": json_records(df.head(limit)), "total_rows": int(len(df)), "truncated": bool(len(df) > limit)}


def _ranks(ranks: Sequence[int] | None) -> list[int] | None:
    return None if ranks is None else sorted({int(r) for r in ranks})


def _page(path: str, run: str, ranks: Sequence[int] | None = None, **params: Any) -> str:
    return path + query_string({"run": run, "ranks": format_ranks(ranks) if ranks else None, **params})


# ---------------------------------------------------------------------------------------------
# runs and ranks
# ---------------------------------------------------------------------------------------------


def list_runs(s: Settings) -> dict[str, Any]:
    """`analyze runs --json` (``analyzer.summary.runs_json``): every run with its ranks, steps,
    formats, status and file problems."""
    from analyzer.summary import runs_and_problems, runs_json

    runs = runs_json(*runs_and_problems(s.store))
    return {
        "row": "one run of the store, most recently ingested first",
        "rows": runs,
        "total_rows": len(runs),
        "truncated": False,
        "links": s.links(*((f"overview of {r['run']}", _page("/", r["run"])) for r in runs[: s.max_rows])),
    }


def rank_summary(s: Settings, run: str | None = None, top: int = 3) -> dict[str, Any]:
    """`analyze summary --json` (``analyzer.summary.rank_summary``) per rank: steps and step time,
    compute, communication, memory peak, top operators and kernels; and what each rank recorded
    (``webapp.data.collections``: producer, level, status, capabilities and the ``missing`` reasons)."""
    from analyzer.summary import rank_summary as summarize

    if not 1 <= int(top) <= 20:
        raise AgentError(f"top must be in 1..20 (got {top})")
    digest = summarize(s.store, run, top=int(top))
    run = digest["run"]
    with reader(s.store, run) as rd:
        colls = data.collections(rd, run)
    colls = colls.drop(columns=["root_path"])  # a path of the host that ingested it: not evidence
    ranks = [int(r["rank"]) for r in digest["ranks"]]
    return {
        "run": run,
        "row": "one rank: what it recorded and its digest (times ns, sizes bytes)",
        "rows": digest["ranks"][: s.max_rows],
        "total_rows": len(digest["ranks"]),
        "truncated": len(digest["ranks"]) > s.max_rows,
        "collections": json_records(colls.head(s.max_rows)),
        "links": s.links(
            ("overview", _page("/", run)),
            *((f"timeline of rank {r}", links.timeline_url(run, [r])) for r in ranks[:MAX_EVIDENCE]),
        ),
    }


# ---------------------------------------------------------------------------------------------
# the analyses registry
# ---------------------------------------------------------------------------------------------


def _analysis(s: Settings, name: str, run: str) -> pd.DataFrame:
    if name not in ANALYSES:
        raise AgentError(f"no analysis {name!r}; there are: {', '.join(ANALYSES)}")
    return ANALYSES[name].compute(s.store, run)


def analysis(
    s: Settings, name: str, run: str | None = None, ranks: Sequence[int] | None = None, limit: int | None = None
) -> dict[str, Any]:
    """One analysis of ``ANALYSES`` (a section of `analyze report --json`, the table
    ``analysis.<name>`` of `analyze query`), its rows of ``ranks`` when it has a rank column;
    a link per row that names a rank and a time or step."""
    run = resolve_run(s.store, run)
    n = s.bound(limit)
    df = _analysis(s, name, run)
    if ranks is not None and "rank" in df.columns:
        df = df[df["rank"].isin(_ranks(ranks))]
    out = {"run": run, "analysis": name, "row": ANALYSES[name].doc, **_rows(df, n)}
    row_links = [(f"row {i}", links.evidence_url(run, r)) for i, r in enumerate(out["rows"][:MAX_EVIDENCE])]
    out["links"] = s.links(*row_links)
    return out


# ---------------------------------------------------------------------------------------------
# stragglers
# ---------------------------------------------------------------------------------------------


def _members(s: Settings, run: str, instances: Sequence[str]) -> pd.DataFrame:
    """Every member rank of the collective ``instances`` (``analyses.communication_summary``) with
    its entry on the reference clock (``clock_offsets``) and how late it came."""
    comm = ANALYSES["communication"].compute(s.store, run)
    m = comm[comm["instance"].isin(list(instances))][["instance", "rank", "ts_ns", "dur_ns", "wait_ns"]].copy()
    offsets = ANALYSES["clock_offsets"].compute(s.store, run)
    off = dict(zip(offsets["rank"].astype(int), offsets["offset_ns"])) if not offsets.empty else {}
    m["entry_aligned_ns"] = [
        int(t) - int(0 if is_missing(off.get(int(r))) else off[int(r)]) for r, t in zip(m["rank"], m["ts_ns"])
    ]
    m["late_ns"] = m["entry_aligned_ns"] - m.groupby("instance")["entry_aligned_ns"].transform("min")
    return m.sort_values(["instance", "rank"]).reset_index(drop=True)


def _previous_comm_end(s: Settings, run: str, rank: int, ts_ns: int) -> int | None:
    comm = ANALYSES["communication"].compute(s.store, run)
    mine = comm[(comm["rank"] == rank) & (pd.to_numeric(comm["ts_ns"]) < ts_ns)]
    if mine.empty:
        return None
    ends = pd.to_numeric(mine["ts_ns"]) + pd.to_numeric(mine["dur_ns"]).fillna(0)
    return int(min(ends.max(), ts_ns))


def stragglers(s: Settings, run: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """The slow-rank vote (``analyses.slow_ranks``, msprof-analyze's rule) and, for the most voted
    rank, the collectives that convict it (``slow_rank_evidence``) with every member's entry on the
    reference clock, its elapsed and wait time and how late it came; and the window on the slow
    rank from its previous communication to its late entry, to look into with ``timeline_window``."""
    run = resolve_run(s.store, run)
    n = s.bound(limit)
    votes = ANALYSES["slow_ranks"].compute(s.store, run)
    evidence = ANALYSES["slow_rank_evidence"].compute(s.store, run)
    out: dict[str, Any] = {
        "run": run,
        "row": ANALYSES["slow_ranks"].doc,
        **_rows(votes, n),
        "straggler": None,
        "evidence": [],
        "links": [],
    }
    voted = votes[votes["votes"] > 0]
    if voted.empty:
        out["verdict"] = "no rank was voted slow" + (
            " (no collective with at least 4 profiled members to test)" if int(votes["testable"].sum()) == 0 else ""
        )
        return out
    top = int(voted.iloc[0]["rank"])
    mine = evidence[evidence["slow_ranks"].map(lambda xs: top in list(xs))].head(MAX_EVIDENCE)
    members = _members(s, run, list(mine["instance"]))
    ev_rows, link_pairs = [], []
    for rec in json_records(mine):
        mem = members[members["instance"] == rec["instance"]]
        rec["members"] = json_records(mem.drop(columns=["instance"]))
        me = mem[mem["rank"] == top]
        if not me.empty:
            entry = int(me["ts_ns"].iloc[0])
            prev = _previous_comm_end(s, run, top, entry)
            rec["before_entry"] = {"rank": top, "start_ns": prev, "end_ns": entry}
            rec["late_ns"] = int(me["late_ns"].iloc[0])
        ev_rows.append(rec)
        members_t = list(zip(mem["rank"].astype(int), mem["ts_ns"].astype("int64"), mem["dur_ns"]))
        link_pairs.append((f"collective {rec['name']} (step {rec['step']})", links.collective_url(run, members_t)))
    row = voted.iloc[0]
    late = [r["late_ns"] for r in ev_rows if r.get("late_ns") is not None]
    out["straggler"] = {
        "rank": top,
        "votes": int(row["votes"]),
        "instances": int(row["instances"]),
        "vote_ratio": json_ready(row["vote_ratio"]),
        "median_late_ns": int(pd.Series(late).median()) if late else None,
    }
    out["verdict"] = (
        f"rank {top} is the straggler: {int(row['votes'])} of the {int(row['instances'])} collectives it took part "
        "in convict it (it waited least: the others waited for it)"
        + (
            f"; it entered them a median {int(pd.Series(late).median()) / 1e6:.3f} ms after the first member"
            if late
            else ""
        )
    )
    out["evidence"] = ev_rows
    out["links"] = s.links(*link_pairs)
    return out


# ---------------------------------------------------------------------------------------------
# operators, communication, memory, advice
# ---------------------------------------------------------------------------------------------


def top_operators(
    s: Settings,
    run: str | None = None,
    source: str = "operators",
    ranks: Sequence[int] | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The Operators page's grid by name over the ranks (``webapp.data.operator_stats``): count,
    total, self, avg, min, max, the per-rank totals' spread and the rank with the most; the
    slowest call with a link to it on the timeline."""
    if source not in data.SOURCES:
        raise AgentError(f"source must be one of {', '.join(data.SOURCES)} (got {source!r})")
    n = s.bound(limit)
    with reader(s.store, run) as rd:
        run = data.resolve_run(rd, run)
        rk = data.check_ranks(rd, run, _ranks(ranks)) if ranks is not None else None
        df, total = data.operator_stats(rd, run, source, "name", rk, True, n)
    df = df.drop(columns=["shape"])
    out = {
        "run": run,
        "row": f"one {source[:-1]} name over the ranks (times ns; spread_pct = (max - min) / mean of per-rank totals)",
        "rows": json_records(df),
        "total_rows": int(total),
        "truncated": bool(total > len(df)),
    }
    pairs = [("operators page", _page("/operators", run, rk, source=source, group="name"))]
    for r in out["rows"][:MAX_EVIDENCE]:
        if r.get("slowest_rank") is not None and r.get("slowest_ts_ns") is not None:
            pairs.append(
                (f"slowest {r['key']}", links.call_url(run, r["slowest_rank"], r["slowest_ts_ns"], r.get("max_ns")))
            )
    out["links"] = s.links(*pairs)
    return out


def communication(s: Settings, run: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Communication per group (``analyses.comm_group_totals``) and the slowest collective
    instances (``webapp.data.collectives``: ``analyses.collective_instances`` with members), each
    with a link showing it on every member rank."""
    n = s.bound(limit)
    with reader(s.store, run) as rd:
        run = data.resolve_run(rd, run)
        groups = ANALYSES["communication_groups"].compute(s.store, run)
        inst, total = data.collectives(rd, run, None, n)
    pairs = [("communication page", _page("/communication", run))]
    pairs += [
        (f"collective {r.instance}", links.collective_url(run, r.members))
        for r in inst.head(MAX_EVIDENCE).itertuples(index=False)
    ]
    inst = inst.drop(columns=["members"])
    return {
        "run": run,
        "row": ANALYSES["communication_groups"].doc,
        **_rows(groups, n),
        "collectives": json_records(inst),
        "collectives_row": ANALYSES["collective_instances"].doc + " The slowest first.",
        "collectives_total": int(total),
        "links": s.links(*pairs),
    }


def memory_peaks(
    s: Settings, run: str | None = None, ranks: Sequence[int] | None = None, component: str | None = None
) -> dict[str, Any]:
    """The Memory page's peaks (``webapp.data.memory_peaks``) per (rank, device) of a memory
    counter (``component``; default: the one with the most samples, ``webapp.data.memory_components``)."""
    with reader(s.store, run) as rd:
        run = data.resolve_run(rd, run)
        rk = data.check_ranks(rd, run, _ranks(ranks)) if ranks is not None else None
        comps = data.memory_components(rd, run, rk)
        names = [str(c) for c in comps["component"].drop_duplicates()]
        if component is None:
            component = names[0] if names else None
        elif component not in names:
            raise AgentError(f"run {run!r} has no memory component {component!r}; it has: {', '.join(names) or 'none'}")
        peaks = data.memory_peaks(rd, run, rk, component) if component is not None else pd.DataFrame()
    out = {
        "run": run,
        "component": component,
        "components": json_records(comps),
        "row": "one (rank, device): peak allocated / reserved / active bytes and when (rank clock ns)",
        **_rows(peaks, s.max_rows),
    }
    pairs = [("memory page", _page("/memory", run, rk, component=component))]
    for r in out["rows"][:MAX_EVIDENCE]:
        if r.get("peak_allocated_ns") is not None:
            pairs.append((f"rank {r['rank']} at its peak", links.instant_url(run, r["rank"], r["peak_allocated_ns"])))
    out["links"] = s.links(*pairs)
    return out


def advice(s: Settings, run: str | None = None) -> dict[str, Any]:
    """The advisor's findings (``analyses.advise``) with their evidence rows (at most
    ``MAX_EVIDENCE`` per finding, ``evidence_total`` says how many) and a link per evidence row."""
    run = resolve_run(s.store, run)
    df = ANALYSES["advice"].compute(s.store, run)
    rows, pairs = [], []
    for rec in json_records(df.head(s.max_rows)):
        ev = rec.get("evidence") or []
        rec["evidence_total"] = len(ev)
        rec["evidence"] = ev[:MAX_EVIDENCE]
        for e in rec["evidence"]:
            pairs.append((rec["title"], links.evidence_url(run, e) if isinstance(e, dict) else None))
        rows.append(rec)
    return {
        "run": run,
        "row": ANALYSES["advice"].doc,
        "rows": rows,
        "total_rows": len(df),
        "truncated": len(df) > s.max_rows,
        "links": s.links(("overview", _page("/", run)), *pairs),
    }


# ---------------------------------------------------------------------------------------------
# a time window of the timeline
# ---------------------------------------------------------------------------------------------


def timeline_window(
    s: Settings,
    run: str | None,
    ranks: Sequence[int],
    start_ns: int,
    end_ns: int,
    limit: int | None = None,
) -> dict[str, Any]:
    """What the timeline shows on ``ranks`` in [start_ns, end_ns) (each rank's own clock, as the
    stored ``ts_ns``): per rank the time busy in any slice (the step markers and the profiler's own
    spans aside) and the idle rest, the slices per
    name (count, time inside the window; the timeline's measured range, ``timeline_api.range_summary``)
    and the longest slices with their lane."""
    from webapp import timeline_api

    if end_ns <= start_ns:
        raise AgentError(f"end_ns ({end_ns}) must be after start_ns ({start_ns})")
    if not ranks or len(ranks) > 64:
        raise AgentError("name 1 to 64 ranks")
    n = s.bound(limit)
    with reader(s.store, run) as rd:
        run = data.resolve_run(rd, run)
        rk = data.check_ranks(rd, run, _ranks(ranks))
        steps = data.step_windows(rd, run, rk)
    step_spans = {(int(r), int(a), int(b)) for r, a, b in zip(steps["rank"], steps["start_ns"], steps["end_ns"])}
    ctx = timeline_api.context(s.store, run)
    src = timeline_api.tile_source(s.store, ctx, rk)
    rows = ctx.rows[ctx.rows["rank"].isin(rk)]
    lane_of = dict(zip(rows["key"], zip(rows["rank"], rows["lane_group"], rows["process"], rows["lane"])))
    per_rank, longest = [], []
    for r in rk:
        keys = [k for k in rows["key"][rows["rank"] == r] if k in src.lanes]
        if not keys:
            per_rank.append({"rank": r, "slices": 0, "busy_ns": 0, "idle_ns": int(end_ns - start_ns), "names": []})
            continue
        summ = timeline_api.range_summary(
            s.store, ctx, {"lanes": keys, "a": int(start_ns) - ctx.origin, "b": int(end_ns) - ctx.origin}
        )
        got = src.exact(keys, int(start_ns), int(end_ns), MAX_WINDOW_SLICES)
        spans = sorted(  # what the rank did: not the step markers, not the profiler's own spans
            (max(int(a), start_ns), min(int(a) + int(d), end_ns))
            for key, sl in got.items()
            if lane_of[key][1] != "other"
            for a, d in zip(sl.start, sl.dur)
            if not _is_step(step_spans, r, int(a), int(d))
        )
        covered, cur_a, cur_b = 0, None, None
        for a, b in spans:
            if cur_b is None or a > cur_b:
                covered += 0 if cur_b is None else cur_b - cur_a
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        covered += 0 if cur_b is None else cur_b - cur_a
        per_rank.append(
            {
                "rank": r,
                "slices": summ["slices"],
                "busy_ns": int(covered),
                "idle_ns": int(end_ns - start_ns - covered),
                "names": summ["names"],
                "cut": summ["cut"],
            }
        )
        for key, sl in got.items():
            _, group, process, lane = lane_of[key]
            for name, a, d, depth in zip(sl.names, sl.start, sl.dur, sl.depth):
                longest.append(
                    {
                        "rank": r,
                        "lane_group": group,
                        "process": process,
                        "lane": lane,
                        "name": name,
                        "ts_ns": int(a),
                        "dur_ns": int(d),
                        "depth": int(depth),
                    }
                )
    longest.sort(key=lambda x: (-x["dur_ns"], x["rank"], x["ts_ns"]))
    return {
        "run": ctx.run,
        "window": {"start_ns": int(start_ns), "end_ns": int(end_ns), "ns": int(end_ns - start_ns)},
        "row": "one slice overlapping the window, the longest first (its rank's clock, ns)",
        "ranks": per_rank,
        "rows": longest[:n],
        "total_rows": len(longest),
        "truncated": len(longest) > n,
        "links": s.links(
            (
                "this window on the timeline",
                links.timeline_url(ctx.run, rk, [(r, int(start_ns), int(end_ns)) for r in rk]),
            )
        ),
    }


def _is_step(steps: set[tuple[int, int, int]], rank: int, ts: int, dur: int) -> bool:
    """The slice is a step marker (ProfilerStep#N...): it spans one of the rank's steps, to 1 us."""
    return any(r == rank and abs(a - ts) <= 1000 and abs(b - ts - dur) <= 1000 for r, a, b in steps)


# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------


def sql(s: Settings, query: str, run: str | None = None) -> dict[str, Any]:
    """`analyze query` (``analyzer.analyses.views.query``): one read-only statement over the
    store's tables and the ``analysis.*`` tables under DuckDB's lock-down, with a shared server's
    limits (``Settings.sql_limits``: time, memory, threads, rows)."""
    from analyzer.analyses.views import query as run_query

    lim = s.sql_limits
    rows = min(lim.rows or s.max_rows, s.max_rows)
    res = run_query(
        s.store, query, run, limits=Limits(seconds=lim.seconds, rows=rows, memory=lim.memory, threads=lim.threads)
    )
    return {
        "run": run,
        "columns": [str(c) for c in res.frame.columns],
        "rows": json_records(res.frame),
        "total_rows": int(len(res.frame)),
        "truncated": bool(res.truncated),
        "seconds": round(res.seconds, 3),
        "limits": {"seconds": lim.seconds, "rows": rows, "memory": lim.memory, "threads": lim.threads},
    }
