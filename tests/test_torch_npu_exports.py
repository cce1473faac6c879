"""torch_npu Level1 text and db exports (sample_data/torch_npu_{text,db}_level1, 2 ranks each),
ingested by the real CLI: each export's values against its own source files, then what must agree
between the two exports (they are two different runs of one job: other timestamps and durations)."""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, analyze_here

from analyzer.readers.ascend.groups import double_hash
from analyzer.store import Store

TEXT = REPO / "sample_data" / "torch_npu_text_level1"
DB = REPO / "sample_data" / "torch_npu_db_level1"
OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("npu") / "store"
    proc = analyze_here("ingest", str(TEXT), str(DB), "--store", str(path))
    assert proc.stdout.count(" 0 file problem(s)") == 2, proc.stdout
    return Store(path)


def q(store: Store, sql: str) -> list[dict[str, Any]]:
    return store.query(sql).to_dict("records")


def us_ns(text: str) -> int:
    """Oracle: an exact µs decimal string ('1736408883704643.212\\t') to ns, through Decimal."""
    return int((Decimal(text.strip().strip('"').strip()) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def text_file(rank: int, name: str) -> Path:
    return TEXT / f"rank{rank}_ascend_pt" / OUT / name


def sqlite_rows(rank: int, sql: str, db: str | None = None) -> list[tuple[Any, ...]]:
    path = DB / f"rank{rank}_ascend_pt" / OUT / (db or f"ascend_pytorch_profiler_{rank}.db")
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# -- text export against its files --------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, 1])
def test_text_kernels_match_kernel_details(store: Store, rank: int) -> None:
    rows = csv_rows(text_file(rank, "kernel_details.csv"))
    got = q(store, f"SELECT * FROM kernels WHERE run = 'torch_npu_text_level1' AND rank = {rank} ORDER BY kernel_id")
    assert len(got) == len(rows) == 191
    assert sum(1 for k in got if k["is_communication"]) == 4
    assert sum(1 for k in got if not k["is_communication"]) == 187
    # exact ns: the sum of durations and every start, from the µs strings
    assert sum(k["dur_ns"] for k in got) == sum(us_ns(r["Duration(us)"]) for r in rows)
    assert [k["ts_ns"] for k in got] == [us_ns(r["Start Time(us)"]) for r in rows]
    # a float64 round trip would not give these: 16+3 digits
    assert got[0]["ts_ns"] % 1000 == int(rows[0]["Start Time(us)"].strip().split(".")[1][:3])
    assert {k["step"] for k in got} == {50}
    conv = next(k for k in got if k["name"] == "Conv2D1")
    src = next(r for r in rows if r["Name"] == "Conv2D1")
    assert conv["input_shapes"] == src["Input Shapes"]  # tripled quotes in the file: the value keeps its quotes
    assert conv["input_shapes"].startswith('"') and conv["block_dim"] == int(src["Block Dim"])
    hcom = [k for k in got if k["is_communication"]]
    assert all(k["stream_id"] is None and k["task_id"] is None for k in hcom)  # N/A
    assert all(k["core_type"] == "HCCL" for k in hcom)


def test_text_kernel_metrics(store: Store) -> None:
    rows = csv_rows(text_file(0, "kernel_details.csv"))
    idx = next(i for i, r in enumerate(rows) if r["Name"] == "Conv2D1")
    got = {
        r["metric"]: r["value"]
        for r in q(
            store,
            "SELECT metric, value FROM kernel_metrics WHERE run = 'torch_npu_text_level1' AND rank = 0 AND "
            f"kernel_id = {idx}",
        )
    }
    assert got["aic_mac_ratio"] == float(rows[idx]["aic_mac_ratio"])
    assert got["aic_total_time_ns"] == pytest.approx(float(rows[idx]["aicore_time(us)"]) * 1000)
    assert got["aic_mac_time_ns"] == pytest.approx(float(rows[idx]["aic_mac_time(us)"]) * 1000)
    assert got["cube_utilization_pct"] == float(rows[idx]["cube_utilization(%)"])
    # l2_cache.csv joined by stream and task id
    l2 = next(r for r in csv_rows(text_file(0, "l2_cache.csv")) if r["Op Name"] == "Conv2D1")
    assert (l2["Stream Id"], l2["Task Id"]) == (rows[idx]["Stream ID"], rows[idx]["Task ID"])
    assert got["l2_victim_rate"] == float(l2["Victim Rate"])
    assert "l2_hit_rate" not in got  # N/A in the file


@pytest.mark.parametrize("rank", [0, 1])
def test_text_steps_operators_and_device_time(store: Store, rank: int) -> None:
    events = json.loads(text_file(rank, "trace_view.json").read_text(encoding="utf-8"))
    step = next(e for e in events if e.get("name", "").startswith("ProfilerStep#"))
    got = q(store, f"SELECT * FROM steps WHERE run = 'torch_npu_text_level1' AND rank = {rank}")
    assert [(s["step"], s["start_ns"]) for s in got] == [(50, us_ns(step["ts"]))]
    ops = q(store, f"SELECT * FROM operators WHERE run = 'torch_npu_text_level1' AND rank = {rank}")
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert len(ops) == len(cpu_ops)
    assert all(o["self_ns"] <= o["dur_ns"] for o in ops)
    assert {o["step"] for o in ops} == {50}
    # operator_details.csv device times attached to the matching trace op
    details = csv_rows(text_file(rank, "operator_details.csv"))
    assert len(details) == len(cpu_ops) - 1  # ProfilerStep is not in operator_details
    with_dev = [o for o in ops if o["device_self_ns"] is not None]
    assert len(with_dev) == len(details)
    assert sum(o["device_self_ns"] for o in with_dev) == sum(us_ns(r["Device Self Duration(us)"]) for r in details)
    ps = next(o for o in ops if o["name"].startswith("ProfilerStep#"))
    assert ps["device_self_ns"] is None and ps["depth"] == 0


@pytest.mark.parametrize("rank", [0, 1])
def test_text_communication(store: Store, rank: int) -> None:
    comm = json.loads(text_file(rank, "communication.json").read_text(encoding="utf-8"))["step50"]["collective"]
    kernels = {r["Name"]: r for r in csv_rows(text_file(rank, "kernel_details.csv")) if r["Name"].startswith("hcom_")}
    got = q(store, f"SELECT * FROM comm_ops WHERE run = 'torch_npu_text_level1' AND rank = {rank} ORDER BY ts_ns")
    assert len(got) == 4
    for op in got:
        key = f"{op['name']}@{op['group_name']}"
        info = comm[key]["Communication Time Info"]
        assert op["wait_ns"] == round(info["Wait Time(ms)"] * 1e6)
        assert op["transit_ns"] == round(info["Transit Time(ms)"] * 1e6)
        assert op["idle_ns"] == round(info["Idle Time(ms)"] * 1e6)
        assert op["ts_ns"] == us_ns(kernels[op["name"]]["Start Time(us)"])
        assert op["op_type"] == "allreduce" and op["step"] == 50 and op["dtype"] == "FP32"
        assert op["bytes"] == op["count"] * 4
    bw = q(store, f"SELECT * FROM comm_bandwidth WHERE run = 'torch_npu_text_level1' AND rank = {rank}")
    first = comm[f"{got[0]['name']}@{got[0]['group_name']}"]["Communication Bandwidth Info"]["HCCS"]
    rows = [b for b in bw if b["op_name"] == got[0]["name"] and b["transport"] == "HCCS"]
    summary = next(b for b in rows if b["packet_size_bytes"] is None)
    assert summary["bytes"] == round(first["Transit Size(MB)"] * 1e6)  # decimal MB in communication files
    buckets = {b["packet_size_bytes"]: b["packet_count"] for b in rows if b["packet_size_bytes"] is not None}
    assert buckets == {round(float(k) * 1e6): v[0] for k, v in first["Size Distribution"].items()}
    # the unit, checked against another file: each packet size is the size(Byte) of HCCL tasks in the trace
    task_sizes = {
        e["args"]["size(Byte)"]
        for e in json.loads(text_file(rank, "trace_view.json").read_text(encoding="utf-8"))
        if isinstance(e.get("args"), dict) and "size(Byte)" in e["args"]
    }
    assert set(buckets) <= task_sizes
    assert not any(b["op_name"] == "Total Op Info" for b in bw)


def test_text_comm_links_have_global_ranks(store: Store) -> None:
    links = q(store, "SELECT * FROM comm_links WHERE run = 'torch_npu_text_level1' AND op_key = 'allreduce-top1'")
    by = {(r["rank"], r["src_local"], r["dst_local"]): r for r in links}
    # group-local ranks as written; global ranks from each rank's i-i self-link (no parallel_group_info)
    assert by[(0, 0, 0)]["transport"] == "LOCAL" and by[(0, 0, 0)]["dst_rank"] == 0
    assert by[(0, 0, 1)]["src_rank"] == 0 and by[(0, 0, 1)]["dst_rank"] == 1
    assert by[(1, 1, 0)]["src_rank"] == 1 and by[(1, 1, 0)]["dst_rank"] == 0
    assert by[(0, 0, 5)]["dst_rank"] is None  # local rank 5 of the 8-card group was not profiled
    matrix = json.loads(text_file(0, "communication_matrix.json").read_text(encoding="utf-8"))
    link = matrix["step50"]["collective"][f"allreduce-top1@{by[(0, 0, 1)]['group_name']}"]["0-1"]
    assert by[(0, 0, 1)]["bytes"] == round(link["Transit Size(MB)"] * 1e6)
    assert by[(0, 0, 1)]["op_name"] == link["Op Name"]
    groups = q(
        store,
        "SELECT rank, local_rank, global_ranks FROM comm_groups WHERE run = 'torch_npu_text_level1' ORDER BY rank",
    )
    assert [(g["rank"], g["local_rank"]) for g in groups] == [(0, 0), (1, 1)]


def test_text_memory_and_step_trace(store: Store) -> None:
    rows = csv_rows(text_file(0, "memory_record.csv"))
    mem = q(
        store,
        "SELECT * FROM memory_samples WHERE run = 'torch_npu_text_level1' AND rank = 0 AND source = 'memory_record' "
        "ORDER BY ts_ns",
    )
    assert len(mem) == len(rows)
    pta = next(r for r in rows if r["Component"] == "PTA")
    got = next(m for m in mem if m["component"] == "PTA" and m["ts_ns"] == us_ns(pta["Timestamp(us)"]))
    assert got["allocated_bytes"] == round(float(pta["Total Allocated(MB)"]) * 1024 * 1024)  # MB = 1024^2 bytes
    assert got["reserved_bytes"] == round(float(pta["Total Reserved(MB)"]) * 1024 * 1024)
    mod = csv_rows(text_file(0, "npu_module_mem.csv"))
    n_mod = q(
        store,
        "SELECT count(*) AS n FROM memory_samples WHERE run = 'torch_npu_text_level1' AND rank = 0 AND source = "
        "'npu_module_mem'",
    )
    assert n_mod[0]["n"] == len(mod)
    om = csv_rows(text_file(0, "operator_memory.csv"))
    got_om = q(store, "SELECT * FROM operator_memory WHERE run = 'torch_npu_text_level1' AND rank = 0")
    assert len(got_om) == len(om)
    assert sum(r["size_bytes"] for r in got_om) == sum(round(float(r["Size(KB)"]) * 1024) for r in om)
    st = csv_rows(text_file(0, "step_trace_time.csv"))[0]
    got_st = q(store, "SELECT * FROM step_trace WHERE run = 'torch_npu_text_level1' AND rank = 0")[0]
    assert got_st["step"] == 50 and got_st["computing_ns"] == us_ns(st["Computing"])
    assert got_st["comm_not_overlapped_ns"] == us_ns(st["Communication(Not Overlapped)"])
    assert got_st["preparing_ns"] == us_ns(st["Preparing"])


def test_text_collection_meta(store: Store) -> None:
    cols = q(store, "SELECT * FROM collections WHERE run = 'torch_npu_text_level1' ORDER BY rank")
    assert [(c["rank"], c["rank_source"], c["level"], c["status"]) for c in cols] == [
        (0, "profiler_info", "Level1", "complete"),
        (1, "profiler_info", "Level1", "complete"),
    ]
    caps = set(cols[0]["capabilities"])
    assert {
        "operators",
        "kernels",
        "kernel_metrics",
        "communication",
        "comm_matrix",
        "memory",
        "stacks",
        "shapes",
        "steps",
        "step_trace",
        "l2_cache",
        "cann_api",
    } <= caps
    assert "runtime_api" not in caps
    assert "Level1: no Runtime API events (recorded at Level2 only)" in list(cols[0]["missing"])
    config = json.loads(cols[0]["config"])
    assert config["experimental_config"]["_profiler_level"] == "Level1"
    meta = json.loads(cols[0]["meta"])
    assert "ASCEND_GLOBAL_LOG_LEVEL" in meta["env_variables"]
    lanes = q(store, "SELECT DISTINCT process, lane_group FROM lanes WHERE run = 'torch_npu_text_level1'")
    assert {(r["process"], r["lane_group"]) for r in lanes} >= {
        ("Python", "host"),
        ("CANN", "host"),
        ("Ascend Hardware", "device"),
        ("HCCL", "communication"),
        ("Overlap Analysis", "overlap"),
    }


# -- db export against its tables -----------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, 1])
def test_db_kernels_operators_steps(store: Store, rank: int) -> None:
    run = "torch_npu_db_level1"
    compute = sqlite_rows(rank, "SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)")
    comm = sqlite_rows(rank, "SELECT startNs, endNs FROM COMMUNICATION_OP")
    got = q(store, f"SELECT * FROM kernels WHERE run = '{run}' AND rank = {rank}")
    assert sum(1 for k in got if not k["is_communication"]) == len(compute) == 187
    assert sum(1 for k in got if k["is_communication"]) == len(comm) == 4
    assert sum(k["dur_ns"] for k in got if not k["is_communication"]) == sum(e - s for s, e in compute)
    assert sorted(k["ts_ns"] for k in got if k["is_communication"]) == sorted(s for s, _e in comm)
    steps = sqlite_rows(rank, "SELECT id, startNs, endNs FROM STEP_TIME")
    assert [
        (s["step"], s["start_ns"], s["end_ns"])
        for s in q(store, f"SELECT * FROM steps WHERE run = '{run}' AND rank = {rank}")
    ] == steps
    # PYTORCH_API times are TEXT: exact integers
    api = sqlite_rows(
        rank, "SELECT startNs FROM PYTORCH_API p JOIN ENUM_API_TYPE e ON e.id = p.type WHERE e.name = 'op'"
    )
    ops = q(store, f"SELECT ts_ns FROM operators WHERE run = '{run}' AND rank = {rank}")
    assert sorted(o["ts_ns"] for o in ops) == sorted(int(s) for (s,) in api)
    pmu = sqlite_rows(rank, "SELECT count(*) FROM TASK_PMU_INFO")[0][0]
    n_metrics = q(store, f"SELECT count(*) AS n FROM kernel_metrics WHERE run = '{run}' AND rank = {rank}")[0]["n"]
    assert n_metrics == pmu


@pytest.mark.parametrize("rank", [0, 1])
def test_db_communication_and_memory(store: Store, rank: int) -> None:
    run = "torch_npu_db_level1"
    times = {
        n: (g, wt, tr)
        for n, g, wt, tr in sqlite_rows(
            rank, "SELECT hccl_op_name, group_name, wait_time, transit_time FROM CommAnalyzerTime", "analysis.db"
        )
    }
    group_id = sqlite_rows(
        rank, "SELECT s.value FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.groupName LIMIT 1"
    )[0][0]
    got = q(store, f"SELECT * FROM comm_ops WHERE run = '{run}' AND rank = {rank}")
    assert len(got) == 4
    for op in got:
        g, wt, tr = times[op["name"]]
        assert op["group_name"] == g == double_hash(group_id)  # the raw HCCL group id hashes to analysis.db's key
        assert op["wait_ns"] == round(float(wt) * 1e6) and op["transit_ns"] == round(float(tr) * 1e6)
    groups = q(store, f"SELECT * FROM comm_groups WHERE run = '{run}' AND rank = {rank}")
    assert [(g["group_name"], g["group_id"], g["local_rank"]) for g in groups] == [
        (double_hash(group_id), group_id, rank)
    ]
    mem = sqlite_rows(rank, "SELECT timestamp, totalAllocated, totalReserved FROM MEMORY_RECORD")
    got_mem = q(
        store,
        f"SELECT ts_ns, allocated_bytes, reserved_bytes FROM memory_samples WHERE run = '{run}' AND rank = {rank} "
        "AND source = 'MEMORY_RECORD'",
    )
    assert sorted((m["ts_ns"], m["allocated_bytes"], m["reserved_bytes"]) for m in got_mem) == sorted(mem)
    links = q(
        store,
        f"SELECT * FROM comm_links WHERE run = '{run}' AND rank = {rank} AND src_local <> dst_local AND dst_local < 2",
    )
    assert links and all(lk["dst_rank"] == lk["dst_local"] and lk["src_rank"] == rank for lk in links)


# -- what must agree between the two exports ------------------------------------------------------


def test_text_and_db_fill_the_same_tables(store: Store) -> None:
    rows = q(store, "SELECT run, table_name, sum(rows) AS n FROM fact_files GROUP BY run, table_name")
    tables = {
        run: {r["table_name"] for r in rows if r["run"] == run and r["n"] > 0}
        for run in ("torch_npu_text_level1", "torch_npu_db_level1")
    }
    assert tables["torch_npu_text_level1"] == tables["torch_npu_db_level1"]
    assert {
        "slices",
        "lanes",
        "operators",
        "steps",
        "kernels",
        "kernel_metrics",
        "comm_ops",
        "comm_bandwidth",
        "comm_links",
        "comm_groups",
        "memory_samples",
        "operator_memory",
        "step_trace",
        "statistics",
        "counters",
    } <= tables["torch_npu_db_level1"]


def _per_run(store: Store, sql: str) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in q(store, sql):
        out.setdefault(r.pop("run"), []).append(tuple(r.values()))
    return {k: sorted(v, key=str) for k, v in out.items()}


def test_text_and_db_agree_on_counts_and_kinds(store: Store) -> None:
    same = [
        "SELECT run, rank, core_type, is_communication, count(*) FROM kernels GROUP BY ALL",
        # op names carry a per-run group counter (hcom_allReduce__586_0_1 vs __210_0_1): compare the rest
        "SELECT run, rank, op_type, is_p2p, dtype, count, bytes, step FROM comm_ops",
        "SELECT run, rank, step FROM steps",
        "SELECT run, rank, name, count(*) FROM operators GROUP BY ALL",
        "SELECT run, rank, step, op_key, src_local, dst_local, src_rank, dst_rank, transport FROM comm_links",
        "SELECT run, rank, transport, packet_size_bytes IS NULL, count(*) FROM comm_bandwidth GROUP BY ALL",
        # allocator records per component (the same program allocates the same way); periodic samples
        # (APP, driver modules) differ by a tick between runs; CANN names module 74 'AML' in the CSV, 'AMP' in the db
        "SELECT run, rank, component, count(*) FROM memory_samples WHERE component IN ('PTA', 'GE', 'PTA+GE') GROUP "
        "BY ALL",
        "SELECT run, rank, count(DISTINCT component) FROM memory_samples GROUP BY ALL",
        "SELECT run, rank, name, core_type, count FROM statistics WHERE kind = 'op_statistic'",
        "SELECT run, rank, local_rank FROM comm_groups",
        # (Python threads differ between runs; OVERLAP_ANALYSIS is in the rank 0 db only, added by MindStudio Insight)
        "SELECT run, rank, process, lane_group, count(*) FROM lanes WHERE process NOT IN ('Python', 'Overlap "
        "Analysis') GROUP BY ALL",
        # same capabilities, except l2_cache: the db export has no l2_cache table
        "SELECT run, rank, level, status, array_to_string(list_sort(list_filter(capabilities, lambda c: c <> "
        "'l2_cache')), ',') FROM collections",
    ]
    for sql in same:
        got = _per_run(store, sql)
        assert got["torch_npu_text_level1"] == got["torch_npu_db_level1"], sql


def test_bandwidth_units_agree_with_bytes_and_time(store: Store) -> None:
    # Ascend "GB/s" is decimal MB per ms: stored bytes/s must equal stored bytes / transit time
    rows = q(
        store,
        "SELECT run, bytes, transit_ns, bandwidth_bytes_per_s FROM comm_bandwidth "
        "WHERE packet_size_bytes IS NULL AND transit_ns > 0 AND bytes > 0",
    )
    assert {r["run"] for r in rows} == {"torch_npu_text_level1", "torch_npu_db_level1"}
    for r in rows:
        assert r["bandwidth_bytes_per_s"] == pytest.approx(r["bytes"] / r["transit_ns"] * 1e9, rel=2e-3), r
    links = q(
        store, "SELECT bytes, transit_ns, bandwidth_bytes_per_s FROM comm_links WHERE transit_ns > 0 AND bytes > 0"
    )
    assert links
    for r in links:
        assert r["bandwidth_bytes_per_s"] == pytest.approx(r["bytes"] / r["transit_ns"] * 1e9, rel=2e-3), r


def test_trace_view_json_on_its_own(tmp_path: Path) -> None:
    """A torch_npu trace_view.json without its *_ascend_pt folder (msprof-analyze's advisor test
    trace, byte-exact) is read by the text reader: every complete event a slice, the Python cpu_op
    events operators, ProfilerStep#1 a step; any other bare Chrome event array goes to the Kineto reader."""
    src = REPO / "tests" / "data" / "torch_npu_trace_view_alone" / "trace_view.json"
    events = json.loads(src.read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    job = tmp_path / "job"
    job.mkdir()
    (job / "trace_view.json").write_bytes(src.read_bytes())
    (job / "other_trace.json").write_text(
        json.dumps(
            [{"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0, "cat": "cpu_op", "args": {}}]
        )
    )
    path = tmp_path / "store"
    analyze_here("ingest", str(job), "--store", str(path))
    st = Store(path)
    cols = {c["root_path"]: c for c in q(st, "SELECT root_path, producer, status, missing FROM collections")}
    assert {k: v["producer"] for k, v in cols.items()} == {
        "trace_view.json": "torch_npu_text",
        "other_trace.json": "kineto",
    }
    assert any("found on its own" in s for s in cols["trace_view.json"]["missing"])
    (tv,) = [c["rank"] for c in q(st, "SELECT rank FROM collections WHERE producer = 'torch_npu_text'")]
    n = lambda sql: q(st, sql)[0]["n"]  # noqa: E731
    assert n(f"SELECT count(*) AS n FROM slices WHERE rank = {tv}") == len(complete)
    cpu_ops = [e for e in complete if names[e["pid"]] == "Python" and e.get("cat") == "cpu_op"]
    assert n(f"SELECT count(*) AS n FROM operators WHERE rank = {tv}") == len(cpu_ops) == 711
    assert q(st, f"SELECT step FROM steps WHERE rank = {tv}") == [{"step": 1}]
    groups = {
        r["process"]: r["lane_group"]
        for r in q(st, f"SELECT DISTINCT process, lane_group FROM lanes WHERE rank = {tv}")
    }
    assert groups == {"Python": "host", "CANN": "host", "Ascend Hardware": "device", "Overlap Analysis": "overlap"}
    # no kernel_details.csv: the kernels are the Ascend Hardware tasks, exact ns, in step 1
    hw = [e for e in complete if names[e["pid"]] == "Ascend Hardware"]
    k = q(st, f"SELECT count(*) AS n, sum(dur_ns) AS s, count(step) AS with_step FROM kernels WHERE rank = {tv}")[0]
    assert (k["n"], k["with_step"]) == (len(hw), len(hw)) == (276, 276)
    # durations are float µs; 34 of them carry half a ns (x.xxx5 µs), each rounded to a whole ns
    exact = sum(Decimal(repr(e["dur"])) * 1000 for e in hw)
    half_ns = [e for e in hw if len(repr(e["dur"]).split(".")[-1]) > 3]
    assert len(half_ns) == 34 and abs(k["s"] - exact) <= Decimal("0.5") * len(half_ns)
    assert any("taken from trace_view.json's Ascend Hardware lanes" in s for s in cols["trace_view.json"]["missing"])
    # so the step breakdown runs on the device, and agrees with the trace's own Overlap Analysis lanes
    from analyzer.analyses import step_breakdown

    (b,) = step_breakdown(st, "job").to_dict("records")
    overlap = {
        n: sum(
            Decimal(str(e["dur"])) * 1000 for e in complete if names[e["pid"]] == "Overlap Analysis" and e["name"] == n
        )
        for n in ("Computing", "Free")
    }
    assert b["mode"] == "device" and b["step"] == 1
    assert abs(b["computing_ns"] - float(overlap["Computing"])) / float(overlap["Computing"]) < 0.01  # 0.12 %
    assert abs(b["free_ns"] - float(overlap["Free"])) / float(overlap["Free"]) < 0.01  # 0.02 %
