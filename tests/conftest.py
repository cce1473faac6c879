"""Shared fixtures: the repo's sample data, fresh stores, real compare runs, the browser of the web app tests."""

from __future__ import annotations

import os
import shutil
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


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build`` fills once per test session. Serially: a fresh temporary folder. Under
    pytest-xdist (``make test`` runs ``-n 2``) every worker is a session of its own: the folder is
    then one beside the workers' temporary folders, built by the first worker that needs it while it
    holds a file lock (the other waits and reuses it: the recipe of xdist's documentation), so a
    fixture the files on both workers use is not built twice. A build that failed or was killed
    leaves no ``NAME.built`` mark: the next worker removes what it left and builds again."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent
    folder, mark = root / name, root / f"{name}.built"
    with FileLock(root / f"{name}.lock"):
        if not mark.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            mark.touch()
    return folder


def _train(script: Path, out: Path) -> None:
    """``python SCRIPT OUT``: a job of tests/data trained in child processes into ``out``."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{proc.stderr[-3000:]}"


def _ingest(store: Path, *runs: tuple[Path, str]) -> None:
    """`analyze ingest FOLDER --run RUN --store STORE` in process, for every (folder, run) in order."""
    from click.testing import CliRunner

    from analyzer.cli import main

    for folder, run in runs:
        res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store)])
        assert res.exit_code == 0, res.output


@pytest.fixture(scope="session")
def compare_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs that differ in known ways (tests/data/make_compare_runs.py: base, rerun, hidden,
    bucket, slow, micro), trained once per session in child processes (this process never imports
    torch); config -> profile folder. ``RANKSCOPE_COMPARE_RUNS=DIR`` uses runs made before into DIR
    by ``python tests/data/make_compare_runs.py DIR`` (to iterate on the tests without retraining)."""
    made = os.environ.get("RANKSCOPE_COMPARE_RUNS")
    if made:
        return {d.name: d for d in sorted(Path(made).iterdir()) if d.is_dir()}
    out = built_once(tmp_path_factory, "compare_runs", lambda out: _train(TEST_DATA / "make_compare_runs.py", out))
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
    """A pipeline job made by ``tests/data/SCRIPT`` (``built_once``), or the folder ``$ENV`` names."""
    made = os.environ.get(env)
    if made:
        return Path(made)
    return built_once(tmp_path_factory, Path(script).stem, lambda out: _train(TEST_DATA / script, out))


@pytest.fixture(scope="session")
def compare_store(compare_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store with every run of ``compare_runs`` ingested under its configuration's name, in the
    order of make_compare_runs.CONFIGS (so `base` is the oldest). Each xdist worker has a copy of its
    own (test_compare tags runs in it)."""
    order = ["base", "rerun", "hidden", "bucket", "slow", "micro"]
    assert sorted(order) == sorted(compare_runs)
    built = built_once(
        tmp_path_factory, "compare_store", lambda d: _ingest(d / "store", *((compare_runs[n], n) for n in order))
    )
    store = tmp_path_factory.mktemp("compare_store") / "store"
    shutil.copytree(built / "store", store)
    return store


@pytest.fixture(scope="session")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``ingested(dest, (folder, run), ...)``: a store at ``dest`` holding those folders ingested under
    those runs, in that order (`analyze ingest` in process). The ingest runs once per session for a
    given list (``built_once``: once for all xdist workers); every caller gets its own copy (a module
    may ingest more into it, and the caches of the analyses and the web app are keyed by the store's
    path as they are for a fresh ingest)."""
    import hashlib

    made: dict[tuple[tuple[str, str], ...], Path] = {}

    def get(dest: Path, *runs: tuple[Path, str]) -> Path:
        key = tuple((str(Path(folder).resolve()), run) for folder, run in runs)
        if key not in made:
            name = "ingested-" + hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            made[key] = built_once(tmp_path_factory, name, lambda d: _ingest(d / "store", *runs)) / "store"
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


_TERMINAL = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, in the controller: the terminal size its own code sees (``os.environ``), for the worker."""
    node.workerinput["rankscope_terminal"] = {name: os.environ.get(name) for name in _TERMINAL}


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker sees the terminal as a serial run does. pytest imports GNU readline (capture.py),
    which exports COLUMNS=80 and LINES=24 to the C environment, not to ``os.environ``: a serial run's
    code does not see them, its children do. A worker is such a child: its ``os.environ`` held them, and
    the in-process commands printed 80 columns wide (analyzer.terminal.WIDTH) where a serial run prints
    160, wrapping the words the tests look for. Here the worker's own code sees what the controller's
    did, and its children still inherit readline's values, as a serial run's do."""
    seen = getattr(config, "workerinput", {}).get("rankscope_terminal")
    if seen is None:
        return
    for name, value in seen.items():
        inherited = os.environ.pop(name, None)
        if value is not None:
            os.environ[name] = value
        elif inherited is not None:
            os.putenv(name, inherited)  # for the children only, as readline left it in a serial run


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[Any]) -> Iterator[None]:
    """Run the tests in the order they were collected, file by file. pytest otherwise groups the
    tests by the parameters of session-scoped fixtures: pytest-playwright's ``browser_name`` moved
    every browser test ahead of the other tests of its module, and a module-scoped fixture both
    use was made twice (test_webapp_training's training job ran twice)."""
    order = {item.nodeid: i for i, item in enumerate(items)}
    yield
    items.sort(key=lambda item: order.get(item.nodeid, len(order)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[Any]:
    """A failing test's report carries the output of every `analyze serve` still running
    (``webapp_helpers.start_server``; a module's server included): the traceback of a request
    that answered 500 is there, not in the test's own output."""
    import sys

    report = yield
    helpers = sys.modules.get("webapp_helpers")
    if report.failed and helpers is not None:
        for proc in helpers.RUNNING:
            report.sections.append((f"analyze serve (pid {proc.pid}) output", proc.log()[-20_000:]))
    return report
