"""torch_npu Level0 / Level2 excerpts, the older 2023 text export and a raw (never parsed) folder:
the right capabilities, missing sentences and values, through the real CLI."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, analyze_here

from analyzer.store import Store

DATA = REPO / "tests" / "data"
OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("levels") / "store"
    runs = [DATA / f"torch_npu_{k}_{lv}" for k in ("text", "db") for lv in ("level0", "level2")]
    analyze_here("ingest", *map(str, runs), str(DATA / "torch_npu_text_2023"), "--store", str(path))
    return Store(path)


def q(store: Store, sql: str) -> list[dict[str, Any]]:
    return store.query(sql).to_dict("records")


def collection(store: Store, run: str) -> dict[str, Any]:
    rows = q(store, f"SELECT * FROM collections WHERE run = '{run}' ORDER BY rank")
    row = rows[0]
    row["capabilities"] = set(row["capabilities"])
    row["missing"] = list(row["missing"])
    return row


@pytest.mark.parametrize("export", ["text", "db"])
def test_level0(store: Store, export: str) -> None:
    run = f"torch_npu_{export}_level0"
    c = collection(store, run)
    assert c["level"] == "Level0" and c["status"] == "complete" and c["rank"] == 0
    assert (
        "Level0: no communication matrix and no wait/transit split (communication.json and "
        "communication_matrix.json are written from Level1)" in c["missing"]
    )
    assert any(m.startswith("Level0: kernels have no op type") for m in c["missing"])
    assert {"kernels", "communication", "steps"} <= c["capabilities"]
    assert "comm_matrix" not in c["capabilities"] and "runtime_api" not in c["capabilities"]
    k = q(
        store,
        f"SELECT is_communication, count(*) AS n, count(op_type) AS typed FROM kernels WHERE run = '{run}' GROUP BY "
        "ALL",
    )
    by = {r["is_communication"]: r for r in k}
    assert by[False]["n"] == 187 and by[True]["n"] == 4
    assert by[False]["typed"] == 0  # Type = N/A at Level0
    assert q(store, f"SELECT count(*) AS n FROM kernel_metrics WHERE run = '{run}' AND metric LIKE 'aic%'")[0]["n"] == 0
    ops = q(store, f"SELECT * FROM comm_ops WHERE run = '{run}'")
    assert len(ops) == 4 and all(o["wait_ns"] is None and o["transit_ns"] is None for o in ops)
    assert q(store, f"SELECT count(*) AS n FROM comm_links WHERE run = '{run}'")[0]["n"] == 0


def test_level0_text_values(store: Store) -> None:
    with open(DATA / "torch_npu_text_level0" / "rank0_ascend_pt" / OUT / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    got = q(
        store,
        "SELECT name, ts_ns, dur_ns, core_type, step FROM kernels WHERE run = 'torch_npu_text_level0' ORDER BY "
        "kernel_id",
    )
    assert [g["name"] for g in got] == [r["Name"] for r in rows]
    assert got[0]["ts_ns"] == int(rows[0]["Start Time(us)"].strip().replace(".", ""))
    assert {g["step"] for g in got} == {50}
    # HCCL ops: from kernel_details (exact start), with dtype/count from the trace's HCCL lane
    ops = q(store, "SELECT * FROM comm_ops WHERE run = 'torch_npu_text_level0' ORDER BY ts_ns")
    hcom = [r for r in rows if r["Name"].startswith("hcom_")]
    assert [o["name"] for o in ops] == [r["Name"] for r in hcom]
    assert all(o["dtype"] == "FP32" and o["bytes"] == 4 * o["count"] for o in ops)


@pytest.mark.parametrize("export", ["text", "db"])
def test_level2(store: Store, export: str) -> None:
    run = f"torch_npu_{export}_level2"
    c = collection(store, run)
    assert c["level"] == "Level2" and c["status"] == "complete"
    assert {"runtime_api", "cann_api", "communication", "kernels"} <= c["capabilities"]
    assert not any(m.startswith(("Level0", "Level1")) for m in c["missing"])
    ops = q(store, f"SELECT * FROM comm_ops WHERE run = '{run}'")
    assert len(ops) == 4 and all(o["wait_ns"] is not None and o["group_name"] for o in ops)
    k = q(store, f"SELECT is_communication, count(*) AS n FROM kernels WHERE run = '{run}' GROUP BY ALL")
    assert {r["is_communication"]: r["n"] for r in k} == {False: 187, True: 4}
    runtime = q(store, f"SELECT count(*) AS n FROM slices WHERE run = '{run}' AND name LIKE 'Runtime@%'")[0]["n"]
    assert runtime > 0


def test_2023_text_export(store: Store) -> None:
    """Older column layout: no OP State, no Total Active, timestamps without a TAB and with fewer decimals,
    durations with 4 decimals, matrix keyed by op name; a malformed upstream row is skipped with a warning."""
    root = DATA / "torch_npu_text_2023" / "rank0_ascend_pt" / OUT
    files = {r["path"]: r for r in q(store, "SELECT * FROM source_files WHERE run = 'torch_npu_text_2023'")}
    kd = files["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"]
    assert kd["status"] == "warning" and "cell count different from the header" in kd["error"]
    with open(root / "kernel_details.csv", newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    got = q(store, "SELECT * FROM kernels WHERE run = 'torch_npu_text_2023' AND rank = 0 ORDER BY kernel_id")
    assert len(got) == len(body)
    i_start, i_dur = header.index("Start Time(us)"), header.index("Duration(us)")
    hcom = next(r for r in body if r[4].startswith("hcom_"))
    g = next(x for x in got if x["name"] == hcom[4])
    assert hcom[i_start] == "1695115378715400.2" and g["ts_ns"] == 1695115378715400200
    assert hcom[i_dur] == "4975.2664" and g["dur_ns"] == 4975266  # 4 decimals: rounded to the ns
    assert all(x["op_state"] is None for x in got)
    assert (
        q(
            store,
            "SELECT count(*) AS n FROM kernel_metrics WHERE run = 'torch_npu_text_2023' AND metric LIKE "
            "'%_bw_bytes_per_s'",
        )[0]["n"]
        > 0
    )
    mem = q(
        store,
        "SELECT * FROM memory_samples WHERE run = 'torch_npu_text_2023' AND rank = 0 AND source = 'memory_record'",
    )
    assert mem and all(m["active_bytes"] is None for m in mem)
    comm = json.loads((root / "communication.json").read_text())
    p2p = [k.split("@")[0] for step in comm.values() for k in step["p2p"] if k != "Total Op Info"]
    ops = q(store, "SELECT * FROM comm_ops WHERE run = 'torch_npu_text_2023' AND rank = 0")
    assert p2p and {o["name"] for o in ops if o["is_p2p"]} == set(p2p)
    links = q(store, "SELECT * FROM comm_links WHERE run = 'torch_npu_text_2023' AND rank = 0 AND is_p2p")
    assert links and all(lk["op_name"] == lk["op_key"] for lk in links)
    assert {o["step"] for o in ops} == {2}


def test_raw_folder_is_unparsed(tmp_path: Path) -> None:
    root = tmp_path / "job"
    raw = root / "rank_3" / "node1_4242_20250101120000000_ascend_pt"
    (raw / "FRAMEWORK").mkdir(parents=True)
    (raw / "FRAMEWORK" / "torch.op_range.4242").write_bytes(b"\x01\x00\x02\x00TLV")
    prof = raw / "PROF_000001_20250101120000000_ABCDEFGHIJKLMNOP" / "device_0" / "data"
    prof.mkdir(parents=True)
    (prof / "task_track.data.0.slice_0").write_bytes(b"\x00" * 64)
    shutil.copytree(
        DATA / "torch_npu_text_level0" / "rank0_ascend_pt", root / "rank_0" / "node0_1_20250101120000000_ascend_pt"
    )
    store = tmp_path / "store"
    out = analyze_here("ingest", str(root), "--store", str(store))
    assert out.returncode == 0
    st = Store(store)
    cols = {r["rank"]: r for r in st.query("SELECT * FROM collections").to_dict("records")}
    assert (
        cols[3]["status"] == "unparsed"
        and cols[3]["producer"] == "torch_npu_raw"
        and cols[3]["rank_source"] == "rank_dir"
    )
    missing = " ".join(cols[3]["missing"])
    assert (
        "not parsed" in missing and "torch_npu.profiler.profiler.analyse" in missing and "no profiler_info" in missing
    )
    assert cols[0]["status"] == "complete"
    files = st.query("SELECT path, status, error FROM source_files WHERE path LIKE 'rank_3/%'").to_dict("records")
    assert len(files) == 2 and all(f["status"] == "ignored" and "not parsed" in f["error"] for f in files)


def test_parallel_group_info_gives_every_global_rank(tmp_path: Path) -> None:
    """profiler_metadata.json's parallel_group_info, keyed by HCCL group id, is found from the op keys'
    @hash (msprof-analyze's double_hash) and maps every group-local rank to its global rank."""
    from analyzer.readers.ascend.groups import double_hash

    src = REPO / "sample_data" / "torch_npu_text_level1"
    root = tmp_path / "job"
    shutil.copytree(src, root)
    group_id = "10.0.0.1%eth0_60000_0_1736408800000000"
    old = "17522688603477080586"  # the sample's group hash
    new = double_hash(group_id)
    global_ranks = [0, 1, 8, 9, 16, 17, 24, 25]
    for rank in (0, 1):
        d = root / f"rank{rank}_ascend_pt"
        for name in ("communication.json", "communication_matrix.json"):
            p = d / OUT / name
            p.write_text(p.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
        meta = json.loads((d / "profiler_metadata.json").read_text())
        meta["parallel_group_info"] = {group_id: {"group_name": "dp", "group_rank": rank, "global_ranks": global_ranks}}
        (d / "profiler_metadata.json").write_text(json.dumps(meta))
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    st = Store(store)
    groups = st.query("SELECT * FROM comm_groups ORDER BY rank").to_dict("records")
    assert [
        (g["rank"], g["group_name"], g["group_id"], g["pg_name"], list(g["global_ranks"]), g["local_rank"], g["source"])
        for g in groups
    ] == [(r, new, group_id, "dp", global_ranks, r, "parallel_group_info") for r in (0, 1)]
    links = st.query(
        "SELECT src_local, dst_local, src_rank, dst_rank FROM comm_links WHERE rank = 0 AND op_key = 'allreduce-top1'"
    )
    assert sorted(map(tuple, links.itertuples(index=False))) == [(0, i, 0, global_ranks[i]) for i in range(8)]
    ops = st.query("SELECT group_name, group_ranks FROM comm_ops WHERE rank = 1").to_dict("records")
    assert len(ops) == 4 and all(o["group_name"] == new and list(o["group_ranks"]) == global_ranks for o in ops)
