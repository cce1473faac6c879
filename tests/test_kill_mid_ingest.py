"""A crash or kill in the middle of an ingest leaves the store exactly as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from helpers import ANALYZE, REPO, analyze, query, replicated_kineto_job

from analyzer.store import SCRATCH_DIR, Store

SAMPLES = REPO / "sample_data"
CATALOG_SQL = {
    "runs": "SELECT run, root_path FROM runs ORDER BY run",
    "collections": "SELECT collection_id, run, rank, status, n_rows FROM collections ORDER BY collection_id",
    "source_files": "SELECT run, path, sha256, status FROM source_files ORDER BY run, path",
    "fact_files": "SELECT path, rows FROM fact_files ORDER BY path",
    "facts": "SELECT run, rank, count(*) AS n, sum(dur_ns) AS d FROM slices GROUP BY ALL ORDER BY ALL",
}


def _snapshot(store: Path) -> dict[str, list[dict]]:
    st = Store(store)  # read in-process: the CLI's read path, without a process start per query
    return {k: st.query(sql).to_dict("records") for k, sql in CATALOG_SQL.items()}


def test_kill_at_any_point_leaves_store_consistent(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "base")
    before = _snapshot(store)
    big = replicated_kineto_job(tmp_path / "big", 8)
    # the system's temporary folder of the killed ingests: a reader's scratch files are in the store
    # (its .scratch folder), where the next ingest removes what a kill left; none are here
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    outcomes = []
    finished = False
    delay = 0.4
    while not finished and delay < 30:
        proc = subprocess.Popen(
            [*ANALYZE, "ingest", str(big), "--store", str(store), "--run", "big", "--workers", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(system_tmp)},
        )
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its reader processes, no clean-up
            proc.wait()
            outcomes.append(("killed", delay))
        else:
            outcomes.append(("finished", delay))
            finished = True
        snap = _snapshot(store)
        runs = [r["run"] for r in snap["runs"]]
        if runs == ["base"]:
            assert snap == before, f"store changed by an ingest killed after {delay:.1f} s"
        else:  # the kill came after the commit: the new run is there in full
            assert runs == ["base", "big"]
            big_cols = [c for c in snap["collections"] if c["run"] == "big"]
            assert len(big_cols) == 8 and all(c["status"] == "complete" for c in big_cols)
            finished = True
        delay *= 1.6
    assert any(o[0] == "killed" for o in outcomes), outcomes
    assert sorted(p.name for p in system_tmp.iterdir()) == []
    # killed ingests left Parquet files nobody references, and their readers' scratch folders; the
    # next ingest removes them
    analyze("ingest", str(big), "--store", str(store), "--run", "big")
    listed = {r["path"] for r in query(store, "SELECT path FROM fact_files")}
    on_disk = {str(p.relative_to(store)) for p in (store / "facts").rglob("*.parquet")}
    assert on_disk == listed
    assert not (store / SCRATCH_DIR).exists()
    final = _snapshot(store)
    assert [r["run"] for r in final["runs"]] == ["base", "big"]
    base_rows = [r for r in final["facts"] if r["run"] == "base"]
    assert base_rows == before["facts"]
    big_rows = [r for r in final["facts"] if r["run"] == "big"]
    assert len(big_rows) == 8


def test_the_next_ingest_removes_what_killed_readers_left(tmp_path: Path) -> None:
    """A reader's temporary files are in the store's scratch folder, not the system's: a reader killed
    with its ingest cannot remove its own, the next ingest (the ingest lock's next holder) does; an
    ingest that ends leaves none."""
    from analyzer.factwriter import FactWriter
    from analyzer.readers.base import CollectionPlan, ReadContext

    store = tmp_path / "store"
    ctx = ReadContext(CollectionPlan("c0", "r", "kineto", tmp_path, ".", [], rank=0), FactWriter(store, "r", 0, "c0"))
    left = ctx.scratch_dir()
    assert left.parent == store / SCRATCH_DIR
    (left / "slices.arrow").write_bytes(b"rows of a reader killed with its ingest")  # no cleanup: killed
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "base")
    assert not (store / SCRATCH_DIR).exists()
    assert [r["run"] for r in query(store, "SELECT run FROM runs")] == ["base"]
