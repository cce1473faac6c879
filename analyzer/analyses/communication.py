"""Communication per collective and rank, bandwidth by transport, the rank × rank matrix, group totals.

Wait vs transit (msprof-analyze's split of a collective's elapsed time): torch_npu / msprof give
both per op (``Wait Time`` = waiting for the peers, ``Transit Time`` = moving data). Kineto traces
give only the elapsed time; there we estimate, per matched instance (``collectives``), the transit
time as the *shortest* elapsed time among its members (the last rank to arrive waits for nobody,
msprof-analyze's ``slow_link`` uses the same "transmitTime = min(communication time)") and the
wait as elapsed − transit. ``wait_source`` says which one a row holds.

Bandwidth = bytes / transit time. torch_npu reports it per transport (HCCS, RDMA, SDMA, PCIE, SIO);
for Kineto the transport is the backend (gloo, nccl) and the bandwidth is the algorithm bandwidth
(message bytes over the estimated transit time).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import Store
from . import collectives
from .cache import per_run
from .clock_alignment import run_alignment, run_instances

SUMMARY_COLUMNS = [
    "rank",
    "step",
    "group_name",
    "pg_name",
    "op_type",
    "name",
    "is_p2p",
    "instance",
    "ts_ns",
    "dur_ns",
    "wait_ns",
    "transit_ns",
    "wait_source",
    "sync_ns",
    "idle_ns",
    "bytes",
    "bandwidth_bytes_per_s",
    "n_seen",
    "n_members",
]


def _group_labels(groups: pd.DataFrame) -> dict[str, str]:
    out: dict[str, str] = {}
    for g, pg, gid in zip(groups["group_name"], groups["pg_name"], groups["group_id"]):
        label = pg if isinstance(pg, str) and pg and pg not in ("undefined", "None") else None
        if label:
            out[str(g)] = label
        elif isinstance(gid, str) and gid and gid not in ("undefined",):
            out.setdefault(str(g), gid)
    return out


def with_wait_split(ops: pd.DataFrame) -> pd.DataFrame:
    """Fill wait/transit where the producer did not: transit = shortest elapsed in the instance."""
    ops = ops.copy()
    have = ops["wait_ns"].notna() & ops["transit_ns"].notna()
    ops["wait_source"] = np.where(have, "producer", None)
    complete = ops["instance"].notna() & (ops["n_seen"] == ops["n_members"]) & (ops["n_seen"] >= 2) & ~ops["is_p2p"]
    shortest = ops["dur_ns"].where(complete).groupby(ops["instance"]).transform("min")
    est = ~have & complete & shortest.notna()
    ops.loc[est, "transit_ns"] = shortest[est]
    ops.loc[est, "wait_ns"] = ops.loc[est, "dur_ns"] - shortest[est]
    ops.loc[est, "wait_source"] = "estimated"
    return ops


@per_run
def communication_summary(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per communication op and rank: group, instance, elapsed, wait, transit, bytes, bandwidth."""
    ops, _ = run_instances(store, run)
    labels = _group_labels(collectives.run_groups(store, run))
    if ops.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    ops = with_wait_split(ops)
    ops["pg_name"] = ops["group_name"].map(lambda g: labels.get(g) if isinstance(g, str) else None)
    transit = ops["transit_ns"].astype("float64")
    ops["bandwidth_bytes_per_s"] = np.where(transit > 0, ops["bytes"].astype("float64") / transit * 1e9, np.nan)
    out = ops[SUMMARY_COLUMNS].sort_values(["rank", "ts_ns"]).reset_index(drop=True)
    for c in ("wait_ns", "transit_ns", "sync_ns", "idle_ns", "bytes", "step", "n_seen", "n_members"):
        out[c] = out[c].astype("Int64")
    return out


BANDWIDTH_COLUMNS = [
    "rank",
    "step",
    "op_name",
    "group_name",
    "transport",
    "bytes",
    "transit_ns",
    "bandwidth_bytes_per_s",
    "large_packet_ratio",
    "source",
]


@per_run
def comm_bandwidth(store: Store, run: str | None = None) -> pd.DataFrame:
    """Bandwidth per op and transport: the producer's per-transport rows (torch_npu), else per op
    with the backend as transport and the estimated transit time (Kineto)."""
    with store.read_connection(run=run) as con:
        prod = con.execute(
            """
            SELECT rank, step, op_name, group_name, transport, bytes, transit_ns, bandwidth_bytes_per_s,
                   large_packet_ratio, 'producer' AS source
            FROM comm_bandwidth
            WHERE run = ? AND packet_size_bytes IS NULL AND op_name <> 'Total Op Info'
            """,
            [run],
        ).df()
        backends = con.execute(
            "SELECT rank, first(backend) AS backend FROM comm_groups WHERE run = ? GROUP BY rank", [run]
        ).df()
    summary = communication_summary(store, run)
    have = set(prod["rank"].unique())
    est = summary[~summary["rank"].isin(have) & summary["transit_ns"].notna() & summary["bytes"].notna()]
    backend = {int(r): _backend_name(b) for r, b in zip(backends["rank"], backends["backend"])}
    est = pd.DataFrame(
        {
            "rank": est["rank"],
            "step": est["step"],
            "op_name": est["name"],
            "group_name": est["group_name"],
            "transport": est["rank"].map(lambda r: backend.get(int(r), "unknown")),
            "bytes": est["bytes"],
            "transit_ns": est["transit_ns"],
            "bandwidth_bytes_per_s": est["bandwidth_bytes_per_s"],
            "large_packet_ratio": np.nan,
            "source": "estimated",
        }
    )
    out = pd.concat([prod, est], ignore_index=True) if not est.empty else prod
    return out[BANDWIDTH_COLUMNS].reset_index(drop=True)


def _backend_name(b: object) -> str:
    s = str(b or "").lower()
    for name in ("hccl", "nccl", "gloo", "mpi", "ucc"):
        if name in s:
            return name
    return s or "unknown"


MATRIX_COLUMNS = [
    "group_name",
    "pg_name",
    "op_type",
    "is_p2p",
    "src_rank",
    "dst_rank",
    "src_local",
    "dst_local",
    "transport",
    "bytes",
    "transit_ns",
    "bandwidth_bytes_per_s",
    "steps",
    "source",
]


@per_run
def comm_matrix(store: Store, run: str | None = None) -> pd.DataFrame:
    """Rank × rank matrix in GLOBAL ranks, summed over steps: bytes, transit time, bandwidth per link.

    From the producer's communication matrix (the ``*-total`` entries; torch_npu keys are local to
    the group and were converted with the group's global ranks, see docs/formats.md §7.6); a link whose
    group layout is unknown keeps ``src_rank``/``dst_rank`` NULL with its local ranks. Kineto has
    no matrix: there the rows are the matched send/recv pairs of two-rank groups.
    """
    groups = collectives.run_groups(store, run)
    with store.read_connection(run=run) as con:
        links = con.execute(
            """
            SELECT step, op_key, group_name, is_p2p, src_local, dst_local, src_rank, dst_rank, transport,
                   bytes, transit_ns
            FROM comm_links WHERE run = ? AND op_key LIKE '%-total'
            """,
            [run],
        ).df()
    ops, members = run_instances(store, run)
    labels = _group_labels(groups)
    layout = {}
    for g, ranks in zip(groups["group_name"], groups["global_ranks"]):
        lst = collectives.rank_list(ranks)
        if lst:
            layout[str(g)] = lst
    rows = []
    if not links.empty:
        links["op_type"] = links["op_key"].str.rsplit("-", n=1).str[0]
        for col, loc in (("src_rank", "src_local"), ("dst_rank", "dst_local")):
            links[col] = links[col].astype("object")
            miss = links[col].isna()
            if not miss.any():
                continue
            links.loc[miss, col] = [
                _to_global(layout.get(str(g)), lr) for g, lr in zip(links.loc[miss, "group_name"], links.loc[miss, loc])
            ]
        agg = (
            links.groupby(
                ["group_name", "op_type", "is_p2p", "src_rank", "dst_rank", "src_local", "dst_local", "transport"],
                dropna=False,
            )
            .agg(bytes=("bytes", "sum"), transit_ns=("transit_ns", "sum"), steps=("step", "nunique"))
            .reset_index()
        )
        agg["source"] = "comm_links"
        rows.append(agg)
    p2p = ops[ops["is_p2p"] & ops["instance"].notna() & (ops["op_type"] == "recv")]
    if not p2p.empty:
        recv = p2p.copy()
        recv["src_rank"] = [
            next((m for m in members.get(g, ()) if m != r), None) for g, r in zip(recv["group_name"], recv["rank"])
        ]
        recv["dst_rank"] = recv["rank"]
        agg = (
            recv.groupby(["group_name", "src_rank", "dst_rank"], dropna=False)
            .agg(bytes=("bytes", "sum"), transit_ns=("dur_ns", "sum"), steps=("step", "nunique"))
            .reset_index()
        )
        agg["op_type"], agg["is_p2p"], agg["transport"], agg["source"] = "p2p", True, None, "matched send/recv"
        agg["src_local"] = agg["dst_local"] = None
        rows.append(agg)
    if not rows:
        return pd.DataFrame(columns=MATRIX_COLUMNS)
    out = pd.concat(rows, ignore_index=True)
    out["pg_name"] = out["group_name"].map(lambda g: labels.get(g) if isinstance(g, str) else None)
    t = out["transit_ns"].astype("float64")
    out["bandwidth_bytes_per_s"] = np.where(t > 0, out["bytes"].astype("float64") / t * 1e9, np.nan)
    for c in ("src_rank", "dst_rank", "src_local", "dst_local", "bytes", "transit_ns", "steps"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")
    return out[MATRIX_COLUMNS].sort_values(["group_name", "op_type", "src_rank", "dst_rank"]).reset_index(drop=True)


def _to_global(layout: list[int] | None, local: object) -> int | None:
    if layout is None or local is None or pd.isna(local):
        return None
    i = int(local)
    return layout[i] if 0 <= i < len(layout) else None


GROUP_COLUMNS = [
    "group_name",
    "pg_name",
    "ranks",
    "ranks_present",
    "op_types",
    "instances",
    "bytes",
    "elapsed_ns",
    "wait_ns",
    "transit_ns",
    "wait_ratio",
    "sync_ns",
    "idle_ns",
    "idle_ratio",
    "idle_source",
]


@per_run
def comm_group_totals(store: Store, run: str | None = None) -> pd.DataFrame:
    """Per communication group: members, collectives seen, bytes and time summed over its ranks."""
    groups = collectives.run_groups(store, run)
    s = communication_summary(store, run)
    s = s[s["group_name"].notna()]
    _, members = run_instances(store, run)
    labels = _group_labels(groups)
    rows = []
    for g, sub in s.groupby("group_name"):
        wait = sub["wait_ns"].sum(min_count=1)
        transit = sub["transit_ns"].sum(min_count=1)
        idle, idle_source = _idle(sub)
        elapsed = int(sub["dur_ns"].sum())
        sync = sub["sync_ns"].sum(min_count=1)
        rows.append(
            {
                "group_name": g,
                "pg_name": labels.get(g),
                "ranks": list(members.get(g, ())),
                "ranks_present": sorted(int(r) for r in sub["rank"].unique()),
                "op_types": sorted(sub["op_type"].unique()),
                "instances": int(sub["instance"].nunique()),
                "bytes": int(sub["bytes"].sum()) if sub["bytes"].notna().any() else None,
                "elapsed_ns": elapsed,
                "wait_ns": None if pd.isna(wait) else int(wait),
                "transit_ns": None if pd.isna(transit) else int(transit),
                "wait_ratio": (float(wait) / float(wait + transit))
                if not pd.isna(wait) and not pd.isna(transit) and (wait + transit)
                else None,
                "sync_ns": None if pd.isna(sync) else int(sync),
                "idle_ns": idle,
                "idle_ratio": (idle / elapsed) if idle is not None and elapsed else None,
                "idle_source": idle_source,
            }
        )
    out = pd.DataFrame(rows, columns=GROUP_COLUMNS)
    for c in ("sync_ns", "idle_ns"):
        out[c] = out[c].astype("Int64")
    return out


def _idle(ops: pd.DataFrame) -> tuple[int | None, str | None]:
    """Idle time of a group's ops (msprof-analyze: Idle = Elapse − Transit − Wait: time inside the
    op in which the rank neither waits for a peer nor moves data — synchronisation, the tasks'
    gaps): the producer's own ``Idle Time`` where it wrote one, else elapsed − wait − transit of
    the ops whose wait and transit the producer measured. Unknown (None) where wait and transit
    were estimated (Kineto, MindSpore on CPU: wait = elapsed − transit leaves no idle by
    construction)."""
    have = ops["wait_source"].eq("producer") & ops["wait_ns"].notna() & ops["transit_ns"].notna()
    if not have.any():
        return None, None
    sub = ops[have]
    theirs = sub["idle_ns"].notna()
    computed = (sub["dur_ns"] - sub["wait_ns"] - sub["transit_ns"]).clip(lower=0)
    idle = int(sub["idle_ns"].where(theirs, computed).sum())
    source = "producer" if theirs.all() else ("computed" if not theirs.any() else "producer + computed")
    return idle, source


COVERAGE_COLUMNS = ["group_name", "pg_name", "ranks", "ranks_profiled", "profiled"]


@per_run
def group_coverage(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per communication group of two or more ranks: its members, those profiled in the run."""
    groups = collectives.run_groups(store, run)
    al = run_alignment(store, run)
    present = set(al.ranks)
    rows = []
    for g, members in sorted(al.members.items()):
        if len(members) < 2:
            continue
        labels = groups[groups["group_name"] == g]["pg_name"].dropna().unique()
        prof = sorted(r for r in members if r in present)
        rows.append(
            {
                "group_name": g,
                "pg_name": labels[0] if len(labels) else None,
                "ranks": list(members),
                "ranks_profiled": prof,
                "profiled": len(prof),
            }
        )
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)
