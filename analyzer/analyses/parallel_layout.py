"""Parallel layout (which ranks form the TP / CP / EP / DP / PP groups), inferred, not typed.

Sources, best first:

1. *declared* group roles: ``profiler_metadata.json`` ``parallel_group_info`` (torch_npu; kept by
   the reader as ``comm_groups.pg_name``), msprof-analyze's ``communication_group.json``
   (``comm_group_parallel_info``, read into ``declared_groups`` at ingest when the run folder has
   one), Kineto ``pg_config``
   descriptions when the job named its groups (``group_desc``);
2. *structure and traffic* for groups without a role: a dimension is a family of disjoint groups
   of equal size whose ranks form arithmetic progressions with one stride and which together cover
   every rank. A family carrying point-to-point traffic is PP; the families carrying collectives,
   by increasing stride, are TP then DP (one family: DP) — Megatron's default order
   ``tp-cp-ep-dp-pp``; a family with no traffic whose stride is larger than every collective
   family's is PP (pipeline send/recv that the trace could not attribute to a group). With three or
   more collective families the outermost is PP and the ones between TP and DP are CP, EP.
   When the job's sends and recvs run in no group but the world (gloo's name no group), the
   pipelines are read off the traffic (``pipeline.traffic_chains``): each chain of ranks that
   pass activations on is a PP group, its ranks by stage.
   When the trace lists no group but the world and the world carries the collectives, the job is
   pure data parallel: DP = world size.

``parallel_layout`` gives every rank its coordinate (index inside its group) along each dimension;
``layout_metric`` puts any per-rank metric on that grid.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from ..errors import QueryError
from ..messages import Message, message, render
from ..store import Store
from . import collectives
from .cache import per_run
from .clock_alignment import run_instances

DIMS = ("tp", "cp", "ep", "dp", "pp")
_ALIASES = {
    "tp": "tp",
    "tensor": "tp",
    "tensor_model_parallel": "tp",
    "cp": "cp",
    "context": "cp",
    "context_parallel": "cp",
    "ep": "ep",
    "exp": "ep",
    "expert": "ep",
    "expert_model_parallel": "ep",
    "dp": "dp",
    "data": "dp",
    "data_parallel": "dp",
    "pp": "pp",
    "pipeline": "pp",
    "pipeline_model_parallel": "pp",
}
# source: how the dimension was found, in English; source_msgs: the same as messages (analyzer.messages)
DIM_COLUMNS = ["dim", "size", "groups", "stride", "source", "members", "source_msgs"]


def _source(key: str, **params: Any) -> dict[str, Message]:
    """How a dimension was found: {its English text: its message}."""
    msg = message(key, **params)
    return {render(msg): msg}


def _dim_of(label: object) -> str | None:
    if not isinstance(label, str):
        return None
    return _ALIASES.get(label.strip().lower())


def declared_group_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Group records (``infer_layout``'s input) from ``declared_groups`` rows: msprof-analyze's
    ``communication_group.json``, read into the store at ingest."""
    return pd.DataFrame(
        {
            "group_name": rows["group_name"].astype(str),
            "ranks": [tuple(sorted(int(r) for r in ranks)) for ranks in rows["global_ranks"]],
            "label": rows["pg_name"],
            "traffic": rows["traffic"],
            "source": rows["source"],
        },
        columns=["group_name", "ranks", "label", "traffic", "source"],
    )


def _stride(ranks: tuple[int, ...]) -> int | None:
    if len(ranks) < 2:
        return 0
    d = {b - a for a, b in zip(ranks, ranks[1:])}
    return d.pop() if len(d) == 1 else None


def infer_layout(
    groups: pd.DataFrame, world: list[int], chains: list[list[int]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(dims, per-rank coordinates) from group records.

    ``groups`` columns: ranks (tuple), label (role name or None), traffic ('collective', 'p2p',
    'both' or None), source. ``world``: every rank of the job. ``chains``: the pipelines the
    send/recv traffic forms, each its ranks by stage (``_p2p_chains``), for a job whose p2p runs
    in no group but the world.
    """
    world = sorted(set(world))
    n = len(world)
    recs: dict[tuple[int, ...], dict] = {}
    for r in groups.itertuples():
        ranks = tuple(sorted({int(x) for x in r.ranks}))
        if not ranks:
            continue
        rec = recs.setdefault(ranks, {"labels": set(), "traffic": set(), "sources": {}, "raw": set(), "origin": set()})
        rec["origin"].add(r.source)
        if isinstance(r.label, str) and r.label:
            rec["raw"].add(r.label)
        dim = _dim_of(r.label)
        if dim:
            rec["labels"].add(dim)
            rec["sources"].update(_source("layout.declared", origin=str(r.source)))
        if isinstance(r.traffic, str):
            rec["traffic"] |= {"collective", "p2p"} if r.traffic == "both" else {r.traffic}
    # declared dimensions
    dims: dict[str, dict] = {}
    for ranks, rec in recs.items():
        for dim in rec["labels"]:
            d = dims.setdefault(dim, {"groups": set(), "sources": {}})
            d["groups"].add(ranks)
            d["sources"].update(rec["sources"])
    # a declared dimension that does not cover every rank is completed with groups of the same size
    # and stride whose composite label names it (Megatron's ``dp_cp`` is the DP group when CP = 1)
    for dim, d in dims.items():
        covered = {r for g in d["groups"] for r in g}
        shape = {(len(g), _stride(g)) for g in d["groups"]}
        if covered == set(world) or len(shape) != 1:
            continue
        for ranks, rec in recs.items():
            comp = {t for lab in rec.get("raw", ()) for t in lab.lower().split("_")}
            if dim in comp and (len(ranks), _stride(ranks)) in shape and not covered & set(ranks):
                d["groups"].add(ranks)
                d["sources"].update(_source("layout.composite", labels=", ".join(sorted(rec["raw"]))))
                covered |= set(ranks)
    # families of unlabelled groups: (size, stride) partitions of the world
    fam: dict[tuple[int, int], set[tuple[int, ...]]] = defaultdict(set)
    for ranks, rec in recs.items():
        if rec["labels"] or len(ranks) in (0, 1, n):
            continue
        s = _stride(ranks)
        if s is not None:
            fam[(len(ranks), s)].add(ranks)
    families = []
    for (size, stride), gs in fam.items():
        cover = [r for g in gs for r in g]
        if len(cover) == len(set(cover)) and sorted(cover) == world:
            traffic = set().union(*(recs[g]["traffic"] for g in gs))
            families.append({"size": size, "stride": stride, "groups": gs, "traffic": traffic})
    taken = {frozenset(g) for d in dims.values() for g in d["groups"]}
    families = [f for f in families if not any(frozenset(g) in taken for g in f["groups"])]
    p2p = [f for f in families if "p2p" in f["traffic"] and "collective" not in f["traffic"]]
    coll = sorted((f for f in families if "collective" in f["traffic"]), key=lambda f: f["stride"])
    idle = [f for f in families if not f["traffic"]]
    if "pp" not in dims and p2p:
        f = max(p2p, key=lambda f: f["stride"])
        dims["pp"] = {"groups": f["groups"], "sources": _source("layout.p2p")}
    # collective families by increasing stride, Megatron order tp-cp-ep-dp-pp
    k = len(coll)
    order = ["dp"] if k == 1 else ["tp", "dp"] if k == 2 else ["tp"] + ["cp", "ep"][: max(k - 3, 0)] + ["dp", "pp"]
    free_names = [d for d in order if d not in dims]
    for f, name in zip(coll, free_names):
        why = _source("layout.only_family") if k == 1 else _source("layout.family", stride=f["stride"])
        dims[name] = {"groups": f["groups"], "sources": why}
    if "pp" not in dims and idle:
        max_coll = max((f["stride"] for f in coll), default=-1)
        f = max(idle, key=lambda f: f["stride"])
        if f["stride"] > max_coll:
            dims["pp"] = {
                "groups": f["groups"],
                "sources": _source("layout.no_collectives"),
            }
    # pure pipeline parallel: the sends and recvs of the world run along chains of ranks (a rank
    # talks to its two neighbours only); each chain is a PP group, its ranks by stage; data
    # parallel ranks never exchange p2p, so the world's collectives (a loss all-reduce) make no DP
    if "pp" not in dims and chains:
        ranks_in = [r for c in chains for r in c]
        if (
            all(len(c) > 1 for c in chains)
            and len(ranks_in) == len(set(ranks_in))
            and len({len(c) for c in chains}) == 1
        ):
            dims["pp"] = {"groups": {tuple(c) for c in chains}, "sources": _source("layout.p2p_chain")}
    # pure data parallel: the job created no group but the world (the trace lists every process
    # group with its global ranks, Kineto pg_config) and all its collectives run there
    world_rec = recs.get(tuple(world))
    if (
        not dims
        and n >= 2
        and world_rec is not None
        and "collective" in world_rec["traffic"]
        and "comm_groups" in world_rec["origin"]
        and not any(1 < len(g) < n for g in recs)
    ):
        dims["dp"] = {
            "groups": {tuple(world)},
            "sources": _source("layout.world"),
        }
    dim_rows, coords = [], {r: {"rank": r} for r in world}
    for dim in DIMS:
        if dim not in dims:
            continue
        gs = sorted(dims[dim]["groups"])
        sizes = {len(g) for g in gs}
        strides = {_stride(g) for g in gs}
        dim_rows.append(
            {
                "dim": dim,
                "size": max(sizes),
                "groups": len(gs),
                "stride": strides.pop() if len(strides) == 1 else None,
                "source": "; ".join(sorted(dims[dim]["sources"])),
                "source_msgs": [m for _, m in sorted(dims[dim]["sources"].items())],
                "members": [list(g) for g in gs],
            }
        )
        for gi, g in enumerate(gs):
            for pos, r in enumerate(g):
                if r in coords:
                    coords[r][dim] = pos
                    coords[r][f"{dim}_group"] = gi
    cols = ["rank"] + [c for d in DIMS if d in dims for c in (d, f"{d}_group")]
    out = pd.DataFrame(list(coords.values()), columns=cols)
    for c in cols[1:]:
        out[c] = out[c].astype("Int64")
    return pd.DataFrame(dim_rows, columns=DIM_COLUMNS), out


def _p2p_chains(store: Store, run: str, groups: pd.DataFrame, world: list[int]) -> list[list[int]]:
    """The pipelines the send/recv traffic forms (``pipeline.traffic_chains``) when the job's p2p
    runs in the world and no smaller group (a gloo send/recv names no group: it is counted in the
    world, or in none), else none."""
    p2p = [tuple(r) for r, t in zip(groups["ranks"], groups["traffic"]) if t in ("p2p", "both")]
    if not p2p or any(len(r) < len(world) for r in p2p):
        return []
    from .pipeline import traffic_chains  # the pipeline analysis reads the layout: imported here

    return traffic_chains(store, run)


def _records_and_chains(store: Store, run: str) -> tuple[pd.DataFrame, list[int], list[list[int]]]:
    groups, world = _group_records(store, run)
    return groups, world, _p2p_chains(store, run, groups, world)


def _group_records(store: Store, run: str) -> tuple[pd.DataFrame, list[int]]:
    groups = collectives.run_groups(store, run)
    ops, members = run_instances(store, run)
    with store.read_connection(run=run) as con:
        ranks = con.execute("SELECT DISTINCT rank FROM collections WHERE run = ? ORDER BY rank", [run]).df()["rank"]
        ws = con.execute("SELECT max(world_size) FROM collections WHERE run = ?", [run]).fetchone()[0]
        job_groups = con.execute(
            "SELECT group_name, global_ranks, pg_name, traffic, source FROM declared_groups WHERE run = ? "
            "ORDER BY rank, collection_id, group_name",
            [run],
        ).df()
    traffic: dict[str, set[str]] = defaultdict(set)
    for g, p in zip(ops["group_name"], ops["is_p2p"]):
        if isinstance(g, str):
            traffic[g].add("p2p" if p else "collective")
    rows = []
    for g, m in members.items():
        mine = groups[groups["group_name"] == g]
        labels = mine["pg_name"].dropna().unique()
        declared = any(collectives.rank_list(v) for v in mine["global_ranks"])
        t = traffic.get(g, set())
        rows.append(
            {
                "group_name": g,
                "ranks": m,
                "label": labels[0] if len(labels) else None,
                "traffic": "both" if len(t) == 2 else (next(iter(t)) if t else None),
                # members named by the trace, or only the ranks that report the group (maybe a part of it)
                "source": "comm_groups" if declared else "comm_groups (reporting ranks)",
            }
        )
    df = pd.DataFrame(rows, columns=["group_name", "ranks", "label", "traffic", "source"])
    if not job_groups.empty:  # msprof-analyze's communication_group.json, read at ingest
        df = pd.concat([df, declared_group_frame(job_groups)], ignore_index=True)
    world = sorted({int(r) for r in ranks} | {int(r) for m in df["ranks"] for r in m})
    if ws and not pd.isna(ws) and int(ws) >= len(world):
        world = list(range(int(ws)))
    return df, world


@per_run
def parallel_dims(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per parallel dimension found: dim (tp/cp/ep/dp/pp), size, groups, stride, source, members."""
    return infer_layout(*_records_and_chains(store, run))[0]


@per_run
def parallel_layout(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per rank of the job (also ranks that were not profiled, when the groups name them)
    with its coordinate along each dimension found (``tp``, ``dp``, ``pp``, ...: index inside its
    group) and the group's index (``tp_group``, ...)."""
    return infer_layout(*_records_and_chains(store, run))[1]


@per_run
def layout_metric(store: Store, run: str | None = None, metric: str = "free_ns", agg: str = "mean") -> pd.DataFrame:
    """``parallel_layout`` plus ``value``: a per-rank metric — any numeric ``step_breakdown`` column
    aggregated over steps (``agg``: mean, max, sum, median), ``slow_rank_votes``, or
    ``straggler_lateness_ns``: the median per step (per collective when the run has no steps) of
    how much sooner the step would start had the rank not arrived last (``stragglers``'
    ``median_gain_ns``, in the group where the rank stands out most; no value for a rank with no
    collective matched across its members)."""
    from .slow_rank import slow_ranks
    from .step_breakdown import step_breakdown
    from .straggler import stragglers

    lay = parallel_layout(store, run)
    if metric == "slow_rank_votes":
        v = slow_ranks(store, run).set_index("rank")["votes"]
    elif metric == "straggler_lateness_ns":
        v = stragglers(store, run).set_index("rank")["median_gain_ns"]
    else:
        sb = step_breakdown(store, run)
        if metric not in sb.columns or metric in ("rank", "step", "mode"):
            raise QueryError(
                f"unknown metric {metric!r}: use a step_breakdown column, slow_rank_votes or straggler_lateness_ns"
            )
        v = sb.groupby("rank")[metric].agg(agg)
    lay["metric"] = metric
    lay["value"] = lay["rank"].map(v.to_dict())
    return lay
