"""torch_npu bad input: every problem recorded against its file with a clear reason, the other files
of the collection (and the other collections) still ingested. One run, one defect family per rank,
made from the Level1 samples."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, analyze

from analyzer.messages import translate_problems
from analyzer.store import Store

TEXT = REPO / "sample_data" / "torch_npu_text_level1" / "rank0_ascend_pt"
DB = REPO / "sample_data" / "torch_npu_db_level1" / "rank0_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def _copy(src: Path, root: Path, rank: int, db: bool = False) -> Path:
    """A copy of rank 0's folder that says it is ``rank`` (profiler_info name and rank_id, db name)."""
    dst = root / f"host_{rank}_20250109160000000_ascend_pt"
    shutil.copytree(src, dst)
    info = json.loads((dst / "profiler_info_0.json").read_text())
    info["rank_id"] = rank
    (dst / "profiler_info_0.json").unlink()
    (dst / f"profiler_info_{rank}.json").write_text(json.dumps(info))
    if db:
        (dst / OUT / "ascend_pytorch_profiler_0.db").rename(dst / OUT / f"ascend_pytorch_profiler_{rank}.db")
    return dst / OUT


def _cut_mid_row(path: Path) -> None:
    data = path.read_bytes()
    last_row = data.rstrip(b"\r\n").rfind(b"\n") + 1
    path.write_bytes(data[: last_row + (len(data) - last_row) // 2])


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Store, str]:
    tmp = tmp_path_factory.mktemp("npu_bad")
    root = tmp / "job"
    _copy(TEXT, root, 0)  # reference, untouched
    # 1: LF line ends (also inside the multi-line Call Stack cells) and a UTF-8 BOM
    o = _copy(TEXT, root, 1)
    for name in ("kernel_details.csv", "operator_details.csv", "memory_record.csv"):
        data = (o / name).read_bytes().replace(b"\r\n", b"\n")
        (o / name).write_bytes(b"\xef\xbb\xbf" + data)
    # 2: a CSV and the trace cut mid-write
    o = _copy(TEXT, root, 2)
    _cut_mid_row(o / "kernel_details.csv")
    tv = (o / "trace_view.json").read_bytes()
    (o / "trace_view.json").write_bytes(tv[: int(len(tv) * 0.6)])
    # 3: header-only, empty and unreadable files
    o = _copy(TEXT, root, 3)
    header = (o / "l2_cache.csv").read_bytes().splitlines(keepends=True)[0]
    (o / "l2_cache.csv").write_bytes(header)
    (o / "operator_memory.csv").write_bytes(b"")
    (o / "step_trace_time.csv").unlink()
    os.symlink(tmp / "gone.csv", o / "step_trace_time.csv")
    # 4: files that are not what their names say
    o = _copy(TEXT, root, 4)
    shutil.copy(o / "memory_record.csv", o / "kernel_details.csv")
    (o / "communication.json").write_bytes((o / "op_statistic.csv").read_bytes())
    (o / "communication_matrix.json").write_text("[]")
    # 5: a corrupt profiler db (cut in half), analysis.db fine
    o = _copy(DB, root, 5, db=True)
    d = (o / "ascend_pytorch_profiler_5.db").read_bytes()
    (o / "ascend_pytorch_profiler_5.db").write_bytes(d[: len(d) // 2])
    # 6: a profiler db that is a text file, an analysis.db of random bytes
    o = _copy(DB, root, 6, db=True)
    (o / "ascend_pytorch_profiler_6.db").write_text("Step Id,Name\n50,x\n")
    (o / "analysis.db").write_bytes(os.urandom(4096))
    store = tmp / "store"
    proc = analyze("ingest", str(root), "--store", str(store))
    return root, Store(store), proc.stdout


def f_of(store: Store, rank: int, name: str) -> dict[str, Any]:
    rows = store.query(
        f"SELECT path, status, error, rows FROM source_files WHERE path LIKE 'host_{rank}_%' AND path LIKE '%/{name}'"
    ).to_dict("records")
    assert len(rows) == 1, (rank, name, rows)
    return rows[0]


def count(store: Store, table: str, rank: int) -> int:
    return int(store.query(f"SELECT count(*) AS n FROM {table} WHERE rank = {rank}").iloc[0]["n"])


def test_everything_valid_is_ingested(ingested: tuple[Path, Store, str]) -> None:
    _root, store, stdout = ingested
    status = dict(store.query("SELECT rank, status FROM collections").itertuples(index=False))
    assert status == {0: "complete", 1: "complete", 2: "partial", 3: "partial", 4: "partial", 5: "partial", 6: "error"}
    # problems are named with file and reason in the ingest output
    assert "host_2_20250109160000000_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv: file ends mid-row" in stdout
    assert (
        "host_6_20250109160000000_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_6.db: not a SQLite database"
        in stdout
    )


def test_crlf_lf_and_bom_read_alike(ingested: tuple[Path, Store, str]) -> None:
    _root, store, _ = ingested
    for name in ("kernel_details.csv", "operator_details.csv", "memory_record.csv"):
        assert f_of(store, 1, name)["status"] == "ok"
    for sql in (
        "SELECT rank, count(*), sum(dur_ns), sum(ts_ns - 1736408883000000000), count(input_shapes) FROM kernels "
        "GROUP BY rank",
        "SELECT rank, count(device_self_ns), sum(device_total_ns) FROM operators GROUP BY rank",
        "SELECT rank, count(*), sum(reserved_bytes) FROM memory_samples GROUP BY rank",
    ):
        got = {r[0]: r[1:] for r in store.query(sql).itertuples(index=False)}
        assert got[1] == got[0], sql


def test_cut_files(ingested: tuple[Path, Store, str]) -> None:
    _root, store, _ = ingested
    kd = f_of(store, 2, "kernel_details.csv")
    assert kd["status"] == "warning" and "file ends mid-row" in kd["error"] and "dropped it" in kd["error"]
    assert count(store, "kernels", 2) == count(store, "kernels", 0) - 1
    tv = f_of(store, 2, "trace_view.json")
    assert tv["status"] == "warning" and "unterminated JSON array" in tv["error"]
    assert 0 < count(store, "slices", 2) < count(store, "slices", 0)
    assert count(store, "memory_samples", 2) == count(store, "memory_samples", 0)  # other files untouched
    assert count(store, "comm_ops", 2) == 4


def test_empty_header_only_and_unreadable(ingested: tuple[Path, Store, str]) -> None:
    _root, store, _ = ingested
    l2 = f_of(store, 3, "l2_cache.csv")
    assert l2["status"] == "warning" and "header only" in l2["error"]
    om = f_of(store, 3, "operator_memory.csv")
    assert om["status"] == "error" and om["error"].startswith("empty file (0 bytes)")
    stt = f_of(store, 3, "step_trace_time.csv")
    assert stt["status"] == "error" and stt["error"].startswith("cannot read step_trace_time.csv")
    assert count(store, "operator_memory", 3) == 0 and count(store, "step_trace", 3) == 0
    assert count(store, "kernels", 3) == count(store, "kernels", 0)


def test_files_that_are_not_what_their_name_says(ingested: tuple[Path, Store, str]) -> None:
    _root, store, _ = ingested
    kd = f_of(store, 4, "kernel_details.csv")
    assert kd["status"] == "error"
    assert kd["error"].startswith("not a kernel_details.csv: the header lacks Name, Start Time(us), Duration(us)")
    assert "expected columns Name, Start Time(us), Duration(us); found Component, Timestamp(us)" in kd["error"]
    cj = f_of(store, 4, "communication.json")
    assert cj["status"] == "error" and cj["error"].startswith("not valid JSON (communication.json)")
    cm = f_of(store, 4, "communication_matrix.json")
    assert cm["status"] == "error" and "not a communication_matrix.json" in cm["error"]
    assert count(store, "kernels", 4) == 0 and count(store, "comm_links", 4) == 0
    assert count(store, "memory_samples", 4) == count(store, "memory_samples", 0)
    assert count(store, "operators", 4) == count(store, "operators", 0)
    # communication still comes from the trace's HCCL lane, without the wait/transit split
    ops = store.query("SELECT * FROM comm_ops WHERE rank = 4").to_dict("records")
    assert len(ops) == 4 and all(o["wait_ns"] is None for o in ops)


def test_corrupt_and_foreign_sqlite(ingested: tuple[Path, Store, str]) -> None:
    _root, store, _ = ingested
    db5 = f_of(store, 5, "ascend_pytorch_profiler_5.db")
    # cut in half: its schema is damaged; what SQLite still finds is read, the damage said in its words
    assert db5["status"] == "warning", db5
    assert "the db's schema is damaged (database disk image is malformed)" in db5["error"]
    assert "TASK: table unreadable (database disk image is malformed); skipped" in db5["error"]
    zh = translate_problems(db5["error"], "zh")  # SQLite's words too (problem.sqlite.*)
    assert "db 的 schema 已损坏（数据库磁盘映像已损坏）" in zh, zh
    assert "TASK：表无法读取（数据库磁盘映像已损坏）；已跳过" in zh, zh
    assert "malformed" not in zh, zh
    assert f_of(store, 5, "analysis.db")["status"] == "ok"
    ops = store.query("SELECT * FROM comm_ops WHERE rank = 5").to_dict("records")
    assert len(ops) == 4 and all(o["source"] == "analysis.db" and o["wait_ns"] is not None for o in ops)
    assert count(store, "comm_links", 5) > 0 and count(store, "step_trace", 5) == 1
    db6 = f_of(store, 6, "ascend_pytorch_profiler_6.db")
    assert db6["status"] == "error" and "not a SQLite database" in db6["error"]
    an6 = f_of(store, 6, "analysis.db")
    assert an6["status"] == "error" and "not a SQLite database" in an6["error"]


def test_csv_chunks_read_like_one_table(tmp_path: Path) -> None:
    """iter_csv in small chunks gives the rows read_csv gives, cut last row included."""
    from analyzer.readers.ascend.kernels import KERNEL_COLS
    from analyzer.readers.common.csvfile import iter_csv, read_csv

    src = tmp_path / "kernel_details.csv"
    shutil.copy(TEXT / OUT / "kernel_details.csv", src)
    _cut_mid_row(src)
    whole = read_csv(src, "kernel_details.csv", KERNEL_COLS, keep_extra=True)
    chunks = list(iter_csv(src, "kernel_details.csv", KERNEL_COLS, keep_extra=True, chunk_rows=7))
    assert [c.first_row for c in chunks] == list(range(0, whole.n_rows + 1, 7))[: len(chunks)]
    assert sum(c.n_rows for c in chunks) == whole.n_rows == 190
    assert [v for c in chunks for v in c.ns_from_us("start")] == whole.ns_from_us("start")
    assert [v for c in chunks for v in c.extra["aic_mac_ratio"]] == whole.extra["aic_mac_ratio"]
    assert chunks[-1].warnings == whole.warnings and "file ends mid-row" in whole.warnings[0]
    # sentinels: Model ID 4294967295 (single-op mode) and N/A read as "no value"
    assert set(whole.ints("model")) == {None} and whole.get("model")[0] == "4294967295"
    hcom = [i for i, n in enumerate(whole.text("name")) if n.startswith("hcom_")]
    assert hcom and all(whole.ints("task")[i] is None and whole.get("task")[i] == "N/A" for i in hcom)
