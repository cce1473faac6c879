"""Safety net for moves and optimisations: every scenario ingests to exactly the recorded store.

Per run (one per folder of tests/data/ and sample_data/) and table: the row count and a content
hash (tests/golden.py). A change meant to alter what the store holds rewrites the golden file with
``python tests/golden.py --update``; the diff of tests/data/golden_store.json then shows what moved.
"""

from __future__ import annotations

import json
from pathlib import Path

from golden import GOLDEN_FILE, build, diff


def test_every_scenario_ingests_to_the_golden_store(tmp_path: Path) -> None:
    expected = json.loads(GOLDEN_FILE.read_text())
    actual = build(tmp_path / "store")
    assert set(actual) == set(expected), "scenario folders changed: update tests/data/golden_store.json"
    problems = diff(expected, actual)
    assert not problems, "store differs from the golden file:\n" + "\n".join(problems)
