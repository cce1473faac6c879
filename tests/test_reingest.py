"""Re-ingesting: an unchanged folder does almost no work; a changed file is re-read."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from helpers import REPO, analyze, analyze_json, query

SAMPLES = REPO / "sample_data"


def _fact_files(store: Path) -> set[str]:
    return {str(p.relative_to(store)) for p in (store / "facts").rglob("*.parquet")}


def test_unchanged_folder_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    store = tmp_path / "store"
    first = analyze_json("ingest", str(root), "--store", str(store), "--json")
    assert len([c for c in first["collections"] if c["producer"] == "kineto"]) == 2 and not first["unchanged"]
    files = _fact_files(store)
    rows = query(store, "SELECT count(*) AS n FROM slices")
    read_at = query(store, "SELECT path, ingested_at, sha256 FROM source_files ORDER BY path")

    second = analyze_json("ingest", str(root), "--store", str(store), "--json")
    assert second["collections"] == []
    assert sorted(second["unchanged"]) == sorted(c["path"] for c in first["collections"])
    # no file was read again: the catalog rows of every file are the ones of the first ingest
    assert query(store, "SELECT path, ingested_at, sha256 FROM source_files ORDER BY path") == read_at
    assert _fact_files(store) == files
    assert query(store, "SELECT count(*) AS n FROM slices") == rows

    # a touch (new mtime, same bytes) is recognised by hash and still not re-read
    trace = sorted((root / "rank_0").rglob("*.pt.trace.json"))[0]
    os.utime(trace, (time.time() + 5, time.time() + 5))
    third = analyze_json("ingest", str(root), "--store", str(store), "--json")
    assert third["collections"] == [] and len(third["unchanged"]) == len(first["collections"])
    assert _fact_files(store) == files


def test_changed_file_is_reread(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    store = tmp_path / "store"
    analyze("ingest", str(root), "--store", str(store))
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
    rep = analyze_json("ingest", str(root), "--store", str(store), "--json")
    assert [c["path"] for c in rep["collections"]] == [first[1]]
    assert first[0] in rep["unchanged"] and first[1] not in rep["unchanged"]
    after = {r["rank"]: r for r in query(store, "SELECT rank, count(*) AS n FROM operators GROUP BY rank")}
    assert after[0] == before[0]
    assert after[1]["n"] == before[1]["n"] + 1
    added = query(store, "SELECT dur_ns, step FROM operators WHERE name = 'aten::added_by_test'")
    assert added == [{"dur_ns": 2500, "step": int(step["name"].split("#")[1])}]
    # the replaced collection's old Parquet files are gone after the next ingest's clean-up
    analyze("ingest", str(root), "--store", str(store))
    listed = {r["path"] for r in query(store, "SELECT path FROM fact_files")}
    assert _fact_files(store) == listed


def test_several_runs_side_by_side(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "a")
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "b")
    runs = analyze_json("runs", "--json", "--store", str(store))
    assert sorted(r["run"] for r in runs) == ["a", "b"]
    per_run = query(store, "SELECT run, count(*) AS n FROM slices GROUP BY run ORDER BY run")
    assert per_run[0]["n"] == per_run[1]["n"] > 0
    # one run can be read alone, and dropped
    env_store = {"RANKSCOPE_STORE": str(store)}
    only_a = analyze("query", "SELECT DISTINCT run FROM slices", "--run", "a", "--format", "json", env=env_store)
    assert json.loads(only_a.stdout) == [{"run": "a"}]
    analyze("drop", "a", "--store", str(store))
    assert [r["run"] for r in analyze_json("runs", "--json", "--store", str(store))] == ["b"]
