"""Fuzz `analyze ingest` with the seeded corpus of tests/fuzz_corpus.py and count the outcomes.

    python bench/fuzz_ingest.py                 # 1 200 cases, seed 12 (the figures in bench/README.md)
    python bench/fuzz_ingest.py -n 5000 --seed 3 --bound 60 --show warned

Every case copies one format's sample, mutates one file and ingests it in this process with the
real ``ingest()`` into a real store. Prints the counts per format and outcome (Markdown) and the
mean share of the clean sample's rows kept when something was kept; lists every forbidden outcome
(traceback, hang past the bound, a reader crash recorded as a file error, a row changed silently)
with its case, so that it can be replayed: the same seed gives the same cases. Exit code 1 when
there is any.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_corpus as fc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=1200, help="number of cases (default 1200)")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--bound", type=float, default=60.0, help="seconds a case may take (default 60)")
    ap.add_argument("--show", default="", help="also list the cases of these outcomes (comma-separated)")
    args = ap.parse_args()
    show = set(filter(None, args.show.split(",")))
    work = Path(tempfile.mkdtemp(prefix="rankscope-fuzz-"))
    tally = fc.Tally()
    corpus_errors = 0
    t0 = time.perf_counter()
    try:
        for i, case in enumerate(fc.cases(args.n, args.seed)):
            try:
                o = fc.run_case(case, work, args.bound)
            except Exception as exc:  # noqa: BLE001 - the corpus failed to make the case: said, not counted
                print(f"corpus error {case.name} {case.target}: {type(exc).__name__}: {exc}", flush=True)
                corpus_errors += 1
                continue
            tally.add(o)
            if o.outcome in fc.FORBIDDEN or o.outcome in show:
                print(f"{o.outcome:12s} {case.name} {case.target}: {o.error or ''} {o.detail[-800:]}", flush=True)
            if (i + 1) % 100 == 0:  # the counts so far, so that a stopped run still says what it found
                print(f"... {i + 1} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
                print(tally.table(), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.perf_counter() - t0
    print()
    print(tally.table())
    print()
    print(
        f"{args.n} cases (seed {args.seed}) in {took:.0f} s; slowest case {tally.slowest:.1f} s "
        f"(bound {args.bound:.0f} s); forbidden outcomes: {len(tally.forbidden)}; cases the corpus could not "
        f"make: {corpus_errors}"
    )
    return 1 if tally.forbidden else 0


if __name__ == "__main__":
    sys.exit(main())
