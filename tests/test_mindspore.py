"""MindSpore outputs through the real CLI, values checked against the source files.

Real MindSpore 2.10 CPU runs (``sample_data/mindspore_cpu_2rank``: 2 ranks with msrun, graph mode;
``tests/data/mindspore_cpu_windows``: DynamicProfilerMonitor, two windows; ``mindspore_cpu_abnormal``:
jobs that died), the legacy flat files of a real MindSpore 1.x AlexNet run
(``mindspore_legacy_alexnet``, from mindspore-ai/mindinsight), and an Ascend-layout ``*_ascend_ms``
CONSTRUCTED by ``make_mindspore_npu_constructed.py`` (no public sample exists).
"""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from helpers import REPO, analyze_here

from analyzer.store import Store

DATA = Path(__file__).resolve().parent / "data"
TWO_RANKS = REPO / "sample_data" / "mindspore_cpu_2rank"
WINDOWS = DATA / "mindspore_cpu_windows"
ABNORMAL = DATA / "mindspore_cpu_abnormal"
LEGACY = DATA / "mindspore_legacy_alexnet"
NPU = DATA / "mindspore_npu_constructed"


def us_ns(v: str | float) -> int:
    return int(Decimal(str(v).strip()) * 1000)


def ms_ns(v: str) -> int:
    return int(Decimal(v.strip()) * 1_000_000)


def q(store: Path, sql: str) -> list[dict]:
    """Rows of a read-only query on the store the CLI wrote (in process: each `analyze query` would
    start a Python; the CLI's own query path is covered by test_store_and_cli)."""
    with Store(store).read_connection() as con:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def ingest(src: Path, tmp: Path) -> tuple[Path, Path]:
    root = tmp / src.name
    shutil.copytree(src, root)
    store = tmp / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    return root, store


def cpu_ops(trace: Path) -> list[dict]:
    events = json.loads(trace.read_text())
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    return [e for e in events if e["ph"] == "X" and procs[e["pid"]] == "CPU OP"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return ingest(TWO_RANKS, tmp_path_factory.mktemp("ms2"))


def test_two_ranks_from_the_framework_file_suffix(two_ranks: tuple[Path, Path]) -> None:
    root, store = two_ranks
    cols = q(store, "SELECT root_path, rank, rank_source, producer, status, missing FROM collections ORDER BY rank")
    by_rank = {}
    for d in root.glob("*_ascend_ms"):
        suffix = {p.name.rsplit("_", 1)[1].split(".")[0] for p in (d / "FRAMEWORK").iterdir()}
        by_rank[int(suffix.pop())] = d.name
    assert [(c["rank"], c["root_path"], c["rank_source"], c["producer"], c["status"]) for c in cols] == [
        (r, by_rank[r], "framework_suffix", "mindspore", "complete") for r in (0, 1)
    ]
    assert all(any(s.startswith("CPU-only profile") for s in c["missing"]) for c in cols)


def test_cpu_ops_match_trace_view_exactly(two_ranks: tuple[Path, Path]) -> None:
    root, store = two_ranks
    for d in sorted(root.glob("*_ascend_ms")):
        trace = d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        ops = cpu_ops(trace)
        events = json.loads(trace.read_text())
        rank = q(store, f"SELECT rank FROM collections WHERE root_path = '{d.name}'")[0]["rank"]
        got = q(
            store,
            f"SELECT count(*) AS n, sum(dur_ns) AS d, sum(self_ns) AS s, min(ts_ns) AS t0, "
            f"count(*) FILTER (WHERE category = 'CPU OP') AS c FROM operators WHERE rank = {rank}",
        )[0]
        assert got["n"] == got["c"] == len(ops)
        assert got["d"] == sum(us_ns(e["dur"]) for e in ops)  # dur strings '2.584' -> 2584 ns exactly
        assert got["s"] == got["d"]  # graph-mode CPU ops do not nest
        assert got["t0"] == min(us_ns(e["ts"]) for e in ops)
        assert q(store, f"SELECT count(*) AS n FROM slices WHERE rank = {rank}")[0]["n"] == sum(
            1 for e in events if e["ph"] == "X"
        )
        lanes = q(
            store,
            f"SELECT process, lane_group, sum(n_slices) AS n FROM lanes WHERE rank = {rank} GROUP BY ALL ORDER BY "
            "process",
        )
        assert [(x["process"], x["lane_group"]) for x in lanes] == [("CPU OP", "host"), ("Scope Layer", "host")]
        # collectives run as CPU ops on this backend: they are the communication time
        comm = [e for e in ops if e["name"].rsplit("/", 1)[-1].startswith("AllReduce-op")]
        c = q(store, f"SELECT count(*) AS n, sum(dur_ns) AS d, min(op_type) AS t FROM comm_ops WHERE rank = {rank}")[0]
        assert (c["n"], c["d"], c["t"]) == (len(comm), sum(us_ns(e["dur"]) for e in comm), "allreduce")


def test_framework_memory_and_statistics(two_ranks: tuple[Path, Path]) -> None:
    root, store = two_ranks
    for d in sorted(root.glob("*_ascend_ms")):
        mem = next((d / "FRAMEWORK").glob("cpu_ms_memory_record_*.txt"))
        r = int(mem.stem.rsplit("_", 1)[1])
        with open(mem, newline="") as f:
            src = list(csv.DictReader(f))
        got = q(
            store,
            f"SELECT count(*) AS n, max(allocated_bytes) AS a, max(reserved_bytes) AS rsv, min(ts_ns) AS t0, "
            f"min(component) AS comp, min(device) AS dev FROM memory_samples WHERE rank = {r}",
        )[0]
        assert got["n"] == len(src)
        assert got["a"] == max(int(x["Total Allocated(Byte)"]) for x in src)  # bytes and ns as written
        assert got["rsv"] == max(int(x["Total Reserved(Byte)"]) for x in src)
        assert got["t0"] == min(int(x["Timestamp(ns)"]) for x in src)
        assert (got["comp"], got["dev"]) == ("MindSpore", "CPU")
        types = next((d / "FRAMEWORK").glob("cpu_op_type_info_*.csv"))
        with open(types, newline="") as f:
            want = {x["op_type"]: x for x in csv.DictReader(f)}
        st = q(
            store, f"SELECT name, count, total_ns, ratio_pct FROM statistics WHERE rank = {r} AND kind = 'cpu_op_type'"
        )
        assert {s["name"] for s in st} == set(want)
        for s in st:
            w = want[s["name"]]
            assert s["count"] == int(w["type_occurrences"]) and s["total_ns"] == ms_ns(w["total_compute_time"])
            assert s["ratio_pct"] == pytest.approx(float(w["percent"]) * 100)
        # the framework's own per-type total agrees with the trace to the µs (it rounds to 6 significant digits)
        ar = q(store, f"SELECT sum(dur_ns) AS d FROM comm_ops WHERE rank = {r}")[0]["d"]
        assert abs(ar - ms_ns(want["AllReduce"]["total_compute_time"])) < 1000


def test_dynamic_windows_are_separate_collections(tmp_path: Path) -> None:
    root, store = ingest(WINDOWS, tmp_path)
    cols = q(
        store, "SELECT collection_id, root_path, rank, rank_source, meta, missing FROM collections ORDER BY root_path"
    )
    assert len(cols) == 2 and len({c["collection_id"] for c in cols}) == 2
    assert [(c["rank"], c["rank_source"]) for c in cols] == [(0, "window_dir"), (0, "window_dir")]
    windows = sorted(
        (json.loads(c["meta"])["dynamic_window"]["start_step"], json.loads(c["meta"])["dynamic_window"]["stop_step"])
        for c in cols
    )
    assert windows == [(8, 11), (20, 22)]
    for c in cols:
        trace = root / c["root_path"] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        ops = cpu_ops(trace)
        got = q(
            store, f"SELECT count(*) AS n, sum(dur_ns) AS d FROM operators WHERE collection_id = '{c['collection_id']}'"
        )[0]
        assert (got["n"], got["d"]) == (len(ops), sum(us_ns(e["dur"]) for e in ops))
        w = json.loads(c["meta"])["dynamic_window"]
        assert any(f"steps {w['start_step']}-{w['stop_step']}" in s for s in c["missing"])
    # the two windows do not overlap in time: nothing was merged
    spans = q(store, "SELECT min(ts_ns) AS a, max(ts_ns) AS b FROM operators GROUP BY collection_id ORDER BY a")
    assert spans[0]["b"] < spans[1]["a"]


def test_abnormal_exits_are_partial_or_unparsed_not_errors(tmp_path: Path) -> None:
    root = tmp_path / "abnormal"
    shutil.copytree(ABNORMAL, root)
    store = tmp_path / "store"
    proc = analyze_here("ingest", str(root), "--store", str(store))
    assert proc.returncode == 0
    cols = {
        c["root_path"].split("/")[0]: c
        for c in q(store, "SELECT root_path, status, missing, collection_id FROM collections")
    }
    assert {k: v["status"] for k, v in cols.items()} == {
        "06_raise_Profiler": "partial",
        "06_kill_profile": "unparsed",
        "06b_raise_in_with": "complete",
    }
    assert any("exited before the profiler stopped" in s for s in cols["06_kill_profile"]["missing"])
    assert any("not analysed" in s and "FRAMEWORK" in s for s in cols["06_raise_Profiler"]["missing"])
    assert q(store, "SELECT count(*) AS n FROM source_files WHERE status = 'error'")[0]["n"] == 0
    # the raised job stopped the profiler but never analysed: its ops come from the raw timestamps file
    ts_file = next(root.glob("06_raise_Profiler/*/FRAMEWORK/cpu_op_execute_timestamp_*.txt"))
    records = []
    for line in ts_file.read_text().splitlines():
        name, _typ, recs = line.split(";")[:3]
        for rec in recs.split():
            start, dur, _tid = rec.split(",")
            records.append((name, int(start), ms_ns(dur)))
    cid = cols["06_raise_Profiler"]["collection_id"]
    got = q(
        store, f"SELECT count(*) AS n, sum(dur_ns) AS d, min(ts_ns) AS t0 FROM operators WHERE collection_id = '{cid}'"
    )[0]
    assert (got["n"], got["d"], got["t0"]) == (len(records), sum(r[2] for r in records), min(r[1] for r in records))
    # 06b raised inside `with profile()`: the profiler analysed on exit, but wrote no memory file
    cid = cols["06b_raise_in_with"]["collection_id"]
    assert q(store, f"SELECT count(*) AS n FROM memory_samples WHERE collection_id = '{cid}'")[0]["n"] == 0
    assert any("no memory records" in s for s in cols["06b_raise_in_with"]["missing"])


def test_legacy_flat_files(tmp_path: Path) -> None:
    root, store = ingest(LEGACY, tmp_path)
    prof = root / "profiler"
    cols = q(store, "SELECT rank, rank_source, producer, steps, status FROM collections")
    assert cols == [
        {"rank": 1, "rank_source": "file_suffix", "producer": "mindspore_legacy", "steps": [1], "status": "complete"}
    ]
    lines = (prof / "output_timeline_data_1.txt").read_text().splitlines()
    assert lines[0].startswith("op_name, stream_id, start_time(ms), duration(ms)")
    tl = [ln.split(",") for ln in lines[1:] if ln.strip()]
    with open(prof / "aicpu_intermediate_1.csv", newline="") as f:
        aicpu = list(csv.DictReader(f))
    with open(prof / "framework_raw_1.csv", newline="") as f:
        fw = {r["full_op_name"]: r for r in csv.DictReader(f)}
    k = q(
        store,
        "SELECT core_type, count(*) AS n, sum(dur_ns) AS d, min(ts_ns) AS t0 FROM kernels GROUP BY core_type ORDER "
        "BY core_type",
    )
    assert k == [
        {"core_type": "AI_CORE", "n": len(tl), "d": sum(ms_ns(r[3]) for r in tl), "t0": min(ms_ns(r[2]) for r in tl)},
        {
            "core_type": "AI_CPU",
            "n": len(aicpu),
            "d": sum(us_ns(r["run_end"]) - us_ns(r["run_start"]) for r in aicpu),
            "t0": min(us_ns(r["run_start"]) for r in aicpu),
        },
    ]
    # op type, task id and block dim joined from framework_raw by full op name
    one = q(
        store,
        "SELECT name, op_type, task_id, block_dim, input_shapes FROM kernels WHERE name = 'Default/TransData-op118'",
    )[0]
    w = fw["Default/TransData-op118"]
    assert (one["op_type"], one["task_id"], one["block_dim"]) == (w["op_type"], int(w["task_id"]), int(w["block_dim"]))
    assert one["input_shapes"] == json.loads(w["op_info"])["input_0"]["shape"]
    # step_trace_raw is in 100 MHz system-counter ticks: 10 ns each
    with open(prof / "step_trace_raw_1_detail_time.csv", newline="") as f:
        step = next(csv.DictReader(f))
    s = q(store, "SELECT step, start_ns, end_ns FROM steps")
    assert s == [{"step": 1, "start_ns": int(step["start_point"]) * 10, "end_ns": int(step["end_point"]) * 10}]
    with open(prof / "aicore_intermediate_1_type.csv", newline="") as f:
        types = list(csv.DictReader(f))
    st = q(store, "SELECT name, count, total_ns FROM statistics WHERE kind = 'op_statistic' ORDER BY name")
    assert st == sorted(
        (
            {"name": t["op_type"], "count": int(t["execution_frequency"]), "total_ns": ms_ns(t["execution_time"])}
            for t in types
        ),
        key=lambda x: x["name"],
    )
    ign = {
        Path(r["path"]).name: r["error"]
        for r in q(store, "SELECT path, error FROM source_files WHERE status = 'ignored'")
    }
    assert "ascend_timeline_display_1.json" in ign and "output_timeline_data" in ign["ascend_timeline_display_1.json"]
    assert "step_trace_point_info.json" in ign and "minddata_pipeline_raw_1.csv" in ign


def test_legacy_display_without_output_timeline_data(tmp_path: Path) -> None:
    """Without output_timeline_data the device and AI CPU ops come from ascend_timeline_display (a
    Chrome trace, read column by column): every X event once, its name the fullname of its args,
    its op type from its args, task id and block dim from framework_raw, its stream its tid."""
    src = tmp_path / "without_txt" / LEGACY.name
    shutil.copytree(LEGACY, src)
    (src / "profiler" / "output_timeline_data_1.txt").unlink()
    root, store = ingest(src, tmp_path)
    trace = json.loads((root / "profiler" / "ascend_timeline_display_1.json").read_text())
    events = [e for e in trace if e["ph"] == "X"]
    with open(root / "profiler" / "framework_raw_1.csv", newline="") as f:
        fw = {r["full_op_name"]: r for r in csv.DictReader(f)}
    got = q(store, "SELECT name, op_type, stream_id, task_id, block_dim, ts_ns, dur_ns, core_type FROM kernels")
    want = []
    for e in events:
        a = e.get("args", {})
        w = fw.get(a.get("fullname", ""), {})
        want.append(
            {
                "name": a.get("fullname") or e["name"],
                "op_type": a.get("type") or w.get("op_type"),
                "stream_id": int(e["tid"]) if str(e["tid"]).isdigit() else None,
                "task_id": int(w["task_id"]) if w else None,
                "block_dim": int(w["block_dim"]) if w else None,
                "ts_ns": round(e["ts"] * 1000),
                "dur_ns": round(e["dur"] * 1000),
                "core_type": "AI_CORE" if str(e["pid"]) == "1" else "AI_CPU",
            }
        )
    key = lambda r: (r["core_type"], r["ts_ns"], r["name"])  # noqa: E731
    device = [r for r in want if r["core_type"] == "AI_CORE"]
    assert sorted((r for r in got if r["core_type"] == "AI_CORE"), key=key) == sorted(device, key=key)
    # the AI CPU ops of the display (pid 9000) are there too, beside aicpu_intermediate's rows
    got_keys = [key(r) for r in got]
    assert all(key(r) in got_keys for r in want if r["core_type"] == "AI_CPU")
    assert any(r["task_id"] is not None for r in device) and len(device) < len(want)
    lanes = q(store, "SELECT pid, tid, n_slices FROM lanes ORDER BY pid, tid")
    assert sum(r["n_slices"] for r in lanes) == len(got)  # a slice per device task, on its stream's lane


def test_ascend_layout_read_by_the_torch_npu_reader(tmp_path: Path) -> None:
    root, store = ingest(NPU, tmp_path)
    cols = q(
        store,
        "SELECT rank, rank_source, level, producer_version, device_id, steps, config FROM collections ORDER BY rank",
    )
    assert [
        (c["rank"], c["rank_source"], c["level"], c["producer_version"], c["device_id"], c["steps"]) for c in cols
    ] == [
        (0, "profiler_info", "Level1", "MindSpore 2.7.0; CANN 8.0.RC3", 0, [3]),
        (1, "profiler_info", "Level1", "MindSpore 2.7.0; CANN 8.0.RC3", 1, [3]),
    ]
    assert json.loads(cols[0]["config"])["profiler_parameters"]["activities"] == ["CPU", "NPU"]
    trace = json.loads(next(root.glob("*4000*/ASCEND_PROFILER_OUTPUT/trace_view.json")).read_text())
    ms_pid = next(e["pid"] for e in trace if e["ph"] == "M" and e["args"].get("name") == "MindSpore")
    fw = [e for e in trace if e["ph"] == "X" and e["pid"] == ms_pid]
    ops = q(store, "SELECT name, category, depth, dur_ns, self_ns, step FROM operators WHERE rank = 0 ORDER BY ts_ns")
    assert [o["name"] for o in ops] == [e["name"] for e in sorted(fw, key=lambda e: e["ts"])]
    assert {o["category"] for o in ops} == {"MindSpore"} and {o["step"] for o in ops} == {3}
    dense = next(o for o in ops if o["name"] == "Dense")
    assert (dense["depth"], dense["dur_ns"], dense["self_ns"]) == (1, 300500, 300500 - 100250)  # MatMul nested in it
    k = q(store, "SELECT name, step, dur_ns, is_communication FROM kernels WHERE rank = 0 ORDER BY ts_ns")
    assert k == [
        {"name": "MatMul_kernel", "step": 3, "dur_ns": 80500, "is_communication": False},
        {"name": "hcom_allReduce__101_0_1", "step": 3, "dur_ns": 35250, "is_communication": True},
    ]  # 'Step ID'
    c = q(store, "SELECT name, bytes, dtype, step FROM comm_ops WHERE rank = 0")
    assert c == [{"name": "hcom_allReduce__101_0_1", "bytes": 512 * 2, "dtype": "FP16", "step": 3}]
    st = q(store, "SELECT step, computing_ns, preparing_ns FROM step_trace WHERE rank = 0")
    assert st == [{"step": 3, "computing_ns": 80500, "preparing_ns": 60000}]
    groups = {x["process"]: x["lane_group"] for x in q(store, "SELECT DISTINCT process, lane_group FROM lanes")}
    assert groups == {
        "MindSpore": "host",
        "Scope Layer": "host",
        "CANN": "host",
        "Ascend Hardware": "device",
        "HCCL": "communication",
    }


def test_mindspore_24_profiler_folder_and_unfinished_parse(tmp_path: Path) -> None:
    # MindSpore 2.3/2.4: profiler/ holds rank-{r}_*_ascend_ms next to the legacy flat *_{r} files of the
    # same rank (read the folder, list the flat copy as ignored); the rank comes from the folder name
    root = tmp_path / "job"
    prof = root / "profiler"
    shutil.copytree(LEGACY / "profiler", prof)
    ms = prof / "rank-1_20260101000140100_ascend_ms"
    shutil.copytree(next(NPU.glob("*4001*")), ms)
    (ms / "profiler_info_1.json").rename(ms / "profiler_info.json")  # keep the schema, drop the rank from the name
    info = json.loads((ms / "profiler_info.json").read_text())
    info["ms_profiler_info"] = {}
    (ms / "profiler_info.json").write_text(json.dumps(info))
    # a MindSpore 2.5 folder whose parse stopped before ASCEND_PROFILER_OUTPUT: the PROF_* export is read
    unfinished = root / "host_77_20260101000200000_ascend_ms"
    unfinished.mkdir()
    shutil.copytree(
        next((DATA / "msprof_constructed").glob("PROF_*_AAAA*")),
        unfinished / "PROF_000001_20260101000000200_AAAAAAAAAAAAAAAA",
    )
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    cols = {
        c["root_path"]: c
        for c in q(store, "SELECT root_path, rank, rank_source, producer, status, missing FROM collections")
    }
    assert set(cols) == {"profiler/rank-1_20260101000140100_ascend_ms", "host_77_20260101000200000_ascend_ms"}
    c = cols["profiler/rank-1_20260101000140100_ascend_ms"]
    assert (c["rank"], c["rank_source"], c["producer"], c["status"]) == (1, "rank_dir_name", "mindspore", "complete")
    flat = q(
        store,
        "SELECT path, status, error FROM source_files WHERE path LIKE 'profiler/%' AND path NOT LIKE "
        "'profiler/rank-1_%'",
    )
    assert flat and all(f["status"] == "ignored" for f in flat)
    assert any("output_timeline_data_1.txt" in f["path"] and "ascend_ms folder next to it" in f["error"] for f in flat)
    u = cols["host_77_20260101000200000_ascend_ms"]
    assert u["status"] == "partial" and any("PROF_*/mindstudio_profiler_output" in s for s in u["missing"])
    got = q(
        store,
        "SELECT count(*) AS n, sum(dur_ns) AS d FROM kernels k JOIN collections c USING (collection_id) "
        "WHERE c.root_path = 'host_77_20260101000200000_ascend_ms'",
    )
    assert got == [{"n": 4, "d": 140874}]  # the op_summary rows of that PROF folder
