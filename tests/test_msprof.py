"""msprof PROF_* folders through the real CLI, values checked against the source files.

- ``tests/data/msprof_cann8``: a real CANN 8.x msprof export (op_summary, op_statistic, api_statistic,
  task_time; no timeline json) from neo-pan/ascend-msprof-skill;
- ``tests/data/msprof_constructed``: PROF folders built by ``make_msprof_constructed.py`` following
  formats.md §3 (sliced op_summary and msprof json, KB memory CSVs, step_trace, communication_statistic,
  rank_id -1 everywhere, one folder never exported) - constructed, because no public sample has them;
- ``tests/data/msprof_legacy_timeline``: real CANN 6.3/7.0 per-device, per-iteration timelines
  (MindSpore 2.1, 2 devices, iterations 1-2) from mindspore-ai/mindinsight.
"""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from helpers import analyze_here

from analyzer.store import Store

DATA = Path(__file__).resolve().parent / "data"
CANN8 = DATA / "msprof_cann8"
CONSTRUCTED = DATA / "msprof_constructed"
LEGACY = DATA / "msprof_legacy_timeline"


def us_ns(text: str) -> int:
    """Exact ns of a µs decimal string (the trailing TAB msprof writes included)."""
    return int(Decimal(text.strip()) * 1000)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def q(store: Path, sql: str) -> list[dict]:
    """Rows of a read-only query on the store the CLI wrote (in process: each `analyze query` would
    start a Python; the CLI's own query path is covered by test_store_and_cli)."""
    with Store(store).read_connection() as con:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def ingest(src: Path, tmp: Path) -> Path:
    root = tmp / src.name
    shutil.copytree(src, root)
    store = tmp / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    return store


@pytest.fixture(scope="module")
def cann8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest(CANN8, tmp_path_factory.mktemp("cann8"))


@pytest.fixture(scope="module")
def constructed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest(CONSTRUCTED, tmp_path_factory.mktemp("constructed"))


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest(LEGACY, tmp_path_factory.mktemp("legacy"))


def _out(prof: str) -> Path:
    return next(CANN8.glob(f"{prof}/mindstudio_profiler_output"))


# ---------------------------------------------------------------------------------------------
# real CANN 8 export
# ---------------------------------------------------------------------------------------------


def test_real_op_summary_lands_in_kernels_with_exact_ns(cann8: Path) -> None:
    out = _out("PROF_*")
    src = rows(next(out.glob("op_summary_*.csv")))
    cols = q(cann8, "SELECT producer, rank, rank_source, status FROM collections")
    assert cols == [{"producer": "msprof", "rank": 0, "rank_source": "single", "status": "complete"}]
    k = q(
        cann8,
        "SELECT kernel_id, name, core_type, stream_id, task_id, ts_ns, dur_ns, wait_ns, block_dim, mix_block_dim "
        "FROM kernels ORDER BY kernel_id",
    )
    assert len(k) == len(src) == 3
    for got, want in zip(k, src):
        assert got["ts_ns"] == us_ns(want["Task Start Time(us)"])  # '1780676244313289.000\t' exactly
        assert got["dur_ns"] == us_ns(want["Task Duration(us)"])
        assert got["wait_ns"] == us_ns(want["Task Wait Time(us)"])
        assert (got["name"], got["core_type"]) == (want["Op Name"], want["Task Type"])
        assert (got["stream_id"], got["task_id"], got["block_dim"], got["mix_block_dim"]) == (
            int(want["Stream ID"]),
            int(want["Task ID"]),
            int(want["Block Dim"]),
            int(want["Mix Block Dim"]),
        )
    # PMU columns -> kernel_metrics (µs columns in ns), one value per numeric cell
    pmu = [h for h in src[0] if h.startswith(("aic_", "aiv_", "aicore_", "cube_"))]
    n_cells = sum(1 for r in src for h in pmu if r[h] not in ("N/A", ""))
    assert q(cann8, "SELECT count(*) AS n FROM kernel_metrics")[0]["n"] == n_cells
    got = q(cann8, "SELECT value FROM kernel_metrics WHERE kernel_id = 0 AND metric = 'aic_mac_time_ns'")[0]["value"]
    assert got == pytest.approx(float(src[0]["aic_mac_time(us)"]) * 1000)


def test_real_statistics_and_task_time(cann8: Path) -> None:
    out = _out("PROF_*")
    op_stat = rows(next(out.glob("op_statistic_*.csv")))[0]
    st = q(
        cann8, "SELECT name, core_type, count, total_ns, max_ns, ratio_pct FROM statistics WHERE kind = 'op_statistic'"
    )
    assert st == [
        {
            "name": op_stat["OP Type"],
            "core_type": op_stat["Core Type"],
            "count": int(op_stat["Count"]),
            "total_ns": us_ns(op_stat["Total Time(us)"]),
            "max_ns": us_ns(op_stat["Max Time(us)"]),
            "ratio_pct": float(op_stat["Ratio(%)"]),
        }
    ]
    # msprof's own total is the sum of the kernels it lists
    assert q(cann8, "SELECT sum(dur_ns) AS s FROM kernels")[0]["s"] == us_ns(op_stat["Total Time(us)"])
    api = rows(next(out.glob("api_statistic_*.csv")))
    got = q(
        cann8,
        "SELECT level, name, count, total_ns, variance_ns2 FROM statistics WHERE kind = 'api_statistic' ORDER BY "
        "level, name",
    )
    assert len(got) == len(api)
    want = {(r["Level"], r["API Name"]): r for r in api}
    for g in got:
        w = want[(g["level"], g["name"])]
        assert g["total_ns"] == us_ns(w["Time(us)"]) and g["count"] == int(w["Count"])
        assert g["variance_ns2"] == pytest.approx(float(w["Variance"]) * 1e6)  # µs² -> ns²
    # no msprof json: task_time gives the device timeline (every task, one lane per stream)
    tasks = rows(next(out.glob("task_time_*.csv")))
    sl = q(cann8, "SELECT name, tid, ts_ns, dur_ns FROM slices ORDER BY ts_ns")
    assert len(sl) == len(tasks) == 7
    assert sorted(s["ts_ns"] for s in sl) == sorted(us_ns(t["task_start(us)"]) for t in tasks)
    lanes = q(cann8, "SELECT tid, lane, lane_group, n_slices FROM lanes ORDER BY tid")
    assert [(x["lane"], x["lane_group"], x["n_slices"]) for x in lanes] == [
        ("Stream 1754", "device", 4),
        ("Stream 1756", "device", 3),
    ]


# ---------------------------------------------------------------------------------------------
# constructed: slices, KB memory, ranks by (host, device), unparsed
# ---------------------------------------------------------------------------------------------


def test_ranks_ordered_by_host_and_device_and_unexported_folder(constructed: Path) -> None:
    cols = q(
        constructed,
        "SELECT root_path, rank, rank_source, device_id, hostname, status, missing FROM collections ORDER BY rank",
    )
    assert [(c["root_path"][-16:], c["rank"], c["rank_source"], c["device_id"]) for c in cols] == [
        ("BBBBBBBBBBBBBBBB", 0, "host_device_order", 0),
        ("AAAAAAAAAAAAAAAA", 1, "host_device_order", 1),
        ("CCCCCCCCCCCCCCCC", 2, "host_device_order", 2),
    ]
    assert [c["status"] for c in cols] == ["complete", "complete", "unparsed"]
    assert all(c["hostname"] == "node-a" for c in cols)
    assert any("msprof --export=on" in s for s in cols[2]["missing"])
    raw = q(constructed, "SELECT reader, status, error FROM source_files WHERE path LIKE '%CCCC%/data/%'")
    assert raw and all(r["status"] == "ignored" for r in raw)


def test_sliced_op_summary_is_one_file_in_slice_order(constructed: Path) -> None:
    prof = next(CONSTRUCTED.glob("PROF_*_BBBB*"))
    out = prof / "mindstudio_profiler_output"
    src = rows(next(out.glob("op_summary_slice_0_*.csv"))) + rows(next(out.glob("op_summary_slice_1_*.csv")))
    k = q(
        constructed,
        "SELECT kernel_id, name, is_communication, ts_ns, dur_ns, input_shapes FROM kernels WHERE rank = 0 ORDER BY "
        "kernel_id",
    )
    assert [x["kernel_id"] for x in k] == [0, 1, 2, 3]
    assert [x["name"] for x in k] == [r["Op Name"] for r in src]
    assert [x["ts_ns"] for x in k] == [us_ns(r["Task Start Time(us)"]) for r in src]
    assert sum(x["dur_ns"] for x in k) == sum(us_ns(r["Task Duration(us)"]) for r in src) == 140874
    assert [x["is_communication"] for x in k] == [False, False, True, False]
    assert k[0]["input_shapes"] == '"8,1024;1024,1024"'  # doubly quoted cell keeps its quotes
    # PMU metrics of the second slice keep their kernel ids (3, not 1); the HCCL row has none
    assert q(constructed, "SELECT DISTINCT kernel_id FROM kernel_metrics WHERE rank = 0 ORDER BY 1") == [
        {"kernel_id": 0},
        {"kernel_id": 1},
        {"kernel_id": 3},
    ]
    # the unsliced folder reads the same rows
    assert q(constructed, "SELECT count(*) AS n, sum(dur_ns) AS s FROM kernels WHERE rank = 1") == [
        {"n": 4, "s": 140874}
    ]
    # op_summary has no step column: each kernel takes the step_trace iteration whose range holds its start
    trace = rows(next(out.glob("step_trace_*.csv")))
    ranges = [
        (
            int(r["Iteration ID"]),
            us_ns(r["Iteration End(us)"]) - us_ns(r["Iteration Time(us)"]),
            us_ns(r["Iteration End(us)"]),
        )
        for r in trace
    ]
    want = [next((s for s, a, b in ranges if a <= x["ts_ns"] < b), None) for x in k]
    assert want == [1, 1, 1, 2]
    assert [x["step"] for x in q(constructed, "SELECT step FROM kernels WHERE rank = 0 ORDER BY kernel_id")] == want


def test_memory_files_are_kilobytes(constructed: Path) -> None:
    out = next(CONSTRUCTED.glob("PROF_*_BBBB*")) / "mindstudio_profiler_output"
    npu = rows(next(out.glob("npu_mem_*.csv")))
    got = q(
        constructed,
        "SELECT component, ts_ns, reserved_bytes FROM memory_samples WHERE rank = 0 AND source = 'npu_mem' ORDER BY "
        "ts_ns, component",
    )
    want = sorted(
        (
            {"APP": "APP", "device": "Device", "app": "APP"}[r["event"]],
            us_ns(r["timestamp(us)"]),
            int(r["memory(KB)"]) * 1024,
        )
        for r in npu
    )
    assert sorted((g["component"], g["ts_ns"], g["reserved_bytes"]) for g in got) == sorted(want)
    mod = q(
        constructed,
        "SELECT component, reserved_bytes FROM memory_samples WHERE rank = 0 AND source = 'npu_module_mem' ORDER BY "
        "component",
    )
    assert mod == [
        {"component": "HCCL", "reserved_bytes": round(1024.5 * 1024)},
        {"component": "RUNTIME", "reserved_bytes": None},
    ]  # -1 = unknown
    ge = q(
        constructed,
        "SELECT allocated_bytes, reserved_bytes FROM memory_samples WHERE rank = 0 AND source = 'memory_record' "
        "ORDER BY ts_ns",
    )
    assert ge == [
        {"allocated_bytes": 512 * 1024, "reserved_bytes": 2048 * 1024},
        {"allocated_bytes": round(768.25 * 1024), "reserved_bytes": 2048 * 1024},
    ]
    om = q(
        constructed,
        "SELECT name, size_bytes, alloc_ns, release_ns, duration_ns, alloc_allocated_bytes FROM operator_memory "
        "WHERE rank = 0",
    )
    r = rows(next(out.glob("operator_memory_*.csv")))[0]
    alloc = us_ns(r["Allocation Time(us)"])
    assert om == [
        {
            "name": "cann::Graph_1",
            "size_bytes": round(256.5 * 1024),
            "alloc_ns": alloc,
            "release_ns": alloc + us_ns(r["Duration(us)"]),
            "duration_ns": us_ns(r["Duration(us)"]),
            "alloc_allocated_bytes": round(768.5 * 1024),
        }
    ]


def test_timeline_steps_statistics_and_communication(constructed: Path) -> None:
    prof = next(CONSTRUCTED.glob("PROF_*_BBBB*"))
    out = prof / "mindstudio_profiler_output"
    events = []
    for p in sorted(out.glob("msprof_slice_*.json")):
        events += json.loads(p.read_text())
    xs = [e for e in events if e["ph"] in ("X", "i")]
    assert q(constructed, "SELECT count(*) AS n FROM slices WHERE rank = 0")[0]["n"] == len(xs)
    base = 1767225610000000000
    got = q(constructed, f"SELECT sum(ts_ns - {base}) AS s, sum(dur_ns) AS d FROM slices WHERE rank = 0")[0]
    assert got["s"] == sum(us_ns(e["ts"]) - base for e in xs)
    assert got["d"] == sum(round(Decimal(str(e.get("dur", 0))) * 1000) for e in xs)
    # the lanes named in the first slice hold the events of the second
    lanes = {
        (x["process"], x["lane"]): x
        for x in q(constructed, "SELECT process, lane, lane_group, n_slices FROM lanes WHERE rank = 0")
    }
    assert lanes[("Ascend Hardware", "Stream 2")]["n_slices"] == 2
    assert lanes[("Communication", "Plane 0")]["lane_group"] == "communication"
    assert lanes[("Overlap Analysis", "Computing")]["lane_group"] == "overlap"
    assert lanes[("CANN", "Thread 4321")]["lane_group"] == "host"
    ctr = q(constructed, "SELECT process, name, series, value FROM counters WHERE rank = 0 ORDER BY ts_ns, name")
    assert [(c["process"], c["series"], c["value"]) for c in ctr] == [
        ("AI Core Freq", "MHz", 1800.0),
        ("NPU MEM", "KB", 2048.0),
        ("AI Core Freq", "MHz", 1650.0),
        ("NPU MEM", "KB", 4096.0),
    ]
    st = rows(next(out.glob("step_trace_*.csv")))
    steps = q(constructed, "SELECT step, start_ns, end_ns FROM steps WHERE rank = 0 ORDER BY step")
    assert steps == [
        {
            "step": int(r["Iteration ID"]),
            "start_ns": us_ns(r["Iteration End(us)"]) - us_ns(r["Iteration Time(us)"]),
            "end_ns": us_ns(r["Iteration End(us)"]),
        }
        for r in st
    ]
    comm = q(
        constructed, "SELECT name, op_type, group_name, step, dur_ns, bytes, dtype, count FROM comm_ops WHERE rank = 0"
    )
    assert comm == [
        {
            "name": "hcom_allReduce__586_0_1",
            "op_type": "allreduce",
            "group_name": "17522688603477080586",
            "step": 1,
            "dur_ns": 55500,
            "bytes": 1024 * 4,
            "dtype": "FP32",
            "count": 1024,
        }
    ]
    cs = q(
        constructed, "SELECT name, count, total_ns FROM statistics WHERE rank = 0 AND kind = 'communication_statistic'"
    )
    assert cs == [{"name": "hcom_allReduce_", "count": 1, "total_ns": 55500}]
    why = {
        Path(r["path"]).name.split("_2026")[0]: r
        for r in q(
            constructed,
            "SELECT path, status, error FROM source_files WHERE path LIKE '%BBBB%mindstudio_profiler_output%'",
        )
    }
    assert why["task_time"]["status"] == "ignored" and "op_summary" in why["task_time"]["error"]
    assert why["msprof_tx"]["status"] == "ignored"  # a 0-byte file of a kind this version does not read


# ---------------------------------------------------------------------------------------------
# legacy CANN per-device timelines (device monotonic clock -> epoch with start_info)
# ---------------------------------------------------------------------------------------------


def test_legacy_timeline_converted_to_wall_clock(legacy: Path) -> None:
    cols = q(legacy, "SELECT root_path, rank, rank_source, device_id, steps, start_ns FROM collections ORDER BY rank")
    assert [(c["rank"], c["rank_source"], c["device_id"], c["steps"]) for c in cols] == [
        (0, "PROF_info", 0, [1, 2]),
        (1, "PROF_info", 1, [1, 2]),
    ]
    for c in cols:
        dev = c["device_id"]
        d = next(LEGACY.glob(f"PROF_*/device_{dev}"))
        start = json.loads((d / f"start_info.{dev}").read_text())
        events = []
        for p in sorted((d / "timeline").glob("msprof_*.json")):
            events += json.loads(p.read_text())
        xs = [e for e in events if e["ph"] == "X"]
        first_mono_ns = min(round(Decimal(str(e["ts"])) * 1000) for e in xs)
        expect = first_mono_ns - int(start["clockMonotonicRaw"]) + int(start["collectionTimeBegin"]) * 1000
        assert c["start_ns"] == expect
        names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
        lanes = {
            (e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"
        }
        hw = [
            e
            for e in xs
            if names.get(e["pid"]) == "Ascend Hardware"
            and "cat" not in e
            and not lanes.get((e["pid"], e["tid"]), "").startswith("Step Trace")
        ]
        comm = [
            e
            for e in xs
            if names.get(e["pid"]) == "HCCL" and not lanes.get((e["pid"], e["tid"]), "").startswith("Plane")
        ]
        k = q(legacy, f"SELECT count(*) AS n, sum(dur_ns) AS d FROM kernels WHERE rank = {c['rank']}")[0]
        assert k["n"] == len(hw) and k["d"] == sum(round(Decimal(str(e["dur"])) * 1000) for e in hw)
        assert q(legacy, f"SELECT count(*) AS n FROM comm_ops WHERE rank = {c['rank']}")[0]["n"] == len(comm) == 2
        assert q(legacy, f"SELECT count(*) AS n FROM slices WHERE rank = {c['rank']}")[0]["n"] == len(xs)
    # every kernel sits in one of the two iterations
    assert q(legacy, "SELECT count(*) AS n FROM kernels WHERE step IS NULL")[0]["n"] == 0
    ignored = q(legacy, "SELECT path, error FROM source_files WHERE path LIKE '%step_trace_%'")
    assert len(ignored) == 2 and all("msprof_" in r["error"] for r in ignored)


def test_export_folder_without_its_prof_parent_and_zero_byte_files(tmp_path: Path) -> None:
    # a mindstudio_profiler_output/ copied alone is still an msprof export
    root = tmp_path / "job"
    shutil.copytree(
        next(CONSTRUCTED.glob("PROF_*_AAAA*")) / "mindstudio_profiler_output",
        root / "node1" / "mindstudio_profiler_output",
    )
    # msprof's file naming with slices, every file 0 bytes (as in Ascend-msinsight's test data)
    empty = root / "node2" / "mindstudio_profiler_output"
    empty.mkdir(parents=True)
    for name in (
        "op_summary_slice_0_20230919172304.csv",
        "op_summary_slice_1_20230919172305.csv",
        "msprof_slice_0_20230919172304.json",
        "msprof_slice_1_20230919172305.json",
        "memory_record_20230919172305.csv",
    ):
        (empty / name).write_bytes(b"")
    store = tmp_path / "store"
    proc = analyze_here("ingest", str(root), "--store", str(store))
    assert "every file of mindstudio_profiler_output/ is empty" in proc.stdout  # the reason is printed
    cols = {c["root_path"]: c for c in q(store, "SELECT root_path, producer, status, n_rows FROM collections")}
    assert cols["node1"]["producer"] == cols["node2"]["producer"] == "msprof"
    assert cols["node1"]["status"] == "complete" and cols["node2"]["status"] == "error"
    assert q(store, "SELECT count(*) AS n FROM kernels")[0]["n"] == 4
    files = q(store, "SELECT path, status, error FROM source_files WHERE path LIKE 'node2/%'")
    assert len(files) == 5 and all(f["status"] == "ignored" and "0-byte" in f["error"] for f in files)
    # nothing at all to read: the exit code says so
    proc = analyze_here("ingest", str(root / "node2"), "--store", str(tmp_path / "store2"), check=False)
    assert proc.returncode != 0


# ---------------------------------------------------------------------------------------------
# db export (msprof --type=db) and the same reader for MindSpore's export_type=db
# ---------------------------------------------------------------------------------------------

MSPROF_DB = DATA / "msprof_db"  # a real msprof db (ascend-msinsight full_db/msprof_0.db) in a PROF folder


def sqlite_rows(db: Path, sql: str) -> list[tuple]:
    import sqlite3

    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_msprof_db_export_values_from_the_db(tmp_path: Path) -> None:
    """A PROF folder holding only msprof_{ts}.db: kernels, timeline, CANN API and the NPU_OP_MEM memory
    land in the same tables as a text export, each value as the db gives it."""
    store = ingest(MSPROF_DB, tmp_path)
    db = next(MSPROF_DB.glob("PROF_*/msprof_*.db"))
    (col,) = q(store, "SELECT producer, status, capabilities, missing FROM collections")
    assert (col["producer"], col["status"]) == ("msprof", "complete")
    assert {"kernels", "timeline", "memory", "operator_memory", "cann_api"} <= set(col["capabilities"])
    assert any("communication_analyzer.db" in s for s in col["missing"])
    assert not any("not exported" in s for s in col["missing"])
    # compute kernels: COMPUTE_TASK_INFO joined to TASK, names through STRING_IDS, exact ns
    want = sorted(
        sqlite_rows(
            db,
            "SELECT s.value, t.startNs, t.endNs - t.startNs FROM COMPUTE_TASK_INFO c "
            "JOIN TASK t USING (globalTaskId) JOIN STRING_IDS s ON s.id = c.name",
        )
    )
    got = q(store, "SELECT name, ts_ns, dur_ns FROM kernels WHERE NOT is_communication ORDER BY name, ts_ns")
    assert [(k["name"], k["ts_ns"], k["dur_ns"]) for k in got] == want and len(want) == 11
    assert sum(k["dur_ns"] for k in got) == 663872
    (n_api,) = sqlite_rows(db, "SELECT count(*) FROM CANN_API")[0]
    assert (
        q(
            store,
            "SELECT count(*) AS n FROM slices WHERE name LIKE 'AscendCL@%' OR name LIKE 'Runtime@%' "
            "OR name LIKE 'Node@%' OR name LIKE 'Model@%' OR name LIKE 'Hccl@%'",
        )[0]["n"]
        == n_api
    )
    # NPU_OP_MEM: allocator totals per event, and allocate/release pairs as operator memory blocks
    mem = sqlite_rows(db, "SELECT count(*), max(totalAllocate), max(totalReserve) FROM NPU_OP_MEM")[0]
    assert (
        tuple(
            q(store, "SELECT count(*) AS n, max(allocated_bytes) AS a, max(reserved_bytes) AS r FROM memory_samples")[
                0
            ].values()
        )
        == mem
    )
    allocs = sqlite_rows(
        db,
        "SELECT count(*), sum(size) FROM NPU_OP_MEM WHERE type = (SELECT id FROM ENUM_MEMORY WHERE name = 'allocate')",
    )[0]
    blocks = q(store, "SELECT name, size_bytes, alloc_ns, release_ns, duration_ns FROM operator_memory")
    assert (len(blocks), sum(b["size_bytes"] for b in blocks)) == allocs
    assert all(b["duration_ns"] == b["release_ns"] - b["alloc_ns"] > 0 for b in blocks if b["release_ns"] is not None)
    first = min(blocks, key=lambda b: b["alloc_ns"])
    assert (first["name"], first["size_bytes"], first["duration_ns"]) == (
        "hcom_reduceScatter__305_26_1",
        65536,
        1710490360222953520 - 1710490360222620070,
    )


def test_mindspore_db_export_with_its_communication_analyzer_db(tmp_path: Path) -> None:
    """MindSpore export_type=db writes ascend_mindspore_profiler_{rank}.db (msprof's tables) and
    communication_analyzer.db (torch_npu's analysis.db tables). No public MindSpore db exists: this
    folder is constructed from the real msprof db above and the real torch_npu analysis.db, renamed."""
    db = next(MSPROF_DB.glob("PROF_*/msprof_*.db"))
    analysis = (
        Path(__file__).resolve().parents[1]
        / "sample_data"
        / "torch_npu_db_level1"
        / "rank0_ascend_pt"
        / "ASCEND_PROFILER_OUTPUT"
        / "analysis.db"
    )
    root = tmp_path / "ms" / "node1_4242_20240315081920123_ascend_ms"
    (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copyfile(db, root / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_3.db")
    shutil.copyfile(analysis, root / "ASCEND_PROFILER_OUTPUT" / "communication_analyzer.db")
    store = tmp_path / "store"
    analyze_here("ingest", str(tmp_path / "ms"), "--store", str(store))
    (col,) = q(store, "SELECT rank, producer, status, missing FROM collections")
    assert (col["rank"], col["producer"], col["status"]) == (3, "mindspore", "complete")
    assert not any("not read by this version" in s for s in col["missing"])
    assert q(store, "SELECT count(*) AS n FROM kernels WHERE NOT is_communication")[0]["n"] == 11
    # the communication analysis: CommAnalyzerTime ops and CommAnalyzerMatrix links, units converted
    (n_ops,) = sqlite_rows(analysis, "SELECT count(*) FROM CommAnalyzerTime")[0]
    assert q(store, "SELECT count(*) AS n FROM comm_ops")[0]["n"] == n_ops
    (n_links,) = sqlite_rows(analysis, "SELECT count(*) FROM CommAnalyzerMatrix")[0]
    assert q(store, "SELECT count(*) AS n FROM comm_links")[0]["n"] == n_links > 0
    files = {r["path"].rsplit("/", 1)[-1]: r["status"] for r in q(store, "SELECT path, status FROM source_files")}
    assert files == {"ascend_mindspore_profiler_3.db": "ok", "communication_analyzer.db": "ok"}


def test_text_export_wins_over_a_db_export_of_the_same_folder(tmp_path: Path) -> None:
    """msprof --type=text on CANN >= 8 writes the db too: the text export is read, the db listed as
    the same data (not read twice)."""
    root = tmp_path / "cann8"
    shutil.copytree(CANN8, root)
    prof = next(root.glob("PROF_*"))
    shutil.copyfile(next(MSPROF_DB.glob("PROF_*/msprof_*.db")), prof / "msprof_20260605161737.db")
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    src = rows(next(prof.glob("mindstudio_profiler_output/op_summary_*.csv")))
    assert q(store, "SELECT count(*) AS n FROM kernels")[0]["n"] == len(src)
    (db,) = q(store, "SELECT status, error FROM source_files WHERE path LIKE '%.db'")
    assert db["status"] == "ignored" and "same data as the text export" in db["error"]


def test_db_copied_without_its_prof_folder(tmp_path: Path) -> None:
    """msprof_{ts}.db on its own (copied out of PROF_*, as in MindStudio Insight's test data) is
    still an msprof collection, read the same way."""
    loose = tmp_path / "job" / "node3"
    loose.mkdir(parents=True)
    shutil.copyfile(next(MSPROF_DB.glob("PROF_*/msprof_*.db")), loose / "msprof_20240315081920.db")
    (loose / "notes.txt").write_text("not profiler data")
    store = tmp_path / "store"
    analyze_here("ingest", str(tmp_path / "job"), "--store", str(store))
    (col,) = q(store, "SELECT producer, status, root_path FROM collections")
    assert (col["producer"], col["status"], col["root_path"]) == ("msprof", "complete", "node3")
    assert q(store, "SELECT count(*) AS n, sum(dur_ns) AS s FROM kernels WHERE NOT is_communication") == [
        {"n": 11, "s": 663872}
    ]
    files = {r["path"].rsplit("/", 1)[-1]: r["status"] for r in q(store, "SELECT path, status FROM source_files")}
    assert files == {"msprof_20240315081920.db": "ok", "notes.txt": "ignored"}
