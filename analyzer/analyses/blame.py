"""Blame: why the last member of a collective arrived late, and whom it was waiting for in turn.

For a collective whose last member arrived later than the floor (``straggler``), every member's
*interval* runs from the end of its previous collective of the group to its entry into this one (on
its own clock); the last member's interval is longer by its lateness. Each interval is split into
causes, each instant counted once, in this order of precedence:

- ``untraced``: outside the rank's profiled steps (a profiler writing its output between steps);
- on CPU-only ranks: ``dataloader`` (DataLoader ``__next__`` ranges, MindSpore ``GetNext``: the
  input pipeline, whatever runs inside), ``device_sync`` (synchronize calls, ``.item()``),
  ``communication`` (other collectives and p2p ops: waiting for another group), ``compute`` (the
  host operators), ``idle`` (no operator: Python code, a sleep);
- on device ranks the device is the resource: ``communication`` and ``compute`` are its tasks;
  the time it idles is ``dataloader`` or ``device_sync`` when the host was there (the host was not
  feeding it), else ``idle`` (the host launched late: Python, a sleep, the launch path).

The member's **excess** per cause = its time minus the median of its peers'; the cause with the
largest excess is the **cause**, with the operators (device kernels on device ranks, host operators'
self time elsewhere) whose time grew most. When the cause is ``communication`` the rank was itself
waiting for someone: the chain follows the collective of its interval where it waited longest to
that collective's last arrival, up to ``MAX_CHAIN`` links.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from ..breakdown import intervals as iv
from ..messages import text
from ..store import Store
from . import activity
from .arrivals import arrival_analysis
from .cache import per_run

CAUSES = ("untraced", "dataloader", "device_sync", "communication", "compute", "idle")
# the causes in English (CLI, report); the texts in both languages are ``analyzer.messages`` "cause.*"
CAUSE_TEXT = {c: text(f"cause.{c}") for c in (*CAUSES, "unexplained")}
DATALOADER_NAMES = ("enumerate(DataLoader)%", "%DataLoaderIter%", "%GetNext%", "%dataloader%", "%data_loader%")
SYNC_NAMES = (
    "%Synchronize%",
    "aten::item",
    "aten::_local_scalar_dense",
    "cudaStreamWaitEvent",
    "aclrtSynchronize%",
)
MAX_BLAMED = 200  # late collectives explained per run (the latest first)
MAX_CHAIN = 3
TOP_OPS = 5
COLUMNS = [
    "instance",
    "group_name",
    "op_type",
    "step",
    "last_rank",
    "lateness_ns",
    "margin_ns",
    "cause",
    "cause_text",
    "excess_ns",
    "excess_by_cause",
    "top_ops",
    "start_ns",
    "end_ns",
    "peer_interval_ns",
    "highlights",
    "chain",
]


def _like(col: str, patterns: tuple[str, ...]) -> str:
    return "(" + " OR ".join(f"{col} LIKE '{p}'" for p in patterns) + ")"


def _named_ranges(
    con: duckdb.DuckDBPyConnection, run: str, *patterns: tuple[str, ...]
) -> list[dict[int, iv.Intervals]]:
    """Per list of ``patterns``: the ranges of the operators whose name matches one of them, per rank
    (one query for all the lists)."""
    flags = ", ".join(f"{_like('name', p)} AS m{k}" for k, p in enumerate(patterns))
    got = con.execute(
        f"SELECT rank, ts_ns, ts_ns + dur_ns AS end_ns, {flags} FROM operators "
        f"WHERE run = ? AND dur_ns > 0 AND ts_ns IS NOT NULL AND ({' OR '.join(_like('name', p) for p in patterns)})",
        [run],
    ).fetchnumpy()
    ranks, starts, ends = (np.asarray(got[c], dtype=np.int64) for c in ("rank", "ts_ns", "end_ns"))
    out = []
    for k in range(len(patterns)):
        hit = np.asarray(got[f"m{k}"], dtype=bool)
        out.append(
            {int(r): iv.union(starts[hit & (ranks == r)], ends[hit & (ranks == r)]) for r in np.unique(ranks[hit])}
        )
    return out


class _Sets:
    """Per rank: the interval sets the causes are read from (all steps merged)."""

    def __init__(self, store: Store, run: str):
        acts = activity.run_activity(store, run)
        self.mode = {r: a.mode for r, a in acts.items()}
        self.compute: dict[int, iv.Intervals] = {}
        self.comm: dict[int, iv.Intervals] = {}
        for r, a in acts.items():
            self.compute[r] = iv.merge(*(s.compute for s in a.by_step.values()))
            self.comm[r] = iv.merge(*(s.comm for s in a.by_step.values()), *(s.memory for s in a.by_step.values()))
        steps = activity.run_host_steps(store, run)
        with store.read_connection(run=run) as con:
            self.loader, self.sync = _named_ranges(con, run, DATALOADER_NAMES, SYNC_NAMES)
        self.steps = {
            int(r): iv.union(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64))
            for r, g in steps.groupby("rank")
        }

    def split(self, rank: int, lo: int, hi: int) -> dict[str, int]:
        """Time of ``[lo, hi)`` per cause (the causes partition it)."""
        out = dict.fromkeys(CAUSES, 0)
        if hi <= lo:
            return out
        whole = iv.union([lo], [hi])
        left = whole
        e = iv.empty()

        def take(name: str, s: iv.Intervals) -> None:
            nonlocal left
            part = iv.intersect(left, iv.clip(s, lo, hi))
            out[name] += iv.total(part)
            left = iv.subtract(left, part)

        st = self.steps.get(rank)
        if st is not None:
            take("untraced", iv.gaps(st, lo, hi))
        if self.mode.get(rank) == "device":
            order = ("communication", "compute", "dataloader", "device_sync")
        else:
            order = ("dataloader", "device_sync", "communication", "compute")
        sets = {
            "communication": self.comm.get(rank, e),
            "compute": self.compute.get(rank, e),
            "dataloader": self.loader.get(rank, e),
            "device_sync": self.sync.get(rank, e),
        }
        for name in order:
            take(name, sets[name])
        out["idle"] += iv.total(left)
        return out


def _windows(arr: pd.DataFrame) -> pd.DataFrame:
    """Each member's interval on its own clock: previous collective of the group -> entry: its
    call where the trace records it (``call_ns``, as ``arrivals`` takes it), else the op's start.
    A gloo range starts when the process group's worker thread picks the work up, tens of ms after
    the call on a loaded machine, while the calling thread waits with nothing traced: ending there
    blamed a compute straggler's late collective on idle time (65 ms of a 134 ms window at load ~11)."""
    w = arr[["instance", "rank", "ts_ns", "call_ns", "prev_end_ns"]].copy()
    w = w[w["prev_end_ns"].notna()]
    w["lo"] = w["prev_end_ns"].astype("int64")
    w["hi"] = w["call_ns"].astype("Int64").fillna(w["ts_ns"].astype("int64")).astype("int64")
    return w[w["hi"] > w["lo"]]


class _Windows:
    """``_windows`` of the members of each instance, computed once over all of them (row by row:
    per instance, the same rows and index as ``_windows`` of its members alone)."""

    def __init__(self, arr: pd.DataFrame):
        self.frame = _windows(arr)
        self.rows = self.frame.groupby("instance", sort=False).indices

    def get(self, inst: str) -> pd.DataFrame | None:
        """The windows of ``inst``, None when it has none."""
        pos = self.rows.get(inst)
        return None if pos is None else self.frame.iloc[pos]


def _top_ops(con: duckdb.DuckDBPyConnection, run: str, windows: pd.DataFrame, modes: dict[int, str]) -> pd.DataFrame:
    """Time per (window, name): device kernels (not communication) on device ranks, the host operators'
    self time (not annotations, not communication calls) elsewhere."""
    if windows.empty:
        return pd.DataFrame(columns=["wid", "name", "ns"])
    con.register("__w", windows[["wid", "rank", "lo", "hi"]])
    try:
        dev = [r for r, m in modes.items() if m == "device"]
        k = con.execute(
            """
            SELECT w.wid, k.name, sum(k.dur_ns) AS ns FROM kernels k JOIN __w w
              ON k.rank = w.rank AND k.ts_ns >= w.lo AND k.ts_ns < w.hi
            WHERE k.run = $run AND NOT coalesce(k.is_communication, false) AND list_contains($dev, k.rank)
            GROUP BY ALL
            """,
            {"run": run, "dev": dev},
        ).df()
        o = con.execute(
            f"""
            SELECT w.wid, o.name, sum(coalesce(o.self_ns, o.dur_ns)) AS ns FROM operators o JOIN __w w
              ON o.rank = w.rank AND o.ts_ns >= w.lo AND o.ts_ns < w.hi
            WHERE o.run = $run AND NOT list_contains($dev, o.rank)
              AND coalesce(o.category, '') NOT IN ('user_annotation', 'python_function')
              AND NOT (o.name LIKE 'c10d::%' OR o.name = 'record_param_comms' OR o.name LIKE 'gloo:%'
                       OR o.name LIKE 'nccl:%' OR {_like("o.name", DATALOADER_NAMES)})
            GROUP BY ALL
            """,
            {"run": run, "dev": dev},
        ).df()
    finally:
        con.unregister("__w")
    return pd.concat([k, o], ignore_index=True)


def _explain(
    inst: str, last: int, windows: _Windows, sets: _Sets
) -> tuple[dict[str, int], dict[str, int], int, int, int, pd.DataFrame] | None:
    """(excess per cause, the last rank's split, its lo, its hi, peers' median interval, the members'
    windows) of one instance, or None when the last rank or all its peers have no interval."""
    mine = windows.get(inst)
    if mine is None or last not in set(mine["rank"]) or len(mine) < 2:
        return None
    splits = {int(r): sets.split(int(r), int(lo), int(hi)) for r, lo, hi in zip(mine["rank"], mine["lo"], mine["hi"])}
    peers = [s for r, s in splits.items() if r != last]
    excess = {c: int(splits[last][c] - float(np.median([p[c] for p in peers]))) for c in CAUSES}
    row = mine[mine["rank"] == last].iloc[0]
    peer_len = float(np.median([int(h - lo) for r, lo, h in zip(mine["rank"], mine["lo"], mine["hi"]) if r != last]))
    return excess, splits[last], int(row["lo"]), int(row["hi"]), int(peer_len), mine


def _cause(excess: dict[str, int]) -> str:
    best = max(CAUSES, key=lambda c: excess[c])
    return best if excess[best] > 0 else "unexplained"


def blame_rows(
    store: Store, run: str, arr: pd.DataFrame, instances: list[str], sets: _Sets | None = None
) -> list[dict]:
    """The blame of the given instances (``COLUMNS``; an instance without intervals is left out)."""
    sets = sets or _Sets(store, run)
    windows = _Windows(arr)
    explained = {}
    for inst in instances:
        last = arr[(arr["instance"] == inst) & arr["is_last"]]
        if last.empty:
            continue
        got = _explain(inst, int(last["rank"].iloc[0]), windows, sets)
        if got is not None:
            explained[inst] = (last.iloc[0], got)
    if not explained:
        return []
    wins = pd.concat([g[5] for _, g in explained.values()], ignore_index=True)
    wins = wins.assign(wid=np.arange(len(wins)))
    with store.read_connection(run=run) as con:
        tops = _top_ops(con, run, wins, sets.mode)
    by_wid = {int(w): g.set_index("name")["ns"] for w, g in tops.groupby("wid")}
    rows = []
    for inst, (r, (excess, _split, lo, hi, peer_len, _)) in explained.items():
        cause = _cause(excess)
        members = wins[wins["instance"] == inst]
        mine_wid = int(members.loc[members["rank"] == r["rank"], "wid"].iloc[0])
        peer_ops = [
            by_wid.get(int(w), pd.Series(dtype="float64")) for w in members.loc[members["rank"] != r["rank"], "wid"]
        ]
        top = []
        for n in sorted(set(by_wid.get(mine_wid, pd.Series(dtype="float64")).index), key=str):
            m = float(by_wid[mine_wid].get(n, 0.0))
            p = float(np.median([float(s.get(n, 0.0)) for s in peer_ops])) if peer_ops else 0.0
            if m - p > 0:
                top.append({"name": str(n), "excess_ns": int(m - p), "ns": int(m)})
        top.sort(key=lambda x: (-x["excess_ns"], x["name"]))  # ties by name, not by the set's hash order
        rows.append(
            {
                "instance": inst,
                "group_name": r["group_name"],
                "op_type": r["op_type"],
                "step": r["step"],
                "last_rank": int(r["rank"]),
                "lateness_ns": int(r["lateness_ns"]),
                "margin_ns": int(r["margin_ns"]),
                "cause": cause,
                "cause_text": CAUSE_TEXT[cause],
                "excess_ns": int(excess.get(cause, 0)),
                "excess_by_cause": {c: int(v) for c, v in excess.items()},
                "top_ops": top[:TOP_OPS],
                "start_ns": lo,
                "end_ns": hi,
                "peer_interval_ns": peer_len,
                "highlights": [[int(x.rank), int(x.lo), int(x.hi)] for x in members.itertuples()],
                "chain": _chain(int(r["rank"]), inst, cause, lo, hi, arr, windows, sets),
            }
        )
    return rows


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["step"] = df["step"].astype("Int64")
    return df


@per_run
def blame_chains(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per collective whose last member arrived later than the floor (``arrivals``): who,
    by how much, the cause with its excess over the peers, the operators that grew most, the
    interval to show in the timeline (``highlights``: rank, start, end on each rank's own clock) and
    the chain of ranks it was waiting for in turn. The latest ``MAX_BLAMED`` first."""
    st = arrival_analysis(store, run)
    arr = st.arrivals
    if arr.empty:
        return _frame([])
    late = arr[arr["is_last"] & ~arr["is_p2p"].astype(bool)]
    late = late[late["margin_ns"] > late["rank"].map(lambda r: st.floors.get(int(r), 0))]
    late = late.sort_values("margin_ns", ascending=False).head(MAX_BLAMED)
    return _frame(blame_rows(store, run, arr, list(late["instance"])))


@per_run
def blame_of(store: Store, run: str | None, instance: str) -> pd.DataFrame:
    """The blame row of one collective instance, late or not (the communication page's selection);
    empty when the instance is not a matched collective with intervals on its members."""
    arr = arrival_analysis(store, run).arrivals
    if arr.empty or instance not in set(arr["instance"]):
        return _frame([])
    return _frame(blame_rows(store, run, arr, [instance]))


def _chain(
    rank: int, inst: str, cause: str, lo: int, hi: int, arr: pd.DataFrame, windows: _Windows, sets: _Sets
) -> list[dict]:
    """The ranks waited for in turn: [{rank, instance, waited_ns, cause, excess_ns}, ...]."""
    out = [{"rank": rank, "instance": inst, "waited_ns": 0, "cause": cause}]
    seen = {rank}
    while cause == "communication" and len(out) < MAX_CHAIN:
        mine = arr[(arr["rank"] == rank) & (arr["ts_ns"] >= lo) & (arr["ts_ns"] < hi) & (arr["instance"] != inst)]
        if mine.empty:
            break
        top_entry = arr[arr["instance"].isin(mine["instance"])].groupby("instance")["entry_ns"].max()
        waited = top_entry.reindex(mine["instance"]).to_numpy() - mine["entry_ns"].to_numpy()
        k = int(np.argmax(waited))
        if waited[k] <= 0:
            break
        nxt_inst = mine["instance"].iloc[k]
        last = arr[(arr["instance"] == nxt_inst) & arr["is_last"]]
        if last.empty or int(last["rank"].iloc[0]) in seen:
            break
        rank = int(last["rank"].iloc[0])
        seen.add(rank)
        got = _explain(nxt_inst, rank, windows, sets)
        cause = _cause(got[0]) if got else "unexplained"
        out.append(
            {
                "rank": rank,
                "instance": nxt_inst,
                "waited_ns": int(waited[k]),
                "cause": cause,
                "excess_ns": int(got[0][cause]) if got and cause in got[0] else 0,
            }
        )
        if got is None:
            break
        lo, hi, inst = got[2], got[3], nxt_inst
    return out
