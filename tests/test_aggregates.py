"""The aggregates built at ingest (``analyzer.ingest.aggregate``) equal what the raw facts give,
computed both ways here, on real multi-rank traces of four producers; a re-ingest replaces them.
So do the analyses of a whole run stored with it at ingest (``analyzer.analyses.stored``)."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import REPO

from analyzer import analyses, histogram, schema
from analyzer.analyses import STORED_AT_INGEST, step_breakdown, stored
from analyzer.analyses.cache import RESULTS
from analyzer.analyses.step_breakdown import aggregated_ranks, from_aggregates, from_facts
from analyzer.analyses.stored import read_stored
from analyzer.ingest import compact, ingest, run_results
from analyzer.store import Store, execute, run_key
from analyzer.store.layout import is_run_file
from analyzer.tracks import TRACK_SOURCES
from analyzer.versions import analysis_version
from webapp import counter_tracks, lod
from webapp.reader import reader

SAMPLES = {
    "kineto": REPO / "tests" / "data" / "kineto_gloo_4rank_slow",
    "npu_db": REPO / "sample_data" / "torch_npu_db_level1",
    "npu_text": REPO / "sample_data" / "torch_npu_text_level1",
    "mindspore": REPO / "sample_data" / "mindspore_cpu_2rank",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The samples' runs, their aggregates merged into run files (as a run of
    ``compact.MIN_COLLECTIONS`` ranks or more has them) although they have a few ranks."""
    st = Store(tmp_path_factory.mktemp("agg") / "store")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(compact, "MIN_COLLECTIONS", 2)
        for run, folder in SAMPLES.items():
            ingest(folder, st, run=run)
    yield st


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
    check_steps(store, run)
    check_lane_list(store, run)
    check_memory(store, run)
    check_counter_curve(store, run)
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
    check_histograms(got, ops.fillna({"input_shapes": "\0", "category": "\0"}), keys)
    kern = _rows(
        store, "SELECT rank, name, core_type, dur_ns FROM kernels WHERE run = $run AND dur_ns IS NOT NULL", run
    )
    got = _rows(store, "SELECT * FROM agg_kernel_stats WHERE run = $run", run)
    if kern.empty:
        assert got.empty
    else:
        keys = ["rank", "name", "op_type", "core_type", "input_shapes", "is_communication"]
        check_histograms(
            got.fillna({"op_type": "\0", "core_type": "\0", "input_shapes": "\0"}),
            _rows(
                store,
                f"SELECT {', '.join(keys[:-1])}, coalesce(is_communication, false) AS is_communication, dur_ns "
                "FROM kernels WHERE run = $run AND dur_ns IS NOT NULL",
                run,
            ).fillna({"op_type": "\0", "core_type": "\0", "input_shapes": "\0"}),
            keys,
        )
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


def check_histograms(got: pd.DataFrame, calls: pd.DataFrame, keys: list[str]) -> None:
    """Each statistics row's duration histogram (``analyzer.histogram``) holds its calls' durations,
    bucketed here with numpy, and gives their quantiles within the stated accuracy."""
    durs = {k: np.sort(g["dur_ns"].to_numpy(np.int64)) for k, g in calls.groupby(keys)}
    assert len(durs) == len(got)
    for row in got.to_dict("records"):
        d = durs[tuple(row[k] for k in keys)]
        with np.errstate(divide="ignore"):
            want = np.where(d > 0, np.ceil(np.log(d) / np.log(histogram.GAMMA)), histogram.ZERO).astype(np.int64)
        b, c = np.unique(want, return_counts=True)
        assert list(row["hist_buckets"]) == b.tolist() and list(row["hist_counts"]) == c.tolist()
        qs = [0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0]
        est = histogram.quantiles([row["hist_buckets"]], [row["hist_counts"]], qs, [d[0]], [d[-1]])[0]
        exact = np.quantile(d, qs)  # linear interpolation: quantile_cont's
        assert np.all(np.abs(est - exact) <= histogram.RELATIVE_ACCURACY * exact + 1e-6), (row, est, exact)
        assert est[0] == d[0] and est[-1] == d[-1]


def check_steps(store: Store, run: str) -> None:
    """``agg_steps``: per (rank, step, source) the rows, extent and durations the steps give."""
    raw = _rows(store, "SELECT rank, step, source, start_ns, end_ns, dur_ns FROM steps WHERE run = $run", run)
    keys = ["rank", "step", "source"]
    want = (
        raw.fillna({"step": -1, "source": "\0"})
        .groupby(keys)
        .agg(
            n=("rank", "size"),
            start_ns=("start_ns", "min"),
            end_ns=("end_ns", "max"),
            n_measured=("dur_ns", "count"),
            dur_sum_ns=("dur_ns", "sum"),
            dur_max_ns=("dur_ns", "max"),
        )
        .reset_index()
    )
    got = _rows(store, "SELECT * FROM agg_steps WHERE run = $run", run).fillna({"step": -1, "source": "\0"})
    got = got.groupby(keys)[list(want.columns[3:])].agg(
        {"n": "sum", "start_ns": "min", "end_ns": "max", "n_measured": "sum", "dur_sum_ns": "sum", "dur_max_ns": "max"}
    )  # a rank of several collections has a row per collection
    if want.empty:  # a run without steps (MindSpore on CPU)
        assert got.empty
        return
    _same(want, got.reset_index(), keys)


def check_lane_list(store: Store, run: str) -> None:
    """``agg_lane_list``: the rows of ``lanes``."""
    cols = "rank, collection_id, pid, tid, process, lane, lane_group, sort_index, n_slices"
    want = _rows(store, f"SELECT {cols} FROM lanes WHERE run = $run", run)
    got = _rows(store, f"SELECT {cols} FROM agg_lane_list WHERE run = $run", run)
    _same(want, got, ["rank", "collection_id", "pid", "tid"])


MEMORY_SERIES = ("allocated", "reserved", "active")


def check_memory(store: Store, run: str) -> None:
    """Per curve (rank, component, device): the samples, extent and the peak of each series, with a
    time at which a sample had it, as the samples give them; at most MEMORY_BUCKETS buckets."""
    keys = ["rank", "component", "device"]
    peaks = ", ".join(f"max({s}_bytes) AS {s}" for s in MEMORY_SERIES)
    raw = _rows(
        store,
        f"SELECT rank, component, device, count(*) AS samples, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns, {peaks} "
        "FROM memory_samples WHERE run = $run AND ts_ns IS NOT NULL GROUP BY ALL",
        run,
    )
    when = ", ".join(
        f"arg_max({'peak_ts_ns' if s == 'allocated' else s + '_peak_ts_ns'}, {s}_bytes) AS {s}_at"
        for s in MEMORY_SERIES
    )
    agg = _rows(
        store,
        f"SELECT rank, component, device, sum(samples) AS samples, min(start_ns) AS first_ns, "
        f"max(last_ts_ns) AS last_ns, {peaks}, {when}, count(*) AS buckets, max(bucket_ns) AS bucket_ns "
        "FROM agg_memory_curve WHERE run = $run GROUP BY ALL",
        run,
    )
    if raw.empty:
        assert agg.empty
        return
    m = raw.merge(agg, on=keys, suffixes=("", "_agg"))
    assert len(m) == len(raw) == len(agg)
    for col in ("samples", "first_ns", "last_ns"):
        assert (m[col] == m[f"{col}_agg"]).all(), col
    assert (m["buckets"] <= schema.MEMORY_BUCKETS).all()
    assert (m["bucket_ns"] * schema.MEMORY_BUCKETS >= m["last_ns"] - m["first_ns"]).all()
    samples = _rows(
        store,
        "SELECT rank, component, device, ts_ns, allocated_bytes, reserved_bytes, active_bytes FROM memory_samples "
        "WHERE run = $run AND ts_ns IS NOT NULL",
        run,
    )
    for s in MEMORY_SERIES:  # every peak survives the downsampling, at a time a sample had it
        assert ((m[s] == m[f"{s}_agg"]) | (m[s].isna() & m[f"{s}_agg"].isna())).all(), s
        had = m.dropna(subset=[s]).merge(
            samples, left_on=[*keys, f"{s}_at", s], right_on=[*keys, "ts_ns", f"{s}_bytes"]
        )
        assert set(map(tuple, had[keys].values)) == set(map(tuple, m.dropna(subset=[s])[keys].values)), s
    # downsampled where a curve has more samples than buckets
    assert (m["buckets"] < m["samples"]).any() or (m["samples"] <= schema.MEMORY_BUCKETS).all()


def track_samples(store: Store, run: str) -> pd.DataFrame:
    """Every sample of the timeline's counter tracks of ``run`` (``analyzer.tracks``), in the tracks'
    order: by time, of equal times the largest value last."""
    union = " UNION ALL ".join(
        rows.format(source=f"(SELECT * FROM {table} WHERE run = $run)") for rows, table in TRACK_SOURCES
    )
    raw = _rows(store, f"SELECT * FROM ({union})", run)
    return raw.sort_values(["rank", "label", "unit", "ts_ns", "value"], kind="stable").reset_index(drop=True)


def check_counter_curve(store: Store, run: str) -> None:
    """Per track and level, the stored buckets (a rank's collections merged) against the samples:
    their count, minimum, maximum with a time a sample had it, first, last and the last value."""
    raw = track_samples(store, run)
    agg = _rows(store, "SELECT * FROM agg_counter_curve WHERE run = $run", run)
    if raw.empty:
        assert agg.empty
        return
    keys = ["rank", "label", "unit", "bucket"]
    for level in schema.COUNTER_LEVELS:
        r = raw.assign(bucket=raw["ts_ns"].to_numpy(np.int64) >> level)
        want = (
            r.groupby(keys, sort=True)
            .agg(
                samples=("value", "size"),
                lo=("value", "min"),
                hi=("value", "max"),
                first=("ts_ns", "min"),
                last=("ts_ns", "max"),
                last_value=("value", "last"),
            )
            .reset_index()
        )
        a = agg[agg["level"] == level].sort_values(["last_ts_ns", "last_value"])
        got = (
            a.groupby(keys, sort=True)
            .agg(
                samples=("samples", "sum"),
                lo=("min_value", "min"),
                hi=("max_value", "max"),
                first=("first_ts_ns", "min"),
                last=("last_ts_ns", "max"),
                last_value=("last_value", "last"),
            )
            .reset_index()
        )
        pd.testing.assert_frame_equal(want, got, check_dtype=False)
        # every bucket's peak at a time a sample of its track had it
        at = a.merge(raw, left_on=["rank", "label", "unit", "peak_ts_ns", "max_value"],
                     right_on=["rank", "label", "unit", "ts_ns", "value"])  # fmt: skip
        assert len(at.drop_duplicates(["collection_id", *keys])) == len(a), level
    # the driver modules' reserved-only rows are no track; every memory track is the allocators'
    assert not agg["label"].str.contains("HDC|DRV").any() if len(agg) else True
    assert (agg.groupby("level")["samples"].sum() == len(raw)).all()  # each level holds every sample once


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
    # every table is built from some sample (the collector's scalars: test_scalar_curves_...)
    assert set(agg["table_name"]) == set(schema.AGGREGATES) - {"agg_scalar_curve"}
    assert (agg.groupby(["collection_id", "table_name"]).size() == 1).all()  # one file per (table, collection)
    cols = store.load_catalog(["collections"])["collections"].to_pandas()
    assert set(agg["collection_id"]) <= set(cols["collection_id"])


def _aggregate_rows(store: Store, run: str, ranks: list[int] | None = None) -> dict[str, pd.DataFrame]:
    """Every aggregate table's rows of ``run`` (of ``ranks`` only, when given), in one order."""
    out = {}
    with store.read_connection(run=run, ranks=ranks, tables=list(schema.AGGREGATES)) as con:
        for t in schema.AGGREGATE_TABLES:
            df = con.execute(f'SELECT * EXCLUDE (collection_id) FROM "{t.name}"').df()
            keys = [c for c in df.columns if not df[c].map(lambda v: isinstance(v, np.ndarray | list)).any()]
            out[t.name] = df.sort_values(keys, na_position="first").reset_index(drop=True)
    return out


def check_run_files(store: Store, run: str) -> None:
    """The aggregates of a run of several collections are one file per table (``ingest.compact``)
    holding each collection's rows (as many as its ``fact_files`` row says) sorted by rank, with
    rank statistics per row group; the views of some ranks read theirs only."""
    ff = store.load_catalog(["fact_files"], run=run)["fact_files"].to_pandas()
    agg = ff[ff["table_name"].isin(list(schema.AGGREGATES))]
    assert agg["collection_id"].nunique() > 1
    for table, rows in agg.groupby("table_name"):
        assert rows["path"].nunique() == 1 and rows["collection_id"].is_unique, table
        path = rows["path"].iloc[0]
        assert is_run_file(path) and f"{schema.AGGREGATES[table].name}/run=" in path
        pf = pq.ParquetFile(store.path / path)
        assert (
            pf.metadata.num_rows == rows["rows"].sum()
            and rows["size_bytes"].sum() == (store.path / path).stat().st_size
        )
        ranks = pf.read(columns=["rank"])["rank"].to_numpy()
        assert (np.diff(ranks) >= 0).all()
        rank_col = pf.schema_arrow.get_field_index("rank")
        for g in range(pf.metadata.num_row_groups):
            st = pf.metadata.row_group(g).column(rank_col).statistics
            assert st is not None and st.has_min_max
    whole = _aggregate_rows(store, run)
    for rank in sorted(set(agg["rank"]))[1:2]:  # a rank after the first: the others are read past
        part = _aggregate_rows(store, run, [rank])
        for table, df in part.items():
            want = whole[table][whole[table]["rank"] == rank].reset_index(drop=True)
            pd.testing.assert_frame_equal(df, want)
            src = f"SELECT count(*) AS n, count(DISTINCT rank) AS k FROM {table}"
            got = execute(store, src, run=run, ranks=[rank]).frame.iloc[0]
            assert (int(got["n"]), int(got["k"])) == (len(want), int(len(want) > 0))
            with reader(store, run, [rank]) as rd:
                n = rd.catalog().execute(f"SELECT count(*) FROM {rd.source(run, [rank], table)}").fetchone()[0]
            assert n == len(want)


def test_a_multi_rank_runs_aggregates_are_one_file_per_table(store: Store) -> None:
    for run in ("kineto", "mindspore"):
        check_run_files(store, run)


def test_a_run_of_few_ranks_keeps_its_per_collection_files(tmp_path: Path) -> None:
    """Below ``compact.MIN_COLLECTIONS`` collections the merge is not made (it would cost a small
    ingest much and save its queries little): each collection's aggregates stay in files of their
    own, and they read as the run files do."""
    assert compact.MIN_COLLECTIONS > 4
    st = Store(tmp_path / "store")
    ingest(SAMPLES["kineto"], st, run="job")
    ff = st.load_catalog(["fact_files"])["fact_files"].to_pandas()
    agg = ff[ff["table_name"].isin(list(schema.AGGREGATES))]
    assert agg["collection_id"].nunique() == 4
    assert len(agg) and not any(is_run_file(p) for p in agg["path"]) and agg["path"].is_unique
    check_aggregates(st, "job")


def test_a_store_of_per_collection_aggregates_reads_and_a_change_makes_its_run_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before run files (one aggregate file per collection) reads as it is; the
    ingest that changes a collection writes the run's files, from the older files and the new
    collection's, and the one that drops a rank writes them without it."""
    folder = tmp_path / "job"
    shutil.copytree(SAMPLES["kineto"], folder)
    st = Store(tmp_path / "store")
    with monkeypatch.context() as m:
        m.setattr(compact, "run_files", lambda *a: ([], []))  # as the code before run files wrote it
        ingest(folder, st, run="job")
    ff = st.load_catalog(["fact_files"])["fact_files"].to_pandas()
    agg = ff[ff["table_name"].isin(list(schema.AGGREGATES))]
    assert len(agg) and not any(is_run_file(p) for p in agg["path"]) and agg["path"].is_unique
    check_aggregates(st, "job")
    before = _aggregate_rows(st, "job")
    monkeypatch.setattr(compact, "MIN_COLLECTIONS", 2)  # a run of 4 ranks merges as a large one does
    # rank 1's trace loses its later half: its collection is read again
    trace = folder / "rank_1" / "rank1.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    cut = sorted(e["ts"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))[3]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M" or float(e.get("ts", 0)) < cut]
    trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
    ingest(folder, st, run="job")
    check_aggregates(st, "job")
    check_run_files(st, "job")
    after = _aggregate_rows(st, "job")
    for table, df in after.items():
        old = before[table]
        pd.testing.assert_frame_equal(
            df[df["rank"] != 1].reset_index(drop=True), old[old["rank"] != 1].reset_index(drop=True)
        )
    assert len(after["agg_lane_occupancy"].query("rank == 1")) < len(before["agg_lane_occupancy"].query("rank == 1"))
    on_disk = {str(p.relative_to(st.path)) for p in st.path.rglob("*.parquet") if "/agg_" in str(p)}
    listed = st.load_catalog(["fact_files"])["fact_files"].to_pandas()
    assert on_disk == {p for t, p in zip(listed["table_name"], listed["path"]) if t in schema.AGGREGATES}
    # rank 3 leaves the folder: the run files are written again without its rows
    shutil.rmtree(folder / "rank_3")
    ingest(folder, st, run="job")
    check_aggregates(st, "job")
    check_run_files(st, "job")
    gone = _aggregate_rows(st, "job")
    for table, df in gone.items():
        assert 3 not in set(df["rank"])
        pd.testing.assert_frame_equal(df, after[table][after[table]["rank"] != 3].reset_index(drop=True))


def test_scalar_curves_are_each_levels_buckets_of_the_records(tmp_path: Path) -> None:
    """``agg_scalar_curve`` of two ranks' collector scalars (1 000 steps from step 5, a one-step
    spike and a one-step dip, equal values on a bucket's first steps, a value of one rank only): at
    every level, per bucket, the first step, the count and sum of values, the first record of the
    lowest and of the highest value at their steps, as the records grouped by ``step >> level`` give."""
    rng = np.random.default_rng(17)
    for rank in (0, 1):
        lines = []
        for step in range(5, 1005):
            loss = float(round(rng.normal(2.0, 0.1), 3)) if step >= 64 else 1.5  # ties at the start
            loss = {300 + rank: 50.0, 700: -3.0}.get(step, loss)  # a spike, a dip
            scalars = {"loss": loss, **({"only_rank_1": step * 0.5} if rank else {})}
            lines.append(
                json.dumps(
                    {"step": step, "ts_ns": 10**18 + step * 10**8, "step_time_ns": 10**8 + step, "scalars": scalars}
                )
            )
        (tmp_path / "job" / f"rank_{rank}").mkdir(parents=True)
        (tmp_path / "job" / f"rank_{rank}" / "rankscope_scalars.jsonl").write_text("\n".join(lines) + "\n")
    st = Store(tmp_path / "store")
    ingest(tmp_path / "job", st, run="job")
    got = _rows(st, "SELECT * EXCLUDE (run, collection_id) FROM agg_scalar_curve WHERE run = $run", "job")
    rec = _rows(st, "SELECT rank, name, step, value FROM scalars WHERE run = $run", "job")
    assert sorted(set(got["level"])) == list(schema.SCALAR_LEVELS)
    want = []
    for level in schema.SCALAR_LEVELS:
        for (rank, name, bucket), g in rec.groupby(["rank", "name", rec["step"].to_numpy("int64") >> level]):
            g = g.sort_values("step")
            lo, hi = g.loc[g["value"].idxmin()], g.loc[g["value"].idxmax()]  # idxmin / idxmax: the first
            want.append(
                dict(
                    rank=rank,
                    name=name,
                    level=level,
                    bucket=bucket,
                    first_step=g["step"].min(),
                    n=len(g),
                    sum_value=g["value"].sum(),
                    lo_step=lo["step"],
                    lo=lo["value"],
                    hi_step=hi["step"],
                    hi=hi["value"],
                )
            )
    want_df = pd.DataFrame(want)
    keys = ["rank", "name", "level", "bucket"]
    a = got.sort_values(keys).reset_index(drop=True)[list(want_df.columns)]
    b = want_df.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=False, rtol=1e-12)
    spikes = a[(a["name"] == "loss") & (a["hi"] == 50.0)]
    assert set(zip(spikes["rank"], spikes["hi_step"])) == {(0, 300), (1, 301)}  # at every level
    assert len(spikes) == 2 * len(schema.SCALAR_LEVELS)
    assert (a[(a["name"] == "loss") & (a["level"] == 3) & (a["bucket"] == 0)]["lo_step"] == 5).all()  # first tie


def check_run_results(store: Store, run: str) -> set[str]:
    """Every analysis stored with the run at ingest equals the same analysis computed from the facts,
    and ``per_run`` serves it; the paths of their files."""
    rr = store.load_catalog(["run_results"])["run_results"].to_pandas()
    rr = rr[rr["run"] == run]
    assert sorted(rr["analysis"]) == sorted(fn.full_name for fn in STORED_AT_INGEST)
    assert set(rr["run_key"]) == {run_key(store, run)}
    # every analysis computed again (``compute``: neither cached nor stored), the intermediate results
    # they share (the matched collectives, the clock alignment) computed once for all of them: a
    # cleared cache per analysis computed those again for each (~3/4 of this check's time)
    RESULTS.clear()
    computed = {fn.full_name: fn.compute(store, run) for fn in STORED_AT_INGEST}
    # then each served with nothing cached: from its stored file
    RESULTS.clear()
    served = {fn.full_name: fn(store, run) for fn in STORED_AT_INGEST}
    some = (analyses.arrivals, analyses.stragglers, analyses.communication_summary, analyses.advise)
    for fn in STORED_AT_INGEST:
        got = computed[fn.full_name]
        # what the matching gives is there (no outliers without per-step scalars, no links on gloo's ops)
        assert len(got) or fn not in some
        row = rr[rr["analysis"] == fn.full_name].iloc[0]
        assert row["rows"] == len(got)
        pd.testing.assert_frame_equal(read_stored(store, store.catalog_snapshot(), run, row["run_key"], fn), got)
        pd.testing.assert_frame_equal(served[fn.full_name], got)
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
    # a result stored by another version of its code is never served: computed again
    catalog = st.catalog_snapshot()
    assert stored.current(st, catalog, "job", run_key(st, "job"), list(STORED_AT_INGEST)) == {
        fn.full_name for fn in STORED_AT_INGEST
    }
    rr = st.load_catalog(["run_results"])["run_results"].to_pandas()
    row = rr[rr["analysis"] == analyses.stragglers.full_name].iloc[0]
    path = st.path / row["path"]
    fresh = analyses.stragglers.compute(st, "job")
    assert len(fresh)
    tbl = pq.read_table(path)
    ours = analysis_version(analyses.stragglers).encode()
    for key, version, served in (
        (b"rankscope.analysis_version", ours, 0),
        (b"rankscope.analysis_version", b"an older version", len(fresh)),
        (b"rankscope.code_version", ours, len(fresh)),  # the key of stores made before per-analysis versions
    ):
        meta = {k: v for k, v in tbl.schema.metadata.items() if not k.endswith(b"_version")}
        pq.write_table(tbl.slice(0, 0).replace_schema_metadata({**meta, key: version}), path)  # stored rows: none
        RESULTS.clear()
        assert len(analyses.stragglers(st, "job")) == served
        names = stored.current(st, catalog, "job", run_key(st, "job"), list(STORED_AT_INGEST))
        assert (analyses.stragglers.full_name in names) == (served == 0)
    RESULTS.clear()
    pd.testing.assert_frame_equal(analyses.stragglers(st, "job"), fresh)
    # the re-ingest of the unchanged folder (after an upgrade) computes that one again, alone
    before = rr.set_index("analysis")["path"]
    report = ingest(folder, st, run="job")
    assert report.stored_analyses == 1
    after = st.load_catalog(["run_results"])["run_results"].to_pandas().set_index("analysis")["path"]
    changed = {a for a in before.index if after[a] != before[a]}
    assert changed == {analyses.stragglers.full_name} and set(after.index) == set(before.index)
    assert not path.exists()  # the stale file collected
    catalog = st.catalog_snapshot()
    assert stored.current(st, catalog, "job", run_key(st, "job"), list(STORED_AT_INGEST)) == {
        fn.full_name for fn in STORED_AT_INGEST
    }
    assert ingest(folder, st, run="job").stored_analyses == 0  # now nothing to do
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
                    if across:
                        check_drill(store, before, run, source, grouping, a)
    assert compared > 1000


def test_pages_steps_and_lanes_from_the_aggregates_equal_those_from_the_facts(store: Store, tmp_path: Path) -> None:
    """The steps the Overview and the timeline list (``data.steps``, ``step_windows``, ``profiled_steps``)
    and the timeline's lanes (``data.lanes``) read from ``agg_steps`` and ``agg_lane_list`` equal those
    read from the steps and lanes: the same store without the aggregates."""
    from webapp import data

    before = Store(tmp_path / "before")
    shutil.copytree(store.path, before.path)
    with before.write_connection() as con:
        con.execute("DELETE FROM fact_files WHERE table_name IN ('agg_steps', 'agg_lane_list')")
    compared = 0
    for run in SAMPLES:
        with reader(store, run) as rd:
            ranks = data.ranks_of(rd, run)
        for sel in (None, ranks[:1], ranks[1:]):
            got = []
            for st in (store, before):
                with reader(st, run) as rd:
                    if rd.has_files(run, None, "steps"):  # else nothing to read either way (MindSpore on CPU)
                        assert data.all_stored(rd, run, "steps", "agg_steps") == (st is store)
                    assert data.all_stored(rd, run, "lanes", "agg_lane_list") == (st is store)
                    got.append(
                        (
                            data.steps.uncached(rd, run, sel),
                            data.step_windows(rd, run, sel),
                            data.profiled_steps.uncached(rd, run, sel),
                            # in drawing order (``row``; the query's own order is not one)
                            data.lanes.uncached(rd, run, sel)
                            .sort_values(["row", "collection_id", "pid", "tid"])
                            .reset_index(drop=True),
                        )
                    )
            for a, b in zip(*got):
                pd.testing.assert_frame_equal(a, b, check_dtype=False)
                compared += len(a)
    assert compared > 50


def test_drill_of_a_store_without_histograms_reads_every_call(store: Store, tmp_path: Path) -> None:
    """Statistics files written before the histograms (their columns absent): the drill's quantiles
    come from every call, exactly."""
    from webapp import data
    from webapp.reader import reader

    old = Store(tmp_path / "old")
    shutil.copytree(store.path, old.path)
    for f in (old.path / "facts" / "agg_operator_stats").rglob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["hist_buckets", "hist_counts"]), f)
    with reader(old, "kineto") as rd:
        got = data.operator_drill.uncached(rd, "kineto", "operators", "name", "aten::mm", None, None)
    with reader(store, "kineto") as rd:
        calls = (
            rd.facts("kineto", None, ("operators",))
            .execute(
                "SELECT rank, quantile_cont(dur_ns, 0.25) AS q FROM operators WHERE name = 'aten::mm' GROUP BY rank "
                "ORDER BY rank"
            )
            .df()
        )
    assert len(got) == len(calls) > 1
    assert got["p25_ns"].astype(float).tolist() == calls["q"].astype(float).tolist()


def check_drill(store: Store, before: Store, run: str, source: str, grouping: str, rows: pd.DataFrame) -> None:
    """The drill into the top operators (by shape: the first row's and every shape of its name) read
    from the stored statistics and histograms equals that from every call: counts, sums and extremes
    exactly, quantiles within ``histogram.RELATIVE_ACCURACY``."""
    from webapp import data
    from webapp.reader import reader

    picks = [(k, s if grouping == "shape" else None) for k, s in zip(rows["key"][:5], rows["shape"][:5])]
    if grouping == "shape" and picks:
        picks.append((picks[0][0], None))
    for key, shape in picks:
        got = []
        for st in (store, before):
            with reader(st, run) as rd:
                got.append(data.operator_drill.uncached(rd, run, source, grouping, key, shape, None))
        a, b = got
        assert len(a) == len(b) > 0 and list(a.columns) == list(b.columns) == data.DRILL_COLUMNS
        exact = ["rank", "count", "total_ns", "min_ns", "max_ns", "self_ns"]
        pd.testing.assert_frame_equal(a[exact], b[exact], check_dtype=False)
        np.testing.assert_allclose(a["avg_ns"].astype(float), b["avg_ns"].astype(float), rtol=1e-12)
        for q in data.DRILL_QUANTILES:
            want = b[q].astype(float).to_numpy()
            assert np.all(np.abs(a[q].astype(float) - want) <= histogram.RELATIVE_ACCURACY * want + 1e-6), (key, q)


DENSE_SAMPLES = 6000  # memory samples per rank, about three times schema.MEMORY_BUCKETS


@pytest.fixture(scope="module")
def dense_memory(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store]:
    """A real 2-rank Kineto job whose first window's traces also hold DENSE_SAMPLES allocator
    samples per rank (a random walk with one-sample spikes), read by the Kineto reader; and the same
    store without its aggregates (a store written before them)."""
    folder = tmp_path_factory.mktemp("dense") / "job"
    shutil.copytree(REPO / "sample_data" / "kineto_gloo_2rank", folder)
    rng = np.random.default_rng(15)
    for rank, trace in enumerate(sorted(folder.glob("rank_*/window_step2/*step000002.pt.trace.json"))):
        doc = json.loads(trace.read_text())
        mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
        xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        t0, t1 = min(e["ts"] for e in xs), max(e["ts"] + e["dur"] for e in xs)
        walk = (64 << 20) + np.cumsum(rng.integers(-(1 << 16), 1 << 16, DENSE_SAMPLES)).clip(-(32 << 20), None)
        walk[rng.choice(DENSE_SAMPLES, 5, replace=False)] += rng.integers(1 << 20, 8 << 20, 5)  # lone spikes
        for i, (ts, v) in enumerate(zip(np.linspace(t0, t1, DENSE_SAMPLES), walk)):
            e = json.loads(json.dumps(mem[i % len(mem)]))
            e["ts"] = round(float(ts), 3)
            e["args"]["Total Allocated"] = int(v)
            e["args"]["Total Reserved"] = int(v) + (2 << 20) - int(v) % (2 << 20) + rank * (1 << 20)
            doc["traceEvents"].append(e)
        trace.write_text(json.dumps(doc))
    st = Store(tmp_path_factory.mktemp("dense_store") / "store")
    ingest(folder, st, run="dense")
    before = Store(tmp_path_factory.mktemp("dense_before") / "store")
    shutil.copytree(st.path, before.path, dirs_exist_ok=True)
    with before.write_connection() as con:
        con.execute("DELETE FROM fact_files WHERE table_name LIKE 'agg_%'")
    return st, before


def test_memory_page_draws_whole_run_views_from_the_stored_curves(dense_memory: tuple[Store, Store]) -> None:
    """The Memory page's counters, peaks and whole-run curves read from the stored curves (no
    sample read) equal those read from every sample (the same store without its aggregates); a
    window finer than the stored buckets is drawn from its samples."""
    from webapp import data
    from webapp.reader import reader

    st, before = dense_memory
    check_memory(st, "dense")
    agg = _rows(
        st, "SELECT rank, count(*) AS n, sum(samples) AS s FROM agg_memory_curve WHERE run = $run GROUP BY 1", "dense"
    )
    assert (agg["n"] <= schema.MEMORY_BUCKETS).all() and (agg["s"] > agg["n"]).all()  # really downsampled
    bucket = int(_rows(st, "SELECT max(bucket_ns) AS w FROM agg_memory_curve WHERE run = $run", "dense")["w"][0])
    got = {}
    for name, store in (("stored", st), ("samples", before)):
        with reader(store, "dense") as rd:
            comps = data.memory_components.uncached(rd, "dense", None)
            component = str(comps["component"].iloc[0])
            peaks = data.memory_peaks.uncached(rd, "dense", [0, 1], component)
            per_rank = data.memory_peak_per_rank.uncached(rd, "dense", None)
            a, b = int(peaks["first_ns"].min()), int(peaks["last_ns"].max())
            pad = (b - a) // 50  # the page's whole-run window: the samples' extent, padded
            whole = data.memory_curves(rd, "dense", [0, 1], component, a - pad, b + pad, n_buckets=1000)
            read = set(rd.tables_read)
            z0 = a + (b - a) // 3  # zoomed in: 200 of the page's buckets span one stored bucket
            zoom = data.memory_curves(rd, "dense", [0, 1], component, z0, z0 + bucket * 5, n_buckets=1000)
            got[name] = (comps, peaks, per_rank, whole, zoom, read, set(rd.tables_read))
    (comps, peaks, per_rank, whole, zoom, read, zoom_read), (comps0, peaks0, per_rank0, whole0, zoom0, read0, _) = (
        got["stored"],
        got["samples"],
    )
    assert "memory_samples" not in read and "agg_memory_curve" in read  # whole-run: no sample read
    assert whole.attrs["stored"] and not whole0.attrs["stored"] and "memory_samples" in read0
    pd.testing.assert_frame_equal(comps, comps0, check_dtype=False)
    pd.testing.assert_frame_equal(per_rank, per_rank0, check_dtype=False)
    times = [f"peak_{s}_ns" for s in MEMORY_SERIES]
    pd.testing.assert_frame_equal(
        peaks.drop(columns=[*times, "bucket_ns"]), peaks0.drop(columns=[*times, "bucket_ns"]), check_dtype=False
    )
    samples = _rows(
        st, "SELECT rank, ts_ns, allocated_bytes, reserved_bytes FROM memory_samples WHERE run = $run", "dense"
    )
    for s in ("allocated", "reserved"):  # each peak's time is one at which a sample had it
        at = peaks.merge(samples, left_on=["rank", f"peak_{s}_ns"], right_on=["rank", "ts_ns"])
        assert (at[f"peak_{s}_bytes"] == at[f"{s}_bytes"]).groupby(at["rank"]).any().all() and len(at), s
    for curves in (whole, whole0):  # every curve's highest point is the exact peak
        assert curves.groupby("rank")["bucket"].nunique().max() <= 1000
        top = curves.groupby("rank")[["allocated_bytes", "reserved_bytes"]].max()
        want = peaks.set_index("rank")[["peak_allocated_bytes", "peak_reserved_bytes"]]
        assert (top.to_numpy() == want.loc[top.index].to_numpy()).all()
        assert int(curves["samples"].sum()) == int(peaks["samples"].sum())
    assert not zoom.attrs["stored"] and "memory_samples" in zoom_read  # zoomed in far: the samples themselves
    pd.testing.assert_frame_equal(zoom, zoom0)


def test_an_aggregate_written_before_its_columns_grew_reads_null_there(
    dense_memory: tuple[Store, Store], tmp_path: Path
) -> None:
    """A store whose memory curves were written before the peaks of reserved / active kept their
    times: its views still read (NULL there) and the Memory page still draws from them."""
    from webapp import data
    from webapp.reader import reader

    st = Store(tmp_path / "older")
    shutil.copytree(dense_memory[0].path, st.path)
    newer = ("reserved_peak_ts_ns", "active_peak_ts_ns", "last_reserved_bytes", "last_active_bytes")
    files = [f for f in st.path.rglob("*.parquet") if "agg_memory_curve" in str(f)]
    assert files
    for f in files:
        pq.write_table(pq.read_table(f).drop_columns(list(newer)), f)
    with reader(st, "dense") as rd:
        peaks = data.memory_peaks.uncached(rd, "dense", [0, 1], "allocator")
        a, b = int(peaks["first_ns"].min()), int(peaks["last_ns"].max())
        curves = data.memory_curves(rd, "dense", [0, 1], "allocator", a, b)
    assert peaks["peak_reserved_ns"].isna().all() and peaks["peak_allocated_ns"].notna().all()
    assert (
        curves.attrs["stored"]
        and (curves.groupby("rank")["allocated_bytes"].max() == peaks["peak_allocated_bytes"].values).all()
    )


def expected_window(ts: np.ndarray, v: np.ndarray, lo: int, hi: int, n: int) -> tuple[dict, str]:
    """What the timeline's counter track should answer for the samples (ts, v in the tracks' order)
    over [lo, hi) in ``n`` buckets, computed here from the samples: the exact buckets when the track
    or the view holds few samples (or the view is finer than the finest level), else the samples of
    the level's buckets overlapping the view, each stored bucket counted where it starts (clipped to
    the window)."""
    width = max(1.0, (hi - lo) / n)
    fit = [z for z in schema.COUNTER_LEVELS if (1 << z) <= (hi - lo) / n]

    def per_bucket(k: np.ndarray, vals: np.ndarray, held: float | None) -> dict:
        g = pd.Series(vals).groupby(k, sort=True)
        return {
            "held": held,
            "t": [round(int(x) * width) for x in g.min().index],
            "lo": g.min().tolist(),
            "hi": g.max().tolist(),
            "last": g.last().tolist(),
        }

    if fit and len(ts) > counter_tracks.SMALL_TRACK:
        level = max(fit)
        q = ts >> level
        inview = (q >= lo >> level) & (q <= (hi - 1) >> level)
        if inview.sum() > counter_tracks.EXACT_PER_BUCKET * n:
            start = np.maximum(q[inview] << level, lo)
            k = np.minimum(((start - lo) / width).astype(np.int64), n - 1)
            before = v[q < lo >> level]
            return per_bucket(k, v[inview], float(before[-1]) if len(before) else None), "stored"
    inside = (ts >= lo) & (ts < hi)
    k = np.minimum(((ts[inside] - lo) / width).astype(np.int64), n - 1)
    before = v[ts < lo]
    return per_bucket(k, v[inside], float(before[-1]) if len(before) else None), "exact"


def test_counter_tracks_draw_zoomed_out_views_from_the_stored_curves(dense_memory: tuple[Store, Store]) -> None:
    """The timeline's counter tracks (issue 15): a zoomed-out view is drawn from the stored curves
    (no sample read): per view bucket the minimum, maximum and last value of the samples of the
    stored buckets counted there, the value held before them, and every peak — the run's highest
    and each lone spike — kept; a zoomed-in view (few samples) is the exact answer, equal to the one
    a store without the curves gives from every sample."""
    from webapp.reader import reader

    st, before = dense_memory
    check_counter_curve(st, "dense")
    raw = track_samples(st, "dense")
    steps = _rows(st, "SELECT rank, min(start_ns) AS a, max(end_ns) AS b FROM steps WHERE run = $run GROUP BY 1",
                  "dense").set_index("rank")  # fmt: skip
    paths: dict[str, set[str]] = {"stored": set(), "exact": set()}
    for rank in (0, 1):
        with reader(st, "dense", [rank]) as rd:
            listed = counter_tracks.catalog(rd, "dense", [rank])[rank]
        track = listed[0]  # the allocator's, the dense one
        mine = raw[(raw["rank"] == rank) & (raw["label"] == track["label"]) & (raw["unit"] == track["unit"])]
        ts, v = mine["ts_ns"].to_numpy(np.int64), mine["value"].to_numpy(np.float64)
        assert (track["n"], track["max"], track["first"], track["last"]) == (len(ts), v.max(), ts[0], ts[-1])
        a, b = int(ts[0]), int(ts[-1]) + 1
        mid = int(ts[len(ts) // 2])
        windows = [
            ("whole run", a, b, 1150),
            ("whole run, 300 px", a - (b - a) // 20, b + (b - a) // 20, 300),
            ("steps", int(steps.loc[rank, "a"]), int(steps.loc[rank, "b"]), 1150),
            ("a tenth", mid, mid + (b - a) // 10, 200),
            ("narrow", mid, mid + (b - a) // 200, 1150),
        ]
        for name, lo, hi, n in windows:
            got = {}
            for which, store in (("stored", st), ("samples", before)):
                with reader(store, "dense", [rank]) as rd:
                    view = counter_tracks.View.of(track, lo, hi)
                    got[which] = counter_tracks.windows(rd, "dense", [view], n)[track["key"]]
                    got[which + " read"] = set(rd.tables_read)
            want, path = expected_window(ts, v, lo, hi, n)
            paths[path].add(name)
            assert got["stored"] == want, (rank, name)
            assert len(want["t"]) <= n
            if path == "stored":
                assert "memory_samples" not in got["stored read"] and "agg_counter_curve" in got["stored read"]
                # every sample inside the window is counted (the straddling buckets add at most a
                # stored bucket's samples, under a view bucket, past its edges)
                inside = v[(ts >= lo) & (ts < hi)]
                assert max(got["stored"]["hi"]) >= inside.max() and min(got["stored"]["lo"]) <= inside.min()
            else:  # zoomed in: the exact samples, as every sample gives them
                assert got["stored"] == got["samples"], (rank, name)
                assert "memory_samples" in got["stored read"]
        with reader(st, "dense", [rank]) as rd:
            whole = counter_tracks.windows(rd, "dense", [counter_tracks.View.of(track, a, b)], 1150)[track["key"]]
        assert max(whole["hi"]) == v.max()  # the run's peak is never lost
        # nor a lone one-sample spike: the view bucket holding its time reaches it
        spikes = np.flatnonzero((v[1:-1] > v[:-2] + (1 << 20)) & (v[1:-1] > v[2:] + (1 << 20))) + 1
        width = (b - a) / 1150
        level = counter_tracks.level_for(width)
        assert level is not None
        at = dict(zip(whole["t"], whole["hi"]))
        for i in spikes:
            start = max(int(ts[i]) >> level << level, a)
            assert at[round(int((start - a) / width) * width)] >= v[i]
        assert len(spikes) >= 5
    assert paths["stored"] >= {"whole run", "whole run, 300 px"} and "narrow" in paths["exact"], paths


def test_counter_curve_equals_duckdbs_group_by_of_each_level(tmp_path: Path) -> None:
    """``aggregate.counter_curve`` (numpy: one sort for every level) gives the rows the former
    per-level DuckDB group-by gave, value for value and in its order, on samples that test its
    rules: equal largest values (the first read keeps its time, as ``arg_max`` does), NaN (above
    every number: the maximum, never the minimum unless alone), equal last times (the largest
    value), a NULL label, the same label in two units, samples read out of time order."""
    import duckdb
    import pyarrow as pa

    from analyzer.ingest.aggregate import counter_curve

    rng = np.random.default_rng(7)
    n = 4000
    ts = rng.integers(0, 1 << 28, n)
    ts[100:140] = ts[99]  # equal times
    value = rng.integers(0, 6, n).astype(float)  # few values: many equal peaks
    value[rng.choice(n, 30, replace=False)] = np.nan
    labels = pa.array(rng.choice(["a", "b (x)", "c · d", ""], n)).to_pylist()
    for i in rng.choice(n, 50, replace=False):
        labels[i] = None
    rows = pa.table(
        {
            "rank": pa.array(np.full(n, 3), pa.int32()),
            "label": labels,
            "unit": rng.choice(["bytes", "%"], n),
            "allocator": rng.random(n) < 0.5,
            "memory": rng.random(n) < 0.1,
            "ts_ns": ts.astype(np.int64),
            "value": value,
        }
    )
    reference = f"""
    SELECT rank, label, unit, bool_or(allocator) AS allocator, bool_or(memory) AS memory, level,
           ts_ns >> level AS bucket, count(*) AS samples,
           min(value) AS min_value, max(value) AS max_value, arg_max(ts_ns, value) AS peak_ts_ns,
           min(ts_ns) AS first_ts_ns, max(ts_ns) AS last_ts_ns, arg_max(value, (ts_ns, value)) AS last_value
    FROM samples r, (SELECT unnest({list(schema.COUNTER_LEVELS)}) AS level) z
    GROUP BY rank, label, unit, level, bucket
    ORDER BY level, label, unit, bucket
    """
    con = duckdb.connect()
    con.execute("SET threads TO 1")  # arg_max keeps the first of equal values as read: one thread reads in order
    con.register("samples", rows)
    want = con.sql(reference).to_arrow_table()
    got = counter_curve(rows)
    assert got.num_rows == want.num_rows > 1000
    assert got.schema.names == want.schema.names
    pd.testing.assert_frame_equal(got.cast(want.schema).to_pandas(), want.to_pandas())  # NaN equals NaN here
    assert counter_curve(rows.slice(0, 0)).num_rows == 0


def test_lane_order_is_the_lexsort_of_lane_start_and_longest_first() -> None:
    """``aggregate.lane_order`` (one packed sort, then the equal starts) orders slices as
    ``np.lexsort((-dur, ts, key))`` does, on slices with many equal starts, equal durations,
    instants, and on times too far apart to pack (its fallback)."""
    from analyzer.ingest.aggregate import lane_order

    rng = np.random.default_rng(11)
    for n, spread, lanes in ((5000, 50, 4), (5000, 1 << 40, 7), (300, 1 << 61, 3), (1, 10, 1)):
        key = rng.integers(0, lanes, n).astype(np.int64)
        ts = (1 << 60) + rng.integers(0, spread, n).astype(np.int64)
        dur = rng.integers(0, 4, n).astype(np.int64)
        want = np.lexsort((-dur, ts, key))
        assert np.array_equal(lane_order(key, ts, dur), want), (n, spread)
    assert lane_order(*(np.zeros(0, np.int64),) * 3).size == 0
