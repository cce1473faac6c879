"""The CANN family's communication files (docs/formats.md §1.9, §1.10): ``communication.json``
(per op: wait / transit / sync / idle times, bandwidth per transport with the packet size
distribution) and ``communication_matrix.json`` (per op and link: bytes, time, bandwidth between two
group-local ranks), and the ``comm_ops`` rows of a text export.

Units as written: times in ms (start in µs), sizes in decimal MB, bandwidth in "GB/s" = MB per ms
(see ``units``). Op keys are ``{op name}@{group hash}``; steps are ``step{N}`` keys.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem
from ...units import ascend_gbps_to_bytes_per_s, mb_to_bytes, ms_to_ns, us_text_or_bad_ns
from ...vocabulary import P2P_TYPES, normalize_op_type
from ..base import ReadContext
from ..common.cells import number, us_number_to_ns
from ..common.jsonfile import load_json
from ..common.steps import step_containing
from .groups import Groups, parse_link_key

_STEP_KEY = re.compile(r"^step(\d+)$", re.I)


# bytes per element of HCCL data types (ENUM_HCCL_DATA_TYPE names, trace args data_type)
HCCL_DTYPE_BYTES = {
    "INT8": 1,
    "UINT8": 1,
    "INT16": 2,
    "UINT16": 2,
    "FP16": 2,
    "BFP16": 2,
    "BF16": 2,
    "INT32": 4,
    "UINT32": 4,
    "FP32": 4,
    "INT64": 8,
    "UINT64": 8,
    "FP64": 8,
    "INT128": 16,
    "HIF8": 1,
    "FP8E4M3": 1,
    "FP8E5M2": 1,
}


def hccl_bytes(dtype: str | None, count: int | float | None) -> int | None:
    if dtype is None or count is None:
        return None
    size = HCCL_DTYPE_BYTES.get(dtype.strip().upper())
    return int(count) * size if size else None


def step_from_key(key: str | None) -> int | None:
    """'step50' -> 50; 'step' (no step info) -> None."""
    if not key:
        return None
    m = _STEP_KEY.match(key.strip())
    return int(m.group(1)) if m else None


@dataclass
class CommTime:
    """One op of communication.json / CommAnalyzerTime."""

    name: str
    group: str | None
    step: int | None
    is_p2p: bool
    start_us: float | None
    elapse_ns: int | None
    transit_ns: int | None
    wait_ns: int | None
    sync_ns: int | None
    idle_ns: int | None


def gbps(v: Any) -> float | None:
    """'Bandwidth(GB/s)' of communication.json / analysis.db to bytes per second (see units)."""
    return ascend_gbps_to_bytes_per_s(v)


def split_op_key(key: str) -> tuple[str, str | None]:
    """'hcom_allReduce__586_0_1@17522688603477080586' -> (name, hash)."""
    if "@" in key:
        name, h = key.rsplit("@", 1)
        return name, h
    return key, None


def link_rows(entries: Iterable[dict[str, Any]], groups: Groups) -> list[dict[str, Any]]:
    """comm_links rows from matrix entries (keys: step, op_key, op_name, group, is_p2p, src, dst,
    transport, size_mb, time_ms, bw_gbps), group-local ranks converted to global ones."""
    entries = list(entries)
    # group sizes and this rank's self-links first, so every link can be converted
    for e in entries:
        h, src, dst = e.get("group"), e.get("src"), e.get("dst")
        if h is None or src is None or dst is None:
            continue
        groups.note_size(h, max(src, dst) + 1)
        if src == dst:
            groups.note_self_link(h, src)
    groups.finish()
    rows = []
    for e in entries:
        h = e.get("group")
        g = groups.get(h) if h is not None else None
        rows.append(
            {
                "step": e.get("step"),
                "op_key": e.get("op_key"),
                "op_name": e.get("op_name"),
                "group_name": h,
                "is_p2p": e.get("is_p2p"),
                "src_local": e.get("src"),
                "dst_local": e.get("dst"),
                "src_rank": g.to_global(e.get("src")) if g else None,
                "dst_rank": g.to_global(e.get("dst")) if g else None,
                "transport": e.get("transport"),
                "bytes": mb_to_bytes(e.get("size_mb")),
                "transit_ns": ms_to_ns(e.get("time_ms")),
                "bandwidth_bytes_per_s": gbps(e.get("bw_gbps")),
            }
        )
    return rows


def _sections(data: Any, path: Path, kind: str) -> list[tuple[int | None, bool, dict[str, Any]]]:
    """(step, is_p2p, {op key: value}) sections of communication*.json."""
    if not isinstance(data, dict):
        raise InputError(str(path), problem("not_keyed_by_step", kind=kind))
    out = []
    for step_key, body in data.items():
        if not isinstance(body, dict):
            continue
        step = step_from_key(str(step_key))
        for part in ("collective", "p2p"):
            sec = body.get(part)
            if isinstance(sec, dict):
                out.append((step, part == "p2p", sec))
    if data and not out:
        raise InputError(str(path), problem("no_comm_sections", kind=kind))
    return out


def read_communication_json(ctx: ReadContext, path: Path, groups: Groups) -> list[CommTime]:
    """The ops of communication.json (their wait / transit split) and its bandwidth rows (``comm_bandwidth``)."""
    comm_times: list[CommTime] = []
    with ctx.reading(path, "communication.json") as outcome:
        data = load_json(path, "communication.json")
        bw: dict[str, list[Any]] = defaultdict(list)
        for step, p2p, sec in _sections(data, path, "communication.json"):
            for key, op in sec.items():
                if key == "Total Op Info" or not isinstance(op, dict):
                    continue
                name, h = split_op_key(key)
                ti = op.get("Communication Time Info") or {}
                comm_times.append(
                    CommTime(
                        name=name,
                        group=h,
                        step=step,
                        is_p2p=p2p,
                        start_us=number(ti.get("Start Timestamp(us)")),
                        elapse_ns=ms_to_ns(ti.get("Elapse Time(ms)")),
                        transit_ns=ms_to_ns(ti.get("Transit Time(ms)")),
                        wait_ns=ms_to_ns(ti.get("Wait Time(ms)")),
                        sync_ns=ms_to_ns(ti.get("Synchronization Time(ms)")),
                        idle_ns=ms_to_ns(ti.get("Idle Time(ms)")),
                    )
                )
                if h is not None:
                    groups.get(h)
                for transport, info in (op.get("Communication Bandwidth Info") or {}).items():
                    if not isinstance(info, dict):
                        continue
                    size, tm = number(info.get("Transit Size(MB)")), number(info.get("Transit Time(ms)"))
                    if not size and not tm:
                        continue  # transport not used by this op
                    base = {"step": step, "op_name": name, "group_name": h, "transport": transport}
                    rows = [(None, None, None)]
                    dist = info.get("Size Distribution") or {}
                    if isinstance(dist, dict):
                        for pkt, val in dist.items():
                            cnt, ptm = (val[0], val[1]) if isinstance(val, list) and len(val) >= 2 else (val, None)
                            rows.append((mb_to_bytes(number(pkt)), number(cnt), ms_to_ns(ptm)))
                    for pkt_bytes, cnt, ptm in rows:
                        for k2, v2 in base.items():
                            bw[k2].append(v2)
                        bw["bytes"].append(mb_to_bytes(size))
                        bw["transit_ns"].append(ms_to_ns(tm))
                        bw["bandwidth_bytes_per_s"].append(gbps(info.get("Bandwidth(GB/s)")))
                        bw["large_packet_ratio"].append(number(info.get("Large Packet Ratio")))
                        bw["packet_size_bytes"].append(pkt_bytes)
                        bw["packet_count"].append(int(cnt) if cnt is not None else None)
                        bw["packet_transit_ns"].append(ptm)
        outcome.rows = len(comm_times)
        if bw:
            outcome.rows += ctx.write("comm_bandwidth", dict(bw))
        if not comm_times:
            outcome.warn(problem("no_comm_op"))
    return comm_times


def read_matrix_json(ctx: ReadContext, path: Path, groups: Groups) -> None:
    """``comm_links`` (and the group layouts) from communication_matrix.json."""
    with ctx.reading(path, "communication_matrix.json") as outcome:
        data = load_json(path, "communication_matrix.json")
        entries = []
        for step, p2p, sec in _sections(data, path, "communication_matrix.json"):
            for key, links in sec.items():
                if key == "Total Op Info" or not isinstance(links, dict):
                    continue
                op_key, h = split_op_key(key)
                for lk, info in links.items():
                    if not isinstance(info, dict):
                        continue
                    src, dst = parse_link_key(str(lk))
                    entries.append(
                        {
                            "step": step,
                            "op_key": op_key,
                            "op_name": info.get("Op Name") or (op_key if op_key.startswith("hcom_") else None),
                            "group": h,
                            "is_p2p": p2p,
                            "src": src,
                            "dst": dst,
                            "transport": info.get("Transport Type"),
                            "size_mb": info.get("Transit Size(MB)"),
                            "time_ms": info.get("Transit Time(ms)"),
                            "bw_gbps": info.get("Bandwidth(GB/s)"),
                        }
                    )
        rows = link_rows(entries, groups)
        outcome.rows = ctx.write("comm_links", rows) if rows else 0
        if not rows:
            outcome.warn(problem("no_comm_link"))


def write_comm_ops(
    ctx: ReadContext,
    kernel_comm: list[dict[str, Any]],
    trace_ops: list[dict[str, Any]],
    comm_times: list[CommTime],
    groups: Groups | None,
    steps: list[tuple[int, int, int]],
) -> None:
    """``comm_ops`` of a text export: the communication rows of ``kernel_comm`` (kernel_details.csv:
    exact start and duration), else the big HCCL ops of the trace (``trace_ops``), else
    communication.json; each matched by name and order with its trace op (dtype, count, algorithm)
    and its communication.json op (wait / transit split, group)."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in sorted(trace_ops, key=lambda h: us_text_or_bad_ns(str(h["ts"])) or 0 if h["ts"] is not None else 0):
        by_trace[h["name"]].append(h)
    by_time: dict[str, list[CommTime]] = defaultdict(list)
    for c in comm_times:
        by_time[c.name].append(c)
    base: list[dict[str, Any]] = []
    if kernel_comm:
        base = [dict(k, source="kernel_details.csv") for k in kernel_comm]
    elif trace_ops:
        for h in trace_ops:
            ts = us_text_or_bad_ns(h["ts"]) if isinstance(h["ts"], str) else us_number_to_ns(h["ts"])
            base.append(
                {
                    "name": h["name"],
                    "step": None,
                    "ts": ts,
                    "dur": us_number_to_ns(h["dur"]),
                    "source": "trace_view.json",
                }
            )
    else:
        for c in comm_times:
            base.append(
                {
                    "name": c.name,
                    "step": c.step,
                    "ts": us_number_to_ns(c.start_us),
                    "dur": c.elapse_ns,
                    "source": "communication.json",
                }
            )
    if not base:
        return
    base.sort(key=lambda b: (b["ts"] is None, b["ts"] or 0))
    taken_trace: Counter[str] = Counter()
    taken_time: Counter[str] = Counter()
    matched: list[tuple[dict[str, Any], dict[str, Any] | None, CommTime | None]] = []
    used: set[int] = set()
    for b in base:
        name = b["name"]
        tr_list = by_trace.get(name) or []
        tr = tr_list[taken_trace[name]] if taken_trace[name] < len(tr_list) else None
        taken_trace[name] += 1
        ct_list = by_time.get(name) or []
        ct = None
        if ct_list:
            same_step = [c for c in ct_list if b["step"] is not None and c.step == b["step"]]
            ct = (
                same_step[0]
                if len(same_step) == 1
                else (ct_list[taken_time[name]] if taken_time[name] < len(ct_list) else None)
            )
        taken_time[name] += 1
        if ct is not None:
            used.add(id(ct))
        matched.append((b, tr, ct))
    # ops that only communication.json knows (e.g. kernel_details.csv trimmed or cut): kept, float start
    from_json = not kernel_comm and not trace_ops  # then every communication.json op is in base already
    for c in comm_times:
        if id(c) not in used and not from_json:
            extra = {
                "name": c.name,
                "step": c.step,
                "ts": us_number_to_ns(c.start_us),
                "dur": c.elapse_ns,
                "source": "communication.json",
            }
            matched.append((extra, None, c))
    matched.sort(key=lambda m: (m[0]["ts"] is None, m[0]["ts"] or 0))
    rows = []
    for b, tr, ct in matched:
        name = b["name"]
        op_type = normalize_op_type(name)
        step = b["step"]
        if step is None and ct is not None:
            step = ct.step
        if step is None and b["ts"] is not None:
            step = step_containing(steps, b["ts"])
        g = groups.get(ct.group) if (groups is not None and ct is not None and ct.group) else None
        dtype = tr["dtype"] if tr else None
        count = tr["count"] if tr else None
        rows.append(
            {
                "step": step,
                "name": name,
                "op_type": op_type,
                "group_name": g.hash if g else None,
                "group_ranks": None,  # filled after the layouts are complete
                "is_p2p": (ct.is_p2p if ct is not None else False) or op_type in P2P_TYPES,
                "ts_ns": b["ts"],
                "dur_ns": b["dur"] if b["dur"] is not None else (ct.elapse_ns if ct else None),
                "transit_ns": ct.transit_ns if ct else None,
                "wait_ns": ct.wait_ns if ct else None,
                "sync_ns": ct.sync_ns if ct else None,
                "idle_ns": ct.idle_ns if ct else None,
                "bytes": hccl_bytes(dtype, count),
                "dtype": dtype,
                "count": int(count) if count is not None else None,
                "alg_type": tr["alg"] if tr else None,
                "source": b["source"]
                + ("+communication.json" if ct is not None and b["source"] != "communication.json" else ""),
            }
        )
    if groups is not None:
        groups.finish()
        for r in rows:
            if r["group_name"]:
                g = groups.get(r["group_name"])
                r["group_ranks"] = g.global_ranks if g else None
    ctx.write("comm_ops", rows)
