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


STRAGGLER_FIELDS = (
    "rank",
    "group_name",
    "cause",
    "cause_text",
    "top_ops",
    "median_gain_ns",
    "threshold_ns",
    "whatif_gain_ns",
    "gain_share",
    "late_samples",
    "samples",
    "slow_rank_votes",
    "verdict",
)
ARRIVAL_FIELDS = ("rank", "ts_ns", "entry_ns", "lateness_ns", "untraced_ns", "is_last", "margin_ns")


def _straggler_verdict(st: pd.DataFrame, named: pd.DataFrame) -> str:
    """One sentence: who holds the others back and why, or why nobody is named (the Overview's card)."""
    if st.empty:
        return "not judged: no collective was matched across two or more of the run's profiled ranks"
    if named.empty:
        judged = st[~st["verdict"].astype(str).str.startswith("not judged")]
        if judged.empty:
            return str(st["verdict"].iloc[0])
        ratio = judged["median_gain_ns"] / judged["threshold_ns"].clip(lower=1)
        w = judged.loc[ratio.idxmax()]
        return (
            "no rank holds the others back: every rank's lateness at the collectives is within the noise (the "
            f"largest, rank {int(w['rank'])}: a median {int(w['median_gain_ns']) / 1e6:.3f} ms per step against a "
            f"threshold of {int(w['threshold_ns']) / 1e6:.3f} ms)"
        )
    parts = []
    for r in named.to_dict("records"):
        ops = ", ".join(f"{t['name']} +{int(t['excess_ns']) / 1e6:.3f} ms" for t in (r["top_ops"] or [])[:3])
        share = "" if is_missing(r["gain_share"]) else f" ({float(r['gain_share']):.1%} of the profiled step time)"
        parts.append(
            f"rank {int(r['rank'])} is the straggler: it arrives last at the collectives of group {r['group_name']} "
            f"by a median {int(r['median_gain_ns']) / 1e6:.3f} ms per step (threshold "
            f"{int(r['threshold_ns']) / 1e6:.3f} ms); before them its extra time went to "
            f"{r['cause_text'] or 'nothing that stands out'}" + (f" ({ops})" if ops else "") + "; at its peers' pace "
            f"the profiled steps would be {int(r['whatif_gain_ns']) / 1e6:.3f} ms shorter{share}; msprof-analyze's "
            f"vote: {int(r['slow_rank_votes'])} collective(s)"
        )
    return "; ".join(parts)


def stragglers(s: Settings, run: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Who holds the others back, from the arrival order at the collectives (``analyses.stragglers``:
    the verdict per rank with its cause, operators, lateness figures, what-if gain and msprof-analyze's
    vote beside it); as evidence the late collectives of the named rank(s) (``blame_chains``: who
    arrived last, by how much, the cause with its excess over the peers per cause, the interval since
    the group's previous collective on every member, the chain of ranks waited for), each with every
    member's arrival (``arrivals``) and a timeline link highlighting the intervals; and the step that
    each rank made longer (``critical_steps``). With nobody named, the latest late collectives."""
    run = resolve_run(s.store, run)
    n = s.bound(limit)
    st = ANALYSES["stragglers"].compute(s.store, run)
    chains = ANALYSES["blame_chains"].compute(s.store, run)
    crit = ANALYSES["critical_steps"].compute(s.store, run)
    arr = ANALYSES["arrivals"].compute(s.store, run)
    named = st[st["straggler"].astype(bool)] if not st.empty else st
    names = [int(r) for r in named["rank"]]
    blamed = chains[chains["last_rank"].isin(names)] if names else chains
    blamed = blamed.head(MAX_EVIDENCE)
    members = arr[arr["instance"].isin(list(blamed["instance"]))]
    evidence, pairs = [], []
    for rec in json_records(blamed):
        mem = members[members["instance"] == rec["instance"]].sort_values("rank")
        rec["members"] = json_records(mem[list(ARRIVAL_FIELDS)])
        rec["interval"] = {"rank": rec["last_rank"], "start_ns": rec["start_ns"], "end_ns": rec["end_ns"]}
        evidence.append(rec)
        hl = [(int(r), int(a), int(b)) for r, a, b in rec["highlights"]]
        pairs.append(
            (
                f"{rec['op_type']} of group {rec['group_name']} (step {rec['step']}): rank {rec['last_rank']} "
                f"{int(rec['margin_ns']) / 1e6:.3f} ms late",
                links.timeline_url(run, sorted({r for r, _, _ in hl}), hl),
            )
        )
    crit_rows = json_records(crit.head(n))
    for c in crit_rows[:MAX_EVIDENCE]:
        if c.get("critical_rank") is not None:
            pairs.append(
                (
                    f"step {c['step']} on rank {c['critical_rank']} (its critical rank)",
                    links.timeline_url(run, [int(c["critical_rank"])], step=int(c["step"])),
                )
            )
    pairs += [(f"rank {r} on the Cluster page", links.layout_url(run, r)) for r in names]
    return {
        "run": run,
        "row": ANALYSES["stragglers"].doc,
        **_rows(st, n),
        "verdict": _straggler_verdict(st, named),
        "stragglers": [{k: json_ready(r[k]) for k in STRAGGLER_FIELDS} for r in named.to_dict("records")],
        "evidence": evidence,
        "evidence_row": ANALYSES["blame_chains"].doc
        + " With members: every member's arrival (arrivals; entry_ns on the reference clock), and interval: "
        "the window on the late rank's own clock to look into with timeline_window.",
        "evidence_total": int(len(chains[chains["last_rank"].isin(names)]) if names else len(chains)),
        "critical_steps": crit_rows,
        "critical_steps_row": ANALYSES["critical_steps"].doc,
        "links": s.links(*pairs),
    }


# ---------------------------------------------------------------------------------------------
# two runs: diff and check
# ---------------------------------------------------------------------------------------------

DIFF_TABLES = ("findings", "breakdown", "operators", "communication", "memory", "stragglers")


def _cut_diff_table(name: str, rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of a table of `analyze diff --json`; of the operators, the first ``n``
    of each (kind, grouping): they come sorted by kind and grouping, the most changed first."""
    if name != "operators":
        return rows[:n]
    seen: dict[tuple[Any, Any], int] = {}
    out = []
    for r in rows:
        k = (r.get("kind"), r.get("grouping"))
        seen[k] = seen.get(k, 0) + 1
        if seen[k] <= n:
            out.append(r)
    return out


def diff(
    s: Settings,
    base: str,
    new: str,
    base_step: int | None = None,
    new_step: int | None = None,
    ranks: Sequence[int] | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """`analyze diff BASE NEW --json` (``analyses.run_diff``, ``compare_report.diff_json``): the
    verdict, how the runs were paired (steps, ranks), and its tables (findings, step breakdown,
    operators and kernels, communication, memory, stragglers), each cut to ``limit`` rows (the
    operators to ``limit`` per kind and grouping, the most changed first; ``total_rows`` and
    ``truncated`` per table). Evidence: the operators and kernels that changed most, each with the
    rank and step where it changed most in both runs, linked to both timelines; the Compare page."""
    from analyzer.analyses.compare_report import diff_json
    from analyzer.analyses.diff import run_diff
    from analyzer.store import resolve_ref

    n = s.bound(limit)
    s.store.require()
    b, nw = resolve_ref(s.store, base), resolve_ref(s.store, new)
    d = run_diff(s.store, b, nw, base_step, new_step, tuple(_ranks(ranks)) if ranks else None)
    out = json_ready(diff_json(d))
    totals = {k: len(out[k]) for k in DIFF_TABLES}
    for k in DIFF_TABLES:
        out[k] = _cut_diff_table(k, out[k], n)
    out["total_rows"] = totals
    out["truncated"] = [k for k in DIFF_TABLES if len(out[k]) < totals[k]]
    ops = d.operators[(d.operators["grouping"] == "name") & (d.operators["status"] != "same")]
    ops = ops.assign(_abs=ops["delta_ns"].abs()).sort_values("_abs", ascending=False).head(MAX_EVIDENCE)
    evidence = json_records(ops.drop(columns="_abs"))
    one_step = (d.pairing.base_steps[0], d.pairing.new_steps[0]) if d.pairing.step_mode == "chosen" else (None, None)
    pairs = [("these runs on the Compare page", links.compare_url(d.pairing.base, d.pairing.new, *one_step))]
    for e in evidence:
        for side, run in (("base", d.pairing.base), ("new", d.pairing.new)):
            rank, step = e.get(f"{side}_rank"), e.get(f"{side}_step")
            if rank is not None and step is not None:
                label = f"{e['kind']} {e['name']} in {side} (rank {rank}, step {step})"
                pairs.append((label, links.timeline_url(run, [int(rank)], step=int(step))))
    out["evidence"] = evidence
    out["evidence_row"] = (
        "one operator or kernel by name whose time per rank and step changed most (times ns), with the rank and "
        "step where it changed most in each run"
    )
    out["links"] = s.links(*pairs)
    return out


def check(
    s: Settings,
    run: str,
    against: str,
    rules: Sequence[str],
    base_step: int | None = None,
    new_step: int | None = None,
    ranks: Sequence[int] | None = None,
    noise_test: bool = True,
) -> dict[str, Any]:
    """`analyze check RUN --against BASELINE --fail-if RULE... --json` (``analyses.rules.check``):
    passed or not, each rule with the base and new values, the change, the noise test and an
    explanation (the evidence rows), and the diff's verdict when a rule is broken; links to the
    Compare page and, for op:/kernel: rules, to the operator in both runs."""
    from analyzer.analyses.compare_report import check_json
    from analyzer.analyses.rules import check as run_check
    from analyzer.analyses.rules import parse_rule

    if not rules:
        raise AgentError('give at least one rule, e.g. "step_time > +5%"')
    parsed = [parse_rule(r) for r in rules]
    c = run_check(s.store, run, against, parsed, base_step, new_step, _ranks(ranks), noise_test=noise_test)
    out = json_ready(check_json(c.pairing, c.results, c.verdict))
    p = c.pairing
    one_step = (p.base_steps[0], p.new_steps[0]) if p.step_mode == "chosen" else (None, None)
    pairs = [("these runs on the Compare page", links.compare_url(p.base, p.new, *one_step))]
    for r in parsed:
        if r.metric.kind in ("op", "kernel") and "*" not in r.metric.name:  # a name, not a pattern
            source = "operators" if r.metric.kind == "op" else "kernels"
            for run_name in (p.base, p.new):
                pairs.append((f"{r.metric.text} in {run_name}", links.operator_url(run_name, source, r.metric.name)))
    out["row"] = "one rule: the base and new values, the change, the noise test, failed or not"
    out["links"] = s.links(*pairs)
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


TOOLS = {
    f.__name__: f
    for f in (
        list_runs,
        rank_summary,
        analysis,
        stragglers,
        diff,
        check,
        top_operators,
        communication,
        memory_peaks,
        advice,
        timeline_window,
        sql,
    )
}
"""The tools by name (what a worker process answers: ``agent.worker``)."""
