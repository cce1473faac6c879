"""Pipeline parallelism without instrumentation: send → recv pairs across ranks, and per pipeline
stage the forward / backward micro-batches and the bubbles between them.

msprof-analyze's ``pp_chart`` needs mstx ranges the user puts around each forward and backward in
the schedule code. Here the schedule is read off the point-to-point traffic instead:

1. *Pairs* (``send_recv_pairs``). A send and its recv both block until the message moved, so on the
   aligned clock (``clock_alignment``) their ranges overlap. Within each pipeline group of the
   inferred layout (``parallel_layout``: the ``pp`` dimension; without one, the two ranks of a job
   in which only two exchange p2p ops), every send is paired, in time order, with the not yet paired recv of a
   neighbouring stage (stage ± 1) of the same message size and step whose range overlaps it most
   (within ``TOLERANCE_NS`` plus both ranks' clock residuals). gloo's ranges name neither peer nor
   group, HCCL's name the group: both are paired the same way.
2. *Direction*. A send to the next stage carries activations (forward), one to the previous stage
   gradients (backward); a recv is forward when it comes from the previous stage. The k-th op of a
   (kind, direction) in a rank's step is micro-batch k.
3. *Segments* (``pipeline``). A stage's step is cut at its p2p ops. Each op, from the call to the
   end of its range (the calling thread waits on it), is time the stage is blocked on its
   neighbour: **bubble**. The work between two ops belongs to the micro-batch it produces or
   consumes: the work before a send is that send's micro-batch and direction (forward k before the
   activation send k); work after a recv that ends at another recv (or at the end of the pipeline
   phase) consumed that recv (the last stage's forward k after recv k; the first stage's backward
   k after the gradient recv k). Work between a forward recv k and a backward send k (the last
   stage in 1F1B) is **forward+backward** k: without markers the two cannot be told apart. Work
   before the first op that ends in a recv, or between a send and a recv, is **other** (it feeds no
   micro-batch). The pipeline phase ends at the rank's first non-p2p collective after its last p2p
   op (the data-parallel gradient reduction) or at its step end.
4. *Per stage* (``pipeline_stages``): per (rank, step) the micro-batches seen in each direction,
   forward, backward and bubble time, and the bubble's share of the pipeline phase.

Times are on each rank's own clock (``start_ns``) and on the reference clock (``aligned_start_ns``:
minus the rank's clock offset, where it could be estimated).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import Store
from .activity import host_steps
from .cache import per_run
from .clock_alignment import clock_offsets, run_alignment
from .parallel_layout import parallel_layout

TOLERANCE_NS = 200_000

PAIR_COLUMNS = [
    "src_rank",
    "dst_rank",
    "src_stage",
    "dst_stage",
    "pp_group",
    "direction",
    "step",
    "bytes",
    "send_ts_ns",
    "send_end_ns",
    "recv_ts_ns",
    "recv_end_ns",
    "send_name",
    "recv_name",
]
SEGMENT_COLUMNS = [
    "rank",
    "stage",
    "pp_group",
    "n_stages",
    "step",
    "kind",
    "micro_batch",
    "start_ns",
    "end_ns",
    "dur_ns",
    "aligned_start_ns",
    "op",
    "peer",
]
STAGE_COLUMNS = [
    "rank",
    "stage",
    "pp_group",
    "n_stages",
    "step",
    "forward_micro_batches",
    "backward_micro_batches",
    "forward_ns",
    "backward_ns",
    "forward_backward_ns",
    "other_ns",
    "bubble_ns",
    "phase_ns",
    "bubble_pct",
]


def _stages(store: Store, run: str, ranks: list[int]) -> dict[int, tuple[int, int, int]]:
    """rank -> (stage, pp group index, stages in the group) from the inferred layout; without a PP
    dimension, the two ranks of a job where only two exchange p2p ops (more cannot be staged)."""
    lay = parallel_layout(store, run)
    if "pp" in lay.columns and lay["pp"].notna().any():
        n = lay.groupby("pp_group")["pp"].transform("nunique")
        return {
            int(r): (int(s), int(g), int(k))
            for r, s, g, k in zip(lay["rank"], lay["pp"], lay["pp_group"], n)
            if pd.notna(s) and pd.notna(g)
        }
    ranks = sorted(ranks)  # without a PP dimension only two ranks exchanging messages make a pipeline
    return {r: (i, 0, 2) for i, r in enumerate(ranks)} if len(ranks) == 2 else {}


def _p2p_ops(store: Store, run: str) -> pd.DataFrame:
    ops = run_alignment(store, run).ops
    p = ops.loc[ops["is_p2p"] & ops["op_type"].isin(("send", "recv"))].copy()
    p["call"] = p["call_ns"].astype("Int64").fillna(p["ts_ns"]).astype("int64") if len(p) else p["ts_ns"]
    return p.sort_values(["rank", "ts_ns"], kind="stable").reset_index(drop=True)


def _offsets(store: Store, run: str) -> tuple[dict[int, int], dict[int, int]]:
    off = clock_offsets(store, run)
    offset = {int(r): int(o) for r, o in zip(off["rank"], off["offset_ns"]) if pd.notna(o)}
    resid = {int(r): int(x) for r, x in zip(off["rank"], off["residual_p90_ns"]) if pd.notna(x)}
    return offset, resid


def send_recv_pairs(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per send paired with its recv on another rank (see the module doc): ranks, stages,
    direction (forward: to the next stage), step, size, both ranges on their ranks' own clocks."""
    return _pairing(store, run)[PAIR_COLUMNS]


@per_run
def _pairing(store: Store, run: str | None = None) -> pd.DataFrame:
    """``send_recv_pairs`` plus the rows of the send and the recv in ``_p2p_ops`` (``_send``, ``_recv``)."""
    ops = _p2p_ops(store, run)
    if ops.empty:
        return pd.DataFrame(columns=[*PAIR_COLUMNS, "_send", "_recv"])
    stages = _stages(store, run, sorted({int(r) for r in ops["rank"]}))
    offset, resid = _offsets(store, run)
    ops = ops[ops["rank"].isin(stages)].copy()
    shift = ops["rank"].map(lambda r: offset.get(int(r), 0))
    ops["a_call"], ops["a_end"] = ops["call"] - shift, ops["end_ns"] - shift
    recvs = ops[ops["op_type"] == "recv"].sort_values("a_call", kind="stable")
    sends = ops[ops["op_type"] == "send"].sort_values("a_call", kind="stable")
    # per receiving rank, its recvs in call order as plain lists (the loop below is per send)
    queue: dict[int, dict[str, list]] = {}
    for r, g in recvs.groupby("rank"):
        queue[int(r)] = {
            "row": g.index.tolist(),
            "end": g["a_end"].astype("int64").tolist(),
            "bytes": [None if pd.isna(x) else int(x) for x in g["bytes"]],
            "step": [None if pd.isna(x) else int(x) for x in g["step"]],
            "taken": [False] * len(g),
            "first": [0],  # the first recv not yet paired
        }
    neighbours = {
        a: [b for b, (st_b, g_b, _) in stages.items() if g_b == g_a and abs(st_b - st_a) == 1]
        for a, (st_a, g_a, _) in stages.items()
    }
    rows = []
    for i, a, call, nbytes, step in zip(
        sends.index, sends["rank"].astype(int), sends["a_call"].astype("int64"), sends["bytes"], sends["step"]
    ):
        nbytes = None if pd.isna(nbytes) else int(nbytes)
        step = None if pd.isna(step) else int(step)
        best: tuple[int, int, int] | None = None  # (end, rank, position)
        for b in neighbours.get(a, ()):
            q = queue.get(b)
            if q is None:
                continue
            tol = TOLERANCE_NS + resid.get(a, 0) + resid.get(b, 0)
            for k in range(q["first"][0], len(q["row"])):  # the first recv of b not yet paired that can hold it
                if q["taken"][k]:
                    continue
                if nbytes is not None and q["bytes"][k] is not None and q["bytes"][k] != nbytes:
                    continue
                if step is not None and q["step"][k] is not None and q["step"][k] != step:
                    continue
                if q["end"][k] >= call - tol:
                    if best is None or q["end"][k] < best[0]:
                        best = (q["end"][k], b, k)
                    break
        if best is None:
            continue
        _, b, k = best
        q = queue[b]
        q["taken"][k] = True
        while q["first"][0] < len(q["taken"]) and q["taken"][q["first"][0]]:
            q["first"][0] += 1
        stage, group, _ = stages[a]
        rows.append(
            (a, b, stage, stages[b][0], group, "forward" if stages[b][0] > stage else "backward", i, q["row"][k])
        )
    got = pd.DataFrame(
        rows, columns=["src_rank", "dst_rank", "src_stage", "dst_stage", "pp_group", "direction", "_send", "_recv"]
    )
    s_rows, r_rows = ops.loc[got["_send"]], ops.loc[got["_recv"]]
    got["step"] = s_rows["step"].to_numpy()
    got["bytes"] = s_rows["bytes"].to_numpy()
    got["send_ts_ns"], got["send_end_ns"] = s_rows["ts_ns"].to_numpy(), s_rows["end_ns"].to_numpy()
    got["recv_ts_ns"], got["recv_end_ns"] = r_rows["ts_ns"].to_numpy(), r_rows["end_ns"].to_numpy()
    got["send_name"], got["recv_name"] = s_rows["name"].astype(str).to_numpy(), r_rows["name"].astype(str).to_numpy()
    df = got[[*PAIR_COLUMNS, "_send", "_recv"]].copy()
    for c in ("step", "bytes"):
        df[c] = pd.to_numeric(df[c]).astype("Int64")
    return df.sort_values(["send_ts_ns", "src_rank"], kind="stable").reset_index(drop=True)


def _directed_ops(store: Store, run: str) -> tuple[pd.DataFrame, dict[int, tuple[int, int, int]]]:
    """The p2p ops of ranks in a pipeline with their direction and peer (from the pairs)."""
    ops = _p2p_ops(store, run)
    pairs = _pairing(store, run)
    stages = _stages(store, run, sorted({int(r) for r in ops["rank"]})) if len(ops) else {}
    ops["direction"] = None
    ops["peer"] = pd.array([None] * len(ops), dtype="Int64")
    for col, peer in (("_send", "dst_rank"), ("_recv", "src_rank")):
        idx = pairs[col].to_numpy(np.int64)
        ops.loc[idx, "direction"] = pairs["direction"].to_numpy(object)
        ops.loc[idx, "peer"] = pairs[peer].to_numpy(np.int64)
    return ops[ops["direction"].notna()].reset_index(drop=True), stages


@per_run
def pipeline(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per segment of a pipeline stage's step: forward / backward / forward+backward work of
    micro-batch k, bubble (blocked in a send or recv, with its peer), other (see the module doc)."""
    ops, stages = _directed_ops(store, run)
    if ops.empty:
        return pd.DataFrame(columns=SEGMENT_COLUMNS)
    offset, _ = _offsets(store, run)
    with store.read_connection(run=run) as con:
        steps = host_steps(con, run)
    ends = {(int(r), int(s)): (int(a), int(b)) for r, s, a, b in steps.itertuples(index=False)}
    every = run_alignment(store, run).ops
    colls = every.loc[~every["is_p2p"], ["rank", "ts_ns"]]
    coll_starts = {int(r): np.sort(g["ts_ns"].to_numpy(np.int64)) for r, g in colls.groupby("rank")}
    rows: list[dict] = []
    ops["_step"] = ops["step"].astype("Int64").fillna(-1)
    for (rank, step), g in ops.groupby(["rank", "_step"], sort=True):
        rank, step = int(rank), int(step)
        stage, group, n_stages = stages[rank]
        g = g.sort_values("call", kind="stable")
        win = ends.get((rank, step))
        first_start = int(g["call"].iloc[0])
        step_start = win[0] if win else first_start
        last_end = int(g["end_ns"].max())
        later = coll_starts.get(rank, np.empty(0, np.int64))
        later = later[later >= last_end]
        bounds = [x for x in (win[1] if win else None, int(later[0]) if later.size else None) if x is not None]
        phase_end = max(min(bounds or [last_end]), last_end)
        base = {"rank": rank, "stage": stage, "pp_group": group, "n_stages": n_stages}
        base["step"] = step if step >= 0 else None
        for kind, k, a, b, op, peer in _cut(g, min(step_start, first_start), phase_end):
            rows.append({**base, "kind": kind, "micro_batch": k, "start_ns": a, "end_ns": b, "op": op, "peer": peer})
    df = pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
    df["dur_ns"] = df["end_ns"] - df["start_ns"]
    df["aligned_start_ns"] = df["start_ns"] - df["rank"].map(lambda r: offset.get(int(r), 0))
    for c in ("step", "micro_batch", "peer"):
        df[c] = pd.to_numeric(df[c]).astype("Int64")
    for c in ("start_ns", "end_ns", "dur_ns", "aligned_start_ns"):
        df[c] = df[c].astype("int64")
    return df.sort_values(["pp_group", "stage", "rank", "start_ns"], kind="stable").reset_index(drop=True)


Segment = tuple[str, "int | None", int, int, "str | None", "int | None"]


def _cut(g: pd.DataFrame, start: int, phase_end: int) -> list[Segment]:
    """The segments (kind, micro-batch, start, end, op, peer) of one stage's step from its p2p ops
    in call order (see the module doc)."""
    out: list[Segment] = []

    def add(kind: str, k: int | None, a: int, b: int, op: str | None = None, peer: int | None = None) -> None:
        if b > a:
            out.append((kind, k, a, b, op, peer))

    mb = g.groupby(["op_type", "direction"]).cumcount().to_numpy()
    prev: tuple[str, str, int] | None = None  # (op_type, direction, micro-batch) of the previous op
    t = start
    for kind_n, dir_n, call, end, peer, k in zip(g["op_type"], g["direction"], g["call"], g["end_ns"], g["peer"], mb):
        kind_n, dir_n, a, k = str(kind_n), str(dir_n), int(call), int(k)
        if kind_n == "send":
            if prev and prev[0] == "recv" and prev[1] != dir_n:  # the last stage: both, no marker between
                add("forward+backward", k, t, a, f"{prev[1]} {prev[2]} + {dir_n} {k}")
            else:
                add(dir_n, k, t, a)
        elif prev and prev[0] == "recv":
            add(prev[1], prev[2], t, a)
        else:
            add("other", None, t, a)
        add("bubble", k, max(a, t), int(end), f"{kind_n} {dir_n}", int(peer))
        t = max(t, int(end))
        prev = (kind_n, dir_n, k)
    if prev and prev[0] == "recv":
        add(prev[1], prev[2], t, phase_end)
    return out


@per_run
def pipeline_stages(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per (rank, step) of a pipeline stage: micro-batches seen forward and backward, time
    in forward, backward, forward+backward, other work and bubbles, the bubble's share of the phase."""
    seg = pipeline(store, run)
    if seg.empty:
        return pd.DataFrame(columns=STAGE_COLUMNS)
    seg = seg.assign(_step=seg["step"].fillna(-1))
    keys = ["rank", "stage", "pp_group", "n_stages", "_step"]
    t = seg.pivot_table(index=keys, columns="kind", values="dur_ns", aggfunc="sum", fill_value=0)
    for k in ("forward", "backward", "forward+backward", "other", "bubble"):
        if k not in t.columns:
            t[k] = 0
    # micro-batches from the traffic: a direction's sends or recvs in the step, whichever more
    ops, _ = _directed_ops(store, run)
    ops["_step"] = ops["step"].astype("Int64").fillna(-1)
    n = ops.groupby(["rank", "_step", "direction", "op_type"]).size().groupby(["rank", "_step", "direction"]).max()
    n = n.unstack("direction").reindex(columns=["forward", "backward"]).fillna(0).astype("int64")
    at = pd.MultiIndex.from_arrays([t.index.get_level_values("rank"), t.index.get_level_values("_step")])
    fwd = pd.Series(n["forward"].reindex(at).fillna(0).to_numpy(), index=t.index)
    bwd = pd.Series(n["backward"].reindex(at).fillna(0).to_numpy(), index=t.index)
    span = seg.groupby(keys).agg(a=("start_ns", "min"), b=("end_ns", "max"))
    out = pd.DataFrame(
        {
            "forward_micro_batches": fwd.reindex(t.index).fillna(0).astype("int64"),
            "backward_micro_batches": bwd.reindex(t.index).fillna(0).astype("int64"),
            "forward_ns": t["forward"].astype("int64"),
            "backward_ns": t["backward"].astype("int64"),
            "forward_backward_ns": t["forward+backward"].astype("int64"),
            "other_ns": t["other"].astype("int64"),
            "bubble_ns": t["bubble"].astype("int64"),
            "phase_ns": (span["b"] - span["a"]).reindex(t.index).astype("int64"),
        }
    ).reset_index()
    out["bubble_pct"] = (100.0 * out["bubble_ns"] / out["phase_ns"].where(out["phase_ns"] > 0)).round(2)
    out["step"] = out["_step"].where(out["_step"] >= 0).astype("Int64")
    return out[STAGE_COLUMNS].sort_values(["pp_group", "stage", "step", "rank"]).reset_index(drop=True)
