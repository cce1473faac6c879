"""Ascend inputs: our `ingest + report` against msprof-analyze's `cluster -m all`, same files, same run.

    python bench/bench_ascend.py                   # every input below, 5 timed + 2 memory rounds
    python bench/bench_ascend.py --repeat 3 --inputs torch_npu_text,torch_npu_db

msprof-analyze (PyPI ``msprof-analyze``, in the test extra) is the tool Ascend users run over a
cluster's profiles: ``msprof-analyze cluster -d <folder> -m all`` reads every rank and writes its
cluster analyses (step time breakdown, communication, matrix, slow rank / link, ...). Ours for the
same question is two processes: ``analyze ingest <folder> --store <fresh>`` then ``analyze report
--store <it>``; their times are added. Whole processes on both sides, each round on a fresh copy of
the input (msprof-analyze writes next to its input) and a fresh output folder, the tools
alternating (who goes first alternates too); medians over the rounds.

Memory rounds sample each process tree from ``/proc`` (see bench_ingest.py): peak PSS of the tree
and peak RSS of its largest process (ours: the larger of the two processes).

Inputs (real public samples unless said): the torch_npu Level1 text and db exports of
``sample_data/`` (2 ranks, Ascend 910B), the same text export scaled (``--scale`` copies of its step
along the time axis, as bench_torch_npu.py makes it), MindSpore's NPU text export of
``tests/data/mindspore_npu_constructed`` (built from real CANN files, see its generator), real
MindSpore 2.10 CPU output of 2 ranks (``sample_data/mindspore_cpu_2rank``: ``trace_view.json`` and
``FRAMEWORK/``), a real legacy MindSpore ``profiler/`` folder (``tests/data/mindspore_legacy_alexnet``)
and the msprof exports of ``tests/data`` (new and legacy per-device timeline layouts). msprof-analyze
refuses some of these (msprof exports: it wants ``msprof --analyze`` output); a refusal is reported
with our time alone, no ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_ingest import Measured, measure  # noqa: E402

OUT = HERE / "out"
TARGET = 3.0  # msprof-analyze whole process / ours (ingest + report)
INPUTS = {
    "torch_npu_text": REPO / "sample_data" / "torch_npu_text_level1",
    "torch_npu_db": REPO / "sample_data" / "torch_npu_db_level1",
    "torch_npu_text_scaled": None,  # made from torch_npu_text (--scale)
    "mindspore_npu": REPO / "tests" / "data" / "mindspore_npu_constructed",
    "mindspore_cpu": REPO / "sample_data" / "mindspore_cpu_2rank",
    "mindspore_legacy": REPO / "tests" / "data" / "mindspore_legacy_alexnet",
    "msprof_legacy_timeline": REPO / "tests" / "data" / "msprof_legacy_timeline",
    "msprof_text": REPO / "tests" / "data" / "msprof_cann8",
    "msprof_db": REPO / "tests" / "data" / "msprof_db",
}


def _exe(name: str) -> str:
    p = Path(sys.executable).with_name(name)
    return str(p) if p.exists() else name


def run_ours(src: Path, scratch: Path, sample: bool) -> Measured:
    work = Path(tempfile.mkdtemp(prefix="ours-", dir=scratch))
    try:
        data = work / src.name
        shutil.copytree(src, data)
        store = work / "store"
        ing = measure("ours", [_exe("analyze"), "ingest", str(data), "--store", str(store), "--json"], sample)
        rep = measure("ours", [_exe("analyze"), "report", "--store", str(store), "--json"], sample)
        return Measured(
            "ours",
            ing.wall_seconds + rep.wall_seconds,
            ing.wall_seconds,  # the ingest alone ("work" column: the first of the two processes)
            ing.cpu_seconds + rep.cpu_seconds,
            max(ing.peak_pss_mb, rep.peak_pss_mb),
            max(ing.peak_rss_mb, rep.peak_rss_mb),
            max(ing.largest_rss_mb, rep.largest_rss_mb),
            max(ing.largest_pss_mb, rep.largest_pss_mb),
            max(ing.peak_processes, rep.peak_processes),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_msprof_analyze(src: Path, scratch: Path, sample: bool) -> Measured:
    work = Path(tempfile.mkdtemp(prefix="ma-", dir=scratch))
    try:
        data = work / src.name
        shutil.copytree(src, data)
        out = work / "out"
        cmd = [_exe("msprof-analyze"), "cluster", "-d", str(data), "-m", "all", "-o", str(out)]
        m = measure("msprof-analyze", cmd, sample)
        if not (out / "cluster_analysis_output").is_dir():
            raise RuntimeError(f"msprof-analyze wrote no cluster_analysis_output for {src.name}")
        return m
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def bench_input(name: str, src: Path, args: argparse.Namespace, scratch: Path) -> dict[str, object]:
    print(f"\n{name}: {src.relative_to(REPO) if src.is_relative_to(REPO) else src}")
    try:  # does msprof-analyze take this input at all?
        run_msprof_analyze(src, scratch, False)
    except RuntimeError as exc:
        print(f"  msprof-analyze: {str(exc).splitlines()[0][:200]}")
        m = run_ours(src, scratch, False)
        print(f"  ours (ingest + report) {m.wall_seconds:.2f} s; no ratio")
        return {"input": name, "msprof_analyze": "refused", "ours_seconds": m.wall_seconds}
    timed: dict[str, list[Measured]] = {"ours": [], "msprof-analyze": []}
    sampled: dict[str, list[Measured]] = {"ours": [], "msprof-analyze": []}
    tools = [("ours", run_ours), ("msprof-analyze", run_msprof_analyze)]
    for kind, rounds, bucket in (("timed", args.repeat, timed), ("memory", args.memory_repeat, sampled)):
        for r in range(rounds):
            for tool, fn in tools if r % 2 == 0 else tools[::-1]:
                m = fn(src, scratch, kind == "memory")
                bucket[tool].append(m)
                extra = (
                    f"peak PSS {m.peak_pss_mb:5.0f} MB, largest process RSS {m.largest_rss_mb:5.0f} MB"
                    if kind == "memory"
                    else f"CPU {m.cpu_seconds:5.2f} s"
                )
                print(f"  {kind} round {r + 1} {tool:15s} {m.wall_seconds:6.2f} s  {extra}", flush=True)
    med = {t: _median([m.wall_seconds for m in timed[t]]) for t in timed}
    pss = {t: _median([m.peak_pss_mb for m in sampled[t]]) for t in sampled}
    big = {t: _median([m.largest_rss_mb for m in sampled[t]]) for t in sampled}
    ratio = med["msprof-analyze"] / med["ours"]
    rounds = [b.wall_seconds / a.wall_seconds for a, b in zip(timed["ours"], timed["msprof-analyze"])]
    print(
        f"  medians: ours {med['ours']:.2f} s (ingest {_median([m.work_seconds for m in timed['ours']]):.2f} s), "
        f"msprof-analyze {med['msprof-analyze']:.2f} s -> {ratio:.2f}x "
        f"(rounds {', '.join(f'{x:.2f}' for x in rounds)}) "
        f"target >= {TARGET}: {'OK' if ratio >= TARGET else 'MISSED'}\n"
        f"  peak PSS ours {pss['ours']:.0f} MB / msprof-analyze {pss['msprof-analyze']:.0f} MB; largest process RSS "
        f"{big['ours']:.0f} / {big['msprof-analyze']:.0f} MB"
    )
    return {
        "input": name,
        "median_seconds": med,
        "ratio": ratio,
        "ratio_rounds": rounds,
        "peak_pss_mb": pss,
        "largest_rss_mb": big,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", default=",".join(INPUTS), help="comma-separated subset of " + ", ".join(INPUTS))
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--memory-repeat", type=int, default=2, help="memory-sampled rounds (default 2)")
    ap.add_argument("--scale", type=int, default=40, help="copies of the step in torch_npu_text_scaled (default 40)")
    args = ap.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ascend-", dir=OUT))
    print(f"{os.cpu_count()} cores, load {tuple(round(x, 2) for x in os.getloadavg())}")
    results = []
    try:
        for name in [s.strip() for s in args.inputs.split(",") if s.strip()]:
            src = INPUTS[name]
            if src is None:
                from bench_torch_npu import make_scaled

                src = scratch / f"torch_npu_text_x{args.scale}"
                make_scaled(src, args.scale)
            results.append(bench_input(name, src, args, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    res = OUT / f"bench-ascend-{time.strftime('%Y%m%d-%H%M%S')}.json"
    res.write_text(json.dumps({"load_end": os.getloadavg(), "results": results}, indent=1, default=str))
    print(f"\nload at the end {tuple(round(x, 2) for x in os.getloadavg())}; written {res.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
