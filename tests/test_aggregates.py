"""The aggregates built at ingest (``analyzer.ingest.aggregate``) equal what the raw facts give,
computed both ways here, on real multi-rank traces of four producers; a re-ingest replaces them.
So do the analyses of a whole run stored with it at ingest (``analyzer.analyses.stored``)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import REPO

from analyzer import analyses, schema
from analyzer.analyses import STORED_AT_INGEST, step_breakdown, stored
from analyzer.analyses.cache import RESULTS
from analyzer.analyses.step_breakdown import aggregated_ranks, from_aggregates, from_facts
from analyzer.analyses.stored import read_stored
from analyzer.ingest import ingest, run_results
from analyzer.store import Store, run_key
from webapp import lod

SAMPLES = {
    "kineto": REPO / "tests" / "data" / "kineto_gloo_4rank_slow",
    "npu_db": REPO / "sample_data" / "torch_npu_db_level1",
    "npu_text": REPO / "sample_data" / "torch_npu_text_level1",
    "mindspore": REPO / "sample_data" / "mindspore_cpu_2rank",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("agg") / "store")
    for run, folder in SAMPLES.items():
        ingest(folder, st, run=run)
    return st


def _rows(store: Store, sql: str, run: str) -> pd.DataFrame:
    with store.read_connection(run=run) as con:
        return con.execute(sql, {"run": run}).df()


def _same(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> None:
    assert len(a) and len(a) == len(b)
    a = a.sort_values(keys, na_position="first").reset_index(drop=True)
    b = b[list(a.columns)].sort_values(keys, na_position="first").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def check_aggregates(store: Store, run: str) -> None:
    """Every aggregate table of ``run`` against the same figures computed from its facts."""
    check_breakdown(store, run)
    check_statistics(store, run)
    check_memory(store, run)
    check_occupancy(store, run)


def check_breakdown(store: Store, run: str) -> None:
    built, rest = aggregated_ranks(store.catalog_snapshot(), run, None)
    assert built and not rest, (built, rest)  # every rank's breakdown came from the ingest
    stored = from_aggregates(store, run, built)
    pd.testing.assert_frame_equal(stored, from_facts(store, run))
    pd.testing.assert_frame_equal(step_breakdown(store, run), stored)


def check_statistics(store: Store, run: str) -> None:
    ops = _rows(
        store,
        "SELECT rank, name, category, input_shapes, dur_ns, self_ns, ts_ns FROM operators WHERE run = $run "
        "AND name NOT LIKE 'ProfilerStep#%' AND coalesce(category, '') <> 'python_function' AND dur_ns IS NOT NULL",
        run,
    )
    keys = ["rank", "name", "category", "input_shapes"]
    g = ops.fillna({"input_shapes": "\0", "category": "\0"}).groupby(keys)
    want = g.agg(
        count=("dur_ns", "size"),
        total_ns=("dur_ns", "sum"),
        self_ns=("self_ns", "sum"),
        min_ns=("dur_ns", "min"),
        max_ns=("dur_ns", "max"),
    ).reset_index()
    got = _rows(store, "SELECT * FROM agg_operator_stats WHERE run = $run", run)
    got = got.fillna({"input_shapes": "\0", "category": "\0"})
    _same(want, got[list(want.columns)], keys)
    # the slowest call's start is a start of a call of that length
    slowest = got.merge(
        ops.fillna({"input_shapes": "\0", "category": "\0"}),
        left_on=keys + ["max_ns", "slowest_ts_ns"],
        right_on=keys + ["dur_ns", "ts_ns"],
    )
    assert set(map(tuple, slowest[keys].values)) == set(map(tuple, got[keys].values))
    kern = _rows(
        store, "SELECT rank, name, core_type, dur_ns FROM kernels WHERE run = $run AND dur_ns IS NOT NULL", run
    )
    got = _rows(store, "SELECT rank, name, core_type, count, total_ns FROM agg_kernel_stats WHERE run = $run", run)
    if kern.empty:
        assert got.empty
    else:
        want = kern.fillna({"core_type": ""}).groupby(["rank", "name", "core_type"])["dur_ns"].agg(["size", "sum"])
        have = got.fillna({"core_type": ""}).groupby(["rank", "name", "core_type"])[["count", "total_ns"]].sum()
        assert (want.values == have.loc[want.index].values).all() and len(want) == len(have)
    comm = _rows(store, "SELECT rank, group_name, op_type, dur_ns, wait_ns, bytes FROM comm_ops WHERE run = $run", run)
    got = _rows(store, "SELECT * FROM agg_comm WHERE run = $run", run)
    keys = ["rank", "group_name", "op_type"]
    want = (
        comm.fillna({"group_name": "", "op_type": ""})
        .groupby(keys)
        .agg(count=("dur_ns", "size"), dur_ns=("dur_ns", "sum"), wait_ns=("wait_ns", "sum"), bytes=("bytes", "sum"))
        .reset_index()
    )
    have = got.fillna({"group_name": "", "op_type": "", "wait_ns": 0, "bytes": 0})
    _same(want, have[list(want.columns)], keys)


def check_memory(store: Store, run: str) -> None:
    raw = _rows(
        store,
        "SELECT rank, component, device, count(*) AS samples, max(allocated_bytes) AS peak, "
        "arg_max(ts_ns, allocated_bytes) AS peak_ts, max(reserved_bytes) AS reserved FROM memory_samples "
        "WHERE run = $run AND ts_ns IS NOT NULL GROUP BY ALL",
        run,
    )
    agg = _rows(
        store,
        "SELECT rank, component, device, sum(samples) AS samples, max(allocated_bytes) AS peak, "
        "arg_max(peak_ts_ns, allocated_bytes) AS peak_ts, max(reserved_bytes) AS reserved, count(*) AS buckets "
        "FROM agg_memory_curve WHERE run = $run GROUP BY ALL",
        run,
    )
    if raw.empty:
        assert agg.empty
        return
    keys = ["rank", "component", "device"]
    m = raw.merge(agg, on=keys, suffixes=("", "_agg"))
    assert len(m) == len(raw) == len(agg)
    assert (m["samples"] == m["samples_agg"]).all() and (m["buckets"] <= schema.MEMORY_BUCKETS).all()
    for col in ("peak", "reserved"):  # the peaks survive the downsampling
        assert ((m[col] == m[f"{col}_agg"]) | (m[col].isna() & m[f"{col}_agg"].isna())).all(), col
    assert (m["buckets"] < m["samples"]).any() or (m["samples"] <= schema.MEMORY_BUCKETS).all()


def check_occupancy(store: Store, run: str) -> None:
    """The pyramid against the timeline's own lane index (``webapp.lod``) built from every slice."""
    slices = _rows(
        store,
        "SELECT s.collection_id, s.pid, s.tid, s.ts_ns, coalesce(s.dur_ns, 0) AS dur_ns, s.name, s.event_id "
        "FROM slices s JOIN (SELECT DISTINCT collection_id, pid, tid FROM lanes WHERE n_slices > 0) "
        "USING (collection_id, pid, tid) WHERE s.run = $run AND s.ts_ns IS NOT NULL",
        run,
    )
    occ = _rows(store, "SELECT * FROM agg_lane_occupancy WHERE run = $run", run)
    summary = _rows(store, "SELECT * FROM agg_lanes WHERE run = $run", run).set_index(["collection_id", "pid", "tid"])
    long = _rows(store, "SELECT * FROM agg_lane_slices WHERE run = $run", run)
    lanes = slices.groupby(["collection_id", "pid", "tid"])
    assert len(lanes) == len(occ.groupby(["collection_id", "pid", "tid", "level"])) // len(schema.TILE_LEVELS)
    assert len(lanes) == len(summary)
    threshold = schema.LONG_SLICE_BUCKETS << min(schema.TILE_LEVELS)
    for (cid, pid, tid), sl in lanes:
        ix = lod.build_lane(sl["ts_ns"].to_numpy(), sl["dur_ns"].to_numpy(), events=sl["event_id"].to_numpy())
        got = summary.loc[(cid, pid, tid)]
        assert (got["n_slices"], got["first_ns"], got["last_ns"]) == (ix.n, ix.first_ns, ix.last_ns)
        assert min(int(got["max_depth"]), lod.MAX_DEPTH) == ix.max_depth
        mine = occ[(occ["collection_id"] == cid) & (occ["pid"] == pid) & (occ["tid"] == tid)]
        for level in schema.TILE_LEVELS:
            lv = mine[mine["level"] == level].sort_values("bucket")
            # each stored bucket: the covered length the index gives for [bucket, bucket + 1) * 2^level
            starts = lv["bucket"].to_numpy(np.int64) << level
            per = np.diff(ix.covered_until(np.c_[starts, starts + (1 << level)].ravel()))[::2]
            assert (per == lv["busy_ns"].to_numpy()).all(), (cid, pid, tid, level)
            assert lv["busy_ns"].sum() == int(ix.cum[-1]), (cid, pid, tid, level)  # no covered bucket left out
            inst = sl["ts_ns"][sl["dur_ns"] <= 0].to_numpy() >> level
            assert lv["instants"].sum() == inst.size
        ml = long[(long["collection_id"] == cid) & (long["pid"] == pid) & (long["tid"] == tid)]
        keep = (ix.durs == 0) | (ix.durs >= threshold)
        want = sorted(zip(ix.events[keep].tolist(), ix.durs[keep].tolist(), ix.depth[keep].tolist()))
        assert sorted(zip(ml["event_id"], ml["dur_ns"], ml["depth"])) == want, (cid, pid, tid)


@pytest.mark.parametrize("run", list(SAMPLES))
def test_aggregates_equal_what_the_facts_give(store: Store, run: str) -> None:
    check_aggregates(store, run)


def test_aggregates_are_declared_and_listed_per_collection(store: Store) -> None:
    ff = store.load_catalog(["fact_files"])["fact_files"].to_pandas()
    agg = ff[ff["table_name"].isin(list(schema.AGGREGATES))]
    assert set(agg["table_name"]) == set(schema.AGGREGATES)  # every table is built from some sample
    assert (agg.groupby(["collection_id", "table_name"]).size() == 1).all()  # one file per (table, collection)
    cols = store.load_catalog(["collections"])["collections"].to_pandas()
    assert set(agg["collection_id"]) <= set(cols["collection_id"])


def check_run_results(store: Store, run: str) -> set[str]:
    """Every analysis stored with the run at ingest equals the same analysis computed from the facts,
    and ``per_run`` serves it; the paths of their files."""
    rr = store.load_catalog(["run_results"])["run_results"].to_pandas()
    rr = rr[rr["run"] == run]
    assert sorted(rr["analysis"]) == sorted(fn.full_name for fn in STORED_AT_INGEST)
    assert set(rr["run_key"]) == {run_key(store, run)}
    for fn in STORED_AT_INGEST:
        RESULTS.clear()
        computed = fn.compute(store, run)
        # what the matching gives is there (no outliers without per-step scalars, no links on gloo's ops)
        some = (analyses.arrivals, analyses.stragglers, analyses.communication_summary, analyses.advise)
        assert len(computed) or fn not in some
        row = rr[rr["analysis"] == fn.full_name].iloc[0]
        assert row["rows"] == len(computed)
        pd.testing.assert_frame_equal(
            read_stored(store, store.catalog_snapshot(), run, row["run_key"], row["analysis"]), computed
        )
        RESULTS.clear()
        pd.testing.assert_frame_equal(fn(store, run), computed)
    return set(rr["path"])


def test_reingest_of_a_changed_collection_rebuilds_its_aggregates(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_results, "MIN_RANKS", 1)  # the 4 ranks get the run's stored analyses too
    folder = tmp_path / "job"
    shutil.copytree(SAMPLES["kineto"], folder)
    st = Store(tmp_path / "store")
    ingest(folder, st, run="job")
    first = check_run_results(st, "job")
    before = step_breakdown(st, "job")
    # rank 1's trace loses its later half: its collection is read again, with new aggregates
    trace = folder / "rank_1" / "rank1.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    steps = sorted(e["ts"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    cut = steps[len(steps) // 2]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M" or float(e.get("ts", 0)) < cut]
    trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
    rank = 1
    ingest(folder, st, run="job")
    after = step_breakdown(st, "job")
    check_aggregates(st, "job")
    assert len(after[after["rank"] == rank]) < len(before[before["rank"] == rank])
    others = before[before["rank"] != rank].reset_index(drop=True)
    pd.testing.assert_frame_equal(after[after["rank"] != rank].reset_index(drop=True), others)
    # nothing of the old aggregates stays: one file per (table, collection) still
    ff = st.load_catalog(["fact_files"])["fact_files"].to_pandas()
    agg = ff[ff["table_name"].isin(list(schema.AGGREGATES))]
    assert (agg.groupby(["collection_id", "table_name"]).size() == 1).all()
    on_disk = {str(p.relative_to(st.path)) for p in st.path.rglob("*.parquet") if "/agg_" in str(p)}
    assert on_disk == set(agg["path"])
    # the run's stored analyses were computed again from its new content, the old ones removed
    second = check_run_results(st, "job")
    assert not first & second
    ingest(folder, st, run="job")  # unchanged: nothing computed again (the digest answers)
    assert check_run_results(st, "job") == second
    on_disk = {str(p.relative_to(st.path)) for p in st.path.rglob("*.parquet") if "/run_results/" in str(p)}
    st.garbage_collect()
    assert (
        on_disk
        == second
        == {str(p.relative_to(st.path)) for p in st.path.rglob("*.parquet") if "/run_results/" in str(p)}
    )
    # a result stored by another version of the analyses is never served: computed again
    rr = st.load_catalog(["run_results"])["run_results"].to_pandas()
    row = rr[rr["analysis"] == analyses.stragglers.full_name].iloc[0]
    path = st.path / row["path"]
    fresh = analyses.stragglers.compute(st, "job")
    assert len(fresh)
    tbl = pq.read_table(path)
    for version, served in ((stored.code_version(), 0), ("an older version", len(fresh))):
        meta = {**tbl.schema.metadata, b"rankscope.code_version": version.encode()}
        pq.write_table(tbl.slice(0, 0).replace_schema_metadata(meta), path)  # stored rows: none
        RESULTS.clear()
        assert len(analyses.stragglers(st, "job")) == served
    RESULTS.clear()
    pd.testing.assert_frame_equal(analyses.stragglers(st, "job"), fresh)


def test_operators_page_statistics_from_the_aggregates_equal_those_from_every_call(
    store: Store, tmp_path: Path
) -> None:
    """The Operators page's figures (every source, grouping, per rank and across ranks) read from the
    stored statistics equal those computed from every call: the same store without its aggregates."""
    from webapp import data
    from webapp.reader import reader

    before = Store(tmp_path / "before")
    shutil.copytree(store.path, before.path)
    with before.write_connection() as con:
        con.execute("DELETE FROM fact_files WHERE table_name LIKE 'agg_%'")
    compared = 0
    for run in SAMPLES:
        for source in data.SOURCES:
            for grouping in data.GROUPINGS:
                for across in (False, True):
                    got = []
                    for st in (store, before):
                        with reader(st, run) as rd:
                            got.append(data.operator_stats.uncached(rd, run, source, grouping, None, across))
                    (a, n), (b, m) = got
                    assert n == m and len(a) == len(b), (run, source, grouping, across)
                    # which of two equal candidates is named may differ: the slowest call's start and rank
                    # (two calls of the same longest duration), the ranks with the largest / smallest total
                    drop = [c for c in ("slowest_ts_ns", "slowest_rank", "max_rank", "min_rank") if c in a.columns]
                    pd.testing.assert_frame_equal(a.drop(columns=drop), b.drop(columns=drop), check_dtype=False)
                    compared += len(a)
    assert compared > 1000
