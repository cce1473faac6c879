"""Make the trimmed torch_npu samples of this repo from the public Ascend-msinsight test data.

    python sample_data/trim_torch_npu.py SAMPLES_ROOT

SAMPLES_ROOT is a checkout of the profiling samples (see sample_data/README.md for the repository,
commit and paths). Writes:

- ``sample_data/torch_npu_text_level1/rank{0,1}_ascend_pt``: every file byte-exact except
  ``trace_view.json``, from which the ``python_function`` events, the flow events (``ph`` s/f, not
  read by rankscope) and the ``Acc PMU`` / ``QoS`` counter events are dropped (everything else
  kept; the file stays a one-line JSON array);
- ``sample_data/torch_npu_db_level1/rank{0,1}_ascend_pt``: ``analysis.db`` and ``profiler_info``
  byte-exact; in ``ascend_pytorch_profiler_{r}.db`` the python-trace rows of ``PYTORCH_API``
  (type 50003, the db twin of ``python_function``) and the ``ACC_PMU`` rows are deleted, then VACUUM;
- ``tests/data/torch_npu_{text,db}_level{0,2}/rank0_ascend_pt``: rank 0 excerpts for the
  level tests (see ``LEVEL_EXCERPT`` below for what each keeps);
- ``tests/data/torch_npu_text_2023/rank{0,1}_ascend_pt``: the older (2023) export, byte-exact
  (upstream already trimmed it and left out trace_view.json).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SRC_TEXT = "ascend-msinsight/test/data/pytorch/text/{level}/rank{rank}_ascend_pt"
SRC_DB = "ascend-msinsight/test/data/pytorch/db/{level}/rank{rank}_ascend_pt"
SRC_2023 = "ascend-msinsight/server/src/test/test_data/test_rank_{rank}"
OUT = "ASCEND_PROFILER_OUTPUT"

# tests/data excerpts: files of ASCEND_PROFILER_OUTPUT kept byte-exact; trace_view.json keeps only
# the M events, ProfilerStep, the HCCL lanes and (Level2) the CANN Runtime API events
LEVEL_EXCERPT = {
    "level0": ["kernel_details.csv", "l2_cache.csv", "step_trace_time.csv"],
    "level2": [
        "kernel_details.csv",
        "step_trace_time.csv",
        "communication.json",
        "communication_matrix.json",
        "api_statistic.csv",
    ],
}
# profiler db tables emptied in the tests/data excerpts (kept: steps, tasks, kernels, communication,
# CANN API); PYTORCH_API keeps only the ProfilerStep rows and STRING_IDS only the framework strings they use
DB_EXCERPT_EMPTY = [
    "PYTORCH_CALLCHAINS",
    "CONNECTION_IDS",
    "MEMORY_RECORD",
    "OP_MEMORY",
    "NPU_OP_MEM",
    "NPU_MODULE_MEM",
    "NPU_MEM",
    "ACC_PMU",
    "HBM",
    "LLC",
    "SOC_BANDWIDTH_LEVEL",
    "QOS",
    "connectionCats",
    "TASK_PMU_INFO",
]


def _processes(events: list[dict[str, Any]]) -> dict[Any, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}


def _write_trace(path: Path, events: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps(events, ensure_ascii=False), encoding="utf-8")


def trim_text(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    tv = dst / OUT / "trace_view.json"
    events = json.loads(tv.read_text(encoding="utf-8"))
    proc = _processes(events)
    keep = [
        e
        for e in events
        if e.get("cat") != "python_function"
        and e.get("ph") not in ("s", "f")
        and not (e.get("ph") == "C" and proc.get(e.get("pid")) in ("Acc PMU", "QoS"))
    ]
    _write_trace(tv, keep)


def trim_db(src: Path, dst: Path, rank: int, empty: list[str] | None = None, keep_python_api: str = "trace") -> None:
    shutil.copytree(src, dst)
    db = dst / OUT / f"ascend_pytorch_profiler_{rank}.db"
    con = sqlite3.connect(db)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if keep_python_api == "trace":
        con.execute("DELETE FROM PYTORCH_API WHERE type = 50003")
    else:  # excerpts: only the ProfilerStep ranges, and the framework strings they use
        con.execute(
            "DELETE FROM PYTORCH_API WHERE name NOT IN (SELECT id FROM STRING_IDS WHERE value LIKE 'ProfilerStep#%')"
        )
        con.execute(f"DELETE FROM STRING_IDS WHERE id >= {1 << 28} AND id NOT IN (SELECT name FROM PYTORCH_API)")
    for t in ["ACC_PMU", *(empty or [])]:
        if t in tables:
            con.execute(f'DELETE FROM "{t}"')
    con.commit()
    con.execute("VACUUM")
    con.close()


def excerpt_text(src: Path, dst: Path, level: str) -> None:
    (dst / OUT).mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, dst / f.name)
    for name in LEVEL_EXCERPT[level]:
        shutil.copy2(src / OUT / name, dst / OUT / name)
    events = json.loads((src / OUT / "trace_view.json").read_text(encoding="utf-8"))
    proc = _processes(events)
    keep = [
        e
        for e in events
        if e.get("ph") == "M"
        or (e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
        or (e.get("ph") == "X" and proc.get(e.get("pid")) == "HCCL")
        or (level == "level2" and e.get("ph") == "X" and str(e.get("name", "")).startswith("Runtime@"))
    ]
    _write_trace(dst / OUT / "trace_view.json", keep)


def main(root: Path) -> None:
    targets = [REPO / "sample_data" / "torch_npu_text_level1", REPO / "sample_data" / "torch_npu_db_level1"]
    targets += [REPO / "tests" / "data" / f"torch_npu_{k}_{lv}" for k in ("text", "db") for lv in ("level0", "level2")]
    targets += [REPO / "tests" / "data" / "torch_npu_text_2023"]
    for t in targets:
        shutil.rmtree(t, ignore_errors=True)
    for rank in (0, 1):
        trim_text(root / SRC_TEXT.format(level="level1", rank=rank), targets[0] / f"rank{rank}_ascend_pt")
        trim_db(root / SRC_DB.format(level="level1", rank=rank), targets[1] / f"rank{rank}_ascend_pt", rank)
        shutil.copytree(root / SRC_2023.format(rank=rank), targets[-1] / f"rank{rank}_ascend_pt")
    for level in ("level0", "level2"):
        excerpt_text(
            root / SRC_TEXT.format(level=level, rank=0),
            REPO / "tests" / "data" / f"torch_npu_text_{level}" / "rank0_ascend_pt",
            level,
        )
        trim_db(
            root / SRC_DB.format(level=level, rank=0),
            REPO / "tests" / "data" / f"torch_npu_db_{level}" / "rank0_ascend_pt",
            0,
            empty=DB_EXCERPT_EMPTY,
            keep_python_api="steps",
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
