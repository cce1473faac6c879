"""The timeline's tile protocol against brute force: lane indexes (slices by duration class,
nesting depth, occupancy), tiles of real stores (occupancy = interval union per bucket, the slices
long enough to be seen, the instants), the binary format, and the HTTP endpoints (meta, tiles,
search, range) as the browser calls them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from webapp_helpers import KINETO, NPU

from analyzer.store import Store
from webapp import counter_tracks, create_app, lod, tiles
from webapp import timeline_api as api


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Store:
    return Store(ingested(tmp_path_factory.mktemp("timeline_tiles") / "store", (KINETO, "gloo"), (NPU, "npu")))


def lane_slices(store: Store, run: str, rank: int, members: tuple) -> pd.DataFrame:
    """Every slice of a lane, straight from the store."""
    cond = " OR ".join(f"(collection_id = '{c}' AND pid = '{p}' AND tid = '{t}')" for c, p, t in members)
    return store.query(
        f"SELECT ts_ns, coalesce(dur_ns, 0) AS dur_ns, name, event_id, collection_id FROM slices "
        f"WHERE run = ? AND rank = ? AND ({cond}) ORDER BY ts_ns",
        [run, rank],
        run=run,
    )


def union_per_bucket(ts: np.ndarray, dur: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Covered length of each bucket by the union of [ts, ts + dur), by brute force."""
    out = np.zeros(len(edges) - 1, dtype=np.int64)
    ivs = sorted((int(a), int(a + d)) for a, d in zip(ts, dur) if d > 0)
    merged: list[list[int]] = []
    for a, b in ivs:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    for a, b in merged:
        lo = np.clip(np.searchsorted(edges, a, side="right") - 1, 0, len(out) - 1)
        hi = np.clip(np.searchsorted(edges, b, side="left"), 1, len(out))
        for k in range(lo, hi):
            out[k] += max(0, min(b, edges[k + 1]) - max(a, edges[k]))
    return out


# ---------------------------------------------------------------------------------------------
# lane index
# ---------------------------------------------------------------------------------------------


def stack_depths(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Depth by walking a stack (slices sorted by start, the longer first)."""
    depth = np.zeros(len(ts), dtype=np.int64)
    stack: list[int] = []
    for i in range(len(ts)):
        while stack and stack[-1] <= ts[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(ts[i] + dur[i])
    return depth


def random_nested_lane(rng: np.random.Generator, n_top: int) -> tuple[np.ndarray, np.ndarray]:
    """Properly nested slices (with instants, children starting with their parent, and gaps)."""
    ts, dur = [], []

    def fill(a: int, b: int, level: int) -> None:
        t = a
        while t < b:
            gap = int(rng.integers(0, 50))
            t += gap
            if t >= b:
                break
            if rng.random() < 0.1:
                ts.append(t)
                dur.append(0)
                continue
            d = int(min(b - t, rng.integers(1, 2_000_000 >> (3 * level) or 2)))
            ts.append(t)
            dur.append(d)
            if level < 4 and d > 20 and rng.random() < 0.6:
                fill(t, t + d, level + 1)
            t += d

    fill(0, n_top * 2_000_000, 0)
    order = rng.permutation(len(ts))
    return np.array(ts, dtype=np.int64)[order], np.array(dur, dtype=np.int64)[order]


def test_lane_index_selects_exactly_the_slices_a_brute_force_finds() -> None:
    rng = np.random.default_rng(3)
    ts, dur = random_nested_lane(rng, 20)
    ix = lod.build_lane(ts, dur, events=np.arange(len(ts)))
    assert ix.n == len(ts)
    for _ in range(300):
        a = int(rng.integers(-1000, ts.max() + 1000))
        b = a + int(rng.integers(1, 5_000_000))
        min_dur = int(rng.choice([0, 1, 7, 100, 5000, 300_000]))
        got = set(ix.events[ix.select(a, b, min_dur)].tolist())
        end = ts + dur
        overlap = np.where(dur == 0, (ts >= a) & (ts < b), (ts < b) & (end > a))
        want = set(np.flatnonzero(overlap & (dur >= min_dur)).tolist())
        assert got == want, (a, b, min_dur)
    assert ix.overlapping(int(ts.min()), int((ts + dur).max()) + 1) == len(ts)


def test_lane_index_select_in_one_search_equals_the_walk_class_by_class() -> None:
    """``select`` finds every class's rows in one search over the (class, start) keys: the same rows
    in the same order as walking the classes one by one (what tiles are built from, byte for byte),
    and a lane too long for the keys walks the classes."""
    rng = np.random.default_rng(13)
    ts, dur = random_nested_lane(rng, 20)
    ts = ts + 1_700_000_000_000_000_000  # epoch ns, as traces have them
    ix = lod.build_lane(ts, dur, events=np.arange(len(ts)))
    assert ix.keys is not None
    lo, hi = int(ts.min()), int((ts + dur).max())
    for _ in range(400):
        a = int(rng.integers(lo - 10_000_000, hi + 10_000_000))
        b = a + int(rng.integers(1, 50_000_000))
        min_dur = int(rng.choice([-1, 0, 1, 2, 7, 100, 5000, 300_000, 1 << 40]))
        assert np.array_equal(ix.select(a, b, min_dur), ix._select_by_class(a, b, min_dur)), (a, b, min_dur)
    far = lod.build_lane(np.array([0, 5, 1 << 57]), np.array([10, 0, 3]), events=np.arange(3))
    assert far.keys is None
    assert set(far.events[far.select(-1, (1 << 57) + 1, 0)].tolist()) == {0, 1, 2}


def test_lane_index_depth_is_the_nesting_level() -> None:
    rng = np.random.default_rng(5)
    ts, dur = random_nested_lane(rng, 10)
    ix = lod.build_lane(ts, dur, events=np.arange(len(ts)))
    order = np.lexsort((-dur, ts))
    want = dict(zip(order.tolist(), stack_depths(ts[order], dur[order]).tolist()))
    got = dict(zip(ix.events.tolist(), ix.depth.tolist()))
    assert got == want
    assert ix.max_depth == max(want.values())
    # instants at a parent's start sit inside it; a slice starting where another ends is its sibling
    ix2 = lod.build_lane(np.array([0, 0, 10, 10, 10]), np.array([10, 0, 5, 0, 0]), events=np.arange(5))
    assert dict(zip(ix2.events.tolist(), ix2.depth.tolist())) == {0: 0, 1: 1, 2: 0, 3: 1, 4: 1}


def test_lane_index_occupancy_is_the_interval_union() -> None:
    rng = np.random.default_rng(11)
    ts = rng.integers(0, 1_000_000, 3000)
    dur = rng.integers(0, 20_000, 3000)
    ix = lod.build_lane(ts, dur)
    edges = np.linspace(-5000, 1_050_000, 701).astype(np.int64)
    assert np.array_equal(ix.busy(edges), union_per_bucket(ts, dur, edges))
    assert ix.first_ns == ts.min() and ix.last_ns == (ts + dur).max()


def test_duration_classes_hold_their_durations() -> None:
    d = np.array([0, 1, 2, 3, 4, 7, 8, (1 << 40) - 1, 1 << 40, (1 << 53) + 1, (1 << 60) - 1], dtype=np.int64)
    cls = lod.duration_classes(d)
    assert cls.tolist() == [0] + [int(x).bit_length() for x in d[1:]]


# ---------------------------------------------------------------------------------------------
# tiles of a real store
# ---------------------------------------------------------------------------------------------


def test_tiles_of_the_npu_step_match_the_store(store: Store) -> None:
    m = api.meta(store, "npu", None)
    origin = int(m["origin"])
    ctx = api.context(store, "npu")
    rows = ctx.rows.set_index("key")
    src = api.tile_source(store, ctx, [0, 1])
    step = next(s for s in m["steps"] if s[0] == 0)
    z = tiles.level_for((step[3] - step[2]) / 1400)
    checked_slices = 0
    for lane in m["lanes"]:
        sl = lane_slices(store, "npu", lane["rank"], rows.loc[lane["key"], "members"])
        ts, dur = sl["ts_ns"].to_numpy(np.int64), sl["dur_ns"].to_numpy(np.int64)
        for i in tiles.tiles_for(step[2], step[3], z):
            t = src.tile(lane["key"], z, i)
            a, b = (x + origin for x in tiles.tile_range(z, i))
            edges = a + np.arange(tiles.TILE_BUCKETS + 1, dtype=np.int64) * (1 << z)
            share = union_per_bucket(ts, dur, edges) / (1 << z)
            want = np.ceil(np.clip(share, 0, 1) * 255).astype(np.uint8)
            starts_here = np.diff(np.searchsorted(np.sort(ts[dur == 0]), edges))
            want[(want == 0) & (starts_here > 0)] = 1
            assert np.array_equal(t.occupancy, want), (lane["key"], i)
            min_dur = tiles.MIN_SLICE_BUCKETS << z
            long_enough = (ts < b) & (ts + dur > a) & (dur >= min_dur)
            instants = (dur == 0) & (ts >= a) & (ts < b)
            expect = long_enough | (instants if instants.sum() <= tiles.MAX_INSTANTS else False)
            got = sorted(zip(t.slices.start.tolist(), t.slices.dur.tolist(), t.slices.names))
            assert got == sorted(zip(ts[expect].tolist(), dur[expect].tolist(), sl["name"][expect].tolist()))
            assert t.instants == int(instants.sum())
            checked_slices += len(t.slices)
    assert checked_slices > 300  # the step's long slices are in the tiles, with their names


@pytest.mark.parametrize("run", ["npu", "gloo"])
def test_zoomed_out_tiles_from_the_stored_pyramid_equal_the_lane_indexes(store: Store, run: str) -> None:
    """Every tile the stored pyramid answers (levels from the finest stored one up) is the tile the
    lane indexes give: same occupancy, instants, cut, and the same slices with depth and member."""
    m = api.meta(store, run, "all")
    ctx = api.context(store, run)
    ranks = list(ctx.ranks)
    assert ctx.origin % (1 << max(tiles.STORED_LEVELS)) == 0 and ctx.stored  # the pyramid tiles the tiles
    index = api.tile_source(store, ctx, ranks)
    stored = api.stored_source(store, ctx, ranks)
    keys = [ln["key"] for ln in m["lanes"]] + sorted({api.summary_key(ln["rank"], ln["group"]) for ln in m["lanes"]})
    lo = min(e[0] for e in m["events"].values())
    hi = max(e[1] for e in m["events"].values())
    checked = compared = 0
    for z in (tiles.STORED_LEVELS[0], tiles.STORED_LEVELS[0] + 1, tiles.STORED_LEVELS[1], 25, 27, 31):
        wanted = [(k, z, i) for k in keys for i in tiles.tiles_for(lo, hi, z)]
        stored.prefetch(wanted)
        for k, _, i in wanted:
            assert stored.is_stored(k, z)
            a, b = stored.tile(k, z, i), index.tile(k, z, i)
            assert np.array_equal(a.occupancy, b.occupancy), (k, z, i)
            assert (a.instants, a.cut, len(a.slices)) == (b.instants, b.cut, len(b.slices)), (k, z, i)
            rows = [
                zip(
                    t.slices.start.tolist(),
                    t.slices.dur.tolist(),
                    t.slices.depth.tolist(),
                    t.slices.event.tolist(),
                    t.slices.member.tolist(),
                    t.slices.names,
                )
                for t in (a, b)
            ]
            assert list(rows[0]) == list(rows[1]), (k, z, i)  # same slices, in the same order
            checked += 1
            compared += len(b.slices) + int(b.occupancy.astype(bool).sum())
    assert checked > 50 and compared > 500
    # below the finest stored level the lane indexes answer
    assert not stored.is_stored(keys[0], tiles.STORED_LEVELS[0] - 1)


def test_meta_and_zoomed_out_tiles_build_no_lane_index(store: Store) -> None:
    """The whole-run view of every rank reads the stored lane summaries and pyramid: the server
    holds no lane index (``cache.LANES`` stays empty) until a view zooms in."""
    from webapp import cache

    cache.LANES.clear()
    api._CONTEXTS.clear()
    http = create_app(store).server.test_client()
    m = http.get("/_timeline/meta?run=npu&ranks=all").get_json()
    lo = min(e[0] for e in m["events"].values())
    hi = max(e[1] for e in m["events"].values())
    # the whole run at the finest stored level or coarser (the samples are short: a real window of
    # seconds is drawn at level 18 or coarser on any screen)
    z = max(tiles.level_for((hi - lo) / 1400), tiles.STORED_LEVELS[0])
    want = [[ln["key"], z, i] for ln in m["lanes"] for i in tiles.tiles_for(lo, hi, z)]
    r = http.post("/_timeline/tiles", json={"run": "npu", "fp": m["fp"], "tiles": want})
    assert r.status_code == 200 and len(tiles.decode(r.data).tiles) == len(want)
    assert cache.LANES.nbytes == 0
    # zoomed in (a level finer than the stored ones): the ranks' lane indexes are built then
    fine = [[m["lanes"][0]["key"], 12, next(iter(tiles.tiles_for(lo, lo + 1, 12)))]]
    assert http.post("/_timeline/tiles", json={"run": "npu", "fp": m["fp"], "tiles": fine}).status_code == 200
    assert cache.LANES.nbytes > 0


def test_a_tile_is_bounded_whatever_the_zoom(store: Store) -> None:
    m = api.meta(store, "npu", None)
    src = api.tile_source(store, api.context(store, "npu"), [0, 1])
    e = m["events"]["0"]
    for z in range(0, 30, 3):
        for lane in m["lanes"][:6]:
            for i in list(tiles.tiles_for(e[0], e[1], z))[:3]:
                t = src.tile(lane["key"], z, i)
                assert t.occupancy.shape == (tiles.TILE_BUCKETS,)
                assert len(t.slices) <= tiles.MAX_SLICES
                # per nesting level, slices of >= 3 buckets cannot overlap much: a few per 3 buckets
                for d in set(t.slices.depth.tolist()):
                    assert (t.slices.depth == d).sum() <= tiles.TILE_BUCKETS / tiles.MIN_SLICE_BUCKETS + 2


def test_folded_group_tile_is_the_busiest_lane_per_bucket(store: Store) -> None:
    m = api.meta(store, "npu", None)
    src = api.tile_source(store, api.context(store, "npu"), [0])
    e = m["events"]["0"]
    z = tiles.level_for((e[1] - e[0]) / 1000)
    device = [ln["key"] for ln in m["lanes"] if ln["rank"] == 0 and ln["group"] == "device"]
    for i in tiles.tiles_for(e[0], e[1], z):
        folded = src.tile(api.summary_key(0, "device"), z, i)
        want = np.max([src.tile(k, z, i).occupancy for k in device], axis=0)
        assert np.array_equal(folded.occupancy, want) and len(folded.slices) == 0


def test_binary_format_round_trip_keeps_names_as_text() -> None:
    names = ["<img src=x onerror=alert(2)>", "aten::mm", "名前", ""]
    sl = tiles.Slices(
        np.array([1_000, 2_000, 3_000, 4_000], dtype=np.int64) + (1 << 60),
        np.array([10, 0, 30, 1 << 40], dtype=np.int64),
        np.array([0, 1, 2, 3], dtype=np.uint8),
        np.array([5, 6, 7, 1 << 40], dtype=np.int64),
        np.array([0, 0, 1, 0], dtype=np.uint8),
        names,
    )
    occ = np.arange(tiles.TILE_BUCKETS, dtype=np.int64).astype(np.uint8)
    t1 = tiles.Tile("0.3", 12, -2, occ, sl, cut=False, instants=1)
    t2 = tiles.Tile("1.host", 12, 7, np.zeros(tiles.TILE_BUCKETS, np.uint8), tiles.Slices.empty())
    raw = tiles.encode([t1, t2], 1 << 60)
    assert raw[:4] == b"RSTL"
    d = tiles.decode(raw)
    assert d.origin_ns == 1 << 60
    a, b = d.tiles
    assert (a["lane"], a["z"], a["i"], a["n"], a["instants"]) == ("0.3", 12, -2, 4, 1)
    assert a["name"] == names and np.array_equal(a["occupancy"], occ)
    assert a["start"].tolist() == [1000.0, 2000.0, 3000.0, 4000.0]
    assert a["dur"].tolist() == [10.0, 0.0, 30.0, float(1 << 40)] and a["event"][3] == float(1 << 40)
    assert a["depth"].tolist() == [0, 1, 2, 3] and a["member"].tolist() == [0, 0, 1, 0]
    assert (b["lane"], b["n"]) == ("1.host", 0)
    # every float64 block starts on an 8-byte boundary (the browser views them in place)
    assert (12 + int.from_bytes(raw[8:12], "little")) % 8 == 0


def test_levels_and_tile_ranges() -> None:
    assert tiles.level_for(1) == 0 and tiles.level_for(1024) == 10 and tiles.level_for(1500) == 10
    for ns_per_px in (3.0, 1000.0, 123456.7, 9.9e9):
        z = tiles.level_for(ns_per_px)
        assert ns_per_px / 2 < (1 << z) <= ns_per_px
    a, b = tiles.tile_range(3, 5)
    assert (a, b) == (5 * 1024 * 8, 6 * 1024 * 8)
    assert list(tiles.tiles_for(a, b, 3)) == [5] and list(tiles.tiles_for(a - 1, b + 1, 3)) == [4, 5, 6]


# ---------------------------------------------------------------------------------------------
# the HTTP endpoints
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(store: Store):
    return create_app(store).server.test_client()


def test_meta_lists_lanes_steps_clock_and_event_bounds(http, store: Store) -> None:
    r = http.get("/_timeline/meta?run=npu")
    assert r.status_code == 200
    m = r.get_json()
    lanes = store.query("SELECT count(DISTINCT (rank, process, lane)) AS n FROM lanes WHERE run = 'npu'", run="npu")
    assert len(m["lanes"]) == int(lanes["n"].iloc[0])
    assert [ln["key"] for ln in m["lanes"] if ln["rank"] == 1][:3] == ["1.0", "1.1", "1.2"]
    origin = int(m["origin"])
    # "whole run" is the events' span, not the collection's (counters and memory samples stretch that)
    ev = store.query(
        "SELECT rank, min(ts_ns) AS a, max(ts_ns + coalesce(dur_ns, 0)) AS b FROM slices WHERE run = 'npu' "
        "GROUP BY rank",
        run="npu",
    )
    for rank, a, b in ev.itertuples(index=False):
        assert m["events"][str(rank)] == [a - origin, b - origin]
    coll = store.query("SELECT min(start_ns) AS a, max(end_ns) AS b FROM collections WHERE run = 'npu'", run="npu")
    span = max(e[1] for e in m["events"].values()) - min(e[0] for e in m["events"].values())
    assert span < 0.5 * (int(coll["b"].iloc[0]) - int(coll["a"].iloc[0]))
    steps = store.query("SELECT rank, step, start_ns FROM steps WHERE run = 'npu' ORDER BY step, rank", run="npu")
    assert [[s[0], s[1], s[2]] for s in m["steps"]] == [
        [int(r), int(s), int(a) - origin] for r, s, a in steps.itertuples(index=False)
    ]
    clock = {c["rank"]: c for c in m["clock"]}
    assert clock[0]["status"] == "reference" and clock[0]["offset"] == 0
    assert clock[1]["offset"] is not None and clock[1]["residual"] is not None
    # ranks: absent = the first 8, "all", a list; a wrong one is a JSON message
    assert http.get("/_timeline/meta?run=npu&ranks=1").get_json()["ranks"] == [1]
    bad = http.get("/_timeline/meta?run=npu&ranks=7")
    assert bad.status_code == 404 and "has no rank 7" in bad.get_json()["error"]
    assert http.get("/_timeline/meta?run=nope").status_code == 404


def test_meta_of_a_rank_set_is_the_same_whatever_was_asked_before(http, store: Store) -> None:
    """meta keeps the lanes' statistics, the steps and the counters per rank: the answer for a set of
    ranks is the same from cold caches as after other sets filled them in any order."""
    from webapp import cache

    sets = ("0", "1", "0,1", "1,0")
    cold = {}
    for run in ("npu", "gloo"):
        for ranks in sets:
            cache.RESULTS.clear()
            cold[run, ranks] = http.get(f"/_timeline/meta?run={run}&ranks={ranks}").data
        cache.RESULTS.clear()  # then each rank read alone, the pair made of what they left
        for ranks in ("1", "0", "0,1", "1,0"):
            assert http.get(f"/_timeline/meta?run={run}&ranks={ranks}").data == cold[run, ranks], (run, ranks)
    steps = store.query("SELECT count(*) AS n FROM steps WHERE run = 'npu' AND step IS NOT NULL", run="npu")
    assert 0 < len(json.loads(cold["npu", "0,1"])["steps"]) <= int(steps["n"].iloc[0])


def test_tiles_endpoint_sends_gzip_binary_and_refuses_a_stale_view(http) -> None:
    m = http.get("/_timeline/meta?run=gloo").get_json()
    e = m["events"]["0"]
    z = tiles.level_for((e[1] - e[0]) / 1200)
    want = [[ln["key"], z, i] for ln in m["lanes"] for i in tiles.tiles_for(e[0], e[1], z)]
    r = http.post(
        "/_timeline/tiles", json={"run": "gloo", "fp": m["fp"], "tiles": want}, headers={"Accept-Encoding": "gzip"}
    )
    assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip"
    raw = gzip.decompress(r.get_data())
    assert len(raw) == int(r.headers["X-Raw-Bytes"])
    d = tiles.decode(raw)
    assert [(t["lane"], t["z"], t["i"]) for t in d.tiles] == [tuple(w) for w in want]
    assert any("ProfilerStep#" in n for t in d.tiles for n in t["name"])
    assert http.post("/_timeline/tiles", json={"run": "gloo", "fp": "1", "tiles": want}).status_code == 409
    for body, said in (
        ({"run": "gloo", "tiles": [["0.0", 99, 0]]}, "level must be"),
        ({"run": "gloo", "tiles": [["x", 1, 0]]}, "lane key"),
        ({"run": "gloo", "tiles": [["0.999", 1, 0]]}, "no lane 0.999"),
        ({"run": "gloo", "tiles": [["0.0", 1, 0]] * (tiles.MAX_TILES_PER_REQUEST + 1)}, "at most"),
    ):
        r = http.post("/_timeline/tiles", json=body)
        assert r.status_code in (400, 404) and said in r.get_json()["error"], (body, r.get_json())


def test_search_walks_every_match_in_time_order(http, store: Store) -> None:
    m = http.get("/_timeline/meta?run=gloo").get_json()
    keys = [ln["key"] for ln in m["lanes"]]
    off = {str(c["rank"]): c["offset"] or 0 for c in m["clock"]}
    origin = int(m["origin"])
    want = store.query(
        "SELECT rank, ts_ns, event_id FROM slices WHERE run = 'gloo' AND lower(name) LIKE '%all_reduce%'", run="gloo"
    )
    want["view"] = [int(t) - origin - off[str(r)] for r, t in zip(want["rank"], want["ts_ns"])]
    order = sorted(zip(want["view"], want["rank"], want["event_id"]))
    body = {"run": "gloo", "fp": m["fp"], "lanes": keys, "offsets": off, "q": "ALL_reduce", "t": -1, "dir": "next"}
    seen = []
    for _ in range(len(order) + 1):
        j = http.post("/_timeline/search", json=body).get_json()
        assert j["matches"] == len(order)
        if j["hit"] is None:
            break
        h = j["hit"]
        assert "all_reduce" in h["name"]
        seen.append(h["start"] - off[str(h["rank"])])
        body = {**body, "t": seen[-1], "from": {"lane": h["lane"], "event": h["event"]}}
    assert seen == [v for v, _, _ in order]
    back = http.post("/_timeline/search", json={**body, "dir": "prev"}).get_json()["hit"]
    assert back["start"] - off[str(back["rank"])] == order[-2][0]
    assert http.post("/_timeline/search", json={**body, "q": ""}).status_code == 400


def test_range_summary_counts_the_time_inside_the_range(http, store: Store) -> None:
    m = http.get("/_timeline/meta?run=gloo&ranks=0").get_json()
    origin = int(m["origin"])
    e = m["events"]["0"]
    a, b = e[0] + (e[1] - e[0]) // 3, e[0] + (e[1] - e[0]) // 2
    j = http.post(
        "/_timeline/range",
        json={"run": "gloo", "fp": m["fp"], "lanes": [ln["key"] for ln in m["lanes"]], "a": a, "b": b},
    ).get_json()
    sl = store.query(
        "SELECT name, ts_ns, coalesce(dur_ns, 0) AS d FROM slices WHERE run = 'gloo' AND rank = 0", run="gloo"
    )
    lo, hi = origin + a, origin + b
    ts, d = sl["ts_ns"].to_numpy(np.int64), sl["d"].to_numpy(np.int64)
    inside = np.where(d == 0, (ts >= lo) & (ts < hi), (ts < hi) & (ts + d > lo))
    part = sl[inside].assign(t=np.minimum(ts + d, hi)[inside] - np.maximum(ts, lo)[inside])
    assert j["slices"] == int(inside.sum())
    top = part.groupby("name")["t"].sum().sort_values(ascending=False)
    got = {n["name"]: n["total"] for n in j["names"]}
    for name, total in top.head(5).items():
        assert got[name] == total


def test_routes_answer_errors_as_json(http, tmp_path: Path) -> None:
    r = http.post("/_timeline/tiles", data="nope", content_type="application/json")
    assert r.status_code == 400 and "JSON" in r.get_json()["error"]
    empty = create_app(tmp_path / "none").server.test_client()
    r = empty.get("/_timeline/meta?run=x")
    assert r.status_code in (400, 404) and r.get_json()["error"]


def test_counter_tracks_are_listed_per_rank_and_sent_in_bounded_buckets(http, store: Store) -> None:
    """Issue 17 item 4: the counter tracks under each rank — the allocators' memory (not the driver
    modules) and the producer's counters — listed by meta, and sent over a view window as at most
    ``n`` buckets whose minimum / maximum / last value are those of the samples they hold; a rank's
    clock offset moves its samples in view time by exactly the offset."""
    m = http.get("/_timeline/meta?run=npu").get_json()
    origin = int(m["origin"])
    tracks = [c for c in m["counters"] if c["rank"] == 0]
    assert [c["label"] for c in tracks[:3]] == ["PTA+GE (NPU:0)", "PTA (NPU:0)", "GE (NPU:0)"]  # largest peak first
    assert all(c["unit"] == "bytes" for c in tracks[:3]) and tracks[3]["label"].startswith("NPU MEM · ")
    assert not any("HDC" in c["label"] or "DRV" in c["label"] for c in tracks)
    # every track is listed (none dropped): the first 16 in that order are the rank's top ones
    listed = (
        store.query(
            "SELECT count(DISTINCT (process, name, series)) AS n FROM counters WHERE run = 'npu' AND rank = 0",
            run="npu",
        )["n"].iloc[0]
        + store.query(
            "SELECT count(DISTINCT (component, device)) AS n FROM memory_samples WHERE run = 'npu' AND rank = 0 "
            "AND allocated_bytes IS NOT NULL AND coalesce(source, '') NOT IN ('npu_module_mem', 'NPU_MODULE_MEM')",
            run="npu",
        )["n"].iloc[0]
    )
    assert len(tracks) == listed > 16 and [c["top"] for c in tracks] == [True] * 16 + [False] * (listed - 16)
    raw = store.query(
        "SELECT ts_ns, allocated_bytes::DOUBLE AS v FROM memory_samples WHERE run = 'npu' AND rank = 0 "
        "AND component = 'PTA+GE' AND allocated_bytes IS NOT NULL ORDER BY ts_ns",
        run="npu",
    )
    pta = tracks[0]
    assert (pta["min"], pta["max"], pta["n"]) == (raw["v"].min(), raw["v"].max(), len(raw))
    assert pta["first"] == int(raw["ts_ns"].iloc[0]) - origin
    hbm = next(c for c in tracks if c["label"] == "NPU MEM · APP/HBM")
    c_raw = store.query(
        "SELECT ts_ns, value FROM counters WHERE run = 'npu' AND rank = 0 AND name = 'APP/HBM' ORDER BY ts_ns",
        run="npu",
    )
    assert (hbm["unit"], hbm["max"], hbm["n"]) == ("KB", c_raw["value"].max(), len(c_raw))
    # a window holding the middle of the samples, 200 buckets: few samples per bucket, so exact (the
    # stored curves of zoomed-out views: test_aggregates.test_counter_tracks_draw_zoomed_out_views_...)
    ts = raw["ts_ns"].to_numpy(np.int64)
    a, b, n = int(ts[len(ts) // 4]) - origin, int(ts[3 * len(ts) // 4]) - origin, 200
    assert len(ts) // 2 <= counter_tracks.EXACT_PER_BUCKET * n
    body = {"run": "npu", "fp": m["fp"], "tracks": [pta["key"], hbm["key"]], "a": a, "b": b, "n": n, "offsets": {}}
    got = http.post("/_timeline/counters", json=body).get_json()["tracks"][pta["key"]]
    assert 0 < len(got["t"]) <= n
    inside = raw[(raw["ts_ns"] >= origin + a) & (raw["ts_ns"] < origin + b)]
    bucket = ((inside["ts_ns"] - origin - a) // ((b - a) / n)).astype(int).clip(upper=n - 1)
    want = inside.groupby(bucket)["v"].agg(["min", "max", "last"])
    assert got["lo"] == want["min"].tolist() and got["hi"] == want["max"].tolist()
    assert got["last"] == want["last"].tolist()
    assert got["held"] == raw[raw["ts_ns"] < origin + a]["v"].iloc[-1]  # the value when the window opens
    # rank 0's clock 5 ms ahead: the same samples come 5 ms later in view time
    shifted = http.post("/_timeline/counters", json={**body, "offsets": {"0": 5_000_000}}).get_json()
    later = shifted["tracks"][pta["key"]]
    moved = raw[(raw["ts_ns"] >= origin + a + 5_000_000) & (raw["ts_ns"] < origin + b + 5_000_000)]
    assert later["last"][-1] == moved["v"].iloc[-1] and later["last"] != got["last"]
    # a track past the top ones is sent as well
    last = tracks[-1]
    got = http.post("/_timeline/counters", json={**body, "tracks": [last["key"]], "a": 0, "b": 10**15}).get_json()
    assert len(got["tracks"][last["key"]]["t"]) > 0
    # bad requests are JSON messages
    assert http.post("/_timeline/counters", json={**body, "tracks": ["0.c999"]}).status_code == 404
    assert http.post("/_timeline/counters", json={**body, "b": a}).status_code == 400


def test_flow_arrows_link_launches_to_device_tasks_and_a_collectives_members(http, store: Store) -> None:
    """Issue 17 item 4: the flow arrows of a view — a CANN call to the device task it launched (the
    same ``connection_id``), the members of each matched collective linked where they left it —
    each end on its slice's lane; bounded, the rest counted."""
    from analyzer.analyses.clock_alignment import run_instances
    from webapp import flows

    m = http.get("/_timeline/meta?run=npu").get_json()
    origin = int(m["origin"])
    lanes = {ln["key"]: ln for ln in m["lanes"]}
    ev = m["events"]["0"]
    body = {"run": "npu", "fp": m["fp"], "ranks": [0, 1], "a": ev[0], "b": ev[1], "offsets": {"0": 0, "1": 0}}
    got = http.post("/_timeline/flows", json={**body, "kinds": ["launch"]}).get_json()
    assert len(got["arrows"]) == flows.MAX_ARROWS and got["more"] > 0  # the whole run: bounded
    links = store.query(
        "SELECT rank, ts_ns, json_extract_string(args, '$.connection_id') AS link FROM slices "
        "WHERE run = 'npu' AND json_extract_string(args, '$.connection_id') IS NOT NULL",
        run="npu",
    )
    link_at = {(int(r), int(t)): str(x) for r, t, x in links.itertuples(index=False)}
    for f in got["arrows"][:50]:
        (hl, r, t0, _), (dl, r2, t1, _) = f["from"], f["to"]
        assert r == r2 and lanes[hl]["group"] == "host" and lanes[dl]["group"] == "device"
        assert link_at[(r, origin + t0)] == link_at[(r, origin + t1)]  # one connection_id
    # once the lanes' tiles are drawn (their indexes built), each end is at its slice's nesting level:
    # how many slices of its thread are still open at its start
    keys = sorted({f[end][0] for f in got["arrows"][:50] for end in ("from", "to")})
    z = tiles.level_for((ev[1] - ev[0]) / 1000)
    want = [[k, z, i] for k in keys for i in tiles.tiles_for(ev[0], ev[1], z)][: api.tiles.MAX_TILES_PER_REQUEST]
    assert http.post("/_timeline/tiles", json={"run": "npu", "fp": m["fp"], "tiles": want}).status_code == 200
    got = http.post("/_timeline/flows", json={**body, "kinds": ["launch"]}).get_json()
    sl = store.query(
        "SELECT rank, collection_id, pid, tid, ts_ns, coalesce(dur_ns, 0) AS dur FROM slices "
        "WHERE run = 'npu' AND rank IN (0, 1)",
        run="npu",
    )
    levels = set()
    for f in got["arrows"][:50]:
        for _, r, t, level in (f["from"], f["to"]):
            me = sl[(sl["rank"] == r) & (sl["ts_ns"] == origin + t)].sort_values("dur").iloc[0]
            th = sl[(sl["collection_id"] == me["collection_id"]) & (sl["pid"] == me["pid"]) & (sl["tid"] == me["tid"])]
            before = (th["ts_ns"] < me["ts_ns"]) | ((th["ts_ns"] == me["ts_ns"]) & (th["dur"] > me["dur"]))
            assert level == int((before & (th["ts_ns"] + th["dur"] > me["ts_ns"])).sum()), f
            levels.add(level)
    assert max(levels) > 0  # host calls nested under operators: not all at the lane's top
    # a narrow window: every arrow has an end inside it, nothing left out
    a = got["arrows"][10]["from"][2]
    small = http.post("/_timeline/flows", json={**body, "kinds": ["launch"], "a": a, "b": a + 200_000}).get_json()
    assert small["more"] == 0 and 0 < len(small["arrows"]) < flows.MAX_ARROWS
    assert all(a <= f["from"][2] < a + 200_000 or a <= f["to"][2] < a + 200_000 for f in small["arrows"])
    # the tooltips in the page's language, the tasks' names from the trace as they are (the same arrows:
    # none left out; their order among launches at the same time is the query's)
    zh = http.post(
        "/_timeline/flows",
        json={**body, "kinds": ["launch"], "a": a, "b": a + 200_000},
        headers={"Referer": "http://localhost/timeline?lang=zh"},
    ).get_json()["arrows"]
    en = sorted(f["label"].replace("launch → ", "下发 → ", 1) for f in small["arrows"])
    assert sorted(f["label"] for f in zh) == en and all(x.startswith("下发 → ") for x in en)
    # collectives: rank 0's member to rank 1's, at each one's end of the instance
    coll = http.post("/_timeline/flows", json={**body, "kinds": ["collective"]}).get_json()["arrows"]
    ops, _ = run_instances(store, "npu")
    ops = ops[ops["instance"].notna() & ~ops["is_p2p"]]
    ends = {(int(r), int(e) - origin) for r, e in zip(ops["rank"], ops["end_ns"])}
    assert len(coll) == ops["instance"].nunique() > 0
    for f in coll:
        assert (f["from"][1], f["from"][2]) in ends and (f["to"][1], f["to"][2]) in ends
        assert lanes[f["from"][0]]["group"] == lanes[f["to"][0]]["group"] == "communication"
    bad = http.post("/_timeline/flows", json={**body, "kinds": ["teleport"]})
    assert bad.status_code == 400 and "expected a list of launch, p2p, collective" in bad.get_json()["error"]


def test_launch_arrows_are_every_link_with_an_end_in_the_view(http, store: Store) -> None:
    """The launch arrows of a view are exactly the host call -> device task pairs (one link id, a
    host lane and a device lane of one rank) with an end inside it, whichever end, on both ranks,
    with and without clock offsets: among them pairs whose task starts a little before its call
    (this sample's device clock: up to 24 µs), cut by the view's left edge between the two."""
    m = http.get("/_timeline/meta?run=npu").get_json()
    origin = int(m["origin"])
    sl = store.query(
        "SELECT s.rank, s.ts_ns, s.link, l.lane_group FROM slices s JOIN (SELECT DISTINCT rank, collection_id, "
        "pid, tid, lane_group FROM lanes WHERE run = 'npu') l USING (rank, collection_id, pid, tid) "
        "WHERE s.run = 'npu' AND s.link IS NOT NULL",
        run="npu",
    )
    host, dev = sl[sl["lane_group"] == "host"], sl[sl["lane_group"] == "device"]
    pairs = host.merge(dev, on=["rank", "link"], suffixes=("_h", "_d"))
    early = pairs[pairs["ts_ns_d"] < pairs["ts_ns_h"]]
    assert len(pairs) > 1000 and len(early) > 0
    e = early.iloc[len(early) // 2]
    cut = int(e["ts_ns_d"]) - origin + 1  # a view starting between an early task and its call
    mid = int(pairs["ts_ns_h"].median()) - origin
    for offsets in ({0: 0, 1: 0}, {0: 3_000_000, 1: -2_000_000}):
        for a, width in ((cut, 20_000), (cut - 10_000, 50_000), (mid, 200_000), (mid + 1_000_000, 1_500_000)):
            body = {"run": "npu", "fp": m["fp"], "ranks": [0, 1], "kinds": ["launch"], "a": a, "b": a + width}
            got = http.post("/_timeline/flows", json={**body, "offsets": {str(r): o for r, o in offsets.items()}})
            got = got.get_json()
            assert got["more"] == 0
            drawn = {(f["from"][1], f["from"][2], f["to"][2]) for f in got["arrows"]}
            off = pairs["rank"].map(offsets)
            h, d = pairs["ts_ns_h"] - origin - off, pairs["ts_ns_d"] - origin - off
            want = pairs[((h >= a) & (h < a + width)) | ((d >= a) & (d < a + width))]
            assert drawn == set(zip(want["rank"], h[want.index], d[want.index])), (offsets, a, width)
            assert drawn or width < 100_000
