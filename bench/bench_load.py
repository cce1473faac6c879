"""Many users at once against the real server: ``analyze serve`` in its own process, N simulated
users for T seconds hitting pages and callbacks over HTTP; latency percentiles and errors.

The store is the one ``bench_webapp.py`` builds (64 ranks replicated from the torch_npu Level1
sample, ~20 M timeline slices; kept in ``bench/out/webapp_store`` and reused), or any store with
``--store``/``--run``. The server is started as a user starts it: ``analyze serve --port 0`` (with
``$RANKSCOPE_TOKEN`` set: a server that knows tokens requires it, an older one ignores it).

Each user is a thread with its own HTTP session (cookies kept, as a browser does):

- it opens the URL the server printed (the token in it, where there is one, becomes a cookie) and
  fetches the page's scripts once (a browser with an empty cache);
- then, until the time is up, it visits a page chosen at random and makes the calls the browser
  makes for it: the page's HTML, ``/_dash-layout``, ``/_dash-dependencies``, the router's
  ``/_dash-update-component`` for the page layout, then the page's callbacks (overview content;
  timeline lanes and the tiles of the whole run / a step / 1 ms for 8 ranks; operators grid and a
  drill; memory curves and peaks; communication), with a think time of 0.5-1.5 s between visits.

An error is a transport failure, an HTTP status other than 200/204 (the timeline's 409 "view
changed" included), or a callback answering with an error message. Before the clock starts one
visit of every page warms the server's caches (the first overview of a run computes its step
breakdown); those calls are not counted.

``--beside FOLDER``: while the users run, ``analyze ingest FOLDER`` runs again and again into the same
store (a run of its own each time, each committing while the server reads; dropped afterwards);
the commits made within the window are counted. ``--code DIR``: the server runs the ``analyzer`` /
``webapp`` packages of another checkout (e.g. ``git archive`` of an older commit), the baseline of
the same run.

    python bench/bench_load.py                       # 50 users, 60 s, the 64-rank bench store
    python bench/bench_load.py --beside sample_data/torch_npu_text_level1
    python bench/bench_load.py --users 10 --seconds 20 --ranks 16 --slices 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from bench_webapp import OUT, RUN, TIMELINE_PX, build_store, pct  # noqa: E402
from webapp_helpers import callback_body  # noqa: E402

from webapp import tiles  # noqa: E402
from webapp.params import format_ranks  # noqa: E402

PAGES = ("/", "/timeline", "/operators", "/memory", "/communication", "/training", "/advisor", "/cluster")
CLUSTER_METRICS = ("step_ns", "communication_ns", "wait_ns", "peak_memory", "slow_rank_votes", "straggler_lateness_ns")
ERROR_MARKERS = (b"msg-error", b"Internal error")


class Recorder:
    """Latencies and errors of every request, by kind (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: dict[str, list[float]] = {}
        self.errors: dict[str, list[str]] = {}
        self.counting = False

    def add(self, kind: str, seconds: float, error: str | None) -> None:
        if not self.counting:
            return
        with self.lock:
            self.times.setdefault(kind, []).append(seconds)
            if error:
                self.errors.setdefault(kind, []).append(error)


class User:
    """One simulated browser."""

    def __init__(self, base: str, start_url: str, rec: Recorder, deps: list[dict[str, Any]], info: dict[str, Any]):
        self.base = base
        self.start_url = start_url
        self.rec = rec
        self.deps = deps
        self.info = info
        self.http = requests.Session()
        self.rng = random.Random()

    def request(self, kind: str, method: str, path: str, **kw: Any) -> requests.Response | None:
        t = time.perf_counter()
        error = None
        r = None
        try:
            r = self.http.request(method, path if path.startswith("http") else self.base + path, timeout=120, **kw)
            if r.status_code not in (200, 204):
                error = f"HTTP {r.status_code}: {r.text[:200]}"
            elif any(m in r.content for m in ERROR_MARKERS):
                error = f"error message in the answer: {r.text[:200]}"
        except requests.RequestException as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.rec.add(kind, time.perf_counter() - t, error)
        return r if error is None else None

    def callback(self, kind: str, first_output: str, inputs: dict[str, Any], state: dict[str, Any] | None = None):
        body = callback_body(self.deps, first_output, inputs, state)
        return self.request(kind, "POST", "/_dash-update-component", json=body)

    # -- a visit ----------------------------------------------------------------------------------

    def open(self) -> None:
        """The first visit: the printed URL (token -> cookie), then the page's scripts once."""
        r = self.request("page html", "GET", self.start_url)
        if r is None:
            return
        for src in re.findall(rb'<script src="([^"]+)"', r.content):
            self.request("script (first visit)", "GET", src.decode())

    def visit(self, path: str) -> None:
        run = self.info["run"]
        self.request("page html", "GET", f"{path}?run={run}")
        self.request("_dash-layout", "GET", "/_dash-layout")
        self.request("_dash-dependencies", "GET", "/_dash-dependencies")
        self.callback(
            "page layout", "_pages_content.children", {"_pages_location.pathname": path, "_pages_location.search": ""}
        )
        getattr(self, "page_" + (path.strip("/") or "overview"))(run)

    def page_overview(self, run: str) -> None:
        step = self.rng.choice(["mean", *self.info["steps"][:20]])
        self.callback(
            "overview", "ov-content.children", {"ov-run.value": run, "ov-ranks.value": [], "ov-step.value": step}
        )

    def page_timeline(self, run: str) -> None:
        n = self.info["n_ranks"]
        first = self.rng.randrange(0, max(1, n - 7))
        ranks = list(range(first, min(n, first + 8)))
        r = self.request("timeline meta", "GET", f"/_timeline/meta?run={run}&ranks={format_ranks(ranks)}")
        if r is None:
            return
        m = r.json()
        ev = m["events"].get(str(ranks[0]))
        if not ev:
            return
        folded = list(dict.fromkeys(f"{ln['rank']}.{ln['group']}" for ln in m["lanes"] if ln["group"] != "other"))
        lanes = [ln["key"] for ln in m["lanes"] if ln["group"] != "other"][:40]
        self.tiles(run, m["fp"], folded[:40], ev[0], ev[1])
        steps = [s for s in m["steps"] if s[0] == ranks[0]]
        if steps:
            st = self.rng.choice(steps)
            self.tiles(run, m["fp"], lanes, st[2], st[3])
        a = self.rng.uniform(ev[0], max(ev[0], ev[1] - 1e6))
        self.tiles(run, m["fp"], lanes, a, a + 1e6)

    def tiles(self, run: str, fp: Any, keys: list[str], a: float, b: float) -> None:
        z = tiles.level_for((b - a) / TIMELINE_PX)
        want = [[k, z, i] for k in keys for i in tiles.tiles_for(a, b, z)]
        for lo in range(0, len(want), 256):
            self.request(
                "timeline tiles",
                "POST",
                "/_timeline/tiles",
                json={"run": run, "fp": fp, "tiles": want[lo : lo + 256]},
                headers={"Accept-Encoding": "gzip"},
            )

    def page_operators(self, run: str) -> None:
        src, grp, scope = self.rng.choice(
            [("kernels", "name", "across"), ("kernels", "type", "rank"), ("operators", "shape", "across")]
        )
        inputs = {
            "op-run.value": run,
            "op-ranks.value": [],
            "op-source.value": src,
            "op-group.value": grp,
            "op-scope.value": scope,
        }
        r = self.callback("operators grid", "op-grid.rowData", inputs)
        if r is None:
            return
        rows = r.json()["response"]["op-grid"]["rowData"]
        if rows and scope == "across":
            pick = rows[self.rng.randrange(min(10, len(rows)))]
            self.callback(
                "operators drill",
                "op-drill.children",
                {"op-grid.selectedRows": [pick], "op-grid.rowData": rows},
                {k: v for k, v in inputs.items() if k != "op-scope.value"},
            )

    def page_memory(self, run: str) -> None:
        comp = self.info.get("component")
        if not comp:
            return
        n = self.info["n_ranks"]
        first = self.rng.randrange(0, max(1, n - 7))
        ranks = list(range(first, min(n, first + 8)))
        self.callback(
            "memory curves",
            "mem-curves.figure",
            {
                "mem-run.value": run,
                "mem-ranks.value": ranks,
                "mem-component.value": comp,
                "mem-series.value": ["allocated", "reserved", "active"],
            },
        )
        self.callback(
            "memory peaks",
            "mem-peaks.children",
            {"mem-run.value": run, "mem-ranks.value": ranks, "mem-component.value": comp},
        )

    def page_communication(self, run: str) -> None:
        metric = self.rng.choice(["bytes", "transit_ns", "bandwidth_bytes_per_s"])
        self.callback(
            "communication",
            "cm-content.children",
            {"cm-run.value": run, "cm-ranks.value": [], "cm-metric.value": metric},
        )

    def some_ranks(self) -> list[int]:
        """All ranks, or 8 in a row."""
        n = self.info["n_ranks"]
        if self.rng.random() < 0.5:
            return []
        first = self.rng.randrange(0, max(1, n - 7))
        return list(range(first, min(n, first + 8)))

    def page_training(self, run: str) -> None:
        self.callback(
            "training",
            "tr-content.children",
            {"tr-run.value": run, "tr-ranks.value": self.some_ranks(), "tr-scalar.value": None},
        )

    def page_advisor(self, run: str) -> None:
        self.callback(
            "advisor",
            "adv-content.children",
            {
                "adv-run.value": run,
                "adv-ranks.value": self.some_ranks(),
                "adv-severity.value": None,
                "adv-rule.value": None,
            },
        )

    def page_cluster(self, run: str) -> None:
        metric = self.rng.choice(CLUSTER_METRICS)
        self.callback("cluster", "cl-content.children", {"cl-run.value": run, "cl-metric.value": metric})

    def loop(self, until: float, think: tuple[float, float]) -> None:
        self.open()
        while time.monotonic() < until:
            self.visit(self.rng.choice(PAGES))
            time.sleep(self.rng.uniform(*think))


def start_server(
    store: Path, token: str, code: Path | None = None, workers: int = 1
) -> tuple[subprocess.Popen[str], str]:
    """``analyze serve --port 0`` on ``store`` (``--workers N`` when more than 1); with ``code``,
    that checkout's packages serve."""
    env = {**os.environ, "RANKSCOPE_TOKEN": token}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyzer", "serve", "--store", str(store), "--port", "0"]
        + (["--workers", str(workers)] if workers > 1 else []),
        cwd=str(code or REPO),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"(http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # drain the log
            return proc, m.group(1)
    proc.kill()
    raise SystemExit("analyze serve printed no URL:\n" + "".join(seen))


def tree_rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of ``pid`` and its child processes (the workers of ``--workers``), MiB."""
    total = 0.0
    kids = Path(f"/proc/{pid}/task/{pid}/children")
    for p in [pid, *(int(k) for k in (kids.read_text().split() if kids.exists() else []))]:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


def tree_cpu_s(pid: int) -> float:
    """CPU time (user + system) of ``pid`` and its child processes so far, seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    kids = Path(f"/proc/{pid}/task/{pid}/children")
    for p in [pid, *(int(k) for k in (kids.read_text().split() if kids.exists() else []))]:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


class Beside:
    """``analyze ingest FOLDER`` into the store, again and again until stopped (a run of its own each
    time): an ingest committing beside the server. Counts the commits and their times."""

    def __init__(self, store: Path, folder: Path):
        self.store = store
        self.folder = folder
        self.runs: list[str] = []
        self.times: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _analyze(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "analyzer", *args, "--store", str(self.store)]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), check=False)

    def _loop(self) -> None:
        while not self.stop.is_set():
            run = f"beside-{len(self.runs) + len(self.failures)}"
            t = time.perf_counter()
            r = self._analyze("ingest", str(self.folder), "--run", run, "--workers", "1")
            if r.returncode == 0:
                self.runs.append(run)
                self.times.append(time.perf_counter() - t)
            else:
                self.failures.append(f"{run}: exit {r.returncode}: {(r.stderr or r.stdout)[-300:]}")

    def finish(self) -> None:
        """Wait for the ingest under way, then drop every run it made."""
        self.stop.set()
        self.thread.join()
        for run in self.runs:
            self._analyze("drop", run)


def store_info(store: Path, run: str) -> dict[str, Any]:
    from analyzer.store import Store
    from webapp import data
    from webapp.reader import reader

    with reader(Store(store), run) as rd:
        ranks = data.ranks_of(rd, run)
        steps = data.steps(rd, run, None)
        comps = data.memory_components(rd, run, ranks[:1])
    return {
        "run": run,
        "n_ranks": len(ranks),
        "steps": [int(s) for s in steps["step"]],
        "component": str(comps["component"].iloc[0]) if not comps.empty else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--think", type=float, nargs=2, default=(0.5, 1.5), metavar=("MIN", "MAX"))
    ap.add_argument("--store", default=str(OUT / "webapp_store"))
    ap.add_argument("--run", default=RUN)
    ap.add_argument("--ranks", type=int, default=64, help="when building the bench store")
    ap.add_argument("--slices", type=int, default=20_000_000, help="when building the bench store")
    ap.add_argument("--source", default=str(REPO / "sample_data" / "torch_npu_text_level1"))
    ap.add_argument("--json", dest="json_out", default=None, help="write the figures to this file too")
    ap.add_argument("--beside", default=None, help="a folder ingested again and again while the users run")
    ap.add_argument("--code", default=None, help="serve with this checkout's packages (the baseline)")
    ap.add_argument("--workers", type=int, default=1, help="analyze serve --workers (server processes)")
    args = ap.parse_args()

    dest = Path(args.store)
    meta = dest / "bench_meta.json"
    if args.run == RUN:
        want = {"source": str(Path(args.source).resolve()), "ranks": args.ranks, "slices": args.slices}
        if not meta.exists() or json.loads(meta.read_text()).get("want") != want:
            print(f"building {dest}: {args.ranks} ranks, ~{args.slices:,} slices ...")
            info = build_store(Path(args.source).resolve(), dest, args.ranks, args.slices)
            meta.write_text(json.dumps({"want": want, "info": info}, indent=2))
        b = json.loads(meta.read_text())["info"]
        print(f"store: {b['ranks']} ranks, {b['slices']:,} slices, {b['size_bytes'] / 2**20:,.0f} MiB")
    info = store_info(dest, args.run)

    token = secrets.token_urlsafe(24)
    proc, url = start_server(dest, token, Path(args.code).resolve() if args.code else None, args.workers)
    base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
    think = f"{args.think[0]}-{args.think[1]} s"
    print(f"server: {base} (pid {proc.pid}); {args.users} users for {args.seconds:.0f} s, think {think}")
    try:
        rec = Recorder()
        probe = User(base, url, rec, [], info)
        probe.open()
        probe.deps = probe.http.get(base + "/_dash-dependencies", timeout=120).json()
        t = time.perf_counter()
        for p in PAGES:  # warm-up, not counted
            probe.visit(p)
        print(f"warm-up visit of every page: {time.perf_counter() - t:.1f} s")
        beside = Beside(dest, Path(args.beside).resolve()) if args.beside else None
        rec.counting = True
        users = [User(base, url, rec, probe.deps, info) for _ in range(args.users)]
        t0 = time.monotonic()
        if beside is not None:
            beside.thread.start()
        until = t0 + args.seconds
        threads = [threading.Thread(target=u.loop, args=(until, tuple(args.think))) for u in users]
        load0 = os.getloadavg()[0]
        cpu0, server_cpu0 = time.process_time(), tree_cpu_s(proc.pid)
        for th in threads:
            th.start()
            time.sleep(0.02)
        for th in threads:
            th.join()
        wall = time.monotonic() - t0
        load1 = os.getloadavg()[0]
        gen_cpu, server_cpu = time.process_time() - cpu0, tree_cpu_s(proc.pid) - server_cpu0
        print(
            f"CPU over the window: this load generator {gen_cpu:.1f} s ({gen_cpu / wall:.0%} of one core), "
            f"the server's processes {server_cpu:.1f} s ({server_cpu / wall:.0%} of one core)"
        )
        rss = tree_rss_mib(proc.pid)
        print(f"server RSS after the window: {rss:.0f} MiB (every process of the server)")
        if beside is not None:
            committed = len(beside.runs)  # within the window (the one under way finishes after)
            beside.finish()
            print(
                f"beside: {committed} ingest(s) of {args.beside} committed within the window "
                f"(each {statistics.median(beside.times) if beside.times else float('nan'):.1f} s median), "
                f"{len(beside.failures)} failed" + (f": {beside.failures[0]}" if beside.failures else "")
            )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()

    report(rec, wall, args, (load0, load1))


def report(rec: Recorder, wall: float, args: argparse.Namespace, load: tuple[float, float]) -> None:
    every = [x for xs in rec.times.values() for x in xs]
    n_err = sum(len(v) for v in rec.errors.values())
    print(
        f"\n{len(every)} requests in {wall:.1f} s ({len(every) / wall:.1f}/s), {n_err} errors; "
        f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end"
    )
    print(f"{'request':<24} {'n':>6} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    rows: list[tuple[str, list[float]]] = sorted(rec.times.items()) + [("ALL", every)]
    out: dict[str, Any] = {"users": args.users, "seconds": args.seconds, "wall": wall, "errors": n_err, "kinds": {}}
    for kind, xs in rows:
        err = n_err if kind == "ALL" else len(rec.errors.get(kind, []))
        ms = [f"{pct(xs, q) * 1e3:8.0f}" for q in (0.5, 0.95, 0.99)]
        print(f"{kind:<24} {len(xs):6d} {err:4d} {' '.join(ms)} {max(xs) * 1e3:8.0f}")
        out["kinds"][kind] = {
            "n": len(xs),
            "errors": err,
            "p50": pct(xs, 0.5),
            "p95": pct(xs, 0.95),
            "p99": pct(xs, 0.99),
            "max": max(xs),
            "mean": statistics.fmean(xs),
        }
    for kind, errs in rec.errors.items():
        print(f"  {kind}: {len(errs)} error(s), e.g. {errs[0]}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
