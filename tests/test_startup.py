"""What each command imports before it needs it: `analyze --help` and `analyze runs` start without
DuckDB's fact views, pyarrow, pandas or numpy, and `analyze ingest` never imports pandas. Asserted
on the modules a real process imported (sys.modules, ``-X importtime``), not on wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO, analyze

HEAVY = ("duckdb", "pyarrow", "pandas", "numpy")


def _imported(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _imported_by_program(*args: str) -> set[str]:
    """The modules a real `analyze ...` process imported, and their top-level packages (-X importtime
    on stderr; an import that was refused is listed too, alone, without its submodules)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "analyzer", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.update((name, name.split(".")[0]))
    return names


def test_importing_the_cli_is_cheap() -> None:
    mods = _imported("import analyzer.cli")
    assert not {m for m in HEAVY if m in mods}, sorted(m for m in HEAVY if m in mods)
    assert "rich" not in mods  # the consoles are made by the commands that print
    assert not {m for m in HEAVY if m in _imported("import analyzer")}
    assert not {m for m in HEAVY if m in _imported("from analyzer.store import Store, resolve_store_path")}


def test_help_and_runs_import_no_heavy_library(tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze("ingest", str(REPO / "sample_data" / "kineto_gloo_2rank"), "--store", str(store))
    assert not {m for m in HEAVY if m in _imported_by_program("--help")}
    assert "pandas.core" in _imported_by_program("query", "SELECT 1", "--store", str(store))  # the check can see it
    # runs reads the catalog with DuckDB, and nothing else heavy
    assert not {"pyarrow", "pandas", "numpy"} & _imported_by_program("runs", "--store", str(store))


def test_ingest_never_imports_pandas(tmp_path: Path) -> None:
    got = _imported_by_program(
        "ingest", str(REPO / "sample_data" / "kineto_gloo_2rank"), "--store", str(tmp_path / "s")
    )
    # the readers never go through pandas (pyarrow asks for it once and is refused), nor does the
    # step breakdown stored with each collection (analyzer.breakdown, imported by a local pool's
    # driver before it forks its workers), nor anything of the analyses (their package imports pandas)
    assert "pyarrow" in got and "pyarrow.pandas_compat" not in got
    assert "pandas.core" not in got and "analyzer.analyses" not in got and "analyzer.breakdown.rows" in got
    # and the store it wrote reads back through the usual (pandas) query path
    out = analyze("query", "SELECT count(*) AS n FROM slices", "--format", "json", "--store", str(tmp_path / "s"))
    assert json.loads(out.stdout)[0]["n"] > 0


_AFTER_INGEST = """
import gc, json, os, sys
from analyzer import cli
cli._PROGRAM = True  # as `analyze` sets it (run() would end the process before the print)
cli.main(["ingest", sys.argv[1], "--store", sys.argv[2], "--json"], standalone_mode=False)
import pyarrow as pa
state = [pa.default_memory_pool().backend_name, gc.isenabled(), gc.get_freeze_count()]
print(json.dumps(state + [os.environ.get("OPENBLAS_NUM_THREADS")]))
"""


def _after_ingest(store: Path, unset: str, **extra: str) -> list[object]:
    """What an `analyze ingest` program leaves of its settings (Arrow's pool, the collector, the
    frozen objects, OpenBLAS's threads) once its command is done, ``unset`` removed from the
    environment and ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if k != unset}
    sample = str(REPO / "sample_data" / "kineto_gloo_2rank")
    proc = subprocess.run(
        [sys.executable, "-c", _AFTER_INGEST, sample, str(store)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**env, **extra},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = analyze("query", "SELECT count(*) AS n FROM slices", "--format", "json", "--store", str(store))
    assert json.loads(out.stdout)[0]["n"] > 0
    return json.loads(proc.stdout.splitlines()[-1])


def test_ingest_program_allocates_arrow_from_malloc_unless_the_user_chose(tmp_path: Path) -> None:
    # mimalloc (pyarrow's default) keeps freed pages per thread: the ingest's peak memory counted them
    assert _after_ingest(tmp_path / "a", "ARROW_DEFAULT_MEMORY_POOL")[0] == "system"
    assert (
        _after_ingest(tmp_path / "b", "ARROW_DEFAULT_MEMORY_POOL", ARROW_DEFAULT_MEMORY_POOL="jemalloc")[0]
        == "jemalloc"
    )


def test_ingest_program_freezes_its_imports_and_keeps_the_collector_on(tmp_path: Path) -> None:
    # the imports (pyarrow, numpy, DuckDB, the readers) were made without collector passes and
    # frozen; the collector runs for the work itself; numpy's BLAS starts no spinning threads
    _pool, enabled, frozen, blas = _after_ingest(tmp_path / "a", "OPENBLAS_NUM_THREADS")
    assert enabled is True and isinstance(frozen, int) and frozen > 10_000 and blas == "1"
    assert _after_ingest(tmp_path / "b", "OPENBLAS_NUM_THREADS", OPENBLAS_NUM_THREADS="4")[3] == "4"  # kept
