"""Re-ingesting: an unchanged folder does almost no work; a changed file is re-read.

The commands run in this process (helpers.analyze_here: what they make is the subject here, a
process per call cost ~2 s of CPU); what a real process imports is asked of one (``_imports``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import duckdb
from helpers import REPO, analyze_here, analyze_here_json, query

from analyzer import schema

SAMPLES = REPO / "sample_data"


def _fact_files(store: Path) -> set[str]:
    return {str(p.relative_to(store)) for p in (store / "facts").rglob("*.parquet")}


def _views_read_the_listed_files(store: Path) -> None:
    """Each fact view of the catalog (what a user opening it with DuckDB reads) reads exactly the
    files ``fact_files`` lists for its table: a commit makes again the views of the tables it changes only."""
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
        listed = con.execute("SELECT table_name, path FROM fact_files").fetchall()
    finally:
        con.close()
    root = store.resolve()
    for t in schema.FACT_TABLES:
        want = sorted({str(root / os.path.normpath(p)) for name, p in listed if name == t.name})  # run files once
        assert sorted(re.findall(r"'([^']*\.parquet)'", views[t.name])) == want, t.name


def test_unchanged_folder_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    store = tmp_path / "store"
    first = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert len([c for c in first["collections"] if c["producer"] == "kineto"]) == 2 and not first["unchanged"]
    files = _fact_files(store)
    rows = query(store, "SELECT count(*) AS n FROM slices")
    read_at = query(store, "SELECT path, ingested_at, sha256 FROM source_files ORDER BY path")

    second = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert second["collections"] == []
    assert sorted(second["unchanged"]) == sorted(c["path"] for c in first["collections"])
    # no file was read again: the catalog rows of every file are the ones of the first ingest
    assert query(store, "SELECT path, ingested_at, sha256 FROM source_files ORDER BY path") == read_at
    assert _fact_files(store) == files
    assert query(store, "SELECT count(*) AS n FROM slices") == rows

    # a touch (new mtime, same bytes) is recognised by hash and still not re-read
    trace = sorted((root / "rank_0").rglob("*.pt.trace.json"))[0]
    os.utime(trace, (time.time() + 5, time.time() + 5))
    third = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert third["collections"] == [] and len(third["unchanged"]) == len(first["collections"])
    assert _fact_files(store) == files


def test_changed_file_is_reread(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    before = {r["rank"]: r for r in query(store, "SELECT rank, count(*) AS n FROM operators GROUP BY rank")}

    first = {
        c["rank"]: c["path"]
        for c in query(store, "SELECT rank, root_path AS path FROM collections WHERE producer = 'kineto'")
    }
    # rewrite rank 1 with one more operator event
    trace = sorted((root / "rank_1").rglob("*.pt.trace.json"))[-1]
    data = json.loads(trace.read_text())
    step = [e for e in data["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")][-1]
    data["traceEvents"].append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::added_by_test",
            "pid": step["pid"],
            "tid": step["tid"],
            "ts": step["ts"] + 1.0,
            "dur": 2.5,
            "args": {},
        }
    )
    trace.write_text(json.dumps(data))
    rep = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert [c["path"] for c in rep["collections"]] == [first[1]]
    assert first[0] in rep["unchanged"] and first[1] not in rep["unchanged"]
    after = {r["rank"]: r for r in query(store, "SELECT rank, count(*) AS n FROM operators GROUP BY rank")}
    assert after[0] == before[0]
    assert after[1]["n"] == before[1]["n"] + 1
    added = query(store, "SELECT dur_ns, step FROM operators WHERE name = 'aten::added_by_test'")
    assert added == [{"dur_ns": 2500, "step": int(step["name"].split("#")[1])}]
    _views_read_the_listed_files(store)
    # the replaced collection's old Parquet files are gone after the next ingest's clean-up
    analyze_here("ingest", str(root), "--store", str(store))
    listed = {r["path"] for r in query(store, "SELECT path FROM fact_files")}
    assert _fact_files(store) == listed


def test_several_runs_side_by_side(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "a")
    analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "b")
    runs = analyze_here_json("runs", "--json", "--store", str(store))
    assert sorted(r["run"] for r in runs) == ["a", "b"]
    per_run = query(store, "SELECT run, count(*) AS n FROM slices GROUP BY run ORDER BY run")
    assert per_run[0]["n"] == per_run[1]["n"] > 0
    # one run can be read alone, and dropped
    env_store = {"RANKSCOPE_STORE": str(store)}
    only_a = analyze_here("query", "SELECT DISTINCT run FROM slices", "--run", "a", "--format", "json", env=env_store)
    assert json.loads(only_a.stdout) == [{"run": "a"}]
    _views_read_the_listed_files(store)
    analyze_here("drop", "a", "--store", str(store))
    assert [r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))] == ["b"]
    _views_read_the_listed_files(store)


def _imports(*args: str) -> set[str]:
    """Modules a real `analyze ...` process imported (-X importtime)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "analyzer", *args], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {ln.rsplit("|", 1)[1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}


def test_unchanged_folder_is_answered_from_the_digest(tmp_path: Path) -> None:
    """An unchanged folder is answered from the catalog's digest: nothing imported but the CLI, the
    catalog not touched (the run's update time stays), the same report as the full path gives."""
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    (root / "notes.txt").write_text("not a profile")
    store = tmp_path / "store"
    first = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    catalog = store / "catalog.duckdb"
    stamp = (catalog.stat().st_mtime_ns, catalog.stat().st_size)
    runs_before = analyze_here_json("runs", "--json", "--store", str(store))
    # read-only commands leave the digest valid
    analyze_here("summary", "--store", str(store))
    query(store, "SELECT count(*) AS n FROM slices")

    mods = _imports("ingest", str(root), "--store", str(store))
    assert "duckdb" not in mods and "pyarrow" not in mods and "analyzer.readers" not in mods
    fast = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert (catalog.stat().st_mtime_ns, catalog.stat().st_size) == stamp
    assert fast["collections"] == [] and sorted(fast["unchanged"]) == sorted(c["path"] for c in first["collections"])
    assert fast["ignored"] == first["ignored"] and len(fast["ignored"]) == 1
    assert analyze_here_json("runs", "--json", "--store", str(store)) == runs_before

    # the full path (no digest) gives the same answer and changes nothing either
    (store / "catalog.digest.json").unlink()
    full = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert {k: v for k, v in full.items() if k != "seconds"} == {k: v for k, v in fast.items() if k != "seconds"}
    assert analyze_here_json("runs", "--json", "--store", str(store)) == runs_before
    assert (store / "catalog.digest.json").exists()  # written again by that ingest

    # a new file below the folder: the full path runs and sees it
    (root / "more.txt").write_text("still not a profile")
    again = analyze_here_json("ingest", str(root), "--store", str(store), "--json")
    assert len(again["ignored"]) == 2


def test_runs_without_a_valid_digest_reads_the_catalog(tmp_path: Path) -> None:
    """The digest is trusted only while the catalog files are the ones it was written after: a
    change made by another writer, or a digest from other code, sends runs to the catalog."""
    import duckdb

    store = tmp_path / "store"
    analyze_here("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "a")
    assert [r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))] == ["a"]
    con = duckdb.connect(str(store / "catalog.duckdb"))  # a writer that knows nothing of the digest
    con.execute("UPDATE runs SET run = 'renamed'")
    con.close()
    assert [r["run"] for r in analyze_here_json("runs", "--json", "--store", str(store))] == ["renamed"]
    mods = _imports("runs", "--store", str(store))
    assert "duckdb" in mods  # the catalog was read
    analyze_here("drop", "renamed", "--store", str(store))
    assert analyze_here_json("runs", "--json", "--store", str(store)) == []
    assert "duckdb" not in _imports("runs", "--store", str(store))  # drop wrote the digest again
