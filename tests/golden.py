"""The store's content per scenario, as a fingerprint: row count and a content hash per table.

Every profile folder of ``tests/data/`` and ``sample_data/`` is ingested as its own run into one
store; per run and table (every fact table, and the catalog rows that describe collections and
files) the fingerprint is the number of rows and a SHA-256 over the rows in a canonical order
(each row as sorted-key JSON, the lines sorted). Columns that differ from one ingest or one clone
to the next are left out: when it was ingested, file mtimes, the fact file names (fresh uuids).

``tests/data/golden_store.json`` holds the expected fingerprints. After a change that is meant to
change what the store holds, rewrite it with ``python tests/golden.py --update`` and read the diff.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN_FILE = REPO / "tests" / "data" / "golden_store.json"
# folders of tests/data that are not profiler output
NOT_PROFILES = {"collector", "parallel_layout", "torch_npu_2.13.0"}
# columns left out of the fingerprint: they differ between two ingests of the same files
VOLATILE = {
    "collections": {"ingested_at"},
    "source_files": {"ingested_at", "mtime_ns"},
}


def scenarios() -> dict[str, Path]:
    """Run name -> profile folder, for every scenario of tests/data/ and sample_data/."""
    out: dict[str, Path] = {}
    for d in sorted((REPO / "tests" / "data").iterdir()):
        if d.is_dir() and d.name not in NOT_PROFILES and not d.name.startswith("_"):
            out[f"t_{d.name}"] = d
    for d in sorted((REPO / "sample_data").iterdir()):
        if d.is_dir() and not d.name.startswith((".", "_")):
            out[f"s_{d.name}"] = d
    return out


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, str):
        return value.replace(str(REPO), "<repo>")
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if value is None or isinstance(value, (int, bool)):
        return value
    return str(value)


def table_fingerprint(rows: list[dict[str, Any]], drop: set[str] = frozenset()) -> list[Any]:
    lines = sorted(json.dumps(_canonical({k: v for k, v in r.items() if k not in drop}), sort_keys=True) for r in rows)
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode())
        h.update(b"\n")
    return [len(lines), h.hexdigest()[:16]]


def build(store_path: Path) -> dict[str, dict[str, list[Any]]]:
    """Ingest every scenario into a fresh store at ``store_path`` and fingerprint it."""
    from analyzer.errors import NothingIngestedError
    from analyzer.ingest import ingest
    from analyzer.store import Store

    store = Store(store_path)
    runs = scenarios()
    for run, folder in runs.items():
        try:
            ingest(folder, store, run=run)
        except NothingIngestedError:
            pass
    return fingerprint(store, list(runs))


def fingerprint(store: Any, runs: list[str]) -> dict[str, dict[str, list[Any]]]:
    """Per run and table of ``store``: [row count, content hash] (the volatile columns left out)."""
    from analyzer.schema import FACT_TABLES

    out: dict[str, dict[str, list[Any]]] = {}
    if not store.exists():
        return out
    with store.read_connection() as con:
        for run in runs:
            fp: dict[str, list[Any]] = {}
            for table in ["collections", "source_files"] + [t.name for t in FACT_TABLES]:
                rel = con.execute(f'SELECT * FROM "{table}" WHERE run = ?', [run])
                cols = [d[0] for d in rel.description]
                rows = [dict(zip(cols, r)) for r in rel.fetchall()]
                if rows or table in ("collections", "source_files"):
                    fp[table] = table_fingerprint(rows, VOLATILE.get(table, set()))
            out[run] = fp
    return out


def diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """One line per (run, table) whose fingerprint differs."""
    lines = []
    for run in sorted(set(expected) | set(actual)):
        e, a = expected.get(run, {}), actual.get(run, {})
        for table in sorted(set(e) | set(a)):
            if e.get(table) != a.get(table):
                lines.append(f"{run}.{table}: expected {e.get(table)}, got {a.get(table)}")
    return lines


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        fp = build(Path(tmp) / "store")
    if "--update" in sys.argv:
        body = ",\n".join(
            f" {json.dumps(run)}: {{\n"
            + ",\n".join(f"  {json.dumps(t)}: {json.dumps(v)}" for t, v in sorted(fp[run].items()))
            + "\n }"
            for run in sorted(fp)
        )
        GOLDEN_FILE.write_text("{\n" + body + "\n}\n")
        print(f"wrote {GOLDEN_FILE.relative_to(REPO)}: {len(fp)} runs")
    else:
        problems = diff(json.loads(GOLDEN_FILE.read_text()), fp)
        print("\n".join(problems) or "store identical to the golden file")
        sys.exit(1 if problems else 0)
