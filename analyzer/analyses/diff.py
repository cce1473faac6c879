"""Two runs compared (``analyze diff BASE NEW``): what got slower, where, and by how much.

Built on the analyses of each run, with their names (docs/analyses.md §8). The steps and ranks
compared are chosen by ``run_pairing``; every value is **per step** (the mean over the compared
steps) and, for operators and communication, **per rank and step**, so runs that profiled
different numbers of steps or ranks compare. Parts (each a table ``analysis.diff*``):

- ``breakdown``: per matched rank (or layout class) and in total, every step breakdown column of
  both runs, the change, and whether it is beyond the step-to-step noise of the two runs (``noise``);
- ``operators``: host operators and device kernels by name and by name + input shapes: calls and
  time per rank and step in each run, the change, new and vanished ones; the rank row where it
  changed most and the steps to look at in each run's timeline;
- ``communication``: per collective type and group (matched by role, else members): calls, bytes
  per call, elapsed / wait / transit per rank and step, bandwidth;
- ``memory``: the peak allocated / reserved memory per matched rank and the highest of all;
- ``stragglers``: each run's slow ranks (msprof-analyze's vote, ``slow_rank``);
- ``findings`` and ``verdict``: the changes named in one sentence (``verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..messages import Message, english
from ..store import Store
from ..vocabulary import COMM_CALL_SQL, comparable_name
from . import collectives
from .cache import per_pair
from .communication import communication_summary
from .noise import yuen
from .run_metrics import BREAKDOWN, MEMORY, MEMORY_SQL, rows_at
from .run_pairing import Pairing, RankGroup, fmt_ranks, pair_runs
from .slow_rank import slow_ranks
from .step_breakdown import step_breakdown

TOTAL = "total"
BREAKDOWN_COLUMNS = [
    "label",
    "scope",
    "base_ranks",
    "new_ranks",
    "metric",
    "base_value",
    "new_value",
    "delta",
    "delta_pct",
    "significant",
    "t",
    "base_steps",
    "new_steps",
    "base_step",
    "new_step",
]
OPERATOR_COLUMNS = [
    "kind",
    "grouping",
    "name",
    "input_shapes",
    "status",
    "is_communication",
    "base_calls",
    "new_calls",
    "base_ns",
    "new_ns",
    "delta_ns",
    "delta_pct",
    "base_total_ns",
    "new_total_ns",
    "label",
    "base_rank",
    "new_rank",
    "base_step",
    "new_step",
]
COMM_COLUMNS = [
    "op_type",
    "group",
    "status",
    "base_calls",
    "new_calls",
    "base_bytes_per_call",
    "new_bytes_per_call",
    "base_bytes",
    "new_bytes",
    "base_elapsed_ns",
    "new_elapsed_ns",
    "delta_elapsed_ns",
    "base_wait_ns",
    "new_wait_ns",
    "delta_wait_ns",
    "base_transit_ns",
    "new_transit_ns",
    "base_bandwidth_bytes_per_s",
    "new_bandwidth_bytes_per_s",
]
MEMORY_COLUMNS = [
    "label",
    "scope",
    "base_ranks",
    "new_ranks",
    "metric",
    "base_value",
    "new_value",
    "delta",
    "delta_pct",
]
STRAGGLER_COLUMNS = ["side", "run", "rank", "votes", "instances", "vote_ratio"]


@dataclass
class RunDiff:
    """Everything ``analyze diff`` shows (treat the frames as read-only: they are shared)."""

    pairing: Pairing
    breakdown: pd.DataFrame
    operators: pd.DataFrame
    communication: pd.DataFrame
    memory: pd.DataFrame
    stragglers: pd.DataFrame
    findings: pd.DataFrame
    verdict: str  # in English (the CLI's); ``verdict_msgs`` writes it in a language (``verdict.sentence``)
    producers: tuple[tuple[str, ...], tuple[str, ...]]
    verdict_msgs: list[Message] = field(default_factory=list)  # a message per row of ``findings``


def _pct(base: float | None, new: float | None) -> float | None:
    """The change in percent of the base (None when the base is 0 or missing: a new item's status says so)."""
    if base is None or new is None or pd.isna(base) or pd.isna(new) or base == 0:
        return None
    return (new - base) / abs(base) * 100.0


def _f(v: object) -> float | None:
    return None if v is None or pd.isna(v) else float(v)  # type: ignore[arg-type]


def _group_of(groups: list[RankGroup], side: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for g in groups:
        for r in g.base_ranks if side == "base" else g.new_ranks:
            out[int(r)] = g.label
    return out


def _scope(p: Pairing) -> str:
    return p.match


def _metric_row(p: Pairing, g: RankGroup, metric: str, bv: float | None, nv: float | None) -> dict[str, object]:
    """The columns every per-group metric row of a diff starts with: who is compared, and the change."""
    return {
        "label": g.label,
        "scope": TOTAL if g.label == TOTAL else _scope(p),
        "base_ranks": list(g.base_ranks),
        "new_ranks": list(g.new_ranks),
        "metric": metric,
        "base_value": bv,
        "new_value": nv,
        "delta": None if bv is None or nv is None else nv - bv,
        "delta_pct": _pct(bv, nv),
    }


# ---------------------------------------------------------------------------------------------
# step breakdown
# ---------------------------------------------------------------------------------------------


def _side_frame(store: Store, p: Pairing, side: str) -> pd.DataFrame:
    run, ranks, steps = p.side(side)
    rows = rows_at(step_breakdown(store, run), ranks, steps).copy()
    rows["group"] = rows["rank"].map(_group_of(list(p.groups), side))
    for c in BREAKDOWN.values():
        rows[c] = pd.to_numeric(rows[c], errors="coerce").astype("float64")
    rows["step"] = rows["step"].astype("float64")  # NaN for a run without steps (not a key)
    return rows


def _group_stats(rows: pd.DataFrame, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per group: the mean over its ranks of each rank's mean over steps; and per (group, step) the
    mean over its ranks."""
    cols = list(BREAKDOWN.values())
    per_rank = rows.groupby([key, "rank"])[cols].mean().groupby(level=0).mean()
    per_step = rows.dropna(subset=["step"]).groupby([key, "step"])[cols].mean()
    return per_rank, per_step


def breakdown_diff(store: Store, p: Pairing) -> pd.DataFrame:
    b, n = _side_frame(store, p, "base"), _side_frame(store, p, "new")
    b["all"], n["all"] = TOTAL, TOTAL
    groups = [*p.groups, RankGroup(TOTAL, tuple(p.base_ranks), tuple(p.new_ranks))]
    stats = {("base", "group"): _group_stats(b, "group"), ("new", "group"): _group_stats(n, "group")}
    stats[("base", "all")] = _group_stats(b, "all")
    stats[("new", "all")] = _group_stats(n, "all")
    rows = []
    for g in groups:
        key = "all" if g.label == TOTAL else "group"
        (b_rank, b_step), (n_rank, n_step) = stats[("base", key)], stats[("new", key)]
        b_steps = b_step.loc[g.label] if g.label in b_step.index.get_level_values(0) else pd.DataFrame()
        n_steps = n_step.loc[g.label] if g.label in n_step.index.get_level_values(0) else pd.DataFrame()
        link = _link_pair(b_steps, n_steps, p)
        for col in BREAKDOWN.values():
            bv = _f(b_rank.at[g.label, col]) if g.label in b_rank.index else None
            nv = _f(n_rank.at[g.label, col]) if g.label in n_rank.index else None
            noise = yuen(
                list(b_steps[col].dropna()) if not b_steps.empty else [],
                list(n_steps[col].dropna()) if not n_steps.empty else [],
            )
            rows.append(
                {
                    **_metric_row(p, g, col, bv, nv),
                    "significant": noise.significant,
                    "t": noise.t,
                    "base_steps": noise.n_base,
                    "new_steps": noise.n_new,
                    "base_step": link[0],
                    "new_step": link[1],
                }
            )
    out = pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)
    for c in ("base_value", "new_value", "delta", "delta_pct", "t"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    out["significant"] = out["significant"].astype("boolean")
    for c in ("base_step", "new_step"):
        out[c] = out[c].astype("Int64")
    return out


def _link_pair(b_steps: pd.DataFrame, n_steps: pd.DataFrame, p: Pairing) -> tuple[int | None, int | None]:
    """The step pair in which the group's step time changed most (what a timeline link opens)."""
    best, best_d = (None, None), -1.0
    for sb, sn in p.step_pairs:
        bv = b_steps["step_ns"].get(float(sb), np.nan) if sb is not None and not b_steps.empty else np.nan
        nv = n_steps["step_ns"].get(float(sn), np.nan) if sn is not None and not n_steps.empty else np.nan
        d = abs(nv - bv) if not (pd.isna(bv) or pd.isna(nv)) else -0.5
        if d > best_d:
            best, best_d = (sb, sn), d
    return best


# ---------------------------------------------------------------------------------------------
# operators and kernels
# ---------------------------------------------------------------------------------------------

OPERATORS_SQL = f"""
SELECT rank, step, name, input_shapes AS shapes, count(*) AS calls, sum(dur_ns)::DOUBLE AS total_ns,
       sum(coalesce(self_ns, dur_ns))::DOUBLE AS self_ns, {COMM_CALL_SQL} AS is_comm
FROM operators
WHERE run = $run AND list_contains($ranks, rank) AND {{steps}}
  AND name NOT LIKE 'ProfilerStep#%' AND coalesce(category, '') <> 'python_function'
GROUP BY rank, step, name, input_shapes
"""
KERNELS_SQL = """
SELECT rank, step, name, input_shapes AS shapes, count(*) AS calls, sum(dur_ns)::DOUBLE AS total_ns,
       sum(dur_ns)::DOUBLE AS self_ns, coalesce(bool_or(is_communication), false) AS is_comm
FROM kernels
WHERE run = $run AND list_contains($ranks, rank) AND {steps}
GROUP BY rank, step, name, input_shapes
"""


@dataclass
class _Side:
    """What one run contributes to a diff beyond its analyses, read in one go."""

    calls: pd.DataFrame  # per (kind, rank, step, name, shapes): calls, time
    n: int  # (rank, step) pairs compared: the divisor of "per rank and step"
    peaks: pd.DataFrame  # per rank: peak allocated / reserved bytes


def _side(store: Store, p: Pairing, side: str) -> _Side:
    run, ranks, steps = p.side(side)
    known = [int(s) for s in steps if s is not None]
    where = "list_contains($steps, step)" if known else "true"
    # DuckDB refuses a parameter the statement does not use: $steps only when steps filter
    params = {"run": run, "ranks": [int(r) for r in ranks], **({"steps": known} if known else {})}
    with store.read_connection(run=run, ranks=ranks, tables=["operators", "kernels", "memory_samples"]) as con:
        ops = con.execute(OPERATORS_SQL.format(steps=where), params).df().assign(kind="operator")
        ker = con.execute(KERNELS_SQL.format(steps=where), params).df().assign(kind="kernel")
        peaks = con.execute(MEMORY_SQL, {"run": run, "ranks": params["ranks"]}).df()
    df = pd.concat([d for d in (ops, ker) if not d.empty], ignore_index=True) if len(ops) + len(ker) else ops
    df["name"] = df["name"].map(comparable_name)
    df["shapes"] = df["shapes"].map(canonical_shapes)
    df["step"] = pd.to_numeric(df["step"], errors="coerce").astype("float64")
    df["group"] = df["rank"].map(_group_of(list(p.groups), side))
    n = len(rows_at(step_breakdown(store, run), ranks, steps)) or len(ranks) or 1
    return _Side(df, n, peaks)


def canonical_shapes(text: object) -> str:
    """Input shapes written one way for every producer, so two runs' shapes compare: Kineto's
    ``[[64, 512], [512, 512]]`` stays as it is (spacing normalised); torch_npu's ``32,1000;\\r\\n1000,4096``
    (one tensor per ``;``, quoted in kernel_details.csv) becomes ``[[32, 1000], [1000, 4096]]``;
    missing → ``""``."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    s = str(text).strip().strip('"').strip()
    if not s:
        return ""
    if s.startswith("["):
        return " ".join(s.split()).replace("[ ", "[").replace(" ]", "]")
    tensors = [t.strip().strip('"').strip() for t in s.split(";")]
    while tensors and not tensors[-1]:
        tensors.pop()
    return "[" + ", ".join("[" + ", ".join(d.strip() for d in t.split(",") if d.strip()) + "]" for t in tensors) + "]"


def _per_step(df: pd.DataFrame, keys: list[str], n: int) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=[*keys, "calls", "self_ns", "total_ns", "is_comm"])
    g = df.groupby(keys, dropna=False)
    out = g[["calls", "self_ns", "total_ns"]].sum() / n
    out["is_comm"] = g["is_comm"].any()
    return out.reset_index()


def operator_diff(p: Pairing, base: _Side, new: _Side) -> pd.DataFrame:
    b, nb, n, nn = base.calls, base.n, new.calls, new.n
    parts = []
    for grouping, keys in (("name", ["kind", "name"]), ("name+shape", ["kind", "name", "shapes"])):
        bs, ns = _per_step(b, keys, nb), _per_step(n, keys, nn)
        m = bs.merge(ns, on=keys, how="outer", suffixes=("_b", "_n"))
        for c in ("calls", "self_ns", "total_ns"):
            m[f"{c}_b"] = pd.to_numeric(m[f"{c}_b"], errors="coerce").fillna(0.0).astype("float64")
            m[f"{c}_n"] = pd.to_numeric(m[f"{c}_n"], errors="coerce").fillna(0.0).astype("float64")
        comm = m["is_comm_b"].astype("boolean").fillna(False) | m["is_comm_n"].astype("boolean").fillna(False)
        frame = pd.DataFrame(
            {
                "kind": m["kind"],
                "grouping": grouping,
                "name": m["name"],
                "input_shapes": m["shapes"].replace("", None) if "shapes" in m else None,
                "is_communication": comm.astype(bool),
                "base_calls": m["calls_b"],
                "new_calls": m["calls_n"],
                "base_ns": m["self_ns_b"],
                "new_ns": m["self_ns_n"],
                "base_total_ns": m["total_ns_b"],
                "new_total_ns": m["total_ns_n"],
            }
        )
        parts.append(frame)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=OPERATOR_COLUMNS)
    out["delta_ns"] = out["new_ns"] - out["base_ns"]
    out["delta_pct"] = [_pct(x, y) for x, y in zip(out["base_ns"], out["new_ns"])]
    out["delta_pct"] = pd.to_numeric(out["delta_pct"], errors="coerce").astype("float64")
    out["status"] = np.select(
        [
            out["base_calls"] == 0,
            out["new_calls"] == 0,
            (out["delta_ns"] != 0) | (out["base_calls"] != out["new_calls"]),
        ],
        ["new", "vanished", "changed"],
        "same",
    )
    out = _with_links(out, b, n, p)
    out = out.assign(_abs=out["delta_ns"].abs()).sort_values(
        ["kind", "grouping", "_abs", "name"], ascending=[False, True, False, True]
    )
    return out.drop(columns="_abs")[OPERATOR_COLUMNS].reset_index(drop=True)


def _with_links(out: pd.DataFrame, b: pd.DataFrame, n: pd.DataFrame, p: Pairing) -> pd.DataFrame:
    """For each operator: the rank row (group) where its time per step changed most, and the step
    pair where it changed most there: what the Compare page links to in each run's timeline."""
    out = out.copy()
    for c in ("label", "base_rank", "new_rank", "base_step", "new_step"):
        out[c] = None
    if b.empty and n.empty:
        return out
    size_b = {g.label: len(g.base_ranks) for g in p.groups}
    size_n = {g.label: len(g.new_ranks) for g in p.groups}

    def per_group_step(df: pd.DataFrame, sizes: dict[str, int]) -> pd.DataFrame:
        if df.empty:
            return pd.DataFrame(columns=["kind", "name", "group", "step", "v"])
        s = df.groupby(["kind", "name", "group", "step"], dropna=False)["self_ns"].sum().reset_index(name="v")
        s["v"] = s["v"] / s["group"].map(sizes).astype("float64")  # mean over the group's ranks
        return s

    gb, gn = per_group_step(b, size_b), per_group_step(n, size_n)
    pairs = pd.DataFrame(
        [
            (float("nan") if sb is None else float(sb), float("nan") if sn is None else float(sn))
            for sb, sn in p.step_pairs
        ],
        columns=["sb", "sn"],
    )
    left = gb.merge(pairs, left_on="step", right_on="sb").drop(columns="step")
    right = gn.merge(pairs, left_on="step", right_on="sn").drop(columns="step")
    both = left.merge(right, on=["kind", "name", "group", "sb", "sn"], how="outer", suffixes=("_b", "_n"))
    if both.empty:
        return out
    both["d"] = (both["v_n"].fillna(0.0) - both["v_b"].fillna(0.0)).abs()
    best = both.sort_values(["d", "group"], ascending=[False, True]).drop_duplicates(["kind", "name"])
    first = {g.label: (g.base_ranks[0], g.new_ranks[0]) for g in p.groups}
    link = {
        (k, nm): (g, first[g][0], first[g][1], sb, sn)
        for k, nm, g, sb, sn in zip(best["kind"], best["name"], best["group"], best["sb"], best["sn"])
        if g in first
    }
    for i, (k, nm) in enumerate(zip(out["kind"], out["name"])):
        hit = link.get((k, nm))
        if hit is None:
            continue
        g, br, nr, sb, sn = hit
        out.iat[i, out.columns.get_loc("label")] = g
        out.iat[i, out.columns.get_loc("base_rank")] = int(br)
        out.iat[i, out.columns.get_loc("new_rank")] = int(nr)
        out.iat[i, out.columns.get_loc("base_step")] = None if pd.isna(sb) else int(sb)
        out.iat[i, out.columns.get_loc("new_step")] = None if pd.isna(sn) else int(sn)
    for c in ("base_rank", "new_rank", "base_step", "new_step"):
        out[c] = out[c].astype("Int64")
    return out


# ---------------------------------------------------------------------------------------------
# communication
# ---------------------------------------------------------------------------------------------


def _group_keys(store: Store, run: str) -> dict[str, str]:
    """A communication group's key across runs: its role when named (tp, dp, default_pg), else its
    members, else its name."""
    groups = collectives.run_groups(store, run)
    out: dict[str, str] = {}
    for g, pg, ranks in zip(groups["group_name"], groups["pg_name"], groups["global_ranks"]):
        members = collectives.rank_list(ranks)
        role = pg if isinstance(pg, str) and pg and pg not in ("undefined", "None") else None
        ranks = fmt_ranks(members) if members else None
        out[str(g)] = (
            english("label.group", role=role, ranks=ranks)
            if role and ranks
            else role or (english("label.ranks", ranks=ranks) if ranks else str(g))
        )
    return out


def _comm_side(store: Store, p: Pairing, side: str) -> tuple[pd.DataFrame, int]:
    run, ranks, steps = p.side(side)
    ops = communication_summary(store, run)
    known = [int(s) for s in steps if s is not None]
    ops = ops[ops["rank"].isin(ranks)]
    if known:
        ops = ops[ops["step"].isin(known)]
    keys = _group_keys(store, run)
    ops = ops.assign(group=ops["group_name"].map(lambda g: keys.get(str(g), str(g)) if isinstance(g, str) else "?"))
    n = len(rows_at(step_breakdown(store, run), ranks, steps)) or len(ranks) or 1
    return ops, n


def _comm_per_step(ops: pd.DataFrame, n: int) -> pd.DataFrame:
    cols = ["op_type", "group", "calls", "bytes", "elapsed_ns", "wait_ns", "transit_ns", "bytes_per_call", "bw"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    d = ops.assign(
        calls=1.0,
        bytes=pd.to_numeric(ops["bytes"], errors="coerce").astype("float64"),
        elapsed_ns=pd.to_numeric(ops["dur_ns"], errors="coerce").astype("float64"),
        wait_ns=pd.to_numeric(ops["wait_ns"], errors="coerce").astype("float64"),
        transit_ns=pd.to_numeric(ops["transit_ns"], errors="coerce").astype("float64"),
    )
    g = d.groupby(["op_type", "group"])
    s = g[["calls", "bytes", "elapsed_ns", "wait_ns", "transit_ns"]].sum(min_count=1)
    s["bytes_per_call"] = s["bytes"] / s["calls"]
    s["bw"] = np.where(s["transit_ns"] > 0, s["bytes"] / s["transit_ns"] * 1e9, np.nan)
    for c in ("calls", "bytes", "elapsed_ns", "wait_ns", "transit_ns"):
        s[c] = s[c] / n
    return s.reset_index()[cols]


def _pair_leftover_groups(b: pd.DataFrame, n: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Groups known only by a name that differs between runs (HCCL group hashes change from one run
    of a job to the next): per collective type and group size, a group only one run has is paired
    with the only one of the other run, and both rows get the label 'A ↔ B'."""
    b, n = b.copy(), n.copy()
    sizes_b = b.groupby("group")["n_members"].max() if not b.empty else pd.Series(dtype="float64")
    sizes_n = n.groupby("group")["n_members"].max() if not n.empty else pd.Series(dtype="float64")
    for op in sorted(set(b["op_type"]) & set(n["op_type"])):
        gb = set(b.loc[b["op_type"] == op, "group"])
        gn = set(n.loc[n["op_type"] == op, "group"])
        only_b, only_n = sorted(gb - gn), sorted(gn - gb)
        by_size_b: dict[object, list[str]] = {}
        by_size_n: dict[object, list[str]] = {}
        for g in only_b:
            by_size_b.setdefault(sizes_b.get(g), []).append(g)
        for g in only_n:
            by_size_n.setdefault(sizes_n.get(g), []).append(g)
        for size, bgs in by_size_b.items():
            ngs = by_size_n.get(size, [])
            if len(bgs) == 1 and len(ngs) == 1:
                label = english("label.pair", a=bgs[0], b=ngs[0])
                b.loc[(b["op_type"] == op) & (b["group"] == bgs[0]), "group"] = label
                n.loc[(n["op_type"] == op) & (n["group"] == ngs[0]), "group"] = label
    return b, n


def communication_diff(store: Store, p: Pairing) -> pd.DataFrame:
    (b, nb), (n, nn) = _comm_side(store, p, "base"), _comm_side(store, p, "new")
    b, n = _pair_leftover_groups(b, n)
    bs, ns = _comm_per_step(b, nb), _comm_per_step(n, nn)
    m = bs.merge(ns, on=["op_type", "group"], how="outer", suffixes=("_b", "_n"))
    if m.empty:
        return pd.DataFrame(columns=COMM_COLUMNS)
    out = pd.DataFrame({"op_type": m["op_type"], "group": m["group"]})
    for ours, theirs in (
        ("calls", "calls"),
        ("bytes_per_call", "bytes_per_call"),
        ("bytes", "bytes"),
        ("elapsed_ns", "elapsed_ns"),
        ("wait_ns", "wait_ns"),
        ("transit_ns", "transit_ns"),
        ("bandwidth_bytes_per_s", "bw"),
    ):
        out[f"base_{ours}"] = pd.to_numeric(m[f"{theirs}_b"], errors="coerce").astype("float64")
        out[f"new_{ours}"] = pd.to_numeric(m[f"{theirs}_n"], errors="coerce").astype("float64")
    out["base_calls"] = out["base_calls"].fillna(0.0)
    out["new_calls"] = out["new_calls"].fillna(0.0)
    out["delta_elapsed_ns"] = out["new_elapsed_ns"].fillna(0.0) - out["base_elapsed_ns"].fillna(0.0)
    out["delta_wait_ns"] = out["new_wait_ns"] - out["base_wait_ns"]
    out["status"] = np.select([out["base_calls"] == 0, out["new_calls"] == 0], ["new", "vanished"], "both")
    out = out.assign(_abs=out["delta_elapsed_ns"].abs()).sort_values(["_abs", "op_type"], ascending=[False, True])
    return out.drop(columns="_abs")[COMM_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# memory, stragglers
# ---------------------------------------------------------------------------------------------


def memory_diff(p: Pairing, base: _Side, new: _Side) -> pd.DataFrame:
    bp, np_ = base.peaks.set_index("rank"), new.peaks.set_index("rank")
    rows = []
    groups = [*p.groups, RankGroup(TOTAL, tuple(p.base_ranks), tuple(p.new_ranks))]
    for g in groups:
        for col in MEMORY.values():
            bv = _peak(bp, g.base_ranks, col)
            nv = _peak(np_, g.new_ranks, col)
            if bv is None and nv is None:
                continue
            rows.append(
                {
                    **_metric_row(p, g, col, bv, nv),
                }
            )
    out = pd.DataFrame(rows, columns=MEMORY_COLUMNS)
    for c in ("base_value", "new_value", "delta", "delta_pct"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    return out


def _peak(peaks: pd.DataFrame, ranks: tuple[int, ...], col: str) -> float | None:
    v = pd.to_numeric(peaks[col], errors="coerce").reindex(list(ranks)).dropna() if not peaks.empty else pd.Series()
    return None if v.empty else float(v.max())


def straggler_diff(store: Store, p: Pairing) -> pd.DataFrame:
    """Each run's slow ranks among the compared ranks (msprof-analyze's vote, ``slow_rank``)."""
    rows = []
    for side in ("base", "new"):
        run, ranks, _ = p.side(side)
        v = slow_ranks(store, run)
        v = v[(v["votes"] > 0) & v["rank"].isin(ranks)]
        for r in v.to_dict("records"):
            rows.append({"side": side, "run": run, **{k: r[k] for k in ("rank", "votes", "instances", "vote_ratio")}})
    return pd.DataFrame(rows, columns=STRAGGLER_COLUMNS)


def producers(store: Store, run: str) -> tuple[str, ...]:
    """The profilers whose operators or kernels the run holds (not the collector's scalars)."""
    co = store.catalog_snapshot()["collections"].select(["run", "producer", "capabilities"]).to_pylist()
    return tuple(
        sorted(
            {
                str(r["producer"])
                for r in co
                if r["run"] == run and r["producer"] and {"operators", "kernels"} & set(r["capabilities"] or [])
            }
        )
    )


@per_pair
def run_diff(
    store: Store,
    base: str,
    new: str,
    base_step: int | None = None,
    new_step: int | None = None,
    ranks: tuple[int, ...] | None = None,
) -> RunDiff:
    """``new`` compared with ``base`` (see the module doc); cached per content of both runs."""
    from ..messages import sentence
    from .verdict import findings

    p = pair_runs(store, base, new, base_step, new_step, ranks)
    b, n = _side(store, p, "base"), _side(store, p, "new")
    parts = {
        "breakdown": breakdown_diff(store, p),
        "operators": operator_diff(p, b, n),
        "communication": communication_diff(store, p),
        "memory": memory_diff(p, b, n),
        "stragglers": straggler_diff(store, p),
    }
    prods = (producers(store, p.base), producers(store, p.new))
    found, msgs = findings(p, prods, **parts)
    return RunDiff(p, **parts, findings=found, verdict=sentence(msgs), producers=prods, verdict_msgs=msgs)
