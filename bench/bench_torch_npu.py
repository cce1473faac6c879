"""Ingest speed of the torch_npu readers, against a plain stdlib parse of the same files, same run.

    python bench/bench_torch_npu.py                  # the bundled samples + a 2-rank export scaled 40x
    python bench/bench_torch_npu.py --scale 200 --repeat 3

The scaled set is made from ``sample_data/torch_npu_text_level1``: each rank's step is repeated
``--scale`` times, shifted in time by the step's length (trace_view.json events, kernel_details.csv,
operator_details.csv, memory_record.csv, operator_memory.csv rows; exact µs strings kept exact).

Timed, each in its own subprocess, rounds interleaved:

- ours: the real CLI ``analyze ingest <folder> --store <fresh folder>`` (interpreter start, imports,
  discovery, parsing, Parquet, catalog commit: everything);
- baseline: ``json.load`` of every trace_view.json plus ``csv.reader`` over every CSV, nothing else
  (the stdlib's floor for just reading the text).

Peak memory is the largest resident set of any process of the run (``ru_maxrss`` of the children).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "torch_npu_text_level1"
DB_SAMPLE = REPO / "sample_data" / "torch_npu_db_level1"
ANALYZE = Path(sys.executable).parent / "analyze"
OUT = "ASCEND_PROFILER_OUTPUT"
SCALED_CSV = {  # file -> timestamp columns shifted per copy
    "kernel_details.csv": ("Start Time(us)",),
    "memory_record.csv": ("Timestamp(us)",),
    "operator_memory.csv": ("Allocation Time(us)", "Release Time(us)", "Active Release Time(us)"),
    "operator_details.csv": (),
}


def _shift(text: str, us: Decimal) -> str:
    s = text.strip()
    if not s or s == "N/A":
        return text
    tail = "\t" if text.endswith("\t") else ""
    return f"{Decimal(s) + us:.3f}{tail}"


def make_scaled(dst: Path, scale: int) -> None:
    for rank_dir in sorted(SAMPLE.iterdir()):
        out = dst / rank_dir.name / OUT
        shutil.copytree(rank_dir, dst / rank_dir.name)
        events = json.loads((rank_dir / OUT / "trace_view.json").read_text(encoding="utf-8"))
        step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
        period = Decimal(str(step["dur"])) + Decimal(1000)
        scaled = []
        for k in range(scale):
            off = period * k
            for e in events:
                if e.get("ph") == "M" and k:
                    continue
                e2 = dict(e)
                if isinstance(e2.get("ts"), str):
                    e2["ts"] = _shift(e2["ts"], off)
                if e2.get("name") == step["name"]:
                    e2["name"] = f"ProfilerStep#{50 + k}"
                scaled.append(e2)
        (out / "trace_view.json").write_text(json.dumps(scaled, ensure_ascii=False), encoding="utf-8")
        for name, cols in SCALED_CSV.items():
            with open(rank_dir / OUT / name, encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f))
            header, body = rows[0], rows[1:]
            idx = [header.index(c) for c in cols if c in header]
            step_i = header.index("Step Id") if "Step Id" in header else None
            with open(out / name, "w", encoding="utf-8", newline="") as f:
                w = csv.writer(f)
                w.writerow(header)
                for k in range(scale):
                    off = period * k
                    for r in body:
                        r2 = list(r)
                        for i in idx:
                            r2[i] = _shift(r2[i], off)
                        if step_i is not None and r2[step_i].strip():
                            r2[step_i] = str(50 + k)
                        w.writerow(r2)
        # communication.json, communication_matrix.json, step_trace_time.csv: one step's worth, as
        # written (still read; not scaled)


BASELINE = r"""
import csv, json, sys
from pathlib import Path
n = 0
for p in sorted(Path(sys.argv[1]).rglob("*")):
    if p.name == "trace_view.json":
        n += len(json.load(open(p, encoding="utf-8")))
    elif p.suffix == ".csv":
        with open(p, encoding="utf-8", newline="") as f:
            n += sum(1 for _ in csv.reader(f))
print(n)
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def size_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-npu-") as tmp:
        tmp_p = Path(tmp)
        scaled = tmp_p / f"scaled_x{args.scale}"
        make_scaled(scaled, args.scale)
        sets = {"samples text": SAMPLE, "samples db": DB_SAMPLE, f"text x{args.scale}": scaled}
        for label, folder in sets.items():
            ours, base = [], []
            for r in range(args.repeat):
                store = tmp_p / f"store-{label.replace(' ', '_')}-{r}"
                ours.append(timed([str(ANALYZE), "ingest", str(folder), "--store", str(store)])[0])
                if "db" not in label:
                    base.append(timed([sys.executable, "-c", BASELINE, str(folder)])[0])
            o = statistics.median(ours)
            line = f"{label:>14}: {size_mb(folder):7.1f} MB  ours {o:6.2f} s"
            if base:
                b = statistics.median(base)
                line += f"  baseline (json.load + csv.reader) {b:6.2f} s  ours/baseline {o / b:4.2f}x"
            print(line, flush=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"largest resident set of any child process: {peak:.0f} MB")


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    main()
