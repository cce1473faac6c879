"""The ingest of a many-rank job: the local process pool against a local Dask cluster.

The job is made of real torch.profiler traces, replicated per rank through the readers' input (not
by writing store rows): rank r is a copy of one source rank's trace with its ``distributedInfo``
rank and world size rewritten and every timestamp shifted by r x 13 µs (ranks are never aligned);
with ``--slow-rank K`` rank K alone is a copy of that source rank (tests/data/kineto_gloo_4rank_slow:
rank 1 is the slow one) and the others copy the remaining ranks. The folder is written once to
``bench/out/cluster_job_<source>_<ranks>`` and reused.

Measured, in the same run, in turns (``--rounds``):

- ``local``: ``analyze ingest JOB --workers N`` — the baseline: the local pool of N processes;
- ``dask``: ``analyze ingest JOB --scheduler-file F`` against a ``dask scheduler`` and N
  ``dask worker --nthreads 1`` processes on 127.0.0.1, started once before the first round (their
  start-up is printed, not counted: a cluster is up before the ingests it serves).

Wall time of the whole ``analyze ingest`` process; peak RSS sampled every 100 ms per role (the
driver's process tree — for ``local`` that includes its pool — the scheduler, each worker's process
tree), and the sum over all of them at one instant; and whether the two stores are identical (the
golden fingerprint of tests/golden.py, every fact table and the catalog rows of the run).

    python bench/bench_cluster.py                                   # 64 ranks of the 4-rank slow-rank sample
    python bench/bench_cluster.py --source bench/out/set_4rank_small --ranks 16 --slow-rank -1
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(HERE)]

from bench_ingest import _kb, _tree  # noqa: E402
from golden import fingerprint  # noqa: E402

from analyzer.store import Store  # noqa: E402

BIN = Path(sys.executable).parent
SAMPLE_S = 0.1
JITTER_US = 13
_TS = re.compile(rb'("ts": )(\d+)')


# -- the job ------------------------------------------------------------------------------------


def _source_traces(source: Path) -> dict[int, bytes]:
    """Source rank -> its trace (the newest trace below the rank's folder), decompressed."""
    out = {}
    for f in sorted(source.rglob("*.pt.trace.json*")):
        data = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
        m = re.search(rb'"distributedInfo": \{[^{}]*?"rank": (\d+)', data[:20000])
        if m:
            out[int(m.group(1))] = data
    if not out:
        raise SystemExit(f"{source}: no torch.profiler trace with distributedInfo")
    return out


def build_job(source: Path, ranks: int, slow: int, out: Path = OUT) -> Path:
    dest = out / f"cluster_job_{source.name}_{ranks}"
    stamp = dest / ".complete"
    if stamp.exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    traces = _source_traces(source)
    normal = [r for r in sorted(traces) if r != slow] or sorted(traces)
    world = max(traces) + 1
    for r in range(ranks):
        src = slow if r == slow and slow in traces else normal[r % len(normal)]
        data = traces[src].replace(
            f'"rank": {src}, "world_size": {world}'.encode(), f'"rank": {r}, "world_size": {ranks}'.encode(), 1
        )
        shift = r * JITTER_US
        data = _TS.sub(lambda m, s=shift: m.group(1) + str(int(m.group(2)) + s).encode(), data)
        d = dest / f"rank_{r}"
        d.mkdir(parents=True)
        (d / f"rank{r}.pt.trace.json").write_bytes(data)
    stamp.write_text(json.dumps({"source": str(source), "ranks": ranks, "slow": slow}))
    return dest


def stored_fingerprint(store: Store, run: str) -> dict[str, str]:
    """The analyses stored with the run at ingest (``run_results``): a hash of each one's rows."""
    import hashlib

    import pyarrow.parquet as pq

    from analyzer.analyses.stored import from_arrow

    rr = store.load_catalog(["run_results"])["run_results"].to_pylist()
    return {
        r["analysis"]: hashlib.sha256(
            from_arrow(pq.read_table(store.path / r["path"])).to_json(orient="split", default_handler=str).encode()
        ).hexdigest()[:16]
        for r in rr
        if r["run"] == run
    }


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Sampler:
    """Peak RSS (MB) per role, each role a process tree, and of all of them at one instant."""

    roles: dict[str, int]  # role -> root pid
    peaks: dict[str, float] = field(default_factory=dict)
    largest: dict[str, float] = field(default_factory=dict)  # the largest single process of the role
    total: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = 0.0
            for role, pid in self.roles.items():
                rss = [_kb(f"/proc/{p}/status", b"VmRSS:") / 1024 for p in _tree(pid)]
                self.peaks[role] = max(self.peaks.get(role, 0.0), sum(rss))
                self.largest[role] = max([self.largest.get(role, 0.0), *rss])
                now += sum(rss)
            self.total = max(self.total, now)
            self._stop.wait(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_ingest(args: list[str], others: dict[str, int]) -> dict[str, Any]:
    """One ``analyze ingest`` process, sampled with the cluster's processes (``others``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "analyze"), "ingest", *args, "--json"], stdout=subprocess.PIPE, cwd=REPO)
    sampler = Sampler({"driver": proc.pid, **others})
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"analyze ingest {' '.join(args)} failed ({proc.returncode})")
    report = json.loads(out)
    return {
        "wall_s": wall,
        "ingest_s": report["seconds"],
        "collections": len(report["collections"]),
        "pids": sorted({c["read_by"]["pid"] for c in report["collections"] if "read_by" in c}),
        "peak_mb": dict(sampler.peaks),
        "largest_mb": dict(sampler.largest),
        "total_peak_mb": sampler.total,
    }


class LocalDask:
    """``dask scheduler`` + N ``dask worker --nthreads 1`` on 127.0.0.1, stopped by PID."""

    def __init__(self, workers: int, tmp: Path):
        self.tmp = tmp
        self.file = tmp / "scheduler.json"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        self._start(
            "scheduler",
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)],
            env,
        )
        for i in range(workers):
            self._start(
                f"worker{i}",
                [
                    "worker",
                    "--scheduler-file",
                    str(self.file),
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                    "--local-directory",
                    str(tmp / f"w{i}"),
                ],
                env,
            )
        from distributed import Client

        while not self.file.exists():
            time.sleep(0.05)
        with Client(scheduler_file=str(self.file), timeout=120, set_as_default=False) as c:
            c.wait_for_workers(workers, timeout=300)
        self.startup_s = time.perf_counter() - t0

    def _start(self, role: str, args: list[str], env: dict[str, str]) -> None:
        with open(self.tmp / f"{role}.log", "wb") as log:
            self.procs[role] = subprocess.Popen(
                [str(BIN / "dask"), *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def pids(self) -> dict[str, int]:
        return {role: p.pid for role, p in self.procs.items()}

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=REPO / "tests" / "data" / "kineto_gloo_4rank_slow")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--slow-rank", type=int, default=1, help="the rank that copies the source's slow rank (-1: none)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT, help="where the job and the figures go (default bench/out)")
    ap.add_argument("--keep-store", type=Path, help="keep the first local ingest's store here (for the web benches)")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    job = build_job(args.source.resolve(), args.ranks, args.slow_rank, out)
    size = sum(f.stat().st_size for f in job.rglob("*.json"))
    print(f"job: {job} — {args.ranks} ranks, {size / 2**20:.0f} MiB of trace")
    results: dict[str, list[dict[str, Any]]] = {"local": [], "dask": []}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cluster = LocalDask(args.workers, tmp)
        try:
            print(f"dask: scheduler + {args.workers} workers up in {cluster.startup_s:.1f} s (not counted)")
            for i in range(args.rounds):
                for kind in ("local", "dask"):
                    store = tmp / f"{kind}{i}"
                    if kind == "local":
                        r = run_ingest(
                            [str(job), "--store", str(store), "--run", "job", "--workers", str(args.workers)], {}
                        )
                    else:
                        r = run_ingest(
                            [str(job), "--store", str(store), "--run", "job", "--scheduler-file", str(cluster.file)],
                            cluster.pids(),
                        )
                    r["fingerprint"] = fingerprint(Store(store), ["job"])["job"]
                    r["fingerprint"]["run_results"] = stored_fingerprint(Store(store), "job")
                    if kind == "local" and i == 0 and args.keep_store:
                        shutil.rmtree(args.keep_store, ignore_errors=True)
                        shutil.copytree(store, args.keep_store)
                    results[kind].append(r)
                    roles = "  ".join(f"{k} {v:.0f}" for k, v in r["peak_mb"].items())
                    print(
                        f"  round {i + 1} {kind:5}: {r['wall_s']:6.1f} s  peak RSS MB: {roles}  "
                        f"(all at once {r['total_peak_mb']:.0f})"
                    )
        finally:
            cluster.stop()
    identical = all(r["fingerprint"] == results["local"][0]["fingerprint"] for rs in results.values() for r in rs)
    worker_pids = {p for r in results["dask"] for p in r["pids"]}
    med = {k: statistics.median(r["wall_s"] for r in rs) for k, rs in results.items()}
    print(
        f"median wall: local {med['local']:.1f} s, dask {med['dask']:.1f} s "
        f"(dask / local {med['dask'] / med['local']:.2f})"
    )
    print(f"stores identical: {identical}; dask read in {len(worker_pids)} worker processes")
    dest = out / f"cluster-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dest.write_text(
        json.dumps(
            {
                "job": str(job),
                "ranks": args.ranks,
                "trace_mib": size / 2**20,
                "workers": args.workers,
                "startup_s": cluster.startup_s,
                "results": results,
                "identical": identical,
                "load": os.getloadavg(),
            },
            indent=1,
        )
    )
    print(f"wrote {dest}")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
