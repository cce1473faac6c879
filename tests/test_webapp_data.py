"""The web app's data layer and page functions, called directly (no browser), checked against
what the sample traces say."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from webapp_helpers import KINETO, NPU, ingest, trace_events, union_ns

from analyzer import analyses
from analyzer.store import Store
from webapp import cache, data, lang, links, lod, tiles, timeline_api
from webapp.errors import BadParameter, EmptyStore, NotFound
from webapp.format import plot_text
from webapp.params import format_ranks, parse_choice, parse_int, parse_ranks, single
from webapp.reader import Reader, reader


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Store:
    return Store(ingested(tmp_path_factory.mktemp("webapp_data") / "store", (KINETO, "gloo"), (NPU, "npu")))


@pytest.fixture
def rd(store: Store):
    with reader(store) as r:
        yield r


def _x(evs: list[dict], tid: int | None = None) -> list[dict]:
    return [e for e in evs if e.get("ph") == "X" and (tid is None or e.get("tid") == tid)]


def _main_tid(evs: list[dict]) -> int:
    return next(e["tid"] for e in evs if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))


# ---------------------------------------------------------------------------------------------


def test_runs_ranks_and_errors(store: Store, rd: Reader, tmp_path: Path) -> None:
    assert set(data.run_names(rd)) == {"gloo", "npu"}
    assert data.ranks_of(rd, "gloo") == [0, 1]
    assert data.resolve_run(rd, "gloo") == "gloo"
    with pytest.raises(NotFound, match="no run named 'nope'"):
        data.resolve_run(rd, "nope")
    with pytest.raises(NotFound, match="no rank 7"):
        data.check_ranks(rd, "gloo", [0, 7])
    assert data.check_ranks(rd, "gloo", None) == [0, 1]
    with reader(Store(tmp_path / "absent")) as empty:
        assert data.runs(empty).empty
        with pytest.raises(EmptyStore):
            data.resolve_run(empty, None)


def _main_lane(store: Store, tid: int) -> tuple[str, tiles.IndexTileSource]:
    ctx = timeline_api.context(store, "gloo")
    key = next(k for k, ln in ctx.lanes.items() if ln.rank == 0 and any(m[2] == str(tid) for m in ln.members))
    return key, timeline_api.tile_source(store, ctx, [0])


def test_timeline_lane_holds_every_slice_of_the_thread(store: Store, rd: Reader) -> None:
    evs = trace_events(0)
    tid = _main_tid(evs)
    key, src = _main_lane(store, tid)
    bounds = data.time_bounds(rd, "gloo", [0])
    got = src.exact([key], bounds[0], bounds[1] + 1, 1_000_000)[key]
    want = _x(evs, tid)
    assert len(got) == len(want)
    assert sorted(got.dur.tolist()) == sorted(round(e["dur"] * 1000) for e in want)
    assert set(got.names) == {e["name"] for e in want}


def test_timeline_occupancy_is_the_interval_union(store: Store, rd: Reader) -> None:
    evs = trace_events(0)
    tid = _main_tid(evs)
    xs = _x(evs, tid)
    want_busy = union_ns([(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in xs if e["dur"] > 0])
    key, src = _main_lane(store, tid)
    (_, ix, _), *rest = src.members(key)
    assert not rest
    a, b = data.time_bounds(rd, "gloo", [0])
    edges = np.linspace(a, b + 1, 301).astype(np.int64)
    # float µs in the trace vs integer ns in the store: at most ~1 ns per slice apart
    assert abs(int(ix.busy(edges).sum()) - want_busy) <= len(xs)
    # a tile's occupancy is that share per bucket, rounded up to 1/255 (never 0 where something is)
    z = tiles.level_for((b - a) / 1000)
    t = src.tile(key, z, next(iter(tiles.tiles_for(a - src.origin, b - src.origin, z))))
    lo = src.origin + tiles.tile_range(z, t.index)[0]
    tile_edges = lo + np.arange(tiles.TILE_BUCKETS + 1, dtype=np.int64) * (1 << z)
    share = ix.busy(tile_edges) / (1 << z)
    assert np.all(t.occupancy >= np.floor(share * 255)) and np.all(t.occupancy <= np.ceil(share * 255) + 1)


def test_timeline_level_of_detail_draws_what_can_be_seen(store: Store, rd: Reader) -> None:
    evs = trace_events(0)
    key, src = _main_lane(store, _main_tid(evs))
    a, b = (x - src.origin for x in data.time_bounds(rd, "gloo", [0]))
    whole_z = tiles.level_for((b - a) / 1000)
    whole = [src.tile(key, whole_z, i) for i in tiles.tiles_for(a, b, whole_z)]
    n_whole = sum(len(t.slices) for t in whole)
    # zoomed out, only slices of at least 3 buckets come as slices; zoomed in 200 times, more do
    assert all((t.slices.dur >= tiles.MIN_SLICE_BUCKETS << whole_z).all() for t in whole)
    assert 0 < n_whole < len(_x(evs))
    # zoomed in around a slice too short for the whole view, it comes as a slice
    everything = src.exact([key], src.origin + a, src.origin + b + 1, 1_000_000)[key]
    short = [i for i in range(len(everything)) if 0 < everything.dur[i] < tiles.MIN_SLICE_BUCKETS << whole_z]
    i = max(short, key=lambda i: everything.dur[i])
    s0, d0 = int(everything.start[i]) - src.origin, int(everything.dur[i])
    z = tiles.level_for(20 * d0 / 1000)
    zoom = [src.tile(key, z, j) for j in tiles.tiles_for(s0 - 10 * d0, s0 + 11 * d0, z)]
    assert any(int(everything.event[i]) in t.slices.event.tolist() for t in zoom)


def test_lod_index_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    ts = rng.integers(0, 10_000, 400)
    dur = rng.integers(0, 300, 400)
    ix = lod.build_lane(ts, dur)
    edges = np.arange(0, 10_600, 53)
    covered = np.zeros(10_600, dtype=bool)
    for a, d in zip(ts, dur):
        covered[a : a + d] = True
    want = np.add.reduceat(covered[: edges[-1]].astype(int), edges[:-1])
    assert np.array_equal(ix.busy(edges), want)
    assert np.array_equal(ix.starts_per_bucket(edges), np.histogram(ts, bins=edges)[0])


def test_slice_detail_has_shapes_args_and_stack(store: Store, rd: Reader) -> None:
    evs = trace_events(0)
    mm = min((e for e in _x(evs) if e["name"] == "aten::mm"), key=lambda e: e["ts"])
    row = store.query(
        "SELECT collection_id, event_id FROM slices WHERE run = 'gloo' AND rank = 0 AND name = 'aten::mm' "
        "ORDER BY ts_ns LIMIT 1",
        run="gloo",
    ).iloc[0]
    d = data.slice_detail(rd, "gloo", 0, row["collection_id"], int(row["event_id"]))
    assert d["name"] == "aten::mm" and d["lane_group"] == "host"
    assert d["dur_ns"] == round(mm["dur"] * 1000)
    assert json.loads(d["input_shapes"]) == mm["args"]["Input Dims"]
    assert json.loads(d["args"])["Input Dims"] == mm["args"]["Input Dims"]
    # the call stack: the python_function slices enclosing the op, innermost first
    enclosing = [
        e
        for e in _x(evs, mm["tid"])
        if e.get("cat") == "python_function" and e["ts"] <= mm["ts"] and e["ts"] + e["dur"] >= mm["ts"] + mm["dur"]
    ]
    frames = d["call_stack"].split("\n")
    assert len(frames) == len(enclosing) > 0
    assert frames[0] == max(enclosing, key=lambda e: (e["ts"], -e["dur"]))["name"]


def test_slice_detail_of_a_device_kernel_has_its_shapes(store: Store, rd: Reader) -> None:
    import csv

    rows = list(csv.DictReader((NPU / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").open()))
    k = next(r for r in rows if r["Type"] == "MatMulV2")
    row = store.query(
        "SELECT collection_id, event_id FROM slices WHERE run = 'npu' AND rank = 0 AND name = ? ORDER BY ts_ns LIMIT 1",
        [k["Name"]],
        run="npu",
    ).iloc[0]
    d = data.slice_detail(rd, "npu", 0, row["collection_id"], int(row["event_id"]))
    assert d["lane_group"] == "device" and d["name"] == k["Name"]
    assert d["input_shapes"].strip('"') == k["Input Shapes"].strip('"')
    assert d["input_types"] == k["Input Data Types"] and d["output_shapes"].strip('"') == k["Output Shapes"].strip('"')
    assert d["op_type"] == "MatMulV2"


def test_operator_stats_per_rank_and_across_ranks(store: Store, rd: Reader) -> None:
    per_rank = {}
    for r in (0, 1):
        mm = [e for e in _x(trace_events(r)) if e["name"] == "aten::mm"]
        per_rank[r] = (
            len(mm),
            sum(e["dur"] for e in mm) * 1000,
            min(e["dur"] for e in mm) * 1000,
            max(e["dur"] for e in mm) * 1000,
        )
    df, n = data.operator_stats(rd, "gloo", "operators", "name", [0, 1], across=False)
    assert n >= len(df) > 0
    for r, (count, total, lo, hi) in per_rank.items():
        row = df[(df["key"] == "aten::mm") & (df["rank"] == r)].iloc[0]
        assert row["count"] == count
        assert abs(row["total_ns"] - total) <= count
        assert abs(row["min_ns"] - lo) <= 1 and abs(row["max_ns"] - hi) <= 1
    across, _ = data.operator_stats(rd, "gloo", "operators", "name", [0, 1], across=True)
    row = across[across["key"] == "aten::mm"].iloc[0]
    totals = [per_rank[r][1] for r in (0, 1)]
    assert row["count"] == per_rank[0][0] + per_rank[1][0] and row["ranks"] == 2
    assert abs(row["spread_pct"] - 100 * (max(totals) - min(totals)) / np.mean(totals)) < 0.01
    assert row["max_rank"] == int(np.argmax(totals))
    # the slowest call, for the link into the timeline: the longest aten::mm of either rank
    slow = max(
        ((r, e) for r in (0, 1) for e in _x(trace_events(r)) if e["name"] == "aten::mm"), key=lambda x: x[1]["dur"]
    )
    assert row["slowest_rank"] == slow[0] and abs(row["max_ns"] - slow[1]["dur"] * 1000) <= 1
    stored = store.query(
        "SELECT ts_ns FROM operators WHERE run = 'gloo' AND name = 'aten::mm' AND rank = ? "
        "ORDER BY dur_ns DESC LIMIT 1",
        [slow[0]],
        run="gloo",
    )
    assert row["slowest_ts_ns"] == stored["ts_ns"].iloc[0]
    # by input shape: one row per distinct Input Dims of aten::mm
    shapes, _ = data.operator_stats(rd, "gloo", "operators", "shape", [0], across=False)
    want = {
        json.dumps(e["args"]["Input Dims"]).replace(" ", "") for e in _x(trace_events(0)) if e["name"] == "aten::mm"
    }
    got = {s.replace(" ", "") for s in shapes[shapes["key"] == "aten::mm"]["shape"]}
    assert got == want


def test_operator_drill_across_ranks(store: Store, rd: Reader) -> None:
    d = data.operator_drill(rd, "gloo", "operators", "name", "aten::mm", None, [0, 1])
    for r in (0, 1):
        mm = [e["dur"] * 1000 for e in _x(trace_events(r)) if e["name"] == "aten::mm"]
        row = d[d["rank"] == r].iloc[0]
        assert row["count"] == len(mm)
        # from the stored histograms: within their accuracy (analyzer.histogram)
        assert abs(row["p50_ns"] - float(np.median(mm))) <= 0.01 * float(np.median(mm))
        assert row["min_ns"] == round(min(mm))
        assert abs(row["max_ns"] - max(mm)) <= 1


def test_memory_peaks_and_curves_match_the_trace(store: Store, rd: Reader) -> None:
    peaks = data.memory_peaks(rd, "gloo", [0, 1], "allocator")
    for r in (0, 1):
        mem = [e for e in trace_events(r) if e.get("name") == "[memory]"]
        assert int(peaks[peaks["rank"] == r]["peak_allocated_bytes"].iloc[0]) == max(
            e["args"]["Total Allocated"] for e in mem
        )
    a, b = data.time_bounds(rd, "gloo", None)
    curves = data.memory_curves(rd, "gloo", [0], "allocator", a, b, n_buckets=50)
    assert 0 < len(curves) <= 50
    # downsampling keeps the peak
    assert int(curves["allocated_bytes"].max()) == int(peaks[peaks["rank"] == 0]["peak_allocated_bytes"].iloc[0])
    blocks, n = data.operator_memory(rd, "gloo", [0], limit=5)
    assert len(blocks) == 5 and n > 5
    assert list(blocks["size_bytes"]) == sorted(blocks["size_bytes"], reverse=True)


def test_communication_per_rank_and_collectives(store: Store, rd: Reader) -> None:
    per = data.comm_per_rank(rd, "gloo", [0, 1])
    for r in (0, 1):
        ar = [e for e in _x(trace_events(r)) if e["name"] == "gloo:all_reduce"]
        row = per[per["rank"] == r].iloc[0]
        assert row["ops"] == len(ar)
        assert abs(row["elapsed_ns"] - sum(e["dur"] for e in ar) * 1000) <= len(ar)
    ops, n = data.collectives(rd, "gloo", [0, 1])
    assert n == len(ops) == len([e for e in _x(trace_events(0)) if e["name"] == "gloo:all_reduce"])
    assert (ops["ranks"] == 2).all()
    # each instance's members on their own clocks: the link into the timeline highlights them
    summary = analyses.communication_summary(store, "gloo")
    calls = {(int(r), int(t), int(d)) for r, t, d in zip(summary["rank"], summary["ts_ns"], summary["dur_ns"])}
    for members in ops["members"]:
        assert sorted(r for r, _, _ in members) == [0, 1]
        assert {(int(r), int(t), int(d)) for r, t, d in members} <= calls
    url = links.collective_url("gloo", ops["members"].iloc[0])
    (r0, t0, d0), (r1, t1, d1) = sorted(ops["members"].iloc[0], key=lambda m: -m[2])
    assert url == f"/timeline?run=gloo&ranks=0-1&hl={r0}:{t0}:{t0 + d0},{r1}:{t1}:{t1 + d1}"


def test_links_into_the_timeline() -> None:
    assert links.call_url("r un", 3, 100, 20) == "/timeline?run=r+un&ranks=3&hl=3:100:120"
    assert links.instant_url("a", 1, 7) == "/timeline?run=a&ranks=1&hl=1:7:7"
    assert links.timeline_url("a", [0, 1, 2, 5], step=4) == "/timeline?run=a&ranks=0-2,5&step=4"
    assert links.evidence_url("a", {"rank": 2, "start_ns": 10, "end_ns": 30}) == "/timeline?run=a&ranks=2&hl=2:10:30"
    assert links.evidence_url("a", {"rank": 2, "ts_ns": 10, "dur_ns": 5}) == "/timeline?run=a&ranks=2&hl=2:10:15"
    assert links.evidence_url("a", {"rank": 2, "step": 9}) == "/timeline?run=a&ranks=2&step=9"
    assert links.evidence_url("a", {"transport": "HCCS"}) is None
    many = [(r, 1000 + r, 10 + r) for r in range(100)]
    url = links.collective_url("a", many)
    hl = url.split("hl=")[1].split(",")
    assert len(hl) == links.MAX_HIGHLIGHTS and hl[0] == "99:1099:1208"  # the slowest members first


def test_npu_matrix_and_bandwidth_match_the_profiler_files(store: Store, rd: Reader) -> None:
    out = NPU / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    matrix = json.loads((out / "communication_matrix.json").read_text())
    total = {}
    for step in matrix.values():
        for key, pairs in step["collective"].items():
            if key.split("@")[0].endswith("-total"):
                for link, v in pairs.items():
                    total[link] = total.get(link, 0) + v["Transit Size(MB)"]
    m = data.comm_matrix(rd, "npu", None)
    got = m[m["src"] == "0"]
    assert abs(float(got[got["dst"] == "1"]["bytes"].iloc[0]) - total["0-1"] * 1e6) < 16
    assert abs(float(got[got["dst"] == "0"]["bytes"].iloc[0]) - total["0-0"] * 1e6) < 16
    comm = json.loads((out / "communication.json").read_text())
    ops = [op for st in comm.values() for name, op in st["collective"].items() if not name.startswith("Total Op Info")]
    hccs = sum(op["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] for op in ops)
    bw = data.comm_bandwidth(rd, "npu", [0])
    assert abs(float(bw[bw["transport"] == "HCCS"]["bytes"].iloc[0]) - hccs * 1e6) < 64
    per = data.comm_per_rank(rd, "npu", [0])
    waits = sum(op["Communication Time Info"]["Wait Time(ms)"] for op in ops)
    assert abs(float(per["wait_ns"].iloc[0]) - waits * 1e6) < 10


def test_scalars_are_the_collector_values(store: Store, rd: Reader) -> None:
    sc = data.scalars(rd, "gloo", [0])
    lines = [
        json.loads(x) for x in (KINETO / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines() if x.strip()
    ]
    loss = sc[sc["name"] == "loss"].sort_values("step")
    assert list(loss["step"]) == [x["step"] for x in lines]
    assert np.allclose(loss["value"], [x["scalars"]["loss"] for x in lines])


def test_results_cache_follows_the_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    folder = tmp_path / "profile"  # one folder per run: it first holds rank 0, then rank 1 arrives too
    shutil.copytree(KINETO / "rank_0", folder / "rank_0")
    ingest(folder, path, "one")
    st = Store(path)
    with reader(st) as r:
        assert data.ranks_of(r, "one") == [0]
        before = data.operator_stats(r, "one", "operators", "name", None, across=True)[0]
        # a rendered page part is shared by the requests with the same inputs and language only
        part = cache.rendered(r, "t", ("one", (0,)), object)
        assert cache.rendered(r, "t", ("one", (0,)), object) is part
        assert cache.rendered(r, "t", ("one", (0, 1)), object) is not part
        with lang.use("zh"):
            assert cache.rendered(r, "t", ("one", (0,)), object) is not part
    shutil.copytree(KINETO / "rank_1", folder / "rank_1")
    ingest(folder, path, "one")  # the same run now has both ranks
    with reader(st) as r:
        assert data.ranks_of(r, "one") == [0, 1]
        after = data.operator_stats(r, "one", "operators", "name", None, across=True)[0]
        assert cache.rendered(r, "t", ("one", (0,)), object) is not part  # a new catalog: built again
    mm_b = int(before[before["key"] == "aten::mm"]["ranks"].iloc[0])
    mm_a = int(after[after["key"] == "aten::mm"]["ranks"].iloc[0])
    assert (mm_b, mm_a) == (1, 2)


def test_rendered_parts_are_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page part of many ranks' figures is large: RENDERED keeps about its byte budget, as
    part_bytes counts a part (its components, figures and their arrays), least recently used out first."""
    import plotly.graph_objects as go
    from dash import dcc, html

    def part(rank: int) -> list[Any]:
        fig = go.Figure(go.Scatter(x=np.arange(50_000), y=np.full(50_000, float(rank))))
        return [html.Div([html.H4(f"rank {rank}"), dcc.Graph(figure=fig)])]

    size = cache.part_bytes(part(0))
    assert 800_000 <= size < 900_000  # the figure's two arrays (8 bytes a point) and little else
    shared = part(1)[0].children[1].figure
    assert cache.part_bytes([dcc.Graph(figure=shared), dcc.Graph(figure=shared)]) < 900_000  # counted once
    assert cache.RENDERED.budget is not None and cache.RENDERED.measure is cache.part_bytes
    monkeypatch.setattr(cache.RENDERED, "budget", 3 * size + size // 2)
    cache.RENDERED.clear()
    try:
        for rank in range(5):
            cache.RENDERED.get(("t", rank), lambda rank=rank: part(rank))
        assert len(cache.RENDERED) == 3 and cache.RENDERED.nbytes <= 3 * size + size // 2
        kept = cache.RENDERED.get(("t", 2), lambda: "built again")
        assert kept != "built again"  # the newest three stayed
        assert cache.RENDERED.get(("t", 1), lambda: "built again") == "built again"  # the oldest left
        assert cache.RENDERED.get(("t", 3), lambda: "built again") != "built again"
        cache.RENDERED.get(("t", 5), lambda: part(5))  # over the budget: the least recently used leaves
        assert cache.RENDERED.get(("t", 4), lambda: "built again") == "built again"
        assert cache.RENDERED.get(("t", 3), lambda: "built again") != "built again"  # used lately: kept
    finally:
        cache.RENDERED.clear()


def test_reader_opens_the_store_once_per_request(store: Store) -> None:
    with reader(store, "gloo", [0, 1], ("steps", "lanes", "slices")) as r:
        data.ranks_of(r, "gloo")
        data.steps.uncached(r, "gloo", [0, 1])
        data.lane_indexes(r, "gloo", [0, 1], data.lanes(r, "gloo", [0, 1]))
        assert r.opened <= 1


# ---------------------------------------------------------------------------------------------


def test_url_parameters() -> None:
    assert parse_ranks("ranks", "0,1,4-7") == [0, 1, 4, 5, 6, 7]
    assert parse_ranks("ranks", None) is None and parse_ranks("ranks", "all") is None
    assert parse_ranks("ranks", ["2", "3"]) == [2, 3]
    assert format_ranks([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"
    for bad in ("abc", "3-1", "-1", "0-99999999"):
        with pytest.raises(BadParameter):
            parse_ranks("ranks", bad)
    assert parse_int("step", "12") == 12
    with pytest.raises(BadParameter, match="not an integer"):
        parse_int("step", "twelve")
    with pytest.raises(BadParameter, match="given more than once"):
        single("run", ["a", "b"])
    with pytest.raises(BadParameter, match="must be one of"):
        parse_choice("group", "bogus", ("type", "name"), "name")


def test_plot_text_shows_markup_literally() -> None:
    assert plot_text("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert plot_text("a & <b>") == "a &amp; &lt;b&gt;"


def test_importing_the_web_app_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import webapp, webapp.app, analyzer.cli\n"
        f"app = webapp.create_app({str(tmp_path / 'store')!r})\n"
        "app.server.test_client().get('/')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'analyzer.ingest' not in sys.modules, 'the ingest code was imported'\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]


def test_every_rank_asked_for_reads_what_the_whole_run_gives(store: Store, rd: Reader) -> None:
    """A page showing every rank passes them all; the data layer asks the analyses for the whole run
    (one cached result for every page, the stored rows of a many-rank run): the same rows as the
    analyses give for that list of ranks."""
    every = data.ranks_of(rd, "gloo")
    assert every == sorted(analyses.step_breakdown(store, "gloo")["rank"].unique().tolist())
    assert data._ranks_arg(rd, "gloo", every[::-1]) is None and data._ranks_arg(rd, "gloo", every[:1]) == every[:1]
    pairs = (
        (data.step_breakdown, analyses.step_breakdown),
        (data.comm_per_rank, analyses.comm_per_rank),
        (data.comm_bandwidth, analyses.transport_bandwidth),
    )
    for ours, theirs in pairs:
        pd.testing.assert_frame_equal(ours(rd, "gloo", every), theirs(store, "gloo", every))
    ops, n = data.collectives(rd, "gloo", every)
    listed, n_listed = data._collectives(rd, "gloo", every, data.MAX_GRID_ROWS)  # the ranks as a list
    assert n == n_listed == len(analyses.collective_instances(store, "gloo", every))
    pd.testing.assert_frame_equal(ops, listed)


def test_the_warm_up_fills_what_the_communication_page_asks_for(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's Communication job computes the page's first view with the arguments its
    callback uses: afterwards the page's data needs none of the analyses it is built from."""
    from webapp import warmup

    cache.RESULTS.clear()
    analyses.cache.RESULTS.clear()
    job = dict(warmup._jobs("gloo", [0], stored=None))["communication page"]
    with reader(store, "gloo") as r:
        job(r)
    for name in ("collective_instances", "comm_per_rank", "transport_bandwidth", "rank_pairs", "step_breakdown"):
        monkeypatch.setattr(analyses, name, lambda *a, **k: pytest.fail("computed again"))
    with reader(store, "gloo") as r:
        every = data.ranks_of(r, "gloo")
        ops, n = data.collectives(r, "gloo", every)
        assert n and len(ops) == n
        assert not data.comm_per_rank(r, "gloo", every).empty and not data.comm_definition(r, "gloo", every).empty
        data.comm_bandwidth(r, "gloo", every)  # none on gloo's ops (no transports, no links): still kept
        data.comm_matrix(r, "gloo", every)


def test_the_warm_up_gives_way_to_requests_being_served() -> None:
    """A warm-up job starts once no request of the process is being served (or after YIELD_S)."""
    import threading

    from flask import Flask

    from webapp import warmup

    app = Flask("t")
    warmup.install(app)
    release, inside = threading.Event(), threading.Event()

    @app.route("/slow")
    def slow() -> str:
        inside.set()
        release.wait(60)
        return "ok"

    client = threading.Thread(target=lambda: app.test_client().get("/slow"))
    client.start()
    assert inside.wait(60)
    started = threading.Event()
    waiter = threading.Thread(target=lambda: (warmup._give_way(120.0), started.set()))
    waiter.start()
    assert not started.wait(0.5)  # a request is being served: the job waits
    release.set()
    assert started.wait(60)  # it ended: the job starts
    client.join(60)
    waiter.join(60)
