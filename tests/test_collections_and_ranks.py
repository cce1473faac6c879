"""Several collections per rank are kept apart; ranks are found where formats.md §7.5 says."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO, analyze_here, query

SAMPLES = REPO / "sample_data"

REPEAT_SCRIPT = """
import sys, torch
from torch.profiler import profile, schedule, tensorboard_trace_handler, ProfilerActivity
out = sys.argv[1]
lin = torch.nn.Linear(32, 32)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=0, active=2, repeat=2),
             on_trace_ready=tensorboard_trace_handler(out, worker_name="host_1234")) as p:
    for _ in range(6):
        lin(torch.randn(8, 32)).sum().backward()
        p.step()
"""


def test_repeat_cycles_are_separate_collections(tmp_path: Path) -> None:
    out = tmp_path / "tb"
    subprocess.run([sys.executable, "-c", REPEAT_SCRIPT, str(out)], check=True, capture_output=True, timeout=120)
    traces = sorted(out.glob("*.pt.trace.json"))
    assert len(traces) == 2  # one file per repeat cycle, same (unknown) rank
    store = tmp_path / "store"
    analyze_here("ingest", str(out), "--store", str(store))
    cols = query(store, "SELECT rank, rank_source, steps, missing FROM collections ORDER BY steps[1]")
    assert [c["steps"] for c in cols] == [[1, 2], [4, 5]]  # ProfilerStep ids of each cycle, not merged
    # no rank anywhere (single process, no distributedInfo): both cycles come from one worker -> rank 0
    assert [(c["rank"], c["rank_source"]) for c in cols] == [(0, "single"), (0, "single")]
    # two workers without ranks are numbered in discovery order, and the store says so
    other = out / "host_5678.1700000000000.pt.trace.json"
    shutil.copy(traces[0], other)
    analyze_here("ingest", str(out), "--store", str(store))
    cols = query(store, "SELECT rank, rank_source, missing, root_path FROM collections")
    assert sorted(c["rank"] for c in cols) == [0, 0, 1]
    assert all(c["rank_source"] == "assigned" and any("no rank found" in m for m in c["missing"]) for c in cols)
    per = query(store, "SELECT collection_id, count(DISTINCT step) AS n FROM steps GROUP BY 1")
    assert sorted(p["n"] for p in per) == [2, 2, 2]


def test_rank_sources(tmp_path: Path) -> None:
    src = sorted((SAMPLES / "kineto_gloo_2rank" / "rank_1").rglob("*.pt.trace.json"))[-1]
    root = tmp_path / "job"
    # 1) distributedInfo.rank in a flat folder
    (root / "flat").mkdir(parents=True)
    shutil.copy(src, root / "flat" / "worker.pt.trace.json")
    # 2) a rank_{id} folder wins over the file's own distributedInfo (and a mismatch is reported)
    (root / "rank_7").mkdir()
    shutil.copy(src, root / "rank_7" / "w.pt.trace.json")
    store = tmp_path / "store"
    analyze_here("ingest", str(root), "--store", str(store))
    got = {
        c["root_path"]: (c["rank"], c["rank_source"], c["status"])
        for c in query(store, "SELECT root_path, rank, rank_source, status FROM collections")
    }
    assert got["flat/worker.pt.trace.json"] == (1, "distributedInfo", "complete")
    assert got["rank_7/w.pt.trace.json"] == (7, "rank_dir", "partial")
    warn = query(store, "SELECT error FROM source_files WHERE path = 'rank_7/w.pt.trace.json'")[0]["error"]
    assert "distributedInfo.rank is 1 but the folder says rank 7" in warn

    # 3) a single trace with no rank at all is rank 0
    solo = tmp_path / "solo"
    solo.mkdir()
    data = json.loads(src.read_text())
    data.pop("distributedInfo", None)
    (solo / "t.pt.trace.json").write_text(json.dumps(data))
    analyze_here("ingest", str(solo), "--store", str(store))
    assert query(store, "SELECT rank, rank_source FROM collections WHERE run = 'solo'") == [
        {"rank": 0, "rank_source": "single"}
    ]
