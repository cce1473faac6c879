"""Shared fixtures: the repo's sample data, fresh stores, real compare runs, the browser of the web app tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def compare_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs that differ in known ways (tests/data/make_compare_runs.py: base, rerun, hidden,
    bucket, slow, micro), trained once per session in child processes (this process never imports
    torch); config -> profile folder. ``RANKSCOPE_COMPARE_RUNS=DIR`` uses runs made before into DIR
    by ``python tests/data/make_compare_runs.py DIR`` (to iterate on the tests without retraining)."""
    import os
    import subprocess
    import sys

    made = os.environ.get("RANKSCOPE_COMPARE_RUNS")
    if made:
        return {d.name: d for d in sorted(Path(made).iterdir()) if d.is_dir()}
    out = tmp_path_factory.mktemp("compare_runs")
    script = TEST_DATA / "make_compare_runs.py"
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return {d.name: d for d in sorted(out.iterdir()) if d.is_dir()}


@pytest.fixture(scope="session")
def pipeline_1f1b_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 4-stage 1F1B pipeline job (tests/data/make_pipeline_1f1b.py), trained once per session
    in child processes (this process never imports torch): ``trace/`` its profile folder, ``log/``
    its own record. ``RANKSCOPE_PIPELINE_JOB=DIR`` uses a job made before into DIR."""
    return _pipeline_job(tmp_path_factory, "RANKSCOPE_PIPELINE_JOB", "make_pipeline_1f1b.py")


@pytest.fixture(scope="session")
def pipeline_interleaved_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 4-rank interleaved (virtual-pipeline) 1F1B job, two chunks per rank
    (tests/data/make_pipeline_interleaved.py), trained once per session in child processes:
    ``trace/`` its profile folder, ``log/`` its own record. ``RANKSCOPE_INTERLEAVED_JOB=DIR`` uses a
    job made before into DIR."""
    return _pipeline_job(tmp_path_factory, "RANKSCOPE_INTERLEAVED_JOB", "make_pipeline_interleaved.py")


def _pipeline_job(tmp_path_factory: pytest.TempPathFactory, env: str, script: str) -> Path:
    """A pipeline job made by ``tests/data/SCRIPT`` into a fresh folder (or the folder ``$ENV`` names)."""
    import os
    import subprocess
    import sys

    made = os.environ.get(env)
    if made:
        return Path(made)
    out = tmp_path_factory.mktemp(Path(script).stem)
    cmd = [sys.executable, str(TEST_DATA / script), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="session")
def compare_store(compare_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store with every run of ``compare_runs`` ingested under its configuration's name, in the
    order of make_compare_runs.CONFIGS (so `base` is the oldest)."""
    from click.testing import CliRunner

    from analyzer.cli import main

    store = tmp_path_factory.mktemp("compare_store") / "store"
    order = ["base", "rerun", "hidden", "bucket", "slow", "micro"]
    assert sorted(order) == sorted(compare_runs)
    for name in order:
        res = CliRunner().invoke(main, ["ingest", str(compare_runs[name]), "--run", name, "--store", str(store)])
        assert res.exit_code == 0, res.output
    return store


@pytest.fixture(scope="session")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``ingested(dest, (folder, run), ...)``: a store at ``dest`` holding those folders ingested under
    those runs, in that order (`analyze ingest` in process). The ingest runs once per session for a
    given list; every caller gets its own copy (a module may ingest more into it, and the caches of
    the analyses and the web app are keyed by the store's path as they are for a fresh ingest)."""
    import shutil

    from click.testing import CliRunner

    from analyzer.cli import main

    made: dict[tuple[tuple[str, str], ...], Path] = {}

    def get(dest: Path, *runs: tuple[Path, str]) -> Path:
        key = tuple((str(Path(folder).resolve()), run) for folder, run in runs)
        if key not in made:
            path = tmp_path_factory.mktemp("ingested") / "store"
            for folder, run in runs:
                res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(path)])
                assert res.exit_code == 0, res.output
            made[key] = path
        shutil.copytree(made[key], dest)
        return dest

    return get


@pytest.fixture(scope="session")
def browser(browser_type: Any) -> Iterator[Any]:
    """Debian chromium (webapp_helpers.CHROMIUM), one per session (every test has its own context)."""
    from webapp_helpers import ARGS, CHROMIUM

    b = browser_type.launch(executable_path=CHROMIUM, args=ARGS)
    yield b
    b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page; the test fails on a console error, a page error or a dialog (a trace
    name run as script)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    # generous: a first view computes the analyses, and a test run may share 2 cores with a busy machine
    # (30 s was exceeded once at load 15: the Overview of a fresh server); it only matters on a failure
    pg.set_default_timeout(90_000)
    problems: list[str] = []
    dialogs: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.problems = problems  # type: ignore[attr-defined]
    pg.dialogs = dialogs  # type: ignore[attr-defined]
    yield pg
    ctx.close()
    assert not problems, problems
    assert not dialogs, f"a trace name ran as script: {dialogs}"


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[Any]) -> Iterator[None]:
    """Run the tests in the order they were collected, file by file. pytest otherwise groups the
    tests by the parameters of session-scoped fixtures: pytest-playwright's ``browser_name`` moved
    every browser test ahead of the other tests of its module, and a module-scoped fixture both
    use was made twice (test_webapp_training's training job ran twice)."""
    order = {item.nodeid: i for i, item in enumerate(items)}
    yield
    items.sort(key=lambda item: order.get(item.nodeid, len(order)))
