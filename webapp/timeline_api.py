"""The timeline's HTTP endpoints, served by the app's Flask server beside Dash's own routes.

The timeline page draws on a canvas in the browser (``assets/timeline.js``) and asks these for
data; every answer is bounded whatever the size of the trace:

``GET /_timeline/meta?run=R&ranks=0-7``
    JSON: the run's origin (its first timestamp) and content fingerprint, the lanes of the ranks in
    drawing order (key, group, process and lane names, slices, nesting depth, collections), each
    rank's steps, first and last event, and the estimated clock offsets with their residuals.
``POST /_timeline/tiles`` ``{"run", "fp", "tiles": [[lane, level, index], ...]}``
    the tiles in the binary format of :func:`webapp.tiles.encode` (gzip when the browser takes it).
``POST /_timeline/search`` ``{"run", "fp", "lanes", "offsets", "q", "t", "dir", "from"}``
    the next (or previous) slice after time ``t`` whose name contains ``q``, and how many match.
``POST /_timeline/range`` ``{"run", "fp", "lanes", "offsets", "a", "b"}``
    what a measured range holds: its slices per name (count, time inside the range), the longest first.
``POST /_timeline/counters`` ``{"run", "fp", "tracks", "offsets", "a", "b", "n"}``
    the counter tracks (``webapp.counter_tracks``; meta lists them per rank) over the view [a, b) in
    at most ``n`` buckets each: minimum, maximum and last value per bucket, the value held before.
``POST /_timeline/flows`` ``{"run", "fp", "ranks", "kinds", "offsets", "a", "b"}``
    the flow arrows (``webapp.flows``: launch → device task, send → recv, a collective's members)
    with an end inside the view, each end on its slice's lane; at most ``flows.MAX_ARROWS``.

Times sent and received are ns after the run's origin (exact in a float64 up to 104 days); absolute
ns travel as strings. ``offsets`` maps a rank to the ns the browser subtracts from that rank's
times (its clock offset when the aligned clock is on): a time ``t`` of the view is ``t + offset``
on the rank's own clock, where tiles live.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from flask import Flask, Response, request

from analyzer.errors import AnalyzerError
from analyzer.messages import is_message
from analyzer.store import Store

from . import counter_tracks, data, flows, lod, tiles
from .cache import run_cached
from .errors import BadParameter, NotFound, WebappError
from .labels import said, said_term
from .params import parse_ranks, single
from .reader import Reader, reader

MAX_SEARCH_LANES = 20_000
MAX_RANGE_SLICES = 200_000
TOP_NAMES = 25


class StaleView(WebappError):
    """The run changed in the store since the browser read its lanes (a new ingest)."""


# ---------------------------------------------------------------------------------------------
# lanes as the protocol names them
# ---------------------------------------------------------------------------------------------


@run_cached
def timeline_rows(rd: Reader, run: str) -> pd.DataFrame:
    """One row per timeline lane of the run, in drawing order: key ``"{rank}.{k}"`` (the k-th lane
    of its rank), rank, lane_group, process, lane, n_slices and members (the (collection_id, pid,
    tid) of the thread in each collection of the rank)."""
    df = data.lanes(rd, run, None)
    cols = ["key", "rank", "k", "lane_group", "process", "lane", "n_slices", "members"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.sort_values(["row", "collection_id", "pid", "tid"])
    g = df.groupby("row", sort=True)
    members: dict[Any, list[tuple[str, Any, Any]]] = {}  # one pass over the rows (a Python call per lane cost seconds)
    for row, c, p, tid in zip(df["row"].tolist(), df["collection_id"].tolist(), df["pid"].tolist(), df["tid"].tolist()):
        members.setdefault(row, []).append((str(c), p, tid))
    out = pd.DataFrame(
        {
            "rank": g["rank"].first().astype("int64"),
            "lane_group": g["lane_group"].first(),
            "process": g["process"].first(),
            "lane": g["lane"].first(),
            "n_slices": g["n_slices"].first().astype("int64"),
        }
    )
    out["members"] = [tuple(members[r]) for r in out.index]
    out = out.reset_index()
    out["k"] = out["row"] - out.groupby("rank")["row"].transform("min")
    out["key"] = out["rank"].astype(str) + "." + out["k"].astype(str)
    return out[cols].reset_index(drop=True)


def summary_key(rank: int, group: str) -> str:
    """The key of a folded lane group of a rank (its lanes drawn as one row)."""
    return f"{int(rank)}.{group}"


def _rank_of(key: str) -> int:
    head = str(key).split(".", 1)[0]
    if not head.lstrip("-").isdigit():
        raise BadParameter("lane", key, "expected a lane key like 0.3")
    return int(head)


@dataclass(frozen=True)
class Context:
    """What every timeline request of a run needs from the catalog, kept until the catalog changes
    (so a request for cached tiles opens nothing)."""

    run: str
    fp: str  # the run's content fingerprint (the browser sends it back; a new ingest changes it)
    origin: int  # the run's first timestamp (``tiles.aligned_origin``): times travel as ns after it
    ranks: tuple[int, ...]
    rows: pd.DataFrame  # timeline_rows()
    sources: dict[str, tuple[int, str]]  # collection_id -> (rank, slices files)
    lanes: dict[str, tiles.Lane]  # by key
    summaries: dict[str, list[str]]  # a folded group's key -> its lanes' keys
    stored: set[str] = frozenset()  # collections whose lanes the ingest summarised (the tile pyramid)
    # per rank: its lanes and folded groups (a request names a few ranks of thousands)
    rank_lanes: dict[int, list[tiles.Lane]] = field(default_factory=dict)
    rank_summaries: dict[int, dict[str, list[str]]] = field(default_factory=dict)

    def lanes_of(self, ranks: Sequence[int]) -> list[tiles.Lane]:
        """The lanes of ``ranks``, in drawing order."""
        keep = set(ranks)
        return [ln for r in sorted(keep) for ln in self.rank_lanes.get(r, ())]

    def summaries_of(self, ranks: Sequence[int]) -> dict[str, list[str]]:
        """The folded groups of ``ranks``: key -> its lanes' keys."""
        return {k: v for r in sorted(set(ranks)) for k, v in self.rank_summaries.get(r, {}).items()}


def _context(
    run: str, fp: str, origin: int, ranks: tuple[int, ...], rows: pd.DataFrame, sources: Any, stored: set[str]
) -> Context:
    lanes = {k: tiles.Lane(k, int(r), m) for k, r, m in zip(rows["key"], rows["rank"], rows["members"])}
    summaries: dict[str, list[str]] = {}
    rank_lanes: dict[int, list[tiles.Lane]] = {}
    rank_summaries: dict[int, dict[str, list[str]]] = {}
    for k, r, g in zip(rows["key"], rows["rank"], rows["lane_group"]):
        sk = summary_key(int(r), str(g))
        summaries.setdefault(sk, []).append(str(k))
        rank_summaries.setdefault(int(r), {})[sk] = summaries[sk]
        rank_lanes.setdefault(int(r), []).append(lanes[k])
    return Context(
        run, fp, origin, ranks, rows, sources, lanes, summaries, frozenset(stored), rank_lanes, rank_summaries
    )


_CONTEXTS: OrderedDict[tuple[str, str], tuple[Any, Context]] = OrderedDict()
_CONTEXTS_LOCK = threading.Lock()
MAX_CONTEXTS = 64


def context(store: Store, run: str) -> Context:
    """The timeline context of ``run`` (NotFound when the store has no such run), kept while the
    catalog snapshot of the store is the same object (``Store.catalog_snapshot``: a new one after
    every commit)."""
    key = (str(store.path), str(run))
    snap = store.catalog_snapshot() if store.exists() else None
    with _CONTEXTS_LOCK:
        hit = _CONTEXTS.get(key)
        if hit is not None and snap is not None and hit[0] is snap:
            _CONTEXTS.move_to_end(key)
            return hit[1]
    with reader(store, run) as rd:
        run = data.resolve_run(rd, run)
        bounds = data.time_bounds(rd, run, None)
        if bounds is None:
            raise NotFound(f"run {run!r} has no timed events")
        ctx = _context(
            run,
            rd.run_key(run),
            tiles.aligned_origin(bounds[0]),
            tuple(data.ranks_of(rd, run)),
            timeline_rows(rd, run),
            data.lane_sources(rd, run, None),
            data.stored_collections(rd, run),
        )
        used = rd.catalog_tables()
    if used is snap:  # what was read is the snapshot the key names
        with _CONTEXTS_LOCK:
            _CONTEXTS[key] = (snap, ctx)
            while len(_CONTEXTS) > MAX_CONTEXTS:
                _CONTEXTS.popitem(last=False)
    return ctx


def _check_ranks(ctx: Context, ranks: Sequence[int]) -> list[int]:
    unknown = sorted({int(r) for r in ranks} - set(ctx.ranks))
    if unknown:
        raise NotFound(f"run {ctx.run!r} has no rank {', '.join(map(str, unknown[:10]))}")
    return sorted({int(r) for r in ranks})


def tile_source(store: Store | Reader, ctx: Context, ranks: Sequence[int]) -> tiles.IndexTileSource:
    """The tile source of ``ranks`` (lane indexes built on first use, then cached)."""
    ranks = _check_ranks(ctx, ranks)
    keep = set(ranks)
    sources = {cid: v for cid, v in ctx.sources.items() if v[0] in keep}
    indexes = data.cached_lane_indexes(sources)
    if indexes is None:
        with reader(store, ctx.run, ranks, ("lanes", "slices")) as rd:
            indexes = data.lane_indexes(rd, ctx.run, ranks, data.lanes(rd, ctx.run, None))
    return tiles.IndexTileSource(ctx.origin, ctx.lanes_of(ranks), indexes, ctx.summaries_of(ranks))


def stored_source(store: Store, ctx: Context, ranks: Sequence[int]) -> tiles.StoredTileSource:
    """The tile source of ``ranks`` for the tiles endpoint: the zoomed-out levels from the pyramid
    the ingest stored (no lane index in memory), the finer ones from ``tile_source``."""
    ranks = _check_ranks(ctx, ranks)

    def fetch(want: pd.DataFrame) -> Any:
        with reader(store, ctx.run, ranks, ("agg_lane_occupancy", "agg_lane_slices")) as rd:
            return data.stored_tiles(rd, ctx.run, ranks, want)

    return tiles.StoredTileSource(
        ctx.origin,
        ctx.lanes_of(ranks),
        ctx.summaries_of(ranks),
        set(ctx.stored),
        fetch,
        lambda: tile_source(store, ctx, ranks),
    )


def _lane_stats(
    store: Store | Reader, ctx: Context, ranks: list[int], rows: pd.DataFrame
) -> dict[str, tuple[int, int, int, int]]:
    """Per lane key of ``rows``: (slices, first start, last end, deepest nesting level), from what the
    ingest stored when every collection of the ranks has it, else from the lane indexes."""
    members = dict(zip(rows["key"], rows["members"]))
    cids = {c for m in members.values() for c, _, _ in m}
    out: dict[str, tuple[int, int, int, int]] = {}
    if cids <= ctx.stored:
        with reader(store, ctx.run, ranks, ("agg_lanes",)) as rd:
            by = data.stored_lanes(rd, ctx.run, ranks)
        for key, mem in members.items():
            got = [by[m] for m in mem if m in by]
            n = sum(g[0] for g in got)
            out[key] = (
                n,
                min((g[1] for g in got if g[0]), default=0),
                max((g[2] for g in got if g[0]), default=0),
                min(max((g[3] for g in got), default=0), lod.MAX_DEPTH),
            )
        return out
    src = tile_source(store, ctx, ranks)
    for key in members:
        idx = [ix for _, ix, _ in src.members(key)]
        out[key] = (
            sum(ix.n for ix in idx),
            min((ix.first_ns for ix in idx if ix.n), default=0),
            max((ix.last_ns for ix in idx if ix.n), default=0),
            max((ix.max_depth for ix in idx), default=0),
        )
    return out


# ---------------------------------------------------------------------------------------------
# meta
# ---------------------------------------------------------------------------------------------


def _num(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else v


DEFAULT_RANKS = 8


def default_ranks(all_ranks: Sequence[int]) -> list[int]:
    """The ranks a timeline shows when the address names none."""
    return list(all_ranks[:DEFAULT_RANKS])


def _text(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def meta(store: Store, run: str, ranks: Sequence[int] | str | None) -> dict[str, Any]:
    """Everything the browser needs to lay out the timeline of ``ranks`` (None: the first 8, "all")."""
    ctx = context(store, run)
    run = ctx.run
    all_ranks = list(ctx.ranks)
    selected = all_ranks if ranks == "all" else default_ranks(all_ranks) if ranks is None else _check_ranks(ctx, ranks)
    rows = ctx.rows[ctx.rows["rank"].isin(selected)]
    # one reader for all that follows: the fact views of the ranks bound once, and only for what the
    # per-rank caches do not hold yet
    with reader(store, run, selected, ("agg_lanes", "agg_counter_curve", "memory_samples", "counters")) as rd:
        return _meta(rd, ctx, all_ranks, selected, rows)


def _meta(rd: Reader, ctx: Context, all_ranks: list[int], selected: list[int], rows: pd.DataFrame) -> dict[str, Any]:
    run, origin = ctx.run, ctx.origin
    stats = _lane_stats(rd, ctx, selected, rows)
    lanes_out = []
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for key, rank, grp, proc, lane, members in zip(
        rows["key"], rows["rank"], rows["lane_group"], rows["process"], rows["lane"], rows["members"]
    ):
        n, a, b, depth = stats[key]
        if n:
            first[rank] = min(first.get(rank, 1 << 62), a)
            last[rank] = max(last.get(rank, -(1 << 62)), b)
        lanes_out.append(
            {
                "key": key,
                "rank": int(rank),
                "group": str(grp),
                "process": str(proc),
                "lane": str(lane),
                "n": int(n),
                "depth": int(depth) + 1,
                "members": [m[0] for m in members],
            }
        )
    st = data.step_windows(rd, run, selected)
    counters = [
        {**d, "first": d["first"] - origin, "last": d["last"] - origin}
        for listed in counter_tracks.catalog(rd, run, selected).values()
        for d in listed
    ]
    try:
        off = data.clock_offsets(rd, run)
    except (AnalyzerError, WebappError, ValueError, KeyError) as exc:  # the timeline works without offsets
        off = pd.DataFrame()
        clock_error: str | None = str(exc)
    else:
        clock_error = None
        off = off[off["rank"].astype("int64").isin(selected)] if not off.empty else off
    steps = [
        [int(r), int(s), int(a) - origin, int(b) - origin]
        for r, s, a, b in zip(st["rank"], st["step"], st["start_ns"], st["end_ns"])
        if pd.notna(a) and pd.notna(b)
    ]
    clock = []
    for r in off.to_dict("records") if not off.empty else []:
        if int(r["rank"]) not in selected:
            continue
        clock.append(
            {
                "rank": int(r["rank"]),
                "offset": None if pd.isna(r["offset_ns"]) else int(r["offset_ns"]),
                "residual": None if pd.isna(r["residual_ns"]) else int(r["residual_ns"]),
                "p90": None if pd.isna(r["residual_p90_ns"]) else int(r["residual_p90_ns"]),
                "n": int(r["n_collectives"]),
                "status": str(r["status"]),
                "status_text": said_term("clock", str(r["status"]).replace(" ", "_"), str(r["status"])),
                # in the request's language (English from results stored without messages)
                "warning": said(r["warning_msg"]) if is_message(r.get("warning_msg")) else _text(r.get("warning")),
            }
        )
    return {
        "run": run,
        "origin": str(origin),
        "fp": ctx.fp,
        "ranks": selected,
        "all_ranks": all_ranks,
        "lanes": lanes_out,
        "steps": steps,
        "events": {str(r): [first[r] - origin, last[r] - origin] for r in first},
        "clock": clock,
        "clock_error": clock_error,
        "counters": counters,
        "limits": {
            "buckets": tiles.TILE_BUCKETS,
            "min_slice_buckets": tiles.MIN_SLICE_BUCKETS,
            "max_level": tiles.MAX_LEVEL,
            "max_tiles": tiles.MAX_TILES_PER_REQUEST,
            "max_counters": MAX_COUNTER_REQUEST,
        },
    }


# ---------------------------------------------------------------------------------------------
# tiles, search, range
# ---------------------------------------------------------------------------------------------


def _check_fp(ctx: Context, fp: Any) -> None:
    if fp is not None and str(fp) != ctx.fp:
        raise StaleView(f"run {ctx.run!r} changed in the store since this page was opened: reload it")


def tile_bytes(store: Store, ctx: Context, wanted: Sequence[Sequence[Any]]) -> bytes:
    """The tiles ``[[lane, level, index], ...]`` of ``run``, encoded."""
    if len(wanted) > tiles.MAX_TILES_PER_REQUEST:
        raise BadParameter("tiles", len(wanted), f"at most {tiles.MAX_TILES_PER_REQUEST} tiles per request")
    parsed = []
    for w in wanted:
        if not isinstance(w, (list, tuple)) or len(w) != 3:
            raise BadParameter("tiles", w, "expected [lane, level, index]")
        lane, level, index = str(w[0]), w[1], w[2]
        if not isinstance(level, int) or not isinstance(index, int) or not 0 <= level <= tiles.MAX_LEVEL:
            raise BadParameter("tiles", w, f"level must be an integer in 0..{tiles.MAX_LEVEL}, index an integer")
        parsed.append((lane, level, index))
    ranks = sorted({_rank_of(lane) for lane, _, _ in parsed})
    src = stored_source(store, ctx, ranks)
    for lane, _, _ in parsed:
        if not src.has(lane):
            raise NotFound(f"run {ctx.run!r} has no lane {lane}")
    src.prefetch(parsed)  # the stored tiles of the request in one read
    out = [src.tile(lane, level, index) for lane, level, index in parsed]
    return tiles.encode(out, src.origin)


def _offsets(body: dict[str, Any]) -> dict[int, int]:
    raw = body.get("offsets") or {}
    if not isinstance(raw, dict):
        raise BadParameter("offsets", raw, "expected {rank: ns}")
    try:
        return {int(k): int(round(float(v or 0))) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise BadParameter("offsets", raw, "expected {rank: ns}") from None


def _lane_keys(body: dict[str, Any]) -> list[str]:
    lanes = body.get("lanes")
    if not isinstance(lanes, list) or not lanes or len(lanes) > MAX_SEARCH_LANES:
        raise BadParameter("lanes", lanes, f"expected a list of 1..{MAX_SEARCH_LANES} lane keys")
    return [str(x) for x in lanes]


def _matching_codes(names: Sequence[str], needle: str) -> np.ndarray:
    low = needle.lower()
    return np.array([i for i, n in enumerate(names) if low in n.lower()], dtype=np.int32)


def search(store: Store, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The slice whose name contains ``q`` (case-insensitive) that comes next (``dir`` "next") or
    before (``dir`` "prev") in (start, lane, event) order after the position ``t`` (view time) /
    ``from`` (a previous hit: {lane, event}), over ``lanes``; and how many slices match."""
    q = str(body.get("q") or "").strip()
    if not q:
        raise BadParameter("q", q, "empty search")
    forward = str(body.get("dir") or "next") != "prev"
    try:
        t = int(round(float(body.get("t") or 0)))
    except (TypeError, ValueError):
        raise BadParameter("t", body.get("t"), "expected ns after the origin") from None
    keys = _lane_keys(body)
    order = {k: i for i, k in enumerate(keys)}
    offsets = _offsets(body)
    cur = body.get("from") or {}
    cur_pos = order.get(str(cur.get("lane")), -1 if forward else len(keys))
    cur_ev = int(cur.get("event", -1 if forward else 1 << 62)) if cur else (-1 if forward else 1 << 62)
    src = tile_source(store, ctx, sorted({_rank_of(k) for k in keys}))
    codes_cache: dict[int, np.ndarray] = {}
    total = 0
    best: tuple[int, int, int] | None = None
    best_hit: dict[str, Any] | None = None
    for key in keys:
        if key not in src.lanes:
            continue
        p = order[key]
        off = offsets.get(_rank_of(key), 0)
        for m, ix, coll in src.members(key):
            cid = id(coll.names)
            if cid not in codes_cache:
                codes_cache[cid] = _matching_codes(coll.names, q)
            if not codes_cache[cid].size or not ix.n:
                continue
            rows = np.flatnonzero(np.isin(ix.names, codes_cache[cid]))
            total += rows.size
            if not rows.size:
                continue
            when = ix.starts[rows] - src.origin - off  # view time
            ev = ix.events[rows]
            if forward:
                ok = (when > t) | ((when == t) & ((p > cur_pos) | ((p == cur_pos) & (ev > cur_ev))))
            else:
                ok = (when < t) | ((when == t) & ((p < cur_pos) | ((p == cur_pos) & (ev < cur_ev))))
            if not ok.any():
                continue
            cand = np.flatnonzero(ok)
            pick = cand[np.lexsort((ev[cand], when[cand]))[0 if forward else -1]]
            kk = (int(when[pick]), p, int(ev[pick]))
            if best is None or (kk < best if forward else kk > best):
                best = kk
                r = rows[pick]
                best_hit = {
                    "lane": key,
                    "rank": _rank_of(key),
                    "collection_id": src.lanes[key].members[m][0],
                    "event": int(ix.events[r]),
                    "name": coll.names[int(ix.names[r])],
                    "start": int(ix.starts[r]) - src.origin,
                    "dur": int(ix.durs[r]),
                    "depth": int(ix.depth[r]),
                }
    return {"q": q, "matches": int(total), "hit": best_hit}


def _window(body: dict[str, Any]) -> tuple[int, int]:
    """The view range [a, b) of a request (ns after the origin), b after a."""
    try:
        a, b = int(round(float(body["a"]))), int(round(float(body["b"])))
    except (KeyError, TypeError, ValueError):
        raise BadParameter("a", body.get("a"), "expected a and b in ns after the origin") from None
    if b <= a:
        raise BadParameter("b", b, "must be after a")
    return a, b


def range_summary(store: Store, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The slices of ``lanes`` inside the view range [a, b): per name how many and how long inside
    the range (the longest first, at most TOP_NAMES names), counted over at most MAX_RANGE_SLICES."""
    a, b = _window(body)
    keys = _lane_keys(body)
    offsets = _offsets(body)
    src = tile_source(store, ctx, sorted({_rank_of(k) for k in keys}))
    frames = []
    by_rank: dict[int, list[str]] = {}
    for k in keys:
        if k in src.lanes:
            by_rank.setdefault(_rank_of(k), []).append(k)
    budget = MAX_RANGE_SLICES
    cut = False
    for rank, ks in by_rank.items():
        off = offsets.get(rank, 0)
        lo, hi = src.origin + a + off, src.origin + b + off
        got = src.exact(ks, lo, hi, max(budget, 1))
        for sl in got.values():
            if not len(sl):
                continue
            inside = np.minimum(sl.start + sl.dur, hi) - np.maximum(sl.start, lo)
            frames.append(pd.DataFrame({"name": sl.names, "inside": np.clip(inside, 0, None)}))
            budget -= len(sl)
        if budget <= 0:
            cut = True
            break
    if not frames:
        return {"slices": 0, "names": [], "cut": cut}
    df = pd.concat(frames, ignore_index=True)
    g = df.groupby("name").agg(count=("inside", "size"), total=("inside", "sum"), longest=("inside", "max"))
    g = g.sort_values(["total", "count"], ascending=False).head(TOP_NAMES).reset_index()
    return {
        "slices": len(df),
        "names": [
            {"name": str(n), "count": int(c), "total": int(t), "longest": int(x)}
            for n, c, t, x in zip(g["name"], g["count"], g["total"], g["longest"])
        ],
        "cut": cut,
    }


MAX_COUNTER_REQUEST = 256  # tracks in one counters request


def counters(store: Store, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The counter tracks ``tracks`` (keys as meta lists them) over the view [a, b) (ns after the
    origin, each rank's clock shifted by its offset), at most ``n`` buckets each."""
    try:
        a, b = int(round(float(body["a"]))), int(round(float(body["b"])))
        n = int(body.get("n") or 1000)
    except (KeyError, TypeError, ValueError):
        raise BadParameter("a", body.get("a"), "expected a, b in ns after the origin and n buckets") from None
    if b <= a:
        raise BadParameter("b", b, "must be after a")
    keys = body.get("tracks")
    if not isinstance(keys, list) or len(keys) > MAX_COUNTER_REQUEST:
        raise BadParameter("tracks", keys, f"expected a list of at most {MAX_COUNTER_REQUEST} track keys")
    keys = [str(k) for k in keys]
    ranks = _check_ranks(ctx, sorted({_rank_of(k) for k in keys}))
    offsets = _offsets(body)
    with reader(store, ctx.run, ranks, ("memory_samples", "counters", "agg_counter_curve")) as rd:
        listed = {str(c["key"]): c for cs in counter_tracks.catalog(rd, ctx.run, ranks).values() for c in cs}
        views = []
        for k in dict.fromkeys(keys):
            tr = listed.get(k)
            if tr is None:
                raise NotFound(f"run {ctx.run!r} has no counter track {k}")
            lo = ctx.origin + a + offsets.get(int(tr["rank"]), 0)
            views.append(counter_tracks.View.of(tr, lo, lo + (b - a)))
        out = counter_tracks.windows(rd, ctx.run, views, n)
    return {"a": a, "b": b, "tracks": out}


def flow_arrows(store: Store, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The flow arrows of ``kinds`` between ``ranks`` over the view [a, b) (``webapp.flows``)."""
    a, b = _window(body)
    kinds = body.get("kinds")
    if not isinstance(kinds, list) or not kinds or any(k not in flows.KINDS for k in kinds):
        raise BadParameter("kinds", kinds, f"expected a list of {', '.join(flows.KINDS)}")
    raw = body.get("ranks")
    if not isinstance(raw, list) or not raw:
        raise BadParameter("ranks", raw, "expected a list of ranks")
    try:
        ranks = _check_ranks(ctx, [int(r) for r in raw])
    except (TypeError, ValueError):
        raise BadParameter("ranks", raw, "expected a list of ranks") from None
    keep = set(ranks)
    lane_keys = {
        (str(c), str(p), str(t)): str(k)
        for k, r, mem in zip(ctx.rows["key"], ctx.rows["rank"], ctx.rows["members"])
        if int(r) in keep
        for c, p, t in mem
    }
    return flows.arrows(store, ctx.run, ctx.origin, lane_keys, ranks, kinds, a, b, _offsets(body))


# ---------------------------------------------------------------------------------------------
# Flask routes
# ---------------------------------------------------------------------------------------------


def _status(exc: BaseException) -> int:
    if isinstance(exc, StaleView):
        return 409
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, (WebappError, AnalyzerError)):
        return 400
    return 500


def _error(exc: BaseException) -> Response:
    from .ui import log

    code = _status(exc)
    if code == 500:
        log.exception("timeline request failed", exc_info=exc)
        text = f"internal error ({type(exc).__name__}); the server log has the details"
    else:
        text = str(exc)
    return Response(json.dumps({"error": text}), status=code, mimetype="application/json")


def _json(obj: Any) -> Response:
    return Response(json.dumps(obj, ensure_ascii=False, separators=(",", ":")), mimetype="application/json")


def _body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise BadParameter("body", None, "expected a JSON object")
    return body


def _run(value: Any) -> str:
    run = single("run", value)
    if not run:
        raise BadParameter("run", value, "no run given")
    return run


def register(server: Flask) -> None:
    """Add the timeline's routes to the app's Flask server."""
    from .ui import current_store

    @server.get("/_timeline/meta")
    def _meta() -> Response:
        try:
            run = _run(request.args.get("run"))
            text = single("ranks", request.args.get("ranks"))
            ranks: Any = "all" if text == "all" else parse_ranks("ranks", text)
            return _json(meta(current_store(), run, ranks))
        except Exception as exc:  # noqa: BLE001 - every error becomes a JSON message
            return _error(exc)

    def view_request() -> tuple[dict[str, Any], Store, Context]:
        """The JSON body of a view request, the store and the run's context (its fingerprint checked)."""
        body = _body()
        store = current_store()
        ctx = context(store, _run(body.get("run")))
        _check_fp(ctx, body.get("fp"))
        return body, store, ctx

    @server.post("/_timeline/tiles")
    def _tiles() -> Response:
        try:
            body, store, ctx = view_request()
            wanted = body.get("tiles") or []
            if not isinstance(wanted, list):
                raise BadParameter("tiles", wanted, "expected a list")
            raw = tile_bytes(store, ctx, wanted)
            resp = Response(raw, mimetype="application/octet-stream")
            if "gzip" in (request.headers.get("Accept-Encoding") or ""):
                resp.set_data(gzip.compress(raw, compresslevel=1))
                resp.headers["Content-Encoding"] = "gzip"
            resp.headers["X-Raw-Bytes"] = str(len(raw))
            resp.headers["Cache-Control"] = "no-store"
            return resp
        except Exception as exc:  # noqa: BLE001
            return _error(exc)

    def answer(compute: Callable[[Store, Context, dict[str, Any]], dict[str, Any]]) -> Callable[[], Response]:
        def route() -> Response:
            try:
                body, store, ctx = view_request()
                return _json(compute(store, ctx, body))
            except Exception as exc:  # noqa: BLE001 - every error becomes a JSON message
                return _error(exc)

        return route

    for name, compute in (
        ("search", search),
        ("counters", counters),
        ("flows", flow_arrows),
        ("range", range_summary),
    ):
        server.add_url_rule(f"/_timeline/{name}", f"_{name}", answer(compute), methods=["POST"])
