"""The communication analysis db (torch_npu's ``analysis.db``, ``communication_analyzer.db``):
CommAnalyzerTime / Bandwidth / Matrix and StepTraceTime; and the ``comm_ops`` rows of a db export."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from ....errors import InputError
from ....messages import problem
from ....units import fit_ns, mb_to_bytes, ms_to_ns
from ....vocabulary import P2P_TYPES, normalize_op_type
from ...base import ReadContext
from ...common.cells import number, step_number, us_number_to_ns
from ..communication import gbps, hccl_bytes, link_rows, step_from_key
from ..groups import Groups
from .sqlite import Db, DbExport, table_problem


def read_analysis(
    ctx: ReadContext, adb: Db, st: DbExport | None, groups: Groups, problems: list[str]
) -> dict[str, list[dict[str, Any]]]:
    times: dict[str, list[dict[str, Any]]] = defaultdict(list)
    known = {"CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix", "StepTraceTime"}
    if not adb.tables & known:
        raise InputError(str(adb.path), problem("not_analysis_db", tables=", ".join(sorted(known))))

    def guard(name: str, fn: Callable[[], None]) -> None:
        if not adb.has(name):
            return
        problem = table_problem(name, fn)
        if problem:
            problems.append(problem)
        problems.extend(adb.take_problems(name))

    def comm_time() -> None:
        for name, g, start, el, tr, wt, sy, idle, step, typ in adb.all(
            "SELECT hccl_op_name, group_name, start_timestamp, elapse_time, transit_time, wait_time, "
            "synchronization_time, idle_time, step, type FROM CommAnalyzerTime"
        ):
            if name is None or str(name) == "Total Op Info":
                continue
            times[str(name)].append(
                {
                    "group": str(g) if g is not None else None,
                    "step": step_from_key(str(step)) if step else None,
                    "is_p2p": str(typ or "").lower() == "p2p",
                    "elapse": ms_to_ns(el),
                    "transit": ms_to_ns(tr),
                    "wait": ms_to_ns(wt),
                    "sync": ms_to_ns(sy),
                    "idle": ms_to_ns(idle),
                    "start_us": start,
                }
            )
            if g is not None:
                groups.get(str(g))

    def bandwidth() -> None:
        rows = adb.all(
            "SELECT step, type, hccl_op_name, group_name, transport_type, transit_size, transit_time, bandwidth, "
            "large_packet_ratio, package_size, count, total_duration FROM CommAnalyzerBandwidth"
        )
        out: dict[str, list[Any]] = defaultdict(list)
        seen: set[tuple[Any, ...]] = set()

        def add(
            step: Any, op: Any, g: Any, tr: Any, size: Any, tm: Any, bw: Any, lpr: Any, pkt: Any, cnt: Any, dur: Any
        ) -> None:
            out["step"].append(step_from_key(str(step)) if step else None)
            out["op_name"].append(op)
            out["group_name"].append(str(g) if g is not None else None)
            out["transport"].append(tr)
            out["bytes"].append(mb_to_bytes(size))
            out["transit_ns"].append(ms_to_ns(tm))
            out["bandwidth_bytes_per_s"].append(gbps(bw))
            out["large_packet_ratio"].append(float(lpr) if lpr is not None else None)
            out["packet_size_bytes"].append(pkt)
            out["packet_count"].append(cnt)
            out["packet_transit_ns"].append(dur)

        for step, _typ, op, g, tr, size, tm, bw, lpr, pkt, cnt, dur in rows:
            if op is None or str(op) == "Total Op Info" or (not size and not tm):
                continue
            key = (step, op, g, tr)
            if key not in seen:  # the transport summary (repeated on each size bucket in the db)
                seen.add(key)
                add(step, op, g, tr, size, tm, bw, lpr, None, None, None)
            if pkt or cnt:
                add(
                    step,
                    op,
                    g,
                    tr,
                    size,
                    tm,
                    bw,
                    lpr,
                    mb_to_bytes(pkt),
                    int(cnt) if cnt is not None else None,
                    ms_to_ns(dur),
                )
        if out:
            ctx.write("comm_bandwidth", dict(out))

    def matrix() -> None:
        entries = []
        for op_key, g, src, dst, tr, size, tm, bw, step, typ, op_name in adb.all(
            "SELECT hccl_op_name, group_name, src_rank, dst_rank, transport_type, transit_size, transit_time, "
            "bandwidth, step, type, op_name FROM CommAnalyzerMatrix"
        ):
            if op_key is None or str(op_key) == "Total Op Info":
                continue
            entries.append(
                {
                    "step": step_from_key(str(step)) if step else None,
                    "op_key": str(op_key),
                    "op_name": op_name or None,
                    "group": str(g) if g is not None else None,
                    "is_p2p": str(typ or "").lower() == "p2p",
                    "src": step_number(src),
                    "dst": step_number(dst),
                    "transport": tr,
                    "size_mb": size,
                    "time_ms": tm,
                    "bw_gbps": bw,
                }
            )
        rows = link_rows(entries, groups)
        if rows:
            ctx.write("comm_links", rows)

    def step_trace() -> None:
        cols = adb.columns("StepTraceTime")
        names = [
            "step",
            "computing",
            "communication_not_overlapped",
            "overlapped",
            "communication",
            "free",
            "stage",
            "bubble",
            "communication_not_overlapped_and_exclude_receive",
            "preparing",
        ]
        sel = ", ".join(c if c in cols else "NULL" for c in names)
        rows = adb.all(f"SELECT {sel} FROM StepTraceTime")
        if not rows:
            return
        factor = _step_trace_unit(rows, st.steps if st is not None else [])
        out: dict[str, list[Any]] = defaultdict(list)
        targets = [
            "computing_ns",
            "comm_not_overlapped_ns",
            "overlapped_ns",
            "communication_ns",
            "free_ns",
            "stage_ns",
            "bubble_ns",
            "comm_not_overlapped_excl_receive_ns",
            "preparing_ns",
        ]
        for r in rows:
            out["step"].append(step_number(r[0]))
            for col, v in zip(targets, r[1:]):
                x = number(v)
                out[col].append(fit_ns(x * factor) if x is not None else None)
        ctx.write("step_trace", dict(out))

    guard("CommAnalyzerTime", comm_time)
    guard("CommAnalyzerBandwidth", bandwidth)
    guard("CommAnalyzerMatrix", matrix)
    guard("StepTraceTime", step_trace)
    return times


def _step_trace_unit(rows: list[tuple[Any, ...]], steps: list[tuple[int, int, int]]) -> float:
    """ns per unit of StepTraceTime: µs in the samples (same numbers as step_trace_time.csv), ms per the
    docs. Decided by comparing 'stage' (about the step time) with STEP_TIME; µs when in doubt."""
    dur = {s: e - b for s, b, e in steps}
    for r in rows:
        step, stage = step_number(r[0]), r[6]
        if step in dur and stage:
            us_err = abs(float(stage) * 1e3 - dur[step])
            ms_err = abs(float(stage) * 1e6 - dur[step])
            return 1e6 if ms_err < us_err else 1e3
    return 1e3


def write_comm_ops(
    ctx: ReadContext, st: DbExport | None, groups: Groups, times: dict[str, list[dict[str, Any]]]
) -> None:
    """COMMUNICATION_OP rows with the wait/transit split of CommAnalyzerTime; CommAnalyzerTime alone
    (float µs start) when the profiler db gave no communication op."""
    groups.finish()
    rows = []
    taken: Counter[str] = Counter()
    raw = st.comm_ops_raw if st is not None else []
    if not raw:
        for name, ts_list in times.items():
            for t in ts_list:
                start = t["start_us"]
                raw.append(
                    {
                        "name": name,
                        "ts": us_number_to_ns(start),
                        "dur": t["elapse"],
                        "group": t["group"],
                        "dtype": None,
                        "count": None,
                        "alg": None,
                        "from_analysis": True,
                    }
                )
        raw.sort(key=lambda c: (c["ts"] is None, c["ts"] or 0))
    for c in raw:
        name = c["name"] or ""
        cands = times.get(name) or []
        t = cands[taken[name]] if taken[name] < len(cands) else None
        taken[name] += 1
        op_type = normalize_op_type(name)
        h = c["group"] or (t["group"] if t else None)
        g = groups.get(h) if h else None
        step = t["step"] if t and t["step"] is not None else (st.step_of(c["ts"]) if st is not None else None)
        rows.append(
            {
                "step": step,
                "name": name,
                "op_type": op_type,
                "group_name": h,
                "group_ranks": g.global_ranks if g else None,
                "is_p2p": (t["is_p2p"] if t else False) or op_type in P2P_TYPES,
                "ts_ns": c["ts"],
                "dur_ns": c["dur"],
                "transit_ns": t["transit"] if t else None,
                "wait_ns": t["wait"] if t else None,
                "sync_ns": t["sync"] if t else None,
                "idle_ns": t["idle"] if t else None,
                "bytes": hccl_bytes(c["dtype"], c["count"]),
                "dtype": c["dtype"],
                "count": c["count"],
                "alg_type": c["alg"],
                "source": "analysis.db"
                if c.get("from_analysis")
                else "COMMUNICATION_OP" + ("+analysis.db" if t else ""),
            }
        )
    if rows:
        ctx.write("comm_ops", rows)
