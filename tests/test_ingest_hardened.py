"""No input crashes an ingest: file names that are not UTF-8, JSON nested too deep, folders and files
the process may not read (real permissions, as another user's files), run names a terminal or a file
system would choke on. Each problem is a row of ``source_files`` with the reason; the rest is ingested."""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ANALYZE, REPO, analyze, analyze_json, query

from analyzer.errors import RunNameError
from analyzer.ingest import ingest
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
    out = analyze("runs", "--store", str(store.path)).stdout
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
    out = analyze("ingest", str(root), "--store", str(store))
    assert "Traceback" not in out.stdout + out.stderr
    probs = _problems(store)
    assert probs["npu/rank0_ascend_pt/profiler_info_0.json"][0] == "error"
    assert "nested too deeply" in probs["npu/rank0_ascend_pt/profiler_info_0.json"][1]
    assert probs["rank_1/window_step2/rank1_step000002.pt.trace.json"] == (
        "warning",
        "1 malformed event(s) skipped",
    )
    ignored = query(store, "SELECT path, error FROM source_files WHERE status = 'ignored'")
    assert {"path": "rank_0/window_step2/rankscope_window.json", "error": _SIDECAR_NOT_JSON} in ignored
    ranks = query(store, "SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    assert [r["rank"] for r in ranks] == [0]  # the torch_npu rank: its kernel_details.csv was read
    assert query(store, "SELECT count(DISTINCT rank) AS n FROM slices") == [{"n": 2}]


_SIDECAR_NOT_JSON = "collector sidecar is not valid JSON (or not a JSON object)"


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
    analyze("ingest", str(src), "--store", str(store), "--run", "[/]")
    long = tmp_path / ("x" * 250)  # a folder name as long as the file system allows
    shutil.copytree(src / "rank_0", long / "rank_0")
    out = analyze("ingest", str(long), "--store", str(store))
    name = "x" * 110 + "~" + out.stdout.split("~")[1][:8]
    assert f"run {name}: read 2 collection(s)" in out.stdout
    assert len(slug("x" * 300)) == 100 and slug("x" * 300) != slug("x" * 299)
    bad = analyze("ingest", str(src), "--store", str(store), "--run", "a\x1b[31mb", check=False)
    assert bad.returncode == 1 and "holds the control character '\\x1b'" in bad.stderr
    with pytest.raises(RunNameError, match="is 121 characters long"):
        ingest(src, Store(store), run="y" * 121)
    runs = analyze("runs", "--store", str(store)).stdout
    assert "[/]" in runs and "Traceback" not in runs
    assert [r["run"] for r in analyze_json("runs", "--json", "--store", str(store))] == [name, "[/]"]
    summary = analyze_json("summary", "--json", "--run", "[/]", "--store", str(store))
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
