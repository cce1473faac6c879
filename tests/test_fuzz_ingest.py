"""The fuzz corpus in the suite: the seeded covering set of tests/fuzz_corpus.py (every mutation and
every format at least once, an impossible time in every format and in every family of timed events
of every format with Chrome traces), each
ingested by the real ``ingest()``. No case may crash the ingest, crash a reader on an exception of
its own, run past the bound, or change a row without a word; a file with a warning keeps rows.
``python bench/fuzz_ingest.py`` runs 1 200 cases of the same mutations (the figures in bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import fuzz_corpus as fc

SEED = 12
BOUND_S = 30.0  # per case, on a loaded 2-core machine (a case takes 0.2-1 s)


def test_no_corrupted_input_crashes_hangs_or_changes_rows_silently(tmp_path: Path) -> None:
    tally = fc.Tally()
    outcomes = []
    for case in fc.covering(SEED):
        o = fc.run_case(case, tmp_path, BOUND_S)
        tally.add(o)
        outcomes.append(o)
    print("\n" + tally.table())
    forbidden = [f"{o.case.name} ({o.case.target}): {o.outcome}: {o.detail[-1500:]}" for o in tally.forbidden]
    assert not forbidden, "\n".join(forbidden)
    assert set(tally.by_format) == set(fc.SOURCES)
    # the corpus reaches every kind of verdict, and every kind of mutation ran
    assert all(tally.by_outcome[k] > 0 for k in ("ok", "warned", "file_error", "nothing")), tally.by_outcome
    assert {o.case.mutation for o in outcomes} == {m for ms in fc.MUTATIONS.values() for m in ms} | set(fc.FAMILIES)
    # a file with a warning kept rows; every problem has its reason
    assert all(o.rows > 0 for o in outcomes if o.outcome == "warned")
    assert all(o.error for o in outcomes if o.outcome in ("warned", "file_error"))
