"""Advisor: first rules, each finding with the numbers and the events behind it.

Rules (when each fires; the evidence it keeps):

- ``straggler``: a rank is named by the arrival-order analysis (``straggler``); its cause, figures
  and late collectives (with the timeline ranges of each).
- ``slow_rank``: a rank got slow-rank votes (``slow_rank``), or a step-trace column differs across
  ranks by more than 5 % of its mean (msprof-analyze's cluster rule) *and* by more than 3 standard
  errors of the ranks' step-to-step noise (widened for the number of rank pairs); the convicting
  collectives with every member's elapsed time, the per-rank column values.
- ``slow_link``: a rank or link is slow (``slow_link``); per-op bandwidth rows of the slow rank /
  the slow links.
- ``high_free``: Free > 10 % of the step time on a rank (mean over steps); the biggest idle gaps:
  step, start, length, task before and after.
- ``host_bound``: > 10 % of the step time the device sits idle waiting for a task the host had not
  launched yet (the launch of the task after the gap came after the gap began); the gaps with the
  next task, its launch call and launch time.
- ``small_packets``: more than 20 % of the ops on a transport move less than 16 MiB (SDMA, and
  intra-node HCCS/PCIE/SIO) or 1 MiB (RDMA, and Kineto messages), msprof-analyze's packet rule; the
  small ops with size and transit time.
- ``aicpu``: AI CPU tasks longer than 20 µs on NPU input (msprof-analyze's AICPU rule); the tasks
  by name: count, total and longest duration.

``advise`` returns one row per finding: rule, severity (high / medium / low), title, detail (a
sentence with the numbers, in English), title_msg and detail_msg (the same as messages of
``analyzer.messages``: a key and its numbers, ranks and names, rendered in the reader's language
where they are shown), ranks, value, threshold, evidence (list of dicts).
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pandas as pd

from ..breakdown import intervals as iv
from ..messages import Message, message, render
from ..store import Store
from . import activity
from .arrivals import FLOOR_SHARE
from .cache import per_run
from .slow_link import slow_link_analysis
from .slow_rank import slow_rank_analysis
from .step_breakdown import step_breakdown
from .straggler import blame_chains, stragglers

COLUMNS = ["rule", "severity", "title", "detail", "title_msg", "detail_msg", "ranks", "value", "threshold", "evidence"]
SPREAD_THRESHOLD = 0.05
FREE_THRESHOLD = 0.10
HOST_BOUND_THRESHOLD = 0.10
MIN_GAP_NS = 10_000
TOP_GAPS = 5
SMALL_PACKET_RATIO = 0.20
SMALL_BYTES = {"SDMA": 16 << 20, "HCCS": 16 << 20, "PCIE": 16 << 20, "SIO": 16 << 20, "RDMA": 1 << 20}
SMALL_BYTES_DEFAULT = 1 << 20
AICPU_MIN_NS = 20_000


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _finding(
    rule: str,
    severity: str,
    title: Message,
    detail: Message,
    ranks: list[int],
    value: float,
    threshold: float,
    evidence: list[dict],
) -> dict:
    return {
        "rule": rule,
        "severity": severity,
        "title": render(title),
        "detail": render(detail),
        "title_msg": title,
        "detail_msg": detail,
        "ranks": sorted(set(ranks)),
        "value": value,
        "threshold": threshold,
        "evidence": evidence,
    }


def _records(df: pd.DataFrame) -> list[dict]:
    out = []
    for r in df.to_dict("records"):
        out.append(
            {
                k: (
                    None
                    if (isinstance(v, float) and np.isnan(v)) or v is pd.NA
                    else (v.item() if isinstance(v, np.generic) else v)
                )
                for k, v in r.items()
            }
        )
    return out


def _slow_rank_rules(store: Store, run: str, sb: pd.DataFrame) -> list[dict]:
    out = []
    votes, evidence, _ = slow_rank_analysis(store, run)
    voted = votes[votes["votes"] > 0]
    if not voted.empty:
        top = voted.iloc[0]
        ev = evidence[evidence["slow_ranks"].map(lambda s: int(top["rank"]) in s)]
        out.append(
            _finding(
                "slow_rank",
                "high",
                message("advisor.slow_rank.title", rank=int(top["rank"])),
                message(
                    "advisor.slow_rank.detail",
                    rank=int(top["rank"]),
                    votes=int(top["votes"]),
                    instances=int(top["instances"]),
                ),
                [int(r) for r in voted["rank"]],
                float(top["votes"]),
                1.0,
                _records(
                    ev[
                        [
                            "instance",
                            "group_name",
                            "step",
                            "op_type",
                            "bytes",
                            "test",
                            "statistic",
                            "critical",
                            "elapsed_by_rank",
                        ]
                    ]
                ),
            )
        )
    out += _spread_rules(sb)
    return out


def _straggler_rules(store: Store, run: str) -> list[dict]:
    """A finding per named straggler (``straggler``): the cause, its figures, the late collectives."""
    st = stragglers(store, run)
    named = st[st["straggler"].astype(bool)] if not st.empty else st
    if named.empty:
        return []
    chains = blame_chains(store, run)
    out = []
    for r in named.itertuples():
        ev = chains[chains["last_rank"] == r.rank] if not chains.empty else chains
        ops = ", ".join(f"{t['name']} +{_ms(t['excess_ns'])}" for t in (r.top_ops or [])[:3])  # names: data
        cause = message(f"cause.{r.cause}") if r.cause else None
        share = message("advisor.straggler.share", share=r.gain_share) if r.gain_share is not None else ""
        votes = (
            message("advisor.straggler.votes_yes", votes=int(r.slow_rank_votes))
            if r.slow_rank_votes
            else message("advisor.straggler.votes_no")
        )
        out.append(
            _finding(
                "straggler",
                "high",
                message("advisor.straggler.title", rank=int(r.rank), cause=cause or message("cause.not_explained")),
                message(
                    "advisor.straggler.detail",
                    rank=int(r.rank),
                    group=r.group_name,
                    median_gain=float(r.median_gain_ns),
                    threshold=float(r.threshold_ns),
                    cause=cause or message("cause.nothing"),
                    ops=message("advisor.straggler.ops", ops=ops) if ops else "",
                    whatif_gain=float(r.whatif_gain_ns),
                    share=share,
                    votes=votes,
                ),
                [int(r.rank)],
                float(r.median_gain_ns),
                float(r.threshold_ns),
                _records(
                    ev[["instance", "group_name", "step", "op_type", "margin_ns", "cause", "excess_ns", "highlights"]]
                )
                if not ev.empty
                else [],
            )
        )
    return out


SPREAD_Z = 3.0  # a difference between ranks must exceed this many standard errors of the step-to-step noise


def _spread_rules(sb: pd.DataFrame) -> list[dict]:
    """msprof-analyze's cluster rule (Computing / Communication / Free differ across ranks by more
    than 5 % of the mean), counted only when the difference also stands out from the ranks'
    step-to-step noise: > ``SPREAD_Z`` standard errors, widened for the number of rank pairs
    compared (a 2-rank run always differs by a few %), and by more than the run-to-run floor
    (``FLOOR_SHARE`` of the median step time, as the straggler analysis: ranks of one job differ
    systematically by a few % of the step from where the scheduler put them — 1.6 ms of a 31 ms
    step on a 4-rank gloo control, 11 standard errors). Needs two or more steps per rank."""
    out: list[dict] = []
    ranks = sb["rank"].nunique()
    if ranks < 2:
        return out
    pairs = ranks * (ranks - 1) / 2
    z = SPREAD_Z + float(np.sqrt(2 * np.log(pairs))) if pairs > 1 else SPREAD_Z
    floor = FLOOR_SHARE * float(sb["step_ns"].median()) if sb["step_ns"].notna().any() else 0.0
    for col in ("computing_ns", "communication_ns", "free_ns"):
        g = sb.groupby("rank")[col]
        mean, std, n = g.mean(), g.std(ddof=1), g.count()
        if (n < 2).any() or float(mean.mean()) <= 0:
            continue
        hi, lo = int(mean.idxmax()), int(mean.idxmin())
        gap = float(mean[hi] - mean[lo])
        ratio = gap / float(mean.mean())
        se = float(np.sqrt(std[hi] ** 2 / n[hi] + std[lo] ** 2 / n[lo]))
        if ratio <= SPREAD_THRESHOLD or gap <= max(100_000, floor) or gap <= z * se:
            continue
        out.append(
            _finding(
                "slow_rank",
                "medium",
                message("advisor.spread.title", column=message(f"column.{col}"), ratio=ratio),
                message(
                    "advisor.spread.detail",
                    column=message(f"column.{col}"),
                    low=float(mean[lo]),
                    low_rank=lo,
                    high=float(mean[hi]),
                    high_rank=hi,
                    ratio=ratio,
                    mean=float(mean.mean()),
                    threshold=SPREAD_THRESHOLD,
                    z_found=gap / se if se else float("inf"),
                    z_needed=z,
                    floor=floor,
                    floor_share=FLOOR_SHARE,
                    tail=message("advisor.spread.end_wait" if col != "computing_ns" else "advisor.spread.end"),
                ),
                [hi, lo],
                ratio,
                SPREAD_THRESHOLD,
                [{"rank": int(r), col: int(x), "steps": int(n[r])} for r, x in mean.items()],
            )
        )
    return out


def _slow_link_rules(store: Store, run: str) -> list[dict]:
    judged, evidence = slow_link_analysis(store, run)
    return slow_link_findings(judged, evidence)


def slow_link_findings(judged: pd.DataFrame, evidence: pd.DataFrame) -> list[dict]:
    """Findings from ``slow_link_analysis``. Rank-level judgements of one step, group and slow rank
    with the same bandwidths on several transports (torch_npu reports an HCCS transfer also as
    SDMA, with the same size and time) are one finding naming every transport."""
    out = []
    slow = judged[judged["slow"].astype(bool)]  # (an empty object column would select columns)
    ranks = slow[slow["level"] == "rank"].copy()
    if not ranks.empty:
        ranks["_min"] = ranks["min_bytes_per_s"].round(-3)
        ranks["_max"] = ranks["max_bytes_per_s"].round(-3)
        keys = ["step", "group_name", "slow_rank", "fast_rank", "_min", "_max"]
        for _, g in ranks.groupby(keys, dropna=False, sort=False):
            r = g.iloc[0]
            transports = list(dict.fromkeys(str(t) for t in g["transport"]))
            tr = "/".join(transports)
            ev = (
                evidence[
                    (evidence["level"] == "rank")
                    & (evidence["rank"] == r["slow_rank"])
                    & evidence["transport"].isin(transports)
                ]
                if not evidence.empty
                else evidence
            )
            out.append(
                _finding(
                    "slow_link",
                    "high",
                    message("advisor.slow_link_rank.title", rank=r["slow_rank"], transport=tr),
                    message(
                        "advisor.slow_link_rank.detail",
                        step=r["step"],
                        group=r["group_name"],
                        transport=tr,
                        slow_bw=r["min_bytes_per_s"],
                        rank=r["slow_rank"],
                        fast_bw=r["max_bytes_per_s"],
                        fast_rank=r["fast_rank"],
                        gap=r["gap_ratio"],
                        threshold=SPREAD_THRESHOLD,
                    ),
                    [int(r["slow_rank"])],
                    float(r["gap_ratio"]),
                    SPREAD_THRESHOLD,
                    _records(ev.drop(columns=["level"], errors="ignore")),
                )
            )
    for r in slow[slow["level"] == "link"].itertuples():
        ev = evidence[(evidence["level"] == "link") & (evidence["transport"] == r.transport)]
        out.append(
            _finding(
                "slow_link",
                "medium",
                message("advisor.slow_link.title", transport=r.transport, src=r.slow_src, dst=r.slow_dst),
                message(
                    "advisor.slow_link.detail",
                    op=r.op_type,
                    group=r.group_name,
                    src=r.slow_src,
                    dst=r.slow_dst,
                    bw=r.min_bytes_per_s,
                    gap=r.gap_ratio,
                    n=r.n,
                ),
                [x for x in (r.slow_src, r.slow_dst) if x is not None and not pd.isna(x)],
                float(r.gap_ratio),
                SPREAD_THRESHOLD,
                _records(ev.drop(columns=["level"], errors="ignore")),
            )
        )
    return out


def _device_names(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    return con.execute(
        "SELECT rank, name, ts_ns, ts_ns + dur_ns AS end_ns FROM kernels WHERE run = ? AND dur_ns > 0 "
        "ORDER BY rank, ts_ns",
        [run],
    ).df()


def _launches(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """Device task start -> launch call on the host (Kineto ``correlation``, torch_npu ``connection_id``)."""
    return con.execute(
        """
        WITH s AS (
          SELECT s.rank, s.collection_id, s.name, s.ts_ns, l.lane_group,
                 coalesce(TRY_CAST(json_extract(s.args, '$.correlation') AS BIGINT),
                          TRY_CAST(json_extract(s.args, '$.connection_id') AS BIGINT)) AS link
          FROM slices s JOIN lanes l USING (run, rank, collection_id, pid, tid)
          WHERE s.run = $run AND l.lane_group IN ('device', 'host') AND s.dur_ns > 0
            AND (s.args LIKE '%"correlation"%' OR s.args LIKE '%"connection_id"%')),
        dev AS (SELECT * FROM s WHERE lane_group = 'device' AND link IS NOT NULL),
        host AS (SELECT rank, collection_id, link, arg_min(name, ts_ns) AS launch_name, min(ts_ns) AS launch_ns
                 FROM s WHERE lane_group = 'host' AND link IS NOT NULL GROUP BY ALL)
        SELECT dev.rank, dev.ts_ns AS task_ns, dev.name AS task, host.launch_name, host.launch_ns
        FROM dev JOIN host USING (rank, collection_id, link)
        ORDER BY dev.rank, dev.ts_ns
        """,
        {"run": run},
    ).df()


def _gap_rules(store: Store, run: str, sb: pd.DataFrame) -> list[dict]:
    out = []
    acts = activity.run_activity(store, run)
    with store.read_connection(run=run) as con:
        names = _device_names(con, run)
        device_ranks = [r for r, a in acts.items() if a.mode == "device"]
        launches = _launches(con, run) if device_ranks else pd.DataFrame()
    step_ns = sb.groupby("rank")["step_ns"].sum()
    free_ns = sb.groupby("rank")["free_ns"].sum()
    n_steps = sb.groupby("rank")["step_ns"].size()
    with_ids = sb.groupby("rank")["step"].count()  # rows with a step id (0: the whole trace, no markers)

    def over(rank: int, mean: bool) -> Message:
        if not with_ids.get(rank, 0):
            return message("over.trace")
        n = int(n_steps[rank])
        return message(f"over.{'mean' if mean else 'sum'}_{'1' if n == 1 else 'n'}", n=n)

    gaps_by_rank: dict[int, list[dict]] = {}
    for rank, ra in acts.items():
        nm = names[names["rank"] == rank]
        ends, starts = nm["end_ns"].to_numpy(np.int64), nm["ts_ns"].to_numpy(np.int64)
        task_names = nm["name"].tolist()
        order_end = np.argsort(ends)
        rows = []
        for step, sa in ra.by_step.items():
            busy = sa.busy()
            sp = iv.span(busy)
            if sp is None:
                continue
            g0, g1 = iv.gaps(busy, sp[0], sp[1])
            for a, b in zip(g0.tolist(), g1.tolist()):
                if b - a < MIN_GAP_NS:
                    continue
                row = {"rank": rank, "step": step, "start_ns": a, "end_ns": b, "dur_ns": b - a}
                if len(nm):
                    j = int(np.searchsorted(ends[order_end], a, side="right")) - 1
                    k = int(np.searchsorted(starts, b, side="left"))
                    row["task_before"] = task_names[order_end[j]] if j >= 0 else None
                    row["task_after"] = task_names[k] if k < len(nm) else None
                rows.append(row)
        gaps_by_rank[rank] = rows
    # high free time
    for rank in sorted(gaps_by_rank):
        if rank not in step_ns or not step_ns[rank]:
            continue
        share = float(free_ns[rank]) / float(step_ns[rank])
        if share <= FREE_THRESHOLD:
            continue
        top = sorted(gaps_by_rank[rank], key=lambda r: -r["dur_ns"])[:TOP_GAPS]
        where = "device" if acts[rank].mode == "device" else "cpu"
        out.append(
            _finding(
                "high_free",
                "high" if share > 0.3 else "medium",
                message("advisor.high_free.title", rank=rank, share=share),
                message(
                    "advisor.high_free.detail",
                    where=message(f"advisor.high_free.where_{where}"),
                    free=float(free_ns[rank] / n_steps[rank]),
                    step=float(step_ns[rank] / n_steps[rank]),
                    rank=rank,
                    over=over(rank, True),
                    share=share,
                    threshold=FREE_THRESHOLD,
                    tail=message("advisor.high_free.no_tasks")
                    if acts[rank].no_tasks
                    else message("advisor.high_free.biggest", gap=top[0]["dur_ns"] if top else None),
                ),
                [rank],
                share,
                FREE_THRESHOLD,
                top,
            )
        )
    # host-bound dispatch: the task after an idle gap was launched only after the gap began
    if device_ranks and not launches.empty:
        for rank in device_ranks:
            ln = launches[launches["rank"] == rank]
            if ln.empty or rank not in step_ns:
                continue
            t_ns = ln["task_ns"].to_numpy(np.int64)
            bound = []
            for g in gaps_by_rank.get(rank, []):
                k = int(np.searchsorted(t_ns, g["end_ns"] - 1_000, side="left"))
                if k >= len(ln) or abs(int(t_ns[k]) - g["end_ns"]) > 1_000:
                    continue
                launch_ns = int(ln["launch_ns"].iloc[k])
                if launch_ns > g["start_ns"]:
                    bound.append(
                        {
                            **g,
                            "next_task": ln["task"].iloc[k],
                            "launch_call": ln["launch_name"].iloc[k],
                            "launch_ns": launch_ns,
                            "launch_after_idle_ns": launch_ns - g["start_ns"],
                        }
                    )
            total = sum(b["dur_ns"] for b in bound)
            share = total / float(step_ns[rank]) if step_ns[rank] else 0.0
            if share > HOST_BOUND_THRESHOLD:
                top = sorted(bound, key=lambda r: -r["dur_ns"])[:TOP_GAPS]
                out.append(
                    _finding(
                        "host_bound",
                        "high" if share > 0.3 else "medium",
                        message("advisor.host_bound.title", rank=rank),
                        message(
                            "advisor.host_bound.detail",
                            rank=rank,
                            total=total,
                            over=over(rank, False),
                            share=share,
                            threshold=HOST_BOUND_THRESHOLD,
                            gaps=len(bound),
                        ),
                        [rank],
                        share,
                        HOST_BOUND_THRESHOLD,
                        top,
                    )
                )
    return out


def _small_packet_rules(store: Store, run: str) -> list[dict]:
    from .communication import comm_bandwidth

    bw = comm_bandwidth(store, run)
    bw = bw[bw["bytes"].notna() & (bw["transport"] != "LOCAL")]
    out = []
    for transport, g in bw.groupby("transport"):
        limit = SMALL_BYTES.get(str(transport).upper(), SMALL_BYTES_DEFAULT)
        small = g[g["bytes"] < limit]
        ratio = len(small) / len(g)
        if ratio > SMALL_PACKET_RATIO:
            out.append(
                _finding(
                    "small_packets",
                    "medium",
                    message("advisor.small_packets.title", transport=str(transport), ratio=ratio),
                    message(
                        "advisor.small_packets.detail",
                        small=len(small),
                        ops=len(g),
                        transport=str(transport),
                        limit_mib=limit / (1 << 20),
                        ratio=ratio,
                        threshold=SMALL_PACKET_RATIO,
                        transit=float(small["transit_ns"].sum()),
                    ),
                    [int(r) for r in small["rank"].unique()],
                    ratio,
                    SMALL_PACKET_RATIO,
                    _records(
                        small.sort_values("transit_ns", ascending=False).head(20)[
                            ["rank", "step", "op_name", "group_name", "transport", "bytes", "transit_ns"]
                        ]
                    ),
                )
            )
    return out


def _aicpu_rules(store: Store, run: str) -> list[dict]:
    with store.read_connection(run=run) as con:
        df = con.execute(
            """
            SELECT rank, name, op_type, count(*) AS count, sum(dur_ns) AS total_ns, max(dur_ns) AS max_ns
            FROM kernels WHERE run = ? AND upper(core_type) IN ('AI_CPU', 'AICPU') AND dur_ns > ?
            GROUP BY ALL ORDER BY total_ns DESC
            """,
            [run, AICPU_MIN_NS],
        ).df()
    if df.empty:
        return []
    return [
        _finding(
            "aicpu",
            "medium",
            message("advisor.aicpu.title", names=int(df["name"].nunique()), min_us=AICPU_MIN_NS / 1000),
            message(
                "advisor.aicpu.detail",
                tasks=int(df["count"].sum()),
                min_us=AICPU_MIN_NS / 1000,
                total=float(df["total_ns"].sum()),
                longest=float(df["max_ns"].max()),
                name=str(df.iloc[0]["name"]),
            ),
            [int(r) for r in df["rank"].unique()],
            float(df["total_ns"].sum()),
            AICPU_MIN_NS,
            _records(df.head(20)),
        )
    ]


@per_run
def advise(store: Store, run: str | None = None) -> pd.DataFrame:
    """Run every rule; one row per finding (empty when nothing fired), most severe first."""
    sb = step_breakdown(store, run)
    findings: list[dict[str, Any]] = []
    findings += _straggler_rules(store, run)
    findings += _slow_rank_rules(store, run, sb)
    findings += _slow_link_rules(store, run)
    if not sb.empty:
        findings += _gap_rules(store, run, sb)
    findings += _small_packet_rules(store, run)
    findings += _aicpu_rules(store, run)
    df = pd.DataFrame(findings, columns=COLUMNS)
    order = {"high": 0, "medium": 1, "low": 2}
    return df.sort_values("severity", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
