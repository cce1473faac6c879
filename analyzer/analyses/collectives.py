"""Communication ops of all ranks, matched into collective *instances* (one call seen by every member).

An instance is identified by (group, step, op type, message size, order within the step): the
n-th ``allreduce`` of 4 MiB in group G during step s on one rank is the same call as the n-th one
on every other member of G. No global sequence number is used (it shifts when ranks ran different
warm-ups). Point-to-point ops are matched the same way (a send and its recv share group, step,
size and order) but kept apart (``is_p2p``).

Groups. torch_npu / msprof rows and NCCL kernels name their group. gloo ``gloo:*`` ranges do not;
when the rank belongs to a single group (besides itself) that group is used, otherwise the group
is *attributed*: among the rank's groups, the largest one in which every other member has an op of
the same type and size in the same step that overlaps this one in time (all members are inside a
collective when its last member arrives: the latest start precedes the earliest end, within
``tolerance_ns``, after correcting each rank's clock by ``offsets`` when given). Since gloo runs
each process group on its own threads, the decision is taken per thread, on the median over the
thread's collectives.
A gloo send/recv names neither its group nor its peer: in a rank with several groups it stays
unattributed (``group_name`` NULL) and is left out of instances. When nothing in the run names a
group (MindSpore on CPU writes ``Default/AllReduce-op0`` and no group), every collective is in the
world group (``WORLD``, ``group_source`` = ``implied_world``): the one group a job that declares
none has.
"""

from __future__ import annotations

from collections import defaultdict

import duckdb
import numpy as np
import pandas as pd

from ..format import is_missing
from ..store import Store
from ..vocabulary import normalize_op_type
from .activity import steps_at
from .cache import per_run

DEFAULT_TOLERANCE_NS = 200_000  # slack on "all members' intervals overlap" (clock error allowance)
WORLD = "world"  # the group of collectives in a run that names no group at all
SIZE_VARIES = frozenset({"alltoall", "gather", "scatter", "batch_send_recv", "other"})  # per-rank sizes differ


def load_ops(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """comm_ops rows of a run with an ``end_ns`` column, in time order per rank."""
    df = con.execute(
        """
        WITH c AS (
          SELECT * FROM comm_ops WHERE run = $run AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL),
        lane AS (  -- the thread of Kineto annotation ranges (gloo runs each group on its own threads)
          SELECT DISTINCT s.rank, s.collection_id, s.name, s.ts_ns, s.tid
          FROM slices s
          WHERE s.run = $run AND s.category = 'user_annotation'
            AND s.collection_id IN (SELECT DISTINCT collection_id FROM c WHERE source = 'kineto:annotation'))
        SELECT c.rank, c.collection_id, c.step, c.name, c.op_type, c.group_name, c.group_ranks,
               coalesce(c.is_p2p, false) AS is_p2p,
               c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns AS end_ns, c.wait_ns, c.transit_ns, c.sync_ns, c.idle_ns,
               c.bytes, c.alg_type, c.source, lane.tid AS lane
        FROM c LEFT JOIN lane ON lane.rank = c.rank AND lane.collection_id = c.collection_id
                             AND lane.name = c.name AND lane.ts_ns = c.ts_ns
        ORDER BY c.rank, c.ts_ns
        """,
        {"run": run},
    ).df()
    df["op_type"] = df["op_type"].fillna("other")
    return with_call_times(con, run, df.reset_index(drop=True))


def with_call_times(con: duckdb.DuckDBPyConnection, run: str, ops: pd.DataFrame) -> pd.DataFrame:
    """Add ``call_ns``: when the rank *called* each collective, where the trace records the range on
    another thread than the call; and put the op in the step of its call.

    A Kineto ``gloo:*`` range is recorded by the process group's worker thread (``pt_gloo_runloop``)
    when that thread picks the work up, not when the training thread calls it: on a loaded machine
    the worker starts up to 35 ms after the call (measured on the 2-rank straggler jobs at load ~20),
    and an asynchronous collective called at the end of step k may start after step k ended. Both
    make arrival order and step depend on the scheduler. The call is the dispatcher op on the
    calling thread (``c10d::allreduce_`` ...): per (rank, collection, op type), the n-th call is the
    n-th range (a process group runs its work in the order called), checked: every call precedes its
    range (a call or range cut off at the profiling window's edge is dropped first). Where the calls
    cannot be paired so, ``call_ns`` is NULL and the range's own start stands. The op's step becomes
    the ProfilerStep holding its call.

    Also ``peer``: the global rank a point-to-point op's call names (``operators.peer``, its rank
    in the op's group, through ``group_ranks``; torch records it with record_shapes), NULL where
    the trace does not say."""
    ops = ops.copy()
    n = len(ops)
    ops["call_ns"] = pd.array([None] * n, dtype="Int64")
    ops["peer"] = pd.array([None] * n, dtype="Int64")
    # gloo runs the work on its own threads; nccl:* ranges are on the calling thread already
    ann = ops["source"].eq("kineto:annotation") & ops["name"].astype(str).str.startswith("gloo:")
    if not ann.any():
        return ops
    calls = con.execute(
        """
        SELECT o.rank, o.collection_id, o.name, o.ts_ns, o.peer FROM operators o
        WHERE o.run = $run AND o.name LIKE 'c10d::%' AND o.ts_ns IS NOT NULL
          AND o.collection_id IN (SELECT DISTINCT collection_id FROM comm_ops
                                  WHERE run = $run AND source = 'kineto:annotation')
        ORDER BY o.rank, o.ts_ns
        """,
        {"run": run},
    ).fetchall()
    if not calls:
        return ops
    # plain lists and positions, not frames: a report pays ~0.1 ms per pandas operation
    by_key: dict[tuple, list[int]] = defaultdict(list)  # (rank, collection, op type) -> call times, in order
    peer_of: dict[tuple[int, int], int] = {}
    for r, c, name, t, pr in calls:
        by_key[(r, c, normalize_op_type(name))].append(int(t))
        if pr is not None:
            peer_of[(int(r), int(t))] = int(pr)
    ts = ops["ts_ns"].to_numpy(np.int64)
    rows = np.flatnonzero(ann.to_numpy(bool, na_value=False))
    rows = rows[np.argsort(ts[rows], kind="stable")]
    mine: dict[tuple, list[int]] = defaultdict(list)  # the same key -> the ranges' rows, by start
    for i, r, c, o in zip(rows, ops["rank"].to_numpy()[rows], ops["collection_id"].to_numpy()[rows],
                          ops["op_type"].to_numpy()[rows]):  # fmt: skip
        if not (is_missing(r) or is_missing(c) or is_missing(o)):  # as a groupby, which leaves out NA keys
            mine[(r, c, o)].append(int(i))
    call_ns: list[int | None] = [None] * n
    peer: list[int | None] = [None] * n
    members = ops["group_ranks"].to_numpy(object)
    for k, idx in mine.items():
        c = by_key.get(k)
        if c is None:
            continue
        paired = _pair_calls(np.asarray(c, dtype=np.int64), ts[idx])
        if paired is None:
            continue
        rank = int(k[0])
        for i, t in zip(idx, paired):
            call_ns[i] = t
            if peer_of:
                peer[i] = _global(peer_of.get((rank, t)) if t is not None else None, members[i])
    ops["call_ns"] = pd.array(call_ns, dtype="Int64")
    ops["peer"] = pd.array(peer, dtype="Int64")
    have = [i for i, t in enumerate(call_ns) if t is not None]
    if have:
        held: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # rank -> (start, end, step)
        for r, st, start, end in con.execute(
            "SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM steps "
            "WHERE run = ? AND step IS NOT NULL AND source = 'ProfilerStep' GROUP BY rank, step",
            [run],
        ).fetchall():
            if start is not None and end is not None:
                held[int(r)].append((int(start), int(end), int(st)))
        step = ops["step"].astype("Int64").to_numpy(object, na_value=None)
        ranks = ops["rank"].to_numpy()
        by_rank: dict[int, list[int]] = defaultdict(list)
        for i in have:
            by_rank[int(ranks[i])].append(i)
        for rank, idx in by_rank.items():
            if not held.get(rank):
                continue
            starts, ends, steps = (np.asarray(a, dtype=np.int64) for a in zip(*held[rank]))
            order = np.argsort(starts, kind="quicksort")  # as step_of sorts them
            ok, found = steps_at(
                starts[order], ends[order], steps[order], np.asarray([call_ns[i] for i in idx], np.int64)
            )
            for i, hit, v in zip(idx, ok, found):
                if hit:  # the step holding the call, else the range's own
                    step[i] = int(v)
        ops["step"] = pd.array(step, dtype="Int64")
    return ops


def _global(local: int | None, members: object) -> int | None:
    """The global rank of a group's ``local`` rank (``members``: the group's global ranks)."""
    ranks = rank_list(members)
    return ranks[local] if local is not None and ranks and 0 <= local < len(ranks) else None


def _pair_calls(calls: np.ndarray, starts: np.ndarray) -> list[int | None] | None:
    """The call of each range (both sorted), in order: ranges at the window's start whose call fell
    before it have none, calls at its end (or start) whose range the window missed are dropped. None
    when no such pairing puts every call at or before its range's start."""
    n, m = len(calls), len(starts)
    if n >= m:
        for d in dict.fromkeys((0, n - m)):  # calls cut off at the end, else at the start
            c = calls[d : d + m]
            if (c <= starts).all():
                return [int(x) for x in c]
        return None
    if (calls <= starts[m - n :]).all():
        return [None] * (m - n) + [int(x) for x in calls]
    return None


def load_groups(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """One row per (rank, group) the rank belongs to: group_name, global_ranks, pg_name, group_id."""
    return con.execute(
        """
        SELECT DISTINCT rank, group_name, global_ranks, pg_name, group_id, local_rank, backend, source
        FROM comm_groups WHERE run = ? AND group_name IS NOT NULL
        ORDER BY rank, group_name
        """,
        [run],
    ).df()


def group_members(groups: pd.DataFrame, ops: pd.DataFrame) -> dict[str, tuple[int, ...]]:
    """Global ranks of every group: its declared ranks, else the ranks that report it."""
    out: dict[str, set[int]] = defaultdict(set)
    for g, ranks in zip(groups["group_name"], groups["global_ranks"]):
        lst = rank_list(ranks)
        if lst:
            out[str(g)] |= set(lst)
    declared = set(out)
    for g, r in zip(groups["group_name"], groups["rank"]):
        if str(g) not in declared:
            out[str(g)].add(int(r))
    known = ops[ops["group_name"].notna()]
    for g, r in zip(known["group_name"], known["rank"]):
        if str(g) not in declared:
            out[str(g)].add(int(r))
    return {g: tuple(sorted(v)) for g, v in out.items()}


def attribute_groups(
    ops: pd.DataFrame,
    groups: pd.DataFrame,
    offsets: dict[int, int] | None = None,
    tolerance_ns: int = DEFAULT_TOLERANCE_NS,
) -> pd.DataFrame:
    """Fill ``group_name`` / ``group_ranks`` of ops that do not name their group (see module doc).

    Adds a column ``group_source``: ``producer`` (named by the trace), ``only_group`` or ``attributed``.
    """
    ops = ops.copy()
    members = group_members(groups, ops)
    ops["group_source"] = np.where(ops["group_name"].notna(), "producer", None)
    unknown = ops.index[ops["group_name"].isna()]
    if len(unknown) == 0:
        return ops
    if not members:
        # nothing in the run names a group (MindSpore on CPU, a trace without process-group
        # metadata): a job that declares no group runs its collectives in the world group
        ops.loc[unknown, "group_name"] = WORLD
        ops.loc[unknown, "group_source"] = "implied_world"
        ranks = sorted({int(r) for r in ops["rank"]})
        ops["group_ranks"] = [ranks if g == WORLD else r for g, r in zip(ops["group_name"], ops["group_ranks"])]
        return ops
    by_rank: dict[int, list[str]] = defaultdict(list)
    for g, ranks in members.items():
        if len(ranks) >= 2:
            for r in ranks:
                by_rank[r].append(g)
    off = offsets or {}
    end = ops["end_ns"].to_numpy(np.int64) - ops["rank"].map(lambda r: off.get(int(r), 0)).to_numpy(np.int64)
    # index: (rank, step, op_type, bytes) -> (sorted corrected ends, row ids)
    idx: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    keycols = list(zip(ops["rank"], ops["step"].astype("Int64"), ops["op_type"], ops["bytes"].astype("Int64")))
    tmp: dict[tuple, list[int]] = defaultdict(list)
    for i, k in enumerate(keycols):
        tmp[(int(k[0]), _na(k[1]), k[2], _na(k[3]))].append(i)
    for k, rows in tmp.items():
        arr = np.asarray(rows)
        order = np.argsort(end[arr])
        idx[k] = (end[arr][order], arr[order])

    start = ops["ts_ns"].to_numpy(np.int64) - (ops["end_ns"].to_numpy(np.int64) - end)

    def nearest(rank: int, step, op_type: str, nbytes, t: int) -> int | None:
        """Row of the op of that rank and key whose (corrected) end is nearest to t."""
        hit = idx.get((rank, step, op_type, nbytes))
        if hit is None:
            return None
        ends = hit[0]
        j = int(np.searchsorted(ends, t))
        best = None
        for c in (j - 1, j):
            if 0 <= c < ends.size and (best is None or abs(ends[c] - t) < abs(ends[best] - t)):
                best = c
        return int(hit[1][best]) if best is not None else None

    names = ops["group_name"].to_numpy(object, copy=True)
    source = ops["group_source"].to_numpy(object, copy=True)
    lanes = ops["lane"].to_numpy(object) if "lane" in ops else np.full(len(ops), None, dtype=object)
    worst: dict[int, dict[str, float]] = {}  # op -> group -> farthest member's nearest matching end
    for i in unknown:
        rank = int(ops.at[i, "rank"])
        cands = by_rank.get(rank, [])
        if len(cands) == 1:
            names[i], source[i] = cands[0], "only_group"
            continue
        if bool(ops.at[i, "is_p2p"]):
            continue  # a gloo send/recv names neither its group nor its peer: left unattributed
        step, op_type, nbytes = _na(keycols[i][1]), keycols[i][2], _na(keycols[i][3])
        w: dict[str, float] = {}
        for g in cands:
            rows = [nearest(m, step, op_type, nbytes, int(end[i])) for m in members[g] if m != rank]
            if any(r is None for r in rows):
                w[g] = float("inf")
                continue
            rows.append(i)
            # members of one collective are all inside it when the last one arrives: the latest
            # start precedes the earliest end (gap <= 0)
            w[g] = float(start[rows].max() - end[rows].min())
        worst[i] = w

    def pick(scores: dict[str, float]) -> str | None:
        """The largest group whose members all took part (within the tolerance), the tightest among
        those, then the first by name (not the order the candidates were gathered in: a set of
        names iterates in the process' hash-seed order)."""
        ok = sorted(g for g, d in scores.items() if d <= tolerance_ns)
        return max(ok, key=lambda g: (len(members[g]), -scores[g])) if ok else None

    # gloo runs the collectives of one process group on that group's own threads: all collectives
    # of a thread (lane) belong to one group, decided on the median over the lane's ops
    by_lane: dict[tuple, list[int]] = defaultdict(list)
    for i in worst:
        by_lane[(int(ops.at[i, "rank"]), lanes[i])].append(i)
    for (_rank, lane), rows in by_lane.items():
        if lane is None or (isinstance(lane, float) and np.isnan(lane)):
            for i in rows:
                g = pick(worst[i])
                if g is not None:
                    names[i], source[i] = g, "attributed"
            continue
        gs = sorted(set().union(*(worst[i].keys() for i in rows)))
        g = pick({g: float(np.median([worst[i].get(g, float("inf")) for i in rows])) for g in gs})
        if g is not None:
            for i in rows:
                names[i], source[i] = g, "attributed"
    ops["group_name"] = names
    ops["group_source"] = source
    ops["group_ranks"] = [
        list(members[g]) if isinstance(g, str) and g in members else r
        for g, r in zip(ops["group_name"], ops["group_ranks"])
    ]
    return ops


def rank_list(v) -> list[int] | None:
    """A list of ranks from a DuckDB list cell (list, numpy array, None / NA)."""
    if v is None or v is pd.NA or isinstance(v, float):
        return None
    try:
        return [int(x) for x in v]
    except TypeError:
        return None


def _na(v):
    return None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else int(v)


def match_instances(ops: pd.DataFrame, members: dict[str, tuple[int, ...]]) -> pd.DataFrame:
    """Add ``ordinal``, ``instance`` (a string key), ``n_seen`` (ranks that recorded the instance),
    ``n_members`` (members of the group present in the run) and ``match_key`` (what the key is made
    of: ``step``, ``size``, both or neither) per op.

    The key is (group, step, kind, size, order): the step only when every op of the group has one
    (a rank that recorded no step markers would otherwise match nothing), the size only when every
    op of the group and kind has one (a byte count missing on some ranks — a trace without ``In msg
    nelems``, a torch_npu export without trace_view.json — must not split one call into several) and
    the members of one call move the same amount (not all-to-all, gather, scatter: each rank's
    share differs with uneven splits).
    Missing values never enter a key (a missing step or size reads ``?``). Computed on lists, not
    frames: a report pays ~0.1 ms per pandas operation, and a run has few collectives per rank.
    """
    ops = ops.copy()
    if "ordinal" in ops:
        ops = ops.drop(columns=["ordinal"])
    n = len(ops)
    group = ["" if is_missing(g) else str(g) for g in ops["group_name"].to_numpy(object)]
    p2p = ops["is_p2p"].to_numpy(bool)
    op_type = ops["op_type"].to_numpy(object)
    kind = ["p2p" if p else str(t) for p, t in zip(p2p, op_type)]
    step = [None if is_missing(v) else int(v) for v in ops["step"].to_numpy(object)]
    size = [None if is_missing(v) else int(v) for v in ops["bytes"].to_numpy(object)]
    step_all: dict[str, bool] = {}  # group -> every op of it has a step
    size_all: dict[tuple[str, str], bool] = {}  # (group, kind) -> every op of it has a size
    for g, k, s, b in zip(group, kind, step, size):
        step_all[g] = step_all.get(g, True) and s is not None
        size_all[(g, k)] = size_all.get((g, k), True) and b is not None
    use_step = np.array([step_all[g] for g in group], dtype=bool)
    use_size = np.array([size_all[(g, k)] and k not in SIZE_VARIES for g, k in zip(group, kind)], dtype=bool)
    base = [
        f"{g}|{('?' if s is None else s) if us else '*'}|{k}|{('?' if b is None else b) if uz else '*'}"
        for g, s, k, b, us, uz in zip(group, step, kind, size, use_step, use_size)
    ]
    ops["match_key"] = np.select(
        [use_step & use_size, use_step, use_size], ["step+size", "step", "size"], default="order"
    )
    # p2p in a two-member group: the k-th send of A is the k-th recv of B; the key names the sender
    ranks = ops["rank"].to_numpy(object)
    sender = [
        _sender(r, t, members.get(g, ())) if p else -1 for r, t, g, p in zip(ranks, op_type, ops["group_name"], p2p)
    ]
    # the order of each (rank, key, op type, sender) by start time
    ordinal = np.zeros(n, dtype=np.int64)
    seen: dict[tuple, int] = {}
    for i in ops["ts_ns"].reset_index(drop=True).sort_values(kind="stable").index:  # a missing start last
        k = (ranks[i], base[i], op_type[i], sender[i])
        ordinal[i] = seen.get(k, 0)
        seen[k] = ordinal[i] + 1
    ops["ordinal"] = ordinal
    instance = [
        (f"{b}|from{s}|{o}" if p else f"{b}|{o}") if g and (not p or s >= 0) else None
        for g, b, p, s, o in zip(ops["group_name"].notna(), base, p2p, sender, ordinal)
    ]
    ops["instance"] = pd.Series(instance, index=ops.index, dtype=object)
    ops["n_seen"] = ops.groupby("instance")["rank"].transform("nunique").where(ops["instance"].notna())
    present = {int(r) for r in ops["rank"].unique()}
    ops["n_members"] = ops["group_name"].map(
        lambda g: len(set(members.get(g, ())) & present) if isinstance(g, str) else None
    )
    return ops


def _sender(rank: int, op_type: str, group: tuple[int, ...]) -> int:
    """Sender of a p2p op in a two-member group (-1 when it cannot be told)."""
    if op_type == "send":
        return int(rank)
    if op_type == "recv" and len(group) == 2 and rank in group:
        return int(group[0] if group[1] == rank else group[1])
    return -1


def instances(
    con: duckdb.DuckDBPyConnection,
    run: str,
    offsets: dict[int, int] | None = None,
    tolerance_ns: int = DEFAULT_TOLERANCE_NS,
) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
    """Every comm op of the run with its group (attributed when needed) and instance key."""
    ops = load_ops(con, run)
    groups = load_groups(con, run)
    ops = attribute_groups(ops, groups, offsets, tolerance_ns)
    members = group_members(groups, ops)
    return match_instances(ops, members), members


@per_run
def run_groups(store: Store, run: str) -> pd.DataFrame:
    """``load_groups`` of a run, cached per run content."""
    with store.read_connection(run=run) as con:
        return load_groups(con, run)


BLOCKING = frozenset({"allreduce", "allgather", "reduce_scatter", "alltoall", "barrier"})
MIN_END_TOLERANCE_NS = 1_000_000  # members of a blocking collective leave it within this of each other, at least
END_TOLERANCE_FACTOR = 10  # ... or within this many times the typical spread of the size-checked instances
REPAIR_SHARE = 0.5  # re-pair a group's op type when at least this share of its instances fail the check


def verify_by_time(ops: pd.DataFrame, offsets: dict[int, int]) -> pd.DataFrame:
    """Check the matched blocking collectives against the clocks, and re-pair the ones that fail.

    The members of a blocking collective leave it together, so once clocks are corrected their ends
    agree (within ``tolerance``: ``END_TOLERANCE_FACTOR`` × the median spread of the instances whose
    match the message size confirms, at least ``MIN_END_TOLERANCE_NS``). When most instances of a
    group and op type matched by order alone (``REPAIR_SHARE``) disagree by more, the order paired
    different calls — a rank's trace lacks calls (sampled or cut traces), or the calls ran in groups
    the trace does not name (a member leaving late now and then is noise, and stays matched). The
    failing instances' ops, with the ops of that group and type that found no partner, are paired
    again by their corrected end:
    ops of different ranks whose ends lie within the tolerance are one instance (``match`` =
    ``time``); an op left alone is not matched (``n_seen`` 1). ``match`` is ``order`` elsewhere.
    Computed on lists, not frames (see ``match_instances``).
    """
    ops = ops.copy()
    inst = ops["instance"].to_numpy(object, copy=True)
    has = ops["instance"].notna().to_numpy(bool)
    ops["match"] = np.where(has, "order", None)
    cand = has & ~ops["is_p2p"].to_numpy(bool) & ops["op_type"].isin(BLOCKING).to_numpy(bool)
    if not cand.any():
        return ops
    ranks = [int(r) for r in ops["rank"].to_numpy(object)]
    end_c = [int(e) - offsets.get(r, 0) for e, r in zip(ops["end_ns"].to_numpy(object), ranks)]
    kind_key = [f"{g}|{t}" for g, t in zip(ops["group_name"].astype(str), ops["op_type"].astype(str))]
    checked_keys = ops["match_key"].isin(["size", "step+size"]).to_numpy(bool)
    ends: dict[str, list[int]] = {}  # instance -> its members' corrected ends
    members: dict[str, set[int]] = {}
    kind_of: dict[str, str] = {}  # instance -> its group and op type (its first op's)
    checked: set[str] = set()  # instances whose match the size confirms
    for p in np.flatnonzero(cand):
        i = inst[p]
        ends.setdefault(i, []).append(end_c[p])
        members.setdefault(i, set()).add(ranks[p])
        kind_of.setdefault(i, kind_key[p])
        if checked_keys[p]:
            checked.add(i)
    multi = {i: max(e) - min(e) for i, e in ends.items() if len(members[i]) >= 2}  # instance -> spread
    if not multi:
        return ops
    ref = [s for i, s in multi.items() if i in checked] or list(multi.values())
    tolerance = max(MIN_END_TOLERANCE_NS, END_TOLERANCE_FACTOR * int(np.median(np.asarray(ref, dtype=np.float64))))
    failing = {i: s > tolerance and i not in checked for i, s in multi.items()}
    # a kind is mismatched when most of its instances fail: one member leaving late now and then (a
    # rank descheduled on a loaded host) is noise, and pairing by time would only move the error
    tally: dict[str, list[int]] = {}  # kind -> [failing, instances]
    for i, f in failing.items():
        t = tally.setdefault(kind_of[i], [0, 0])
        t[0] += f
        t[1] += 1
    redo_kinds = {k for k, (f, n) in tally.items() if f / n >= REPAIR_SHARE}
    bad = {i for i, f in failing.items() if f and kind_of[i] in redo_kinds}
    if not bad:
        return ops
    n_seen, n_members = ops["n_seen"].to_numpy(object), ops["n_members"].to_numpy(object)
    by_kind: dict[str, list[int]] = {}  # the ops to pair again, by group and op type
    for p in range(len(ops)):
        lonely = cand[p] and kind_key[p] in redo_kinds and _less(n_seen[p], n_members[p])
        if inst[p] in bad or lonely:
            by_kind.setdefault(kind_key[p], []).append(p)
    how = ops["match"].to_numpy(object, copy=True)
    for kk in sorted(by_kind):
        cluster: list[int] = []
        n = 0

        def close(cl: list[int], n: int, kk: str = kk) -> None:
            for p in cl:
                inst[p] = f"{kk}|t{n}" if len(cl) >= 2 else f"{kk}|t{n}|alone"
                how[p] = "time" if len(cl) >= 2 else None

        for p in sorted(by_kind[kk], key=lambda p: end_c[p]):
            if cluster and (end_c[p] - end_c[cluster[0]] > tolerance or ranks[p] in {ranks[q] for q in cluster}):
                close(cluster, n)
                n += 1
                cluster = []
            cluster.append(p)
        if cluster:
            close(cluster, n)
    ops["instance"] = inst
    ops["match"] = how
    ops["n_seen"] = ops.groupby("instance")["rank"].transform("nunique").where(ops["instance"].notna())
    return ops


def _less(a: object, b: object) -> bool:
    """``a < b`` for two counts that may be missing (False then, as pandas compares NaN)."""
    return not (is_missing(a) or is_missing(b)) and a < b  # type: ignore[operator]
