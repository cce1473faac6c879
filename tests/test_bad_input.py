"""Bad input: everything valid is ingested, each problem is recorded with file and reason."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers import REPO, analyze_here, analyze_here_json, query, trace_events

SAMPLES = REPO / "sample_data"


def _bad_root(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank" / "rank_0", root / "rank_0")
    shutil.copytree(SAMPLES / "bad_input", root, dirs_exist_ok=True)
    (root / "rank_3").mkdir()
    os.symlink(tmp_path / "does-not-exist.json", root / "rank_3" / "rank3.pt.trace.json")
    return root


def test_bad_files_are_reported_and_valid_data_ingested(tmp_path: Path) -> None:
    root = _bad_root(tmp_path)
    store = tmp_path / "store"
    out = analyze_here("ingest", str(root), "--store", str(store))
    text = out.stdout
    # every problem named with its file and reason, in the ingest output
    assert "rank_2/empty.pt.trace.json: empty file" in text
    assert "rank_2/rank2.pt.trace.json.gz: not JSON" in text
    assert "rank_2/corrupt.pt.trace.json.gz: cannot read" in text
    assert "rank_3/rank3.pt.trace.json: cannot read" in text
    assert "rank_1/rank1.pt.trace.json: file ends inside the event list (unterminated JSON array)" in text
    assert "notes.txt: not a known profiler output" in text
    assert "config.json: JSON file that is not a profiler trace" in text

    files = {r["path"]: r for r in query(store, "SELECT path, status, reader, error FROM source_files")}
    assert files["rank_2/empty.pt.trace.json"]["status"] == "error"
    assert files["rank_1/rank1.pt.trace.json"]["status"] == "warning"
    good_files = sorted((root / "rank_0").rglob("*.pt.trace.json"))
    assert good_files and all(files[str(f.relative_to(root))]["status"] == "ok" for f in good_files)
    assert files["notes.txt"]["status"] == "ignored"

    # the valid rank is complete and exact
    good = [e for f in good_files for e in trace_events(f)]
    n_ops = sum(1 for e in good if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"))
    got = query(store, "SELECT rank, count(*) AS n FROM operators GROUP BY rank ORDER BY rank")
    assert got[0] == {"rank": 0, "n": n_ops}
    # the truncated one is partial, with exactly the complete events before the cut kept
    cut = (root / "rank_1" / "rank1.pt.trace.json").read_text()
    prefix = cut[: cut.rindex("},") + 1] + "]}"
    kept = json.loads(prefix)["traceEvents"]
    n_kept = sum(1 for e in kept if e.get("ph") in ("X", "i") and e.get("name") != "[memory]")
    sl = query(store, "SELECT rank, count(*) AS n FROM slices GROUP BY rank ORDER BY rank")
    assert sl[1] == {"rank": 1, "n": n_kept}
    cols = {r["rank"]: r["status"] for r in query(store, "SELECT rank, status FROM collections")}
    assert cols == {0: "complete", 1: "partial"}

    # `analyze runs` shows the same problems
    runs = analyze_here("runs", "--store", str(store)).stdout
    assert "empty.pt.trace.json: empty file" in runs
    runs_json = analyze_here_json("runs", "--json", "--store", str(store))
    assert runs_json[0]["status"] == "partial"
    assert len(runs_json[0]["problems"]) == 5


def test_nothing_ingestable_exits_non_zero(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "bad_input" / "rank_2", root / "rank_2")
    proc = analyze_here("ingest", str(root), "--store", str(tmp_path / "store"), check=False)
    assert proc.returncode == 1
    assert "nothing could be ingested" in proc.stderr or "no profiler output found" in proc.stderr
    assert "empty.pt.trace.json: empty file" in proc.stdout
    assert "Traceback" not in proc.stderr

    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "readme.md").write_text("hi")
    proc = analyze_here("ingest", str(empty), "--store", str(tmp_path / "store2"), check=False)
    assert proc.returncode == 1
    assert "no profiler output found" in proc.stderr


def test_corrupting_an_ingested_file_keeps_the_previous_data(tmp_path: Path) -> None:
    root = tmp_path / "job"
    shutil.copytree(SAMPLES / "kineto_gloo_2rank", root)
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    before = query(store, "SELECT rank, count(*) AS n, sum(dur_ns) AS d FROM slices GROUP BY rank ORDER BY rank")

    traces = sorted((root / "rank_1").rglob("*.pt.trace.json"))  # every trace file of rank 1's collection
    for trace in traces:
        trace.write_bytes(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')  # cut before any complete event
    out = analyze_here("ingest", str(root), "--store", str(store), check=False)
    assert out.returncode == 0, out.stderr  # rank 0 is still there (unchanged)
    assert all(str(t.relative_to(root)) in out.stdout for t in traces)
    assert "previous data of this collection kept" in out.stdout
    after = query(store, "SELECT rank, count(*) AS n, sum(dur_ns) AS d FROM slices GROUP BY rank ORDER BY rank")
    assert after == before
