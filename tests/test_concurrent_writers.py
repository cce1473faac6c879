"""The writers of one store take turns: `analyze drop X` during an ingest of X waits for that ingest
(it used to report success at once, and the ingest's commit then brought X back)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from helpers import ANALYZE, REPO, analyze, query

SAMPLES = REPO / "sample_data"


def _job(root: Path, ranks: int = 8) -> Path:
    src = SAMPLES / "kineto_gloo_2rank"
    for r in range(ranks):
        d = root / f"rank_{r}"
        d.mkdir(parents=True)
        data = sorted((src / f"rank_{r % 2}").rglob("*.pt.trace.json"))[-1].read_bytes()
        data = data.replace(
            f'"rank": {r % 2}, "world_size": 2'.encode(), f'"rank": {r}, "world_size": {ranks}'.encode(), 1
        )
        (d / f"rank{r}.pt.trace.json").write_bytes(data)
    return root


def _lock_held(lock: Path) -> bool:
    if not lock.exists():
        return False
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def _first_line(stream, seconds: float = 300) -> str:
    """The first line of a child's output ('' at its end); fails instead of hanging."""
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    t.start()
    t.join(seconds)
    assert got, "the child wrote nothing and did not end"
    return got[0]


def test_drop_during_an_ingest_of_the_run_waits_for_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(store), "--run", "base")
    job = _job(tmp_path / "job")
    analyze("ingest", str(job), "--store", str(store), "--run", "big")
    for f in job.rglob("*.json"):  # every file changed: the next ingest reads and commits them all again
        f.write_bytes(f.read_bytes() + b"\n")

    ingest = subprocess.Popen(
        [*ANALYZE, "ingest", str(job), "--store", str(store), "--run", "big", "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=REPO,
    )
    try:
        # the ingest holds the store's lock: stop it there (its workers too), mid-way
        while not _lock_held(store / ".ingest.lock"):
            assert ingest.poll() is None, "the ingest ended before it was seen holding the lock"
            time.sleep(0.01)
        os.killpg(ingest.pid, signal.SIGSTOP)
        drop = subprocess.Popen(
            [*ANALYZE, "drop", "big", "--store", str(store)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        # the drop neither reports success nor ends while the ingest holds the lock: it says it waits
        assert "waiting for the ingest" in _first_line(drop.stderr)
        assert drop.poll() is None
    finally:
        os.killpg(ingest.pid, signal.SIGCONT)
    assert ingest.wait(timeout=300) == 0
    out, err = drop.communicate(timeout=300)
    assert drop.returncode == 0 and "dropped run big" in out, err
    # the ingest committed first, then the drop removed the run: it stays removed, its files gone
    assert [r["run"] for r in query(store, "SELECT run FROM runs")] == ["base"]
    assert not [p for p in (store / "facts").rglob("*.parquet") if "run=big" in str(p)]
    assert query(store, "SELECT count(*) AS n FROM slices")[0]["n"] > 1000
