"""The short commands a user types most, whole process, against the code of another revision and the
bare interpreter, in the same run.

    python bench/bench_commands.py                  # the code before the speed work (1a1c576), 7 rounds
    python bench/bench_commands.py --before main --repeat 5
    python bench/bench_commands.py --before main --only report   # the four reports alone

What is timed (wall time, start to exit, of one `analyze ...` process, and its CPU time with its
children's: the figure to read on a loaded machine; medians over the rounds):

- ``analyze --help``;
- ``analyze runs`` on a store holding the bundled 2-rank samples (``sample_data/``);
- ``analyze report --run R`` for each bundled 2-rank sample;
- ``analyze ingest`` of an unchanged sample folder (the re-ingest: nothing to read);
- ``analyze summary --run R`` of the Kineto sample.

Baselines of the same run, each command alternating with them within a round:

- *before*: the same command with the package of ``--before`` (a git revision, exported with
  ``git archive`` to a scratch folder and put first on ``PYTHONPATH``, same interpreter and
  libraries), on a store that code ingested itself;
- *python*: ``python -c pass``, the start of the interpreter alone (the floor of any command).

The stores are made once, before the clock runs, by each code's own ``analyze ingest``; one uncounted
round of every command then compiles each side's modules (Python caches them, as on a user's machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
SAMPLES = ("kineto_gloo_2rank", "torch_npu_text_level1", "torch_npu_db_level1", "mindspore_cpu_2rank")
BEFORE = "1a1c576"  # main just before the speed work landed (issue 13)


def _env(pythonpath: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine: compiled modules cached
    env["COLUMNS"] = "80"
    if pythonpath is None:
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and the children it waited for) of one command."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    secs = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return secs, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def export_tree(rev: str, dest: Path) -> Path:
    """The whole tree of ``rev`` under ``dest`` (its ``src/``), via git archive."""
    archive = dest / "src.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(REPO), "archive", rev], stdout=fh, check=True)
    with tarfile.open(archive) as tf:
        tf.extractall(dest / "src", filter="data")
    archive.unlink()
    return dest / "src"


def _commands(store: Path, samples: Path) -> dict[str, list[str]]:
    py = [sys.executable, "-m", "analyzer"]
    out = {
        "analyze --help": [*py, "--help"],
        "analyze runs": [*py, "runs", "--store", str(store)],
    }
    for s in SAMPLES:
        out[f"analyze report ({s})"] = [*py, "report", "--run", s, "--store", str(store)]
    out["analyze summary (kineto_gloo_2rank)"] = [*py, "summary", "--run", SAMPLES[0], "--store", str(store)]
    out["re-ingest, unchanged (kineto_gloo_2rank)"] = [
        *py,
        "ingest",
        str(samples / SAMPLES[0]),
        "--run",
        SAMPLES[0],
        "--store",
        str(store),
    ]
    return out


def _make_store(store: Path, samples: Path, env: dict[str, str]) -> None:
    for s in SAMPLES:
        cmd = [sys.executable, "-m", "analyzer", "ingest", str(samples / s), "--run", s, "--store", str(store)]
        _run(cmd, env)


def _table(
    times: dict[str, dict[str, list[float]]],
    cpus: dict[str, dict[str, list[float]]],
    floor: list[float],
    names: list[str],
    before_rev: str,
    load0: tuple[float, float, float],
    res: Path,
) -> None:
    med_floor = statistics.median(floor)
    print(
        f"\n{'command':<44} {'ours s':>7} {'before s':>9} {'before/ours':>12} {'ours/python':>12}"
        f" {'CPU ours s':>11} {'CPU before s':>13} {'CPU before/ours':>16}"
    )
    rows = []
    for name in names:
        ours, before = statistics.median(times[name]["ours"]), statistics.median(times[name]["before"])
        c_ours, c_before = statistics.median(cpus[name]["ours"]), statistics.median(cpus[name]["before"])
        rows.append(
            {
                "command": name,
                "ours": ours,
                "before": before,
                "cpu_ours": c_ours,
                "cpu_before": c_before,
                "rounds": times[name],
                "cpu_rounds": cpus[name],
            }
        )
        print(
            f"{name:<44} {ours:7.3f} {before:9.3f} {before / ours:11.2f}x {ours / med_floor:11.2f}x"
            f" {c_ours:11.3f} {c_before:13.3f} {c_before / c_ours:15.2f}x"
        )
    print(f"{'python -c pass':<44} {med_floor:7.3f}   ({len(floor)} rounds)")
    load1 = os.getloadavg()
    print(f"load now {tuple(round(x, 2) for x in load1)}", flush=True)
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "before": before_rev,
        "load_start": load0,
        "load_end": load1,
        "python_seconds": floor,
        "commands": rows,
    }
    res.write_text(json.dumps(summary, indent=1))
    print(f"written {res.relative_to(REPO)}\n", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=BEFORE, help=f"git revision of the baseline code (default {BEFORE})")
    ap.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--only", default="", help="time only the commands whose name holds this text (e.g. report)")
    args = ap.parse_args(argv)

    OUT.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="commands-", dir=OUT))
    try:
        before_src = export_tree(args.before, scratch)
        # each code reads its own copy of the samples (the re-ingest compares sizes and mtimes)
        sides = {
            "ours": (_env(None), scratch / "samples-ours", scratch / "store-ours"),
            "before": (_env(before_src), scratch / "samples-before", scratch / "store-before"),
        }
        for env, samples, store in sides.values():
            samples.mkdir()
            for s in SAMPLES:
                shutil.copytree(REPO / "sample_data" / s, samples / s)
            _make_store(store, samples, env)
        load0 = os.getloadavg()
        print(
            f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, load {tuple(round(x, 2) for x in load0)}; "
            f"before = {args.before}; {args.repeat} rounds"
        )
        py_env = _env(None)
        times: dict[str, dict[str, list[float]]] = {}
        cpus: dict[str, dict[str, list[float]]] = {}
        floor: list[float] = []
        names = [n for n in _commands(scratch, scratch) if args.only in n]
        res = OUT / f"commands-{time.strftime('%Y%m%d-%H%M%S')}.json"
        for env, samples, store in sides.values():  # uncounted: compiles each side's modules once
            for name in names:
                _run(_commands(store, samples)[name], env)
        for r in range(args.repeat):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in names:
                for side in order:
                    env, samples, store = sides[side]
                    cmd = _commands(store, samples)[name]
                    wall, cpu = _run(cmd, env)
                    times.setdefault(name, {}).setdefault(side, []).append(wall)
                    cpus.setdefault(name, {}).setdefault(side, []).append(cpu)
                floor.append(_run([sys.executable, "-c", "pass"], py_env)[0])
                line = ", ".join(f"{side} {times[name][side][-1]:.2f} s" for side in order)
                print(f"  round {r + 1}: {name}: {line}", flush=True)
            # the table so far after every round (a long run under load can be cut short)
            _table(times, cpus, floor, names, args.before, load0, res)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
