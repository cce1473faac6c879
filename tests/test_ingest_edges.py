"""Edges of `analyze ingest` / `runs` / `query` a user meets: runs that never held data, two folders
under one run name, files the process may not read, folders that vanished, exact big sums."""

from __future__ import annotations

import builtins
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import REPO, analyze_here, analyze_here_json, query, trace_events

from analyzer.ingest import ingest
from analyzer.ingest.discover import discover
from analyzer.store import Store

SAMPLES = REPO / "sample_data"
DATA = REPO / "tests" / "data"


def test_a_run_that_never_held_data_is_not_created(tmp_path: Path) -> None:
    bad = tmp_path / "allbad"
    bad.mkdir()
    (bad / "x.pt.trace.json").write_text('[{"ph":')
    store = tmp_path / "store"
    out = analyze_here("ingest", str(bad), "--store", str(store), check=False)
    assert out.returncode == 1 and "nothing could be ingested" in out.stderr
    assert "x.pt.trace.json" in out.stdout
    assert analyze_here_json("runs", "--json", "--store", str(store)) == []
    assert "the store is empty" in analyze_here("runs", "--store", str(store)).stdout
    # a real run beside it: listed with plain JSON values
    analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "gloo")
    out = analyze_here("ingest", str(bad), "--store", str(store), check=False)
    assert out.returncode == 1
    (run,) = analyze_here_json("runs", "--json", "--store", str(store))
    assert run["run"] == "gloo" and run["formats"] == ["collector_scalars", "kineto"]
    assert isinstance(run["rows"], int) and run["rows"] > 0 and run["status"] == "complete"


def test_two_folders_under_one_run_name_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "job", tmp_path / "b" / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", a)
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", b / "rank_0")
    store = tmp_path / "store"
    analyze_here("ingest", str(a), "--store", str(store))
    before = query(store, "SELECT rank, count(*) AS n FROM slices GROUP BY rank ORDER BY rank")
    out = analyze_here("ingest", str(b), "--store", str(store), check=False)
    assert out.returncode == 1
    assert f"run 'job' in the store holds {a}" in out.stderr and "--run NAME" in out.stderr
    assert query(store, "SELECT rank, count(*) AS n FROM slices GROUP BY rank ORDER BY rank") == before
    analyze_here("ingest", str(b), "--store", str(store), "--run", "job_b")
    assert [r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))] == ["job_b", "job"]


def test_query_sums_are_exact_and_cells_plain(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store))
    files = sorted((SAMPLES / "kineto_gloo_2rank").rglob("*.pt.trace.json*"))
    base = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            base[f] = int(json.load(fh)["baseTimeNanoseconds"])
    (row,) = query(store, "SELECT sum(ts_ns) AS s, sum(dur_ns) AS d, [1, 2] AS l, NULL AS n FROM operators")
    assert isinstance(row["s"], int) and row["s"] > 2**63  # beyond int64 and float64: exact
    assert row["l"] == [1, 2] and row["n"] is None
    (per,) = query(store, "SELECT sum(dur_ns) AS d, count(*) AS c FROM operators")
    assert per["d"] == row["d"] and isinstance(per["d"], int)
    csv_out = analyze_here(
        "query",
        "SELECT sum(ts_ns) AS s, [1, 2] AS l, NULL AS n FROM operators",
        "--format",
        "csv",
        "--store",
        str(store),
    ).stdout
    assert csv_out.splitlines() == ["s,l,n", f'{row["s"]},"[1, 2]",']
    table = analyze_here("query", "SELECT NULL AS n, sum(dur_ns) AS d FROM operators", "--store", str(store)).stdout
    assert "NULL" in table and f"{row['d']}" in table and "<NA>" not in table and ".0" not in table
    out = analyze_here("query", "SELECT 1", "--run", "nosuch", "--store", str(store), check=False)
    assert out.returncode == 1 and "no run named 'nosuch'" in out.stderr


def test_a_file_the_process_may_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permission denied on some files of one torch_npu rank (as for another user's files): each is
    recorded with the reason, the rest of that rank and the other rank are ingested."""
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "torch_npu_text_level1", root)
    denied = {
        root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / n for n in ("kernel_details.csv", "trace_view.json")
    }
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, (str, os.PathLike)) and Path(file) in denied:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    store = Store(tmp_path / "store")
    report = ingest(root, store, workers=1)
    monkeypatch.setattr(builtins, "open", real_open)
    probs = {p["path"]: p for p in report.problems}
    for rel in (
        "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
        "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
    ):
        assert probs[rel]["status"] == "error" and probs[rel]["error"].startswith("cannot read")
        assert probs[rel]["error"].endswith("Permission denied")
        assert probs[rel]["sha256"] is None
    counts = {
        r["rank"]: r["n"]
        for r in store.query("SELECT rank, count(*) AS n FROM comm_ops GROUP BY rank").to_dict("records")
    }
    assert counts == {0: 4, 1: 4}  # communication.json of rank 0 was readable
    kernels = {
        r["rank"]: r["n"]
        for r in store.query("SELECT rank, count(*) AS n FROM kernels GROUP BY rank").to_dict("records")
    }
    assert 0 not in kernels and kernels[1] > 0


def test_a_folder_that_cannot_be_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    locked = root / "rank_1"
    real_scandir = os.scandir

    def guarded_scandir(path=".", *a, **k):  # type: ignore[no-untyped-def]
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *a, **k)

    monkeypatch.setattr(os, "scandir", guarded_scandir)
    disc = discover(root, "job")
    assert (locked, "cannot list this folder: Permission denied") in disc.problems
    assert {p.rank for p in disc.plans} == {0}


def test_reingest_mirrors_the_folder_and_repeats_its_problems(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    cut = root / "rank_1" / "window_step2" / "rank1_step000003.pt.trace.json"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])  # a warning inside rank 1's window
    store = tmp_path / "store"
    first = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    again = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert again["collections"] == [] and len(again["unchanged"]) == len(first["collections"])
    assert again["problems"] == first["problems"]
    assert [p["path"] for p in first["problems"]] == ["rank_1/window_step2/rank1_step000003.pt.trace.json"]
    shutil.rmtree(root / "rank_1")
    out = analyze_here("ingest", str(root), "--store", str(store))
    assert "removed rank 1 rank_1/window_step2: no longer below the folder" in out.stdout
    assert query(store, "SELECT DISTINCT rank FROM collections") == [{"rank": 0}]
    assert query(store, "SELECT count(*) AS n FROM source_files WHERE path LIKE 'rank_1/%'") == [{"n": 0}]
    assert query(store, "SELECT DISTINCT rank FROM slices") == [{"rank": 0}]


def test_binary_csv_named_in_plain_words(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "torch_npu_text_level1" / "rank1_ascend_pt", root / "rank1_ascend_pt")
    (root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").write_bytes(bytes(range(256)) * 8)
    out = analyze_here("ingest", str(root), "--store", str(tmp_path / "store"))
    line = next(x for x in out.stdout.splitlines() if "op_statistic.csv" in x)
    assert line.endswith("op_statistic.csv: not an op_statistic.csv: binary content, not CSV text")


def test_summary_compute_kernels_leave_out_copies_and_communication(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze_here("ingest", str(DATA / "hta_nccl"), "--store", str(store))
    events = trace_events(DATA / "hta_nccl" / "nccl_data.json.gz")
    kernels = [e for e in events if e.get("cat") == "kernel" and "nccl" not in e["name"].lower()]
    (rank,) = analyze_here_json("summary", "--json", "--store", str(store))["ranks"]
    assert rank["compute_kernels"] == len(kernels)
    assert abs(rank["compute_kernel_ns"] - sum(e["dur"] for e in kernels) * 1000) < len(kernels)


def test_run_names_any_characters(tmp_path: Path) -> None:
    """Partition folders hold a slug of the run name; the run column comes from the files."""
    store = tmp_path / "store"
    for name in ('quo"te/sl<a>', "quo_te_sl_a"):  # same slug, two runs
        analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", name)
    for name in ('quo"te/sl<a>', "quo_te_sl_a"):
        ranks = analyze_here_json("summary", "--json", "--run", name, "--store", str(store))["ranks"]
        assert [(r["rank"], r["steps"]) for r in ranks] == [(0, 2), (1, 2)]
    counts = query(store, "SELECT run, count(*) AS n FROM slices GROUP BY run ORDER BY run")
    assert [r["run"] for r in counts] == ['quo"te/sl<a>', "quo_te_sl_a"] and counts[0]["n"] == counts[1]["n"]


def test_gzip_trace_cut_short_keeps_its_complete_events(tmp_path: Path) -> None:
    import gzip

    src = SAMPLES / "kineto_gloo_2rank" / "rank_0" / "window_step2" / "rank0_step000002.pt.trace.json"
    data = gzip.compress(src.read_bytes())
    root = tmp_path / "job"
    (root / "rank_0").mkdir(parents=True)
    (root / "rank_0" / "r.pt.trace.json.gz").write_bytes(data[: len(data) * 2 // 3])
    (root / "rank_1").mkdir()
    shutil.copy(src, root / "rank_1" / "r.pt.trace.json")
    store = tmp_path / "store"
    out = analyze_here("ingest", str(root), "--store", str(store))
    assert "rank_0/r.pt.trace.json.gz: compressed stream ends early" in out.stdout
    n = {r["rank"]: r["n"] for r in query(store, "SELECT rank, n_rows AS n FROM collections WHERE producer = 'kineto'")}
    assert 0 < n[0] < n[1]


def test_a_refused_folder_does_not_skip_the_next(tmp_path: Path) -> None:
    """issue 11 §1.8: `analyze ingest A B` where A is refused (its run name holds another folder)
    still ingests B, names A and why, and fails the command."""
    a, other = tmp_path / "x" / "job", tmp_path / "y" / "job"
    b = tmp_path / "next"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", other)
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", a / "rank_0")
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", b)
    store = tmp_path / "store"
    analyze_here("ingest", str(other), "--store", str(store))  # run 'job' holds another folder
    out = analyze_here("ingest", str(a), str(b), "--store", str(store), check=False)
    assert out.returncode == 1
    err = " ".join(out.stderr.split())
    assert f"error: {a}: run 'job' in the store holds {other}" in err
    assert f"1 of 2 folder(s) ingested ({b}); not ingested: {a}" in err
    assert sorted(r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))) == ["job", "next"]


def test_unrelated_jobs_under_one_folder_are_not_one_run(tmp_path: Path) -> None:
    """issue 11 §1.8: a parent folder holding two unrelated jobs (a 2-rank and a 4-rank gloo job) is
    not merged into one run: the ingest is refused, names each job's folder and what it holds, and
    says what to do; each folder then ingests as its own run. One job's rank folders still ingest
    as one run."""
    parent = tmp_path / "jobs"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", parent / "gloo2")
    shutil.copytree(DATA / "kineto_gloo_4rank_slow", parent / "gloo4")
    store = tmp_path / "store"
    out = analyze_here("ingest", str(parent), "--store", str(store), check=False)
    assert out.returncode == 1
    err = " ".join(out.stderr.split())
    assert f"{parent} holds separate jobs (gloo2 and gloo4: their world sizes differ)" in err
    assert "gloo2: world size 2, ranks 0-1" in err and "gloo4: world size 4, ranks 0-3" in err
    assert f"analyze ingest {parent / 'gloo2'} {parent / 'gloo4'}" in err
    assert analyze_here_json("runs", "--json", "--store", str(store)) == []
    analyze_here("ingest", str(parent / "gloo2"), str(parent / "gloo4"), "--store", str(store))
    runs = {r["run"]: r for r in analyze_here_json("runs", "--json", "--store", str(store))}
    assert sorted(runs) == ["gloo2", "gloo4"]
    assert query(store, "SELECT count(DISTINCT rank) AS n FROM collections WHERE run = 'gloo4'") == [{"n": 4}]
