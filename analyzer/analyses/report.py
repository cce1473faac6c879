"""``analyze report``: every cluster analysis of one run, as tables or one JSON document.

The JSON holds every row of every section; the text report prints summaries and the first rows of
the long tables (evidence, per-op communication, matrix, layout grid) with a pointer to ``--json``,
and says in a sentence when a section has nothing to show and why.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..breakdown.rows import PARTS
from ..format import is_missing, json_ready
from ..store import Store, resolve_run
from ..terminal import lit
from . import ANALYSES
from .slow_rank import MIN_TESTABLE, slow_rank_analysis

SECTIONS = tuple(ANALYSES)  # the report's sections: every analysis, in the registry's order
MAX_ROWS = 10  # rows of a long table printed in the text report


def build_report(store: Store, run: str | None = None) -> dict[str, Any]:
    """{"run": name, <analysis>: DataFrame, ...} for every analysis of ``ANALYSES`` (plus
    ``slow_rank_skipped_groups`` after ``slow_rank_evidence``)."""
    with report_sections(store, run) as sections:
        return {k: sections[k] for k in sections}


@contextlib.contextmanager
def report_sections(store: Store, run: str | None = None) -> Iterator[Mapping[str, Any]]:
    """The sections of ``build_report``, each computed when first read (then kept), while the run's
    fact views are held: the text report computes only what it prints (which sections it prints
    depends on the run: a run without a layout prints no layout grid)."""
    run = resolve_run(store, run)
    # the run's fact views bound once, held while the analyses run: each analysis' read connection,
    # whatever tables it names, reads this set (binding a set reads every file's footer)
    with store.read_connection(run=run):
        yield _Sections(store, run)


class _Sections(Mapping[str, Any]):
    """The report of ``run`` as a mapping whose values are computed on first read (``report_sections``)."""

    def __init__(self, store: Store, run: str) -> None:
        self._store, self._run = store, run
        self._got: dict[str, Any] = {"run": run}
        self._keys = ["run", "unusable_rows"]
        for name in ANALYSES:
            self._keys.append(name)
            if name == "slow_rank_evidence":
                self._keys.append("slow_rank_skipped_groups")

    def __getitem__(self, key: str) -> Any:
        if key not in self._got:
            store, run = self._store, self._run
            if key == "unusable_rows":
                # rows whose times cannot be placed (NULL, a negative duration, an overflow) are left
                # out of every analysis (Store.read_connection); the report says how many
                self._got[key] = store.unusable_rows(run)
            elif key == "slow_rank_skipped_groups":
                self._got[key] = slow_rank_analysis(store, run)[2]
            elif key in ANALYSES:
                self._got[key] = ANALYSES[key].compute(store, run)
            else:
                raise KeyError(key)
        return self._got[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def report_json(report: Mapping[str, Any]) -> str:
    out: dict[str, Any] = {}
    for k, v in report.items():
        if isinstance(v, pd.DataFrame):
            out[k] = [{c: json_ready(x) for c, x in row.items()} for row in v.to_dict("records")]
        else:
            out[k] = json_ready(v)
    return json.dumps(out, indent=2, default=str)


def _ms(v: Any) -> str:
    if is_missing(v):
        return "-"
    return f"{float(v) / 1e6:.3f}"


def _num(v: Any) -> str:
    if is_missing(v):
        return "-"
    return str(int(v)) if float(v) == int(float(v)) else f"{float(v):.3f}"


def _gbps(v: Any) -> str:
    if is_missing(v):
        return "-"
    return f"{float(v) / 1e9:.4g}"


def _size(v: Any) -> str:
    if is_missing(v):
        return "-"
    b = float(v)
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:.3f} {unit}"
    return f"{int(b)} B"


def _table(console: Any, title: str, columns: list[str], rows: list[list[str]], total: int | None = None) -> None:
    """A rich table of at most MAX_ROWS rows, then "… N more, see --json" when rows were left out."""
    from rich.table import Table

    t = Table(title=lit(title))
    for c in columns:
        t.add_column(lit(c))
    for r in rows[:MAX_ROWS]:  # cells hold names from traces: printed literally
        t.add_row(*map(lit, r))
    console.print(t)
    total = len(rows) if total is None else total
    if total > MAX_ROWS:
        console.print(f"… {total - MAX_ROWS} more, see --json")


def _say(console: Any, text: str) -> None:
    console.print(lit(text))


def print_report(report: Mapping[str, Any], console: Any) -> None:
    """Render the report as rich tables (times in ms, sizes in B/KiB/MiB/GiB, bandwidth in GB/s = 10⁹ B/s)."""
    console.print(f"run [bold]{lit(report['run'])}[/]")
    left = report.get("unusable_rows") or {}
    if left:
        console.print(
            "[yellow]warning:[/] left out of every analysis, their times unusable (missing, negative, "
            "after the year 2100 or overflowed; stored by an earlier version): "
            + lit(", ".join(f"{n} {t} row(s)" for t, n in left.items()))
        )
    _print_steps(report, console)
    _print_communication(report, console)
    _print_matching(report, console)
    _print_stragglers(report, console)
    _print_slow_rank(report, console)
    _print_slow_links(report, console)
    _print_layout(report, console)
    _print_pipeline(report, console)
    _print_clocks(report, console)
    _print_advice(report, console)


def _print_steps(report: Mapping[str, Any], console: Any) -> None:
    sb = report["step_breakdown"]
    if sb.empty:
        _say(console, "step breakdown: no steps and no activity recorded in this run")
    else:
        cols = ["step_ns", *PARTS]
        rows = []
        theirs = "producer_communication_ns"
        show_theirs = bool(sb[theirs].notna().any())
        for rank, g in sb.groupby("rank"):
            means = g[cols].astype("float64").mean()
            cells = [_ms(means[c]) for c in cols]
            if show_theirs:  # the producer's own Communication beside ours
                at = cols.index("communication_ns") + 1
                cells.insert(at, _ms(g[theirs].astype("float64").mean()) if g[theirs].notna().any() else "-")
            n_ids = int(g["step"].notna().sum())  # as `summary` counts: steps with an id
            rows.append([str(rank), str(n_ids) if n_ids else "0 (whole trace)", str(g["mode"].iloc[0]), *cells])
        heads = [c.removesuffix("_ns") for c in cols]
        if show_theirs:
            heads.insert(heads.index("communication") + 1, "producer's comm")
        _table(
            console,
            "Step breakdown (ms, mean over steps; msprof-analyze definitions)",
            ["rank", "steps", "mode"] + heads,
            rows,
        )
        for line in _definition_notes(sb):
            _say(console, line)
        for mode, text in (
            (
                "producer",
                "the producer's own rows (step_trace_time.csv / StepTraceTime): their files hold no device task",
            ),
            ("no tasks", "no device task in their files and no producer row: their device columns are unknown"),
        ):
            ranks = sorted({int(r) for r in sb.loc[sb["mode"] == mode, "rank"]})
            if ranks:
                _say(console, f"step breakdown, rank(s) {', '.join(map(str, ranks))}: {text}")
    tb = report.get("temporal_breakdown")
    if tb is None:
        return
    if tb.empty:
        _say(
            console, "temporal breakdown (HTA): no device ranks in this run (HTA's breakdown covers device tasks only)"
        )
        return
    rows = [
        [
            str(r.rank),
            _steps_text(r.steps),
            _ms(r.kernel_ns),
            _ms(r.idle_ns),
            _ms(r.compute_ns),
            _ms(r.non_compute_ns),
            f"{_num(r.idle_pct)} / {_num(r.compute_pct)} / {_num(r.non_compute_pct)}",
        ]
        for r in tb.itertuples()
    ]
    _table(
        console,
        "Temporal breakdown (ms, HTA's definition: all profiled steps but the last)",
        ["rank", "step ids", "kernel", "idle", "compute", "non-compute", "idle / compute / non-compute %"],
        rows,
    )
    left = (
        sorted(set(sb.loc[sb["mode"].isin(["producer", "no tasks"]), "rank"]) - set(tb["rank"])) if not sb.empty else []
    )
    if left:
        _say(
            console, f"temporal breakdown: rank(s) {', '.join(map(str, left))} left out (no device task in their files)"
        )


_DEFINITIONS = {
    "op spans": "Communication = union of the communication op spans (HCCL ops / NCCL kernels)",
    "task union": "Communication = union of the HCCL tasks (the Plane lanes), as the producer's own step rows "
    "define it",
    "host ranges": "Communication = union of the communication calls' ranges on the host (CPU-only rank)",
}


def _definition_notes(sb: pd.DataFrame) -> list[str]:
    """One sentence per communication definition used: its ranks, and how far the producer's own
    Communication is from ours where the producer wrote one."""
    out = []
    for d, g in sb.groupby("communication_definition"):
        if d not in _DEFINITIONS:
            continue
        ranks = sorted({int(r) for r in g["rank"]})
        both = g[g["producer_communication_ns"].notna() & g["communication_ns"].notna()]
        vs = ""
        if not both.empty:
            theirs = both["producer_communication_ns"].astype("float64")
            diff = (both["communication_ns"].astype("float64") - theirs).abs() / theirs.clip(lower=1)
            vs = f"; ours vs the producer's: largest difference {diff.max():.3%}"
        out.append(f"step breakdown, rank(s) {', '.join(map(str, ranks))}, {d}: {_DEFINITIONS[d]}{vs}")
    return out


_NO_LINKS = {
    "kineto": "Kineto collectives have no per-link data",
    "mindspore": "MindSpore writes per-link data (communication_matrix.json) only for Ascend runs at Level1 or above",
    "torch_npu_text": "torch_npu writes communication_matrix.json only at Level1 or above",
    "torch_npu_db": "torch_npu writes the link tables only at Level1 or above",
    "msprof": "msprof writes per-link data only with --analyze and the communication_matrix rule",
}


def _no_links_reason(report: Mapping[str, Any]) -> str:
    """Why a run has no communication matrix, in its producers' terms."""
    rm = report.get("run_metrics")
    producers = list(rm["producers"].iloc[0]) if rm is not None and not rm.empty else []
    said = [_NO_LINKS[k] for k in dict.fromkeys(producers) if k in _NO_LINKS]
    return "; ".join(said or ["the producer recorded no per-link data"]) + (
        "; point-to-point pairs appear when they can be matched"
    )


def _steps_text(steps: Any) -> str:
    lst = list(steps) if steps is not None else []
    if not lst:
        return "-"
    if len(lst) > 2 and lst == list(range(lst[0], lst[-1] + 1)):
        return f"{lst[0]}–{lst[-1]}"
    return ",".join(str(s) for s in lst)


def _coverage_notes(cov: pd.DataFrame) -> list[str]:
    """Sentences for groups of which only some members were profiled."""
    out = []
    for r in cov.itertuples():
        ranks, present = list(r.ranks), list(r.ranks_profiled)
        if len(present) < len(ranks):
            what = (
                "its collectives cannot be compared across ranks (no wait/transit split, no slow-rank vote)"
                if len(present) < 2
                else f"wait/transit and slow-rank votes use the {len(present)} profiled members only"
            )
            out.append(
                f"group {r.group_name}{f' ({r.pg_name})' if isinstance(r.pg_name, str) else ''}: only "
                f"{len(present)} of {len(ranks)} members profiled (rank{'s' if len(present) != 1 else ''} "
                f"{', '.join(map(str, present)) or 'none'}); {what}"
            )
    return out


def _print_communication(report: Mapping[str, Any], console: Any) -> None:
    cg, comm = report["communication_groups"], report["communication"]
    if comm.empty and cg.empty:
        _say(console, "communication: none recorded in this run")
        return
    if not cg.empty:
        rows = [
            [
                str(r.group_name),
                r.pg_name if isinstance(r.pg_name, str) else "-",
                str(list(r.ranks)),
                ",".join(r.op_types),
                str(r.instances),
                _ms(r.elapsed_ns),
                _ms(r.wait_ns),
                _ms(r.transit_ns),
                "-" if r.wait_ratio is None or pd.isna(r.wait_ratio) else f"{r.wait_ratio:.1%}",
                _ms(r.idle_ns),
                "-" if r.idle_ratio is None or pd.isna(r.idle_ratio) else f"{r.idle_ratio:.1%}",
            ]
            for r in cg.itertuples()
        ]
        _table(
            console,
            "Communication groups (ms, summed over ranks)",
            ["group", "role", "ranks", "ops", "instances", "elapsed", "wait", "transit", "wait ratio"]
            + ["idle", "idle %"],
            rows,
        )
        idle = cg[cg["idle_ratio"].notna()]
        if not idle.empty:
            top = idle.sort_values("idle_ratio", ascending=False).iloc[0]
            _say(
                console,
                "communication groups: idle = elapsed − wait − transit (msprof-analyze's Idle Time: inside the op, "
                "neither waiting for a peer nor moving data — synchronisation, gaps between its tasks; "
                f"{'as the producer wrote it' if top['idle_source'] == 'producer' else 'from wait and transit'}); "
                "largest in group "
                f"{top['group_name']}: {top['idle_ratio']:.1%} of its elapsed time",
            )
    cov = report.get("group_coverage")
    for note in _coverage_notes(cov) if cov is not None else []:
        _say(console, note)
    unattributed = int(comm["group_name"].isna().sum()) if not comm.empty else 0
    if unattributed:
        _say(
            console,
            f"{unattributed} communication op(s) have no group (the trace names none and none could be "
            "attributed, e.g. gloo send/recv in ranks with several groups): they are not matched across ranks",
        )
    if not comm.empty:
        c = comm.assign(
            group=comm["group_name"].fillna("-"), kind=np.where(comm["is_p2p"], "p2p:", "") + comm["op_type"]
        )
        agg = (
            c.groupby(["rank", "group", "kind"], dropna=False)
            .agg(
                ops=("dur_ns", "size"),
                elapsed=("dur_ns", "sum"),
                wait=("wait_ns", lambda x: x.sum(min_count=1)),
                transit=("transit_ns", lambda x: x.sum(min_count=1)),
                nbytes=("bytes", lambda x: x.sum(min_count=1)),
            )
            .reset_index()
            .sort_values(["elapsed", "rank"], ascending=[False, True])
        )
        rows = []
        for r in agg.itertuples():
            t = float(r.transit) if r.transit is not None and not pd.isna(r.transit) else float("nan")
            bw = float(r.nbytes) / t * 1e9 if t and not math.isnan(t) and not pd.isna(r.nbytes) else None
            rows.append(
                [
                    str(r.rank),
                    str(r.group),
                    r.kind,
                    str(r.ops),
                    _ms(r.elapsed),
                    _ms(r.wait),
                    _ms(r.transit),
                    _size(r.nbytes),
                    _gbps(bw),
                ]
            )
        _table(
            console,
            f"Communication per rank, group and op (ms; {len(comm)} ops, one row each in --json)",
            ["rank", "group", "op", "ops", "elapsed", "wait", "transit", "bytes", "GB/s"],
            rows,
        )
    bw = report.get("comm_bandwidth")
    if bw is not None and not bw.empty:
        b = bw[bw["transit_ns"].notna() & bw["bytes"].notna()]
        agg = (
            b.groupby(["rank", "transport", "source"], dropna=False)
            .agg(ops=("bytes", "size"), nbytes=("bytes", "sum"), transit=("transit_ns", "sum"))
            .reset_index()
        )
        rows = [
            [
                str(r.rank),
                str(r.transport),
                str(r.ops),
                _size(r.nbytes),
                _ms(r.transit),
                _gbps(float(r.nbytes) / float(r.transit) * 1e9 if r.transit else None),
                str(r.source),
            ]
            for r in agg.itertuples()
        ]
        _table(
            console,
            "Bandwidth per rank and transport (bytes / transit summed over ops)",
            ["rank", "transport", "ops", "bytes", "transit ms", "GB/s", "source"],
            rows,
        )
    mx = report.get("comm_matrix")
    if mx is not None:
        if mx.empty:
            _say(console, f"communication matrix: no links recorded ({_no_links_reason(report)})")
        else:
            m = mx.sort_values("bytes", ascending=False, na_position="last")
            rows = [
                [
                    str(r.group_name),
                    str(r.op_type),
                    _end(r.src_rank, r.src_local),
                    _end(r.dst_rank, r.dst_local),
                    str(r.transport) if isinstance(r.transport, str) else "-",
                    _size(r.bytes),
                    _ms(r.transit_ns),
                    _gbps(r.bandwidth_bytes_per_s),
                ]
                for r in m.itertuples()
            ]
            _table(
                console,
                "Communication matrix (global ranks, summed over steps; largest links first)",
                ["group", "op", "src", "dst", "transport", "bytes", "transit ms", "GB/s"],
                rows,
            )


def _end(global_rank: Any, local: Any) -> str:
    if global_rank is not None and not pd.isna(global_rank):
        return str(int(global_rank))
    if local is not None and not pd.isna(local):
        return f"local {int(local)}"
    return "-"


def _print_matching(report: Mapping[str, Any], console: Any) -> None:
    cm = report.get("collective_matching")
    if cm is None or cm.empty:
        return
    for r in cm.itertuples():
        if isinstance(r.note, str) and r.note:
            group = "ops without a group" if is_missing(r.group_name) else f"group {r.group_name}"
            _say(console, f"matching, {group}: {r.note}")


def _print_stragglers(report: Mapping[str, Any], console: Any) -> None:
    st = report.get("stragglers")
    if st is None:
        return
    if st.empty:
        cm = report.get("collective_matching")
        why = "no collective was matched across two or more profiled ranks"
        if cm is not None and not cm.empty and cm["note"].notna().any():
            why += " (see the matching notes above)"
        _say(console, f"straggler: not judged, {why}")
        return
    named = st[st["straggler"].astype(bool)]
    unit = "step" if report.get("critical_steps") is not None and not report["critical_steps"].empty else "collective"
    for r in named.itertuples():
        ops = ", ".join(f"{t['name']} +{_ms(t['excess_ns'])} ms" for t in (r.top_ops or [])[:3])
        share = f" ({r.gain_share:.1%} of the profiled step time)" if not is_missing(r.gain_share) else ""
        _say(
            console,
            f"straggler: rank {r.rank} holds the others back (arrival order, group {r.group_name}): "
            f"{r.cause_text or 'cause not explained'}{f' ({ops})' if ops else ''}; it arrives last by a median "
            f"{_ms(r.median_gain_ns)} ms per {unit}; had it taken its peers' time the run would be "
            f"{_ms(r.whatif_gain_ns)} ms shorter{share}",
        )
    if named.empty:
        judged = st[~st["verdict"].str.startswith("not judged")]
        if judged.empty:
            _say(console, f"straggler: not judged, {st['verdict'].iloc[0].removeprefix('not judged: ')}")
        else:
            worst = judged.assign(_r=judged["median_gain_ns"] / judged["threshold_ns"].clip(lower=1)).sort_values("_r")
            w = worst.iloc[-1]
            _say(
                console,
                f"straggler: none — every rank's lateness is within the noise (largest: rank {w['rank']}, a median "
                f"{_ms(w['median_gain_ns'])} ms per {unit} against a threshold of {_ms(w['threshold_ns'])} ms)",
            )
    rows = [
        [
            str(r.rank),
            "yes" if r.straggler else "-",
            str(r.cause) if isinstance(r.cause, str) else "-",
            _ms(r.median_gain_ns),
            _ms(r.threshold_ns),
            _ms(r.whatif_gain_ns),
            "-" if is_missing(r.gain_share) else f"{r.gain_share:.1%}",
            str(r.slow_rank_votes),
        ]
        for r in st.itertuples()
    ]
    _table(
        console,
        f"Stragglers (arrival order after clock alignment; ms; gain = how much earlier the collectives would "
        f"start had the rank arrived with its peers, median per {unit})",
        ["rank", "straggler", "cause", "median gain", "threshold", "what-if total", "of step time", "msprof votes"],
        rows,
    )
    cs = report.get("critical_steps")
    if cs is not None and not cs.empty:
        rows = [
            [
                _num(r.step),
                _ms(r.step_ns),
                "-" if is_missing(r.critical_rank) else str(int(r.critical_rank)),
                _ms(r.gain_ns) if r.gain_ns else "-",
            ]
            for r in cs.itertuples()
        ]
        _table(
            console,
            "Critical rank per step (the rank that set its length; the step would be 'shorter by' ms had it taken "
            "its peers' time; - = balanced, within the noise)",
            ["step", "step ms", "critical rank", "shorter by"],
            rows,
        )
    bc = report.get("blame_chains")
    if bc is not None and not bc.empty:
        rows = []
        for r in bc.itertuples():
            top = (r.top_ops or [{}])[0]
            chain = " → ".join(f"{c['rank']} ({c['cause']})" for c in r.chain)
            rows.append(
                [
                    _num(r.step),
                    str(r.op_type),
                    str(r.group_name),
                    str(r.last_rank),
                    _ms(r.margin_ns),
                    str(r.cause),
                    _ms(r.excess_ns),
                    f"{top['name']} +{_ms(top['excess_ns'])}" if top and r.cause == "compute" else "-",
                    chain,
                ]
            )
        _table(
            console,
            "Blame: late collectives (ms; last = the rank that arrived last; excess = its time in the cause beyond "
            "its peers' median since the group's previous collective)",
            ["step", "op", "group", "last", "by", "cause", "excess", "top operator", "waiting chain"],
            rows,
        )


def _print_slow_rank(report: Mapping[str, Any], console: Any) -> None:
    sr = report["slow_ranks"]
    judged = int(sr["instances"].sum()) if not sr.empty else 0
    testable = int(sr["testable"].sum()) if "testable" in sr and not sr.empty else 0
    if sr.empty or judged == 0:
        _say(console, "slow rank: no collective seen by ≥ 2 profiled members of its group; judged 0")
    elif testable == 0:
        _say(
            console,
            f"slow rank: every collective has fewer than {MIN_TESTABLE} profiled members, too few for "
            f"Dixon's test (as in msprof-analyze); no rank can be voted slow",
        )
    if not sr.empty and judged:
        rows = [
            [str(r.rank), str(r.votes), str(r.instances), str(getattr(r, "testable", "-"))] for r in sr.itertuples()
        ]
        _table(
            console,
            "Slow rank votes, for cross-checking with msprof-analyze (shortest elapsed per collective, "
            "Dixon 99.5 % / 3σ)",
            ["rank", "votes", "collectives seen", f"testable (≥ {MIN_TESTABLE} members)"],
            rows,
        )
    skipped = report.get("slow_rank_skipped_groups") or []
    if skipped:
        _say(
            console,
            f"slow rank: group(s) {', '.join(map(str, skipped))} skipped (their ranks saw different numbers "
            f"of collectives)",
        )
    ev = report["slow_rank_evidence"]
    if not ev.empty:
        rows = [
            [
                ", ".join(map(str, r.slow_ranks)),
                _num(r.step),
                str(r.group_name),
                str(r.op_type),
                _num(r.bytes),
                f"{r.test} {r.statistic:.3f} > {r.critical:.3f}" if r.statistic is not None else str(r.test),
                " ".join(f"{k}:{_ms(v)}" for k, v in sorted(r.elapsed_by_rank.items())),
            ]
            for r in ev.itertuples()
        ]
        _table(
            console,
            "Slow rank evidence: convicting collectives (elapsed ms by rank)",
            ["slow", "step", "group", "op", "bytes", "test", "elapsed by rank"],
            rows,
        )


def _print_slow_links(report: Mapping[str, Any], console: Any) -> None:
    sl = report["slow_links"]
    if sl.empty:
        _say(
            console,
            "slow links: nothing judged (needs ≥ 2 ranks moving ≥ 1 MiB on one transport in a step, "
            "or ≥ 3 matrix links of one group, op and transport)",
        )
        return
    slow = sl[sl["slow"]]
    _say(console, f"slow links: {len(slow)} of {len(sl)} judged bandwidth sets are slow (> 5 % gap)")
    if not slow.empty:
        rows = [
            [
                str(r.level),
                _num(r.step),
                str(r.group_name),
                str(r.transport),
                _num(r.slow_rank) if r.level == "rank" else f"{_num(r.slow_src)}→{_num(r.slow_dst)}",
                _gbps(r.min_bytes_per_s),
                _gbps(r.mean_bytes_per_s),
                _gbps(r.max_bytes_per_s),
                f"{r.gap_ratio:.1%}",
            ]
            for r in slow.itertuples()
        ]
        _table(
            console,
            "Slow links (GB/s)",
            ["level", "step", "group", "transport", "slow", "min", "mean", "max", "gap"],
            rows,
        )
    ev = report["slow_link_evidence"]
    if not ev.empty:
        rows = []
        for r in ev.itertuples():
            who = (
                _num(r.rank)
                if r.level == "rank"
                else f"{_end(r.src_rank, r.src_local)}→{_end(r.dst_rank, r.dst_local)}"
            )
            rows.append(
                [
                    str(r.level),
                    who,
                    str(r.op_name if r.level == "rank" else r.op_type),
                    str(r.transport),
                    _size(r.bytes),
                    _ms(r.transit_ns),
                    _gbps(r.bandwidth_bytes_per_s),
                    str(r.reason),
                ]
            )
        _table(
            console,
            "Slow link evidence",
            ["level", "rank / link", "op", "transport", "bytes", "transit ms", "GB/s", "why"],
            rows,
        )


def _print_layout(report: Mapping[str, Any], console: Any) -> None:
    pdims = report["parallel_dims"]
    if pdims.empty:
        _say(
            console, "parallel layout: no parallel dimension found (no communication group families covering all ranks)"
        )
        return
    _say(console, "parallel layout: " + ", ".join(f"{r.dim.upper()}={r.size} ({r.source})" for r in pdims.itertuples()))
    grid = report.get("layout_metric")
    if grid is None or grid.empty:
        return
    dims = [d for d in pdims["dim"] if d in grid.columns]
    metric = str(grid["metric"].iloc[0])
    rows = [
        [str(r["rank"])]
        + [_num(r[d]) for d in dims]
        + [_ms(r["value"]) if metric.endswith("_ns") else _num(r["value"])]
        for _, r in grid.sort_values(dims[::-1] if dims else ["rank"]).iterrows()
    ]
    unit = " ms" if metric.endswith("_ns") else ""
    _table(
        console,
        f"Layout grid: coordinates and mean {metric.removesuffix('_ns')}{unit} per rank",
        ["rank"] + dims + [f"mean {metric.removesuffix('_ns')}"],
        rows,
    )


def _print_pipeline(report: Mapping[str, Any], console: Any) -> None:
    st = report.get("pipeline_stages")
    if st is None or st.empty:
        return  # not a pipeline-parallel job (or nothing paired): the layout line says so
    g = st.groupby(["pp_group", "stage", "rank"], sort=True).agg(
        fwd=("forward_micro_batches", "mean"),
        bwd=("backward_micro_batches", "mean"),
        forward=("forward_ns", "mean"),
        backward=("backward_ns", "mean"),
        both=("forward_backward_ns", "mean"),
        bubble=("bubble_ns", "mean"),
        pct=("bubble_pct", "mean"),
        chunks=("chunks", "max"),
    )
    rows = [
        [str(k[0]), str(k[1]), str(k[2]), f"{r.fwd:.1f}", f"{r.bwd:.1f}", _ms(r.forward), _ms(r.backward), _ms(r.both),
         _ms(r.bubble), f"{r.pct:.1f}"]
        for k, r in zip(g.index, g.itertuples(index=False))
    ]  # fmt: skip
    head = ["group", "stage", "rank", "fwd µb", "bwd µb", "forward", "backward", "fwd+bwd", "bubble", "bubble %"]
    if g["chunks"].notna().any():  # an interleaved pipeline: the model chunks per rank
        head.append("chunks")
        rows = [row + ["" if pd.isna(c) else str(int(c))] for row, c in zip(rows, g["chunks"])]
    _table(console, "Pipeline from send/recv pairing (mean per step; ms)", head, rows)


def _print_clocks(report: Mapping[str, Any], console: Any) -> None:
    co = report["clock_offsets"]
    if co.empty:
        _say(console, "clock offsets: no rank to align")
        return
    if len(co) == 1:
        _say(console, "clock offsets: a single rank, nothing to align")
        return
    rows = [
        [str(r.rank), r.status, _ms(r.offset_ns), _ms(r.residual_ns), str(r.n_collectives)] for r in co.itertuples()
    ]
    _table(
        console,
        "Clock offsets to the reference rank (ms)",
        ["rank", "status", "offset", "residual", "collectives"],
        rows,
    )
    for w in co["warning"].dropna():
        console.print(f"[yellow]warning:[/] {lit(w)}")


def _print_advice(report: Mapping[str, Any], console: Any) -> None:
    adv = report["advice"]
    console.print(f"[bold]advice[/]: {len(adv)} finding(s)")
    for r in adv.itertuples():
        colour = {"high": "red", "medium": "yellow"}.get(r.severity, "cyan")
        console.print(f"  [{colour}]{lit(f'{r.severity:<6}')}[/] {lit(r.title)}", highlight=False)
        console.print(f"         {lit(r.detail)}", style="dim")
