"""No input crashes an ingest: file names that are not UTF-8, JSON nested too deep, folders and files
the process may not read (real permissions, as another user's files), run names a terminal or a file
system would choke on. Each problem is a row of ``source_files`` with the reason; the rest is ingested."""

from __future__ import annotations

import ctypes
import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ANALYZE, REPO, analyze_here, analyze_here_json, query

from analyzer.errors import InputError, RunNameError
from analyzer.ingest import ingest
from analyzer.messages import translate_problems
from analyzer.readers.chrome import stream
from analyzer.readers.chrome.stream import TraceStream
from analyzer.readers.common.opener import RATIO_AFTER_BYTES, open_input
from analyzer.store import Store, slug

SAMPLES = REPO / "sample_data"
DATA = REPO / "tests" / "data"


def _problems(store: Path) -> dict[str, tuple[str, str]]:
    rows = query(store, "SELECT path, status, error FROM source_files WHERE status IN ('warning', 'error')")
    return {r["path"]: (r["status"], r["error"]) for r in rows}


def test_file_and_folder_names_that_are_not_utf8(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in the run folder's name, a rank folder's name and a stray file's name:
    every file is read (the path opens the real file) and shown with the bytes as \\xNN."""
    root = Path(os.fsdecode(bytes(tmp_path) + b"/job\xff"))
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", root / "rank_0")
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_1", root / os.fsdecode(b"rank_1\xfe"))
    (root / os.fsdecode(b"notes\xe9.json")).write_bytes(b"{}")
    cut = b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}, {"ph": "X", "na'
    (root / os.fsdecode(b"cut\xc3.pt.trace.json")).write_bytes(cut)
    store = Store(tmp_path / "store")
    report = ingest(root, store, workers=1)
    assert report.run == "job\\xff" and report.root.endswith("/job\\xff")
    assert {r.plan.rel_root: r.status for r in report.read} == {
        "rank_0/rankscope_scalars.jsonl": "complete",
        "rank_0/window_step2": "complete",
        "rank_1\\xfe/rankscope_scalars.jsonl": "complete",
        "rank_1\\xfe/window_step2": "complete",
        "cut\\xc3.pt.trace.json": "partial",
    }
    paths = {
        r["path"]: r for r in store.query("SELECT path, status, error, sha256 FROM source_files").to_dict("records")
    }
    assert paths["notes\\xe9.json"]["status"] == "ignored"
    assert paths["cut\\xc3.pt.trace.json"]["status"] == "warning"
    assert paths["rank_1\\xfe/window_step2/rank1_step000002.pt.trace.json"]["sha256"] is not None
    assert store.query("SELECT root_path FROM runs")["root_path"][0].endswith("/job\\xff")
    again = ingest(root, store, workers=1)  # same names, same store text: nothing is read again
    assert again.read == [] and len(again.unchanged) == 5
    out = analyze_here("runs", "--store", str(store.path)).stdout
    assert "job\\xff" in out and "cut\\xc3.pt.trace.json" in out


def test_json_nested_deeper_than_the_decoder_goes(tmp_path: Path) -> None:
    """``[[[[...`` 100 000 levels deep in every small JSON file discovery or a reader looks at (a
    collector sidecar, torch_npu's profiler_info and metadata, a stray .json, a trace's event args)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    (root / "rank_0" / "window_step2" / "rankscope_window.json").write_bytes(deep)
    npu = root / "npu" / "rank0_ascend_pt"
    shutil.copytree(DATA / "torch_npu_text_level0" / "rank0_ascend_pt", npu)
    (npu / "profiler_info_0.json").write_bytes(deep)
    (npu / "profiler_metadata.json").write_bytes(b'{"a": ' + deep + b"}")
    (root / "stray.json").write_bytes(deep)
    trace = root / "rank_1" / "window_step2" / "rank1_step000002.pt.trace.json"
    text = trace.read_bytes()
    i = text.index(b'"args"')
    trace.write_bytes(text[:i] + b'"deep": ' + deep + b", " + text[i:])  # the first event's args
    store = tmp_path / "store"
    out = analyze_here("ingest", str(root), "--store", str(store))
    assert "Traceback" not in out.stdout + out.stderr
    probs = _problems(store)
    assert probs["npu/rank0_ascend_pt/profiler_info_0.json"][0] == "error"
    assert "nested too deeply" in probs["npu/rank0_ascend_pt/profiler_info_0.json"][1]
    at = text.rindex(b"{", 0, i)  # where the event with the deep args starts
    assert probs["rank_1/window_step2/rank1_step000002.pt.trace.json"] == (
        "warning",
        f"1 malformed event(s) skipped (nested too deeply; at byte {at} of the file)",
    )
    zh = translate_problems(probs["rank_1/window_step2/rank1_step000002.pt.trace.json"][1], "zh")
    assert zh == f"跳过了 1 个格式错误的事件（嵌套过深；位于文件的第 {at} 字节）"
    ignored = query(store, "SELECT path, error FROM source_files WHERE status = 'ignored'")
    assert {"path": "rank_0/window_step2/rankscope_window.json", "error": _SIDECAR_NOT_JSON} in ignored
    assert translate_problems(_SIDECAR_NOT_JSON, "zh") == "采集器的 sidecar 文件不是有效的 JSON（或不是 JSON 对象）"
    ranks = query(store, "SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    assert [r["rank"] for r in ranks] == [0]  # the torch_npu rank: its kernel_details.csv was read
    assert query(store, "SELECT count(DISTINCT rank) AS n FROM slices") == [{"n": 2}]


_SIDECAR_NOT_JSON = "collector sidecar is not valid JSON (or not a JSON object)"


@pytest.mark.parametrize(
    "folder", ["mindspore_legacy_alexnet", "msprof_constructed", "msprof_legacy_timeline", "mindspore_cpu_windows"]
)
def test_why_a_file_was_ignored_reads_in_both_languages(tmp_path: Path, folder: str) -> None:
    """Every file a reader or the discovery left out (source_files.status 'ignored') says why in
    English (as stored) and in Chinese; a stray text file and a JSON file that is not a trace too."""
    root = tmp_path / "in"
    shutil.copytree(DATA / folder, root)
    (root / "notes.txt").write_text("my notes")
    (root / "config.json").write_text('{"lr": 0.1}')
    store = Store(tmp_path / "store")
    ingest(root, store, workers=1)
    rows = store.query("SELECT path, error FROM source_files WHERE status = 'ignored'").to_dict("records")
    by_path = {r["path"]: r["error"] for r in rows}
    assert by_path["notes.txt"] == "not a known profiler output"
    assert by_path["config.json"] == "JSON file that is not a profiler trace"
    assert translate_problems(by_path["notes.txt"], "zh") == "不是已知的性能数据采集工具输出"
    assert translate_problems(by_path["config.json"], "zh") == "不是性能数据 trace 的 JSON 文件"
    assert len(set(by_path.values())) > 2  # the readers' own reasons
    for path, error in by_path.items():
        zh = translate_problems(error, "zh")
        assert zh != error and re.search("[\u4e00-\u9fff]", zh), (path, error, zh)
        assert not re.search(r"\b(?:not|the|is|are|of|read|ingested|file)\b", zh), (path, error, zh)


@pytest.fixture
def shared_tmp(tmp_path: Path) -> Iterator[Path]:
    """A folder whose permissions are given back at the end (so that it can be removed)."""
    yield tmp_path
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o777)


def _without_root_privileges() -> None:
    """In the child before exec: drop the capabilities that let root ignore file permissions
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER) from the bounding set, so the program runs
    with the permissions of an ordinary user (its files are still root's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


def _ingest_as_another_user(root: Path, store: Path) -> subprocess.CompletedProcess[str]:
    """`analyze ingest` in a real process that meets the permissions as an ordinary user would
    (as root: without the capabilities that bypass them)."""
    return subprocess.run(
        [*ANALYZE, "ingest", str(root), "--store", str(store), "--workers", "2"],
        capture_output=True,
        text=True,
        preexec_fn=_without_root_privileges if os.geteuid() == 0 else None,
        env={**os.environ, "COLUMNS": "200"},
        timeout=300,
    )


def test_folders_and_files_the_process_may_not_read(shared_tmp: Path) -> None:
    """Real permissions: a rank folder without any access, one that can be listed but not entered,
    a torch_npu folder and a torch_npu output folder without access, a sidecar that cannot be read.
    Each is a problem with its reason; every other rank is ingested."""
    root = shared_tmp / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root / "k")
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_1", root / "k" / "rank_2")
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_1", root / "k" / "rank_3")
    for r in (0, 1, 2):
        shutil.copytree(DATA / "torch_npu_text_level0" / "rank0_ascend_pt", root / "npu" / f"r{r}" / "rank0_ascend_pt")
    for p in [root, *root.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)
    (root / "k" / "rank_1").chmod(0)  # nothing
    (root / "k" / "rank_2").chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # listed, not entered
    (root / "k" / "rank_3" / "window_step2" / "rankscope_window.json").chmod(0)
    (root / "npu" / "r1" / "rank0_ascend_pt").chmod(0)
    (root / "npu" / "r2" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT").chmod(0)
    store = shared_tmp / "store"
    proc = _ingest_as_another_user(root, store)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    probs = _problems(store)
    assert probs["k/rank_1"] == ("error", "cannot list this folder: Permission denied")
    assert probs["k/rank_2/window_step2"] == ("error", "cannot list this folder: Permission denied")
    assert probs["k/rank_2/rankscope_scalars.jsonl"] == ("error", "cannot read: Permission denied")
    assert probs["k/rank_3/window_step2/rankscope_window.json"] == ("error", "cannot read: Permission denied")
    assert probs["npu/r1/rank0_ascend_pt"][1].startswith("cannot read this folder: Permission denied")
    assert probs["npu/r2/rank0_ascend_pt"][1].startswith("cannot read this folder: Permission denied")
    rows = query(store, "SELECT root_path, status FROM collections ORDER BY root_path")
    read = {r["root_path"] for r in rows}
    assert {"k/rank_0/window_step2", "npu/r0/rank0_ascend_pt"} <= read
    assert "k/rank_3/window_step2/rank1_step000002.pt.trace.json" in read  # each trace alone: no sidecar
    n = query(store, "SELECT count(*) AS n FROM kernels")[0]["n"]
    assert n > 0  # the readable torch_npu rank
    assert "permission denied" in proc.stdout.lower()


def test_run_names_a_terminal_or_a_file_system_would_choke_on(tmp_path: Path) -> None:
    store = tmp_path / "store"
    src = SAMPLES / "kineto_gloo_2rank"
    analyze_here("ingest", str(src), "--store", str(store), "--run", "[/]")
    long = tmp_path / ("x" * 250)  # a folder name as long as the file system allows
    shutil.copytree(src / "rank_0", long / "rank_0")
    out = analyze_here("ingest", str(long), "--store", str(store))
    name = "x" * 110 + "~" + out.stdout.split("~")[1][:8]
    assert f"run {name}: read 2 collection(s)" in out.stdout
    assert len(slug("x" * 300)) == 100 and slug("x" * 300) != slug("x" * 299)
    bad = analyze_here("ingest", str(src), "--store", str(store), "--run", "a\x1b[31mb", check=False)
    assert bad.returncode == 1 and "holds the control character '\\x1b'" in bad.stderr
    with pytest.raises(RunNameError, match="is 121 characters long"):
        ingest(src, Store(store), run="y" * 121)
    runs = analyze_here("runs", "--store", str(store)).stdout
    assert "[/]" in runs and "Traceback" not in runs
    assert [r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))] == [name, "[/]"]
    summary = analyze_here_json("summary", "--json", "--run", "[/]", "--store", str(store))
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]


# -- profiler dbs: rows still in a WAL, tables missing ------------------------------------------------

_NPU_DB = DATA / "torch_npu_db_level0" / "rank0_ascend_pt"
_DB_NAME = "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"

_WAL_WRITER = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA journal_mode=WAL")
rows = con.execute("SELECT * FROM TASK").fetchall()
con.execute("DELETE FROM TASK")
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file itself now holds no task
con.execute("PRAGMA wal_autocheckpoint=0")
con.execute("BEGIN")
con.executemany("INSERT INTO TASK VALUES (" + ",".join("?" * len(rows[0])) + ")", rows)
con.execute("COMMIT")  # committed to the WAL only
os._exit(0)  # as a killed profiler: no checkpoint at close
"""


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("keep_shm", [True, False])
def test_rows_of_an_uncheckpointed_wal_are_read_and_nothing_is_written(tmp_path: Path, keep_shm: bool) -> None:
    """A torch_npu db whose TASK rows are committed in its -wal only (the writer died before a
    checkpoint): every kernel is read, as from the clean db; the user's folder is left byte for
    byte as it was (no -shm created, the WAL not checkpointed into the db)."""
    clean = Store(tmp_path / "clean")
    ingest(_NPU_DB.parent, clean, run="clean", workers=1)
    root = tmp_path / "job"
    shutil.copytree(_NPU_DB, root / "rank0_ascend_pt")
    db = root / "rank0_ascend_pt" / _DB_NAME
    subprocess.run([sys.executable, "-c", _WAL_WRITER, str(db)], check=True, timeout=120)
    wal = db.with_name(db.name + "-wal")
    shm = db.with_name(db.name + "-shm")
    assert wal.stat().st_size > 0
    if not keep_shm:  # a copy of the folder taken without the shared-memory file
        shm.unlink()
    with sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True) as con:  # what immutable=1 saw
        assert con.execute("SELECT count(*) FROM TASK").fetchone()[0] == 0
    before = _snapshot(root)
    store = Store(tmp_path / "store")
    report = ingest(root, store, workers=1)
    assert _snapshot(root) == before
    assert shm.exists() == keep_shm
    n = "SELECT count(*) AS n, sum(dur_ns) AS d FROM kernels"
    assert store.query(n).to_dict("records") == clean.query(n).to_dict("records")
    assert store.query(n)["n"][0] == 191
    files = {p["path"]: p["status"] for p in report.problems}
    assert not any(p.endswith(".db") for p in files), files


def test_a_db_without_the_tables_it_should_hold_says_so(tmp_path: Path) -> None:
    """TASK, COMPUTE_TASK_INFO, CANN_API, PYTORCH_API, SESSION_TIME_INFO dropped one at a time from a
    torch_npu db: the file is a warning naming the table and what is lost; the rest is read."""
    full = Store(tmp_path / "full")
    ingest(_NPU_DB.parent, full, run="full", workers=1)
    rows = {t: full.query(f"SELECT count(*) AS n FROM {t}")["n"][0] for t in ("kernels", "operators", "slices")}
    for table, lost, lost_zh in (
        ("TASK", "no device tasks", "没有Device 任务（kernel、通信任务、Device 时间线）"),
        ("COMPUTE_TASK_INFO", "no kernel names", "没有kernel 的名称、类型和 shape"),
        ("CANN_API", "no CANN API calls", "没有CANN API 调用（Host 下发时间线、API 统计）"),
        ("PYTORCH_API", "no framework operators", "没有框架算子（算子、Host 时间线）"),
        ("SESSION_TIME_INFO", "no session start and end times", "没有会话的开始和结束时间"),
    ):
        root = tmp_path / table
        shutil.copytree(_NPU_DB, root / "rank0_ascend_pt")
        with sqlite3.connect(root / "rank0_ascend_pt" / _DB_NAME) as con:
            con.execute(f"DROP TABLE {table}")
        store = Store(tmp_path / f"store_{table}")
        report = ingest(root, store, workers=1)
        (prob,) = [p for p in report.problems if p["path"].endswith(".db")]
        assert prob["status"] == "warning" and prob["error"].startswith(f"table {table} missing: {lost}"), prob
        # stored in English, read in Chinese by its template (what the table holds too)
        assert translate_problems(prob["error"], "zh").startswith(f"缺少表 {table}：{lost_zh}（未采集，或 db 不完整）")
        assert report.read[0].status == "partial"
        got = {t: store.query(f"SELECT count(*) AS n FROM {t}")["n"][0] for t in rows}
        assert got["slices"] > 0 and (table != "PYTORCH_API" or got["kernels"] == rows["kernels"])
    # a torch_npu recording without the NPU activity is not expected to hold the device tables
    from analyzer.readers.ascend.db import expected_tables

    cpu_only = {"common_config": {"activities": ["ProfilerActivity.CPU"]}}
    assert expected_tables(True, cpu_only) == ("PYTORCH_API", "SESSION_TIME_INFO")
    assert expected_tables(False) == ("TASK", "COMPUTE_TASK_INFO", "CANN_API", "SESSION_TIME_INFO")


# -- compressed input, the streaming decoder ------------------------------------------------------------

_TRACE = SAMPLES / "kineto_gloo_2rank" / "rank_0" / "window_step2" / "rank0_step000002.pt.trace.json"


def _events(path: Path, block: int = 1 << 16) -> tuple[list, TraceStream]:
    ts = TraceStream(path, block_bytes=block)
    return [e for b in ts.blocks() for e in b], ts


@pytest.mark.parametrize("fraction", [0.1, 0.35, 0.8])
def test_a_cut_gzip_keeps_what_the_same_bytes_uncompressed_keep(tmp_path: Path, fraction: float) -> None:
    """A .json.gz cut short gives the events of its decompressed prefix, exactly as those bytes
    written as .json do (discovery used to call the cut gzip unreadable: 0 events against 14)."""
    data = gzip.compress(_TRACE.read_bytes())
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(data[: int(len(data) * fraction)])
    prefix = zlib.decompressobj(wbits=31).decompress(cut.read_bytes())
    plain = tmp_path / "plain.pt.trace.json"
    plain.write_bytes(prefix)
    got, ts = _events(cut)
    want, _ = _events(plain)
    assert got and [(e.name, e.ts) for e in got] == [(e.name, e.ts) for e in want]
    assert any(w.startswith("compressed stream ends early") for w in ts.warnings)
    assert ts.truncated and ts.sha256 == hashlib.sha256(cut.read_bytes()).hexdigest()
    store = Store(tmp_path / "store")
    report = ingest(cut, store, workers=1)
    (prob,) = report.problems
    assert prob["status"] == "warning" and "compressed stream ends early" in prob["error"]


def test_a_gzip_bomb_is_refused_early_and_named(tmp_path: Path) -> None:
    """2 GiB of blanks after a trace's first event, 2 MB gzipped: refused once more than 200 bytes
    came out per byte read (past 64 MiB), never decompressed further."""
    bomb = tmp_path / "job" / "bomb.pt.trace.json.gz"
    bomb.parent.mkdir()
    head = b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
    bomb.write_bytes(gzip.compress(head) + gzip.compress(b" " * (16 << 20), 9) * 128 + gzip.compress(b"]}"))
    assert bomb.stat().st_size < 3 << 20
    with open_input(bomb) as f, pytest.raises(InputError, match="decompresses to more than 200 times its size"):
        while f.read(4 << 20):
            pass
    assert f.bytes_out <= RATIO_AFTER_BYTES + (4 << 20) and f.bytes_in < 1 << 20  # stopped at once
    out = analyze_here("ingest", str(bomb.parent), "--store", str(tmp_path / "store"), check=False)
    assert out.returncode == 1 and "bomb.pt.trace.json.gz: decompresses to more than 200 times its size" in out.stdout


def test_whitespace_between_events_is_not_carried_and_giant_events_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 MiB of blanks between two events read with 4 KiB blocks: both events, no warning (the
    blanks are dropped block by block, not accumulated); a string of 3 MiB blanks inside an event
    is kept as it is (blanks inside a string are data); an event over MAX_EVENT_BYTES is skipped
    and named, the events after it kept."""
    ev = b'{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}'
    p = tmp_path / "ws.json"
    p.write_bytes(b'{"traceEvents": [' + ev + b"," + b" \n" * (4 << 20) + ev + b"]}")
    got, ts = _events(p, 4096)
    assert [e.name for e in got] == ["a", "a"] and not ts.warnings
    s = tmp_path / "str.json"
    s.write_bytes(b'{"traceEvents": [' + ev + b', {"ph": "X", "name": "' + b" " * (3 << 20) + b'b"}, ' + ev + b"]}")
    got, ts = _events(s, 4096)
    assert [e.name for e in got] == ["a", " " * (3 << 20) + "b", "a"] and not ts.warnings
    monkeypatch.setattr(stream, "MAX_EVENT_BYTES", 1 << 20)
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + ev + b', {"ph": "X", "name": "' + b"x" * (2 << 20) + b'"}, ' + ev + b"]")
    got, ts = _events(big, 4096)
    assert [e.name for e in got] == ["a", "a"]
    assert ts.warnings[0].startswith("1 malformed event(s) skipped (1 MiB without an event boundary")
    assert translate_problems(ts.warnings[0], "zh").startswith(
        "跳过了 1 个格式错误的事件（1 MiB 内没有事件边界；位于文件的第 "
    )


def test_a_broken_event_is_skipped_by_its_offset_and_the_rest_kept(tmp_path: Path) -> None:
    """One event each: a flipped structure byte, bytes that are not UTF-8 in its name, a name of the
    wrong type, a number too big for a float: the first, third and fourth are skipped and named by
    the offset of their first byte; the second is kept with U+FFFD; every other event is kept."""
    events = [
        {"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": 10 * i + 1, "dur": 1, "args": {"k": [1, {"a": 2}]}}
        for i in range(400)
    ]
    text = json.dumps({"traceEvents": events}).encode()
    broken = (
        text.replace(b'"name": "e50"', b'"name"; "e50"')  # a flipped structure byte
        .replace(b'"name": "e150"', b'"name": "e\xff\xfe150"')  # bytes that are not UTF-8
        .replace(b'"name": "e250"', b'"name": 7777')  # the wrong type
        .replace(b'"ts": 3501,', b'"ts": 1e999,')  # no float holds it (event e350)
    )
    flip, utf8, typ, big = (broken.rindex(b"{", 0, broken.index(m)) for m in (b'"e50"', b"e\xff", b"7777", b"1e999"))
    p = tmp_path / "t.json"
    p.write_bytes(broken)
    for block in (512, 1 << 20):
        got, ts = _events(p, block)
        names = [e.name for e in got]
        assert "e50" not in names and "e250" not in names and "e350" not in names
        assert len(names) == 400 - 3 and "e\ufffd\ufffd150" in names
        offsets, utf = [], []
        for w in ts.warnings:
            m = re.fullmatch(r"(\d+) malformed event\(s\) skipped \((.+); at byte ([\d, ]+) of the file\)", w)
            if m:
                offsets += [int(x) for x in m.group(3).split(", ")]
            else:
                utf.append(w)
        assert sorted(offsets) == [flip, typ, big], (block, ts.warnings)
        assert utf == [f"1 event(s) with bytes that are not UTF-8, kept with them replaced by U+FFFD (at byte {utf8})"]
        assert "`$.name`" in " ".join(ts.warnings) and "Number out of range" in " ".join(ts.warnings)
        # read in Chinese: the stream's sentence and msgspec's reasons (the path in the event as it is)
        zh = " ".join(translate_problems(w, "zh") for w in ts.warnings)
        assert "应为 `str`，实际为 `int`（位于 `$.name`）" in zh and "数字超出范围（位于 `$.ts`）" in zh, zh
        assert re.search(r"跳过了 \d+ 个格式错误的事件（.+；位于文件的第 [\d, ]+ 字节）", zh), zh
        assert "malformed" not in zh and "Expected" not in zh and "at byte" not in zh, zh


# -- times: one check, every format ---------------------------------------------------------------------


def test_impossible_times_are_named_and_kept_out_in_every_format(tmp_path: Path) -> None:
    """A µs duration that overflows int64 ns (9.5e15, inf), a negative duration, a timestamp after 2100:
    in a Kineto trace, a torch_npu kernel_details.csv, a torch_npu db and the collector's scalars.
    The rows are not stored, the file is a warning naming each row and reason; the rest is stored."""
    # Kineto
    d = json.loads(_TRACE.read_text())
    ops = [i for i, e in enumerate(d["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    d["traceEvents"][ops[5]]["dur"] = 9.5e15
    d["traceEvents"][ops[6]]["dur"] = -5
    d["traceEvents"][ops[7]]["ts"] = 4_200_000_000_000_000.0
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "r.pt.trace.json").write_text(json.dumps(d))
    clean = Store(tmp_path / "clean")
    ingest(_TRACE, clean, run="clean", workers=1)
    store = Store(tmp_path / "s")
    (prob,) = ingest(tmp_path / "k", store, workers=1).problems
    assert prob["status"] == "warning"
    for reason in ("ts_ns after the year 2100", "dur_ns beyond what 64-bit ns hold", "dur_ns negative (event"):
        assert reason in prob["error"]
    zh = translate_problems(prob["error"], "zh")
    for reason in ("个事件未存储，ts_ns 晚于 2100 年（第 ", "个事件未存储，dur_ns 超出 64 位", "dur_ns 为负数（第 "):
        assert reason in zh, zh
    assert "not stored" not in zh and " event " not in zh, zh
    n = "SELECT count(*) AS n, min(ts_ns) AS lo, max(ts_ns + dur_ns) AS hi FROM slices"
    got, want = store.query(n).iloc[0], clean.query(n).iloc[0]
    assert got["n"] == want["n"] - 3 and got["lo"] >= want["lo"] and got["hi"] <= want["hi"]
    # torch_npu kernel_details.csv
    root = tmp_path / "npu"
    shutil.copytree(DATA / "torch_npu_text_level0" / "rank0_ascend_pt", root / "rank0_ascend_pt")
    csv_path = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = csv_path.read_text().split("\n")
    for row, value in ((3, "9.5e15"), (5, "-5"), (7, "inf")):
        cells = lines[row].split(",")
        cells[5] = value  # Duration(us)
        lines[row] = ",".join(cells)
    csv_path.write_text("\n".join(lines))
    store = Store(tmp_path / "s2")
    report = ingest(root, store, workers=1)
    prob = next(p for p in report.problems if p["path"].endswith("kernel_details.csv"))
    assert prob["status"] == "warning"
    assert prob["error"] == (
        "kernels: 2 row(s) not stored, dur_ns beyond what 64-bit ns hold (overflow, or not a number) "
        f"(row 3: {2**63 - 1}; row 7: {2**63 - 1}); kernels: 1 row(s) not stored, dur_ns negative (row 5: -5000)"
    )
    assert translate_problems(prob["error"], "zh") == (
        "kernels：2 行未存储，dur_ns 超出 64 位纳秒所能表示的范围（溢出或不是数字）"
        f"（第 3 行：{2**63 - 1}；第 7 行：{2**63 - 1}）；kernels：1 行未存储，dur_ns 为负数（第 5 行：-5000）"
    )
    assert store.query("SELECT count(*) AS n FROM kernels")["n"][0] == 191 - 3
    # torch_npu db: a task that ends before it starts
    root = tmp_path / "db"
    shutil.copytree(_NPU_DB, root / "rank0_ascend_pt")
    with sqlite3.connect(root / "rank0_ascend_pt" / _DB_NAME) as con:
        con.execute("UPDATE TASK SET endNs = startNs - 5000 WHERE rowid = (SELECT min(rowid) FROM TASK)")
    store = Store(tmp_path / "s3")
    report = ingest(root, store, workers=1)
    prob = next(p for p in report.problems if p["path"].endswith(".db"))
    assert prob["status"] == "warning" and "not stored, dur_ns negative" in prob["error"], prob
    # the collector's scalars
    root = tmp_path / "sc"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", root / "rank_0")
    sc = root / "rank_0" / "rankscope_scalars.jsonl"
    lines = sc.read_text().splitlines()
    lines[1] = lines[1].replace('"ts_ns":', '"ts_ns":9', 1)  # a 20-digit ts: beyond int64
    sc.write_text("\n".join(lines) + "\n")
    store = Store(tmp_path / "s4")
    report = ingest(root, store, workers=1)
    prob = next(p for p in report.problems if p["path"].endswith(".jsonl"))
    assert "scalars: 2 row(s) not stored, ts_ns beyond what 64-bit ns hold" in prob["error"]
    assert store.query("SELECT count(*) AS n FROM scalars")["n"][0] == 2 * len(lines) - 2  # step time + loss


def test_time_problems_per_column_and_for_an_end_after_2100() -> None:
    """The one check of stored times on batches of the shapes the fact tables have: instants alone
    (a bad one named, no duration looked for), an instant and a duration each in range whose end is
    after 2100, and a batch that is all in range (nothing kept out)."""
    import pyarrow as pa

    from analyzer.units import MAX_TIME_NS, time_problems

    keep, notes = time_problems("scalars", pa.table({"ts_ns": [1, MAX_TIME_NS + 1, None], "value": [1.0, 2.0, 3.0]}))
    assert keep is not None and keep.to_pylist() == [True, False, True]
    assert notes == [f"scalars: 1 row(s) not stored, ts_ns after the year 2100 (row 2: {MAX_TIME_NS + 1})"]
    half = MAX_TIME_NS // 2 + 1
    keep, notes = time_problems("slices", pa.table({"ts_ns": [half, 5], "dur_ns": [half, 7]}), first_row=10)
    assert keep is not None and keep.to_pylist() == [False, True]
    assert notes == ["slices: 1 row(s) not stored, ending after the year 2100 (row 11)"]
    assert translate_problems(notes[0], "zh") == "slices：1 行未存储，结束时间晚于 2100 年（第 11 行）"
    assert time_problems("slices", pa.table({"ts_ns": [5, None], "dur_ns": [None, 7]})) == (None, [])


def test_a_quote_never_closed_in_a_csv_is_named(tmp_path: Path) -> None:
    """A stray quote in a kernel_details.csv cell swallows every line after it into that cell (the
    csv module reads on to the end of the file): the rows before it are kept, and the file says
    what was lost instead of storing one garbage row."""
    root = tmp_path / "npu"
    shutil.copytree(DATA / "torch_npu_text_level0" / "rank0_ascend_pt", root / "rank0_ascend_pt")
    path = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = path.read_bytes().split(b"\n")
    lines[101] = lines[101].replace(b",", b',"', 1)  # data row 100: a quote opened, never closed
    path.write_bytes(b"\n".join(lines))
    store = Store(tmp_path / "store")
    report = ingest(root, store, workers=1)
    prob = next(p for p in report.problems if p["path"].endswith("kernel_details.csv"))
    assert prob["status"] == "warning"
    assert prob["error"].startswith(
        "a quote opened in record 102 is never closed: the 91 line(s) after it"
    )  # record 1: the header
    assert store.query("SELECT count(*) AS n FROM kernels")["n"][0] == 100


def _trace_pair(folder: Path) -> tuple[Path, Path]:
    """The two traces of a Kineto window (rank 0, steps 2 and 3): one collection of two files."""
    folder.mkdir()
    src = _TRACE.parent
    for p in sorted(src.glob("*.pt.trace.json")):
        shutil.copyfile(p, folder / p.name)
    first, second = sorted(folder.glob("*.pt.trace.json"))
    return first, second


def test_an_impossible_time_is_named_on_its_own_file_in_every_event_family(tmp_path: Path) -> None:
    """A collection's rows are staged across its traces and written after the last one: an impossible
    time in the FIRST of two traces is named on that file, by the event's number in it, in every
    family of timed events: a ``[memory]`` instant (the fuzz's seed 12 case 0301: its warning went
    to the other file, so the file that lost the row read as ok), a counter, a slice's duration. The
    other file stays ok; the rest is stored."""
    clean = Store(tmp_path / "clean")
    ingest(_trace_pair(tmp_path / "c")[0].parent, clean, run="clean", workers=1)
    first, second = _trace_pair(tmp_path / "k")
    d = json.loads(first.read_text())
    ev = d["traceEvents"]
    mem = next(i for i, e in enumerate(ev) if e.get("name") == "[memory]")
    op = next(i for i, e in enumerate(ev) if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    ev[mem]["ts"] = 5e15
    ev[op]["dur"] = -5
    ev.append({"ph": "C", "name": "queue", "pid": 1, "tid": 1, "ts": 9.5e15, "args": {"depth": 3}})
    ev.append({"ph": "C", "name": "queue", "pid": 1, "tid": 1, "ts": ev[op]["ts"], "args": {"depth": 4}})
    first.write_text(json.dumps(d))
    store = Store(tmp_path / "s")
    report = ingest(tmp_path / "k", store, run="k", workers=1)
    (prob,) = report.problems
    assert prob["path"] == first.name and prob["status"] == "warning"
    err = prob["error"]
    assert f"event {mem + 1}: " in err and "ts_ns after the year 2100" in err, err
    assert f"dur_ns negative (event {op + 1}: -5000)" in err, err
    assert f"event {len(ev) - 1}: " in err and "beyond what 64-bit ns hold" in err, err
    n = "SELECT (SELECT count(*) FROM memory_samples) AS m, (SELECT count(*) FROM counters) AS c"
    got, want = store.query(n).iloc[0], clean.query(n).iloc[0]
    assert got["m"] == want["m"] - 1 and got["c"] == want["c"] + 1


def test_a_time_made_impossible_by_a_late_time_base_is_named_on_its_file(tmp_path: Path) -> None:
    """Older Kineto writes the time base after the events: the rows are staged and the base added at
    the end, when every file was read. An event whose time with that base is after 2100 is named on
    its own file (the first of two), by its number there, not on the file read last."""
    folder = tmp_path / "k"
    first, second = _trace_pair(folder)
    late = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 3e12, "dur": 1.0},
        ],
        "baseTimeNanoseconds": 4_100_000_000_000_000_000,
    }
    first.unlink()
    (folder / "a_late_base.pt.trace.json").write_text(json.dumps(late))
    store = Store(tmp_path / "s")
    report = ingest(folder, store, run="k", workers=1)
    (prob,) = report.problems
    assert prob["path"] == "a_late_base.pt.trace.json" and prob["status"] == "warning", report.problems
    assert "slices: 1 event(s) not stored, ts_ns after the year 2100 (event 2: " in prob["error"], prob
    assert "operators: 1 event(s) not stored, ts_ns after the year 2100 (event 2: " in prob["error"], prob


# -- a damaged SQLite db: the file, the table, what is wrong in words; the good tables and rows kept ----


def test_a_damaged_sqlite_db_says_what_is_wrong_and_keeps_what_it_can(tmp_path: Path) -> None:
    """One byte of analysis.db's schema that is not UTF-8 (the fuzz's one traceback class: the file's
    error was only 'UnicodeDecodeError'): the file is a warning that says the schema is damaged in
    SQLite's words, and its tables are read. Text that is not UTF-8 in rows of the profiler db: the
    table that held it is named, the rows are kept (U+FFFD for the bad bytes)."""
    clean = Store(tmp_path / "clean")
    ingest(_NPU_DB.parent, clean, run="clean", workers=1)
    root = tmp_path / "db"
    shutil.copytree(_NPU_DB, root / "rank0_ascend_pt")
    analysis = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    data = bytearray(analysis.read_bytes())
    at = data.index(b"StepTraceTime")  # the schema page: the table's name in sqlite_master
    data[at + 4] = 0x81
    analysis.write_bytes(bytes(data))
    with sqlite3.connect(root / "rank0_ascend_pt" / _DB_NAME) as con:
        con.execute("UPDATE STRING_IDS SET value = CAST(x'41ff42' AS TEXT) WHERE id = (SELECT min(id) FROM STRING_IDS)")
    store = Store(tmp_path / "s")
    report = ingest(root, store, workers=1)
    probs = {p["path"].rsplit("/", 1)[-1]: p for p in report.problems}
    a = probs["analysis.db"]
    assert a["status"] == "warning", a
    assert "the db's schema is damaged (malformed database schema (Step\ufffdraceTime)" in a["error"], a
    assert "not valid UTF-8" in a["error"] and "StepTraceTime" in a["error"], a
    m = probs[_DB_NAME.rsplit("/", 1)[-1]]
    assert m["status"] == "warning" and "text value(s) not valid UTF-8" in m["error"], m
    assert "kept with U+FFFD" in m["error"], m
    # both files' problems read in Chinese: SQLite's words and the table names stay as they are
    za, zm = translate_problems(a["error"], "zh"), translate_problems(m["error"], "zh")
    assert za.startswith(
        "db 的 schema 已损坏（数据库 schema 格式错误（Step\ufffdraceTime）（不是有效 UTF-8 的文本））"
    ), za
    assert "malformed" not in za and "text that" not in za, za
    assert "已关闭 SQLite 的 schema 检查读取：找到 1 个表（StepTraceTime）" in za, za
    utf8 = r"\b[A-Z_]+：第 \d+(, \d+)*(, \.\.\.)? 行有 \d+ 个文本值不是有效的 UTF-8（例如 .*），坏字节"
    assert re.search(utf8, zm), zm
    assert "not valid" not in zm and "skipped" not in za + zm and "schema checks" not in za, (za, zm)
    assert re.search(r"\b[A-Z_]+: \d+ text value\(s\) not valid UTF-8 in rows? \d", m["error"]), m
    n = "SELECT (SELECT count(*) FROM step_trace) AS st, (SELECT count(*) FROM kernels) AS k"
    got, want = store.query(n).iloc[0], clean.query(n).iloc[0]
    assert got["st"] == want["st"] > 0 and got["k"] == want["k"], (got, want)


def test_a_mindspore_aicpu_row_without_a_time_is_named(tmp_path: Path) -> None:
    """MindSpore's legacy aicpu_intermediate: a row whose start is empty or no number was skipped
    without a word when the cell was empty; every skipped row is counted and named by its number."""
    root = tmp_path / "ms"
    shutil.copytree(DATA / "mindspore_legacy_alexnet", root)
    path = root / "profiler" / "aicpu_intermediate_1.csv"
    lines = path.read_text().split("\n")
    for row, value in ((2, ""), (4, "abc")):
        cells = lines[row].split(",")
        cells[5] = value  # run_start
        lines[row] = ",".join(cells)
    path.write_text("\n".join(lines))
    report = ingest(root, Store(tmp_path / "s"), workers=1)
    prob = next(p for p in report.problems if p["path"].endswith("aicpu_intermediate_1.csv"))
    assert prob["status"] == "warning", prob
    want = "2 row(s) skipped, without a start or an end time that is a number (row 2, row 4; e.g. 'abc')"
    assert want in prob["error"], prob
    zh = translate_problems(prob["error"], "zh")
    assert "跳过了 2 行开始或结束时间不是数字的记录（第 2 行，第 4 行；例如 'abc'）" in zh, zh


def test_a_number_no_column_holds_is_stored_as_empty_and_said_in_both_languages(tmp_path: Path) -> None:
    """The collector's scalars with a step of 1e30 (no 64-bit integer holds it): the record is kept
    with its step empty and the file says so (``factwriter.conform``), in English as stored and in
    Chinese as the pages show it."""
    root = tmp_path / "sc"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", root / "rank_0")
    sc = root / "rank_0" / "rankscope_scalars.jsonl"
    lines = sc.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["step"] = 1e30
    lines[1] = json.dumps(rec)
    sc.write_text("\n".join(lines) + "\n")
    store = Store(tmp_path / "s")
    report = ingest(root, store, workers=1)
    prob = next(p for p in report.problems if p["path"].endswith(".jsonl"))
    assert prob["status"] == "warning" and prob["error"] == (
        "scalars.step: 2 value(s) that are not numbers or do not fit 64 bits, stored as empty "
        "(e.g. 1000000000000000019884624838656)"
    ), prob
    assert translate_problems(prob["error"], "zh") == (
        "scalars.step：2 个值不是数字或超出 64 位，已按空值存储（例如 1000000000000000019884624838656）"
    )
    assert store.query("SELECT count(*) AS n FROM scalars WHERE step IS NULL")["n"][0] == 2  # step time + loss


def test_a_device_id_no_column_holds_is_said_and_the_run_committed(tmp_path: Path) -> None:
    """MindSpore's profiler_info with a device id of 26 digits (the fuzz's seed 12 case 0343): the
    commit of the whole run failed on it (OverflowError out of ingest); the collection is stored
    with the device id empty and says why."""
    root = tmp_path / "ms"
    shutil.copytree(DATA / "mindspore_npu_constructed", root)
    info = next(root.glob("*/profiler_info_0.json"))
    info.write_text(info.read_text().replace('"device_id": "0"', '"device_id": "99999999999999999999999999"'))
    store = Store(tmp_path / "s")
    ingest(root, store, run="ms", workers=1)
    rows = store.query("SELECT device_id, missing FROM collections WHERE run = 'ms'")
    said = [m for ms in rows["missing"] for m in ms if "device id 99999999999999999999999999" in m]
    assert said and rows["device_id"].isna().any(), rows


def test_a_time_metric_in_long_form_is_checked_as_a_time() -> None:
    """kernel_metrics holds times in long form (aiv_total_time_ns): a negative or infinite one was
    stored as it was (the fuzz's seed 12 case 0726, aiv_time(us) = -5 in kernel_details.csv); it is
    kept out and named like any other time; other metrics may be anything."""
    import pyarrow as pa

    from analyzer.units import time_problems

    t = pa.table(
        {
            "kernel_id": [1, 2, 3, 4],
            "metric": ["aiv_total_time_ns", "aic_mac_ratio", "aic_total_time_ns", "aiv_total_time_ns"],
            "value": [-5000.0, -1.0, float("inf"), 7.0],
        }
    )
    keep, notes = time_problems("kernel_metrics", t)
    assert keep is not None and keep.to_pylist() == [False, True, False, True]
    assert notes == [
        "kernel_metrics: 2 row(s) not stored, a time metric negative or not a time "
        "(row 1: aiv_total_time_ns -5000.0; row 3: aic_total_time_ns inf)"
    ]
    assert translate_problems(notes[0], "zh") == (
        "kernel_metrics：2 行未存储，时间类指标为负数或不是时间"
        "（第 1 行：aiv_total_time_ns -5000.0；第 3 行：aic_total_time_ns inf）"
    )
