"""CPU and wall time per timeline counter-tracks request (``POST /_timeline/counters``) on a
many-rank store, this tree against a baseline tree alternated in the same run, and which answers
both trees give byte for byte the same.

Each round runs one fresh process per tree that opens the app in process (Flask test client: the
request's work and its encoding count, no network) and makes, for ``--visits`` visits, what the
browser makes when it opens a timeline of 8 ranks (8 consecutive ranks from a random first one,
every third visit 8 drawn at random): ``meta`` (which lists the tracks), then the tracks of those
ranks over the whole run, over a step and over 1 ms, at 1150 buckets (the canvas' width on a
1920 px screen). Both trees make the same random choices. Printed per tree and kind: CPU and wall
p50 / p95 (the load average with them), the process's peak RSS, and per kind whether the answers
of the two trees are identical.

The store: ``bench_webapp.py``'s 64-rank store (``bench/out/webapp_store``, run ``bench64``), or a
store ingested by ``analyze ingest`` (run ``job``). The baseline: a tree holding another version's
``webapp`` (``git archive main webapp | tar -x -C /tmp/base``); it runs with this tree's ``analyzer``.

    python bench/bench_counter_tracks.py --store bench/out/webapp_store --run bench64 --baseline /tmp/base
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_timeline_cold import alternated, arguments, visit_ranks

KINDS = ("meta", "counters whole run", "counters step", "counters 1 ms")
PX = 1150


def child(store: str, run: str, visits: int, seed: int) -> None:
    """One tree's visits in this process: prints {"cpu"/"wall": {kind: [s per call]}, "hashes": {kind: [...]},
    "rss_mib"} as JSON."""
    import hashlib
    import random
    import resource
    import time

    from analyzer.store import Store
    from webapp import warmup
    from webapp.app import create_app
    from webapp.params import format_ranks

    warmup.ENABLED = False
    c = create_app(Store(store)).server.test_client()
    rng = random.Random(seed)
    n = len(c.get(f"/_timeline/meta?run={run}&ranks=0").get_json()["all_ranks"])
    cpu: dict[str, list[float]] = {k: [] for k in KINDS}
    wall: dict[str, list[float]] = {k: [] for k in KINDS}
    hashes: dict[str, list[str]] = {k: [] for k in KINDS}

    def timed(kind: str, method: str, path: str, **kw: Any) -> Any:
        t, w = time.process_time(), time.perf_counter()
        r = c.open(path, method=method, **kw)
        cpu[kind].append(time.process_time() - t)
        wall[kind].append(time.perf_counter() - w)
        if r.status_code != 200:
            raise SystemExit(f"{kind}: HTTP {r.status_code}: {r.data[:300]!r}")
        hashes[kind].append(hashlib.sha256(r.data).hexdigest())
        return r

    for v in range(visits):
        ranks = visit_ranks(rng, n, v)
        m = timed("meta", "GET", f"/_timeline/meta?run={run}&ranks={format_ranks(ranks)}").get_json()
        ev = m["events"].get(str(ranks[0]))
        steps = [s for s in m["steps"] if s[0] == ranks[0]]
        keys = [c["key"] for c in m["counters"]][:256]
        if not ev or not steps or not keys:
            continue
        st = rng.choice(steps)
        a = rng.uniform(ev[0], max(ev[0], ev[1] - 1e6))
        off = {str(c["rank"]): c["offset"] or 0 for c in m["clock"]}
        for kind, lo, hi in (
            ("counters whole run", ev[0], ev[1]),
            ("counters step", st[2], st[3]),
            ("counters 1 ms", a, a + 1e6),
        ):
            body = {"run": run, "fp": m["fp"], "tracks": keys, "offsets": off, "a": lo, "b": hi, "n": PX}
            timed(kind, "POST", "/_timeline/counters", json=body)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"cpu": cpu, "wall": wall, "hashes": hashes, "rss_mib": rss}))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> None:
    args = arguments(__doc__)
    if args.child:
        child(args.store, args.run, args.visits, args.seed)
        return
    for rnd, got in alternated(__file__, args):
        for name, (res, load, end) in got.items():
            print(f"round {rnd}, {name} (load {load:.1f} -> {end:.1f}), peak RSS {res['rss_mib']:.0f} MiB:")
            for kind in KINDS:
                c, w = res["cpu"][kind], res["wall"][kind]
                if c:
                    print(
                        f"  {kind:<20} {len(c):3d} calls  CPU p50 / p95 {1000 * pct(c, 0.5):6.1f} / "
                        f"{1000 * pct(c, 0.95):6.1f} ms   wall p50 / p95 {1000 * pct(w, 0.5):6.1f} / "
                        f"{1000 * pct(w, 0.95):6.1f} ms"
                    )
        if len(got) == 2:
            same = [k for k in KINDS if got["this tree"][0]["hashes"][k] == got["baseline"][0]["hashes"][k]]
            print(f"round {rnd}: answers identical in both trees: {', '.join(same) or 'none'}")


if __name__ == "__main__":
    main()
