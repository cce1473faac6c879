"""Dynamic profiling from the browser (issue 17 §6): `analyze serve --control CONFIG_DIR` with a
token, a real 2-rank training job (torch 2.13 CPU, gloo, DDP) running under the collector in
dynamic mode, started as two processes by the test. The browser asks for steps 6..7 on rank 1 with
record_shapes while the job waits at a step boundary; the collector accepts it (rank 1 armed, rank 0
not selected), records exactly those steps, and the window's traces ingest into the store and show
on the Training page. No sleeps for timing: the job pauses at known steps (``--pause-at``) and the
test polls files and the page with generous timeouts."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from webapp_helpers import CHROMIUM, REPO, ingest, settle, start_server, stop_server

from analyzer.cli import main
from analyzer.store import Store
from collector.dynamic import CONFIG_NAME, LOG_NAME, parse_request, write_config
from webapp import create_app
from webapp.errors import WebappError

SCRIPTS = Path(__file__).resolve().parent / "collector_scripts"
TOKEN = secrets.token_hex(16)
WAIT_S = 240  # generous: two torch processes on a loaded 2-core machine

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_files(paths: list[Path], procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(p.exists() for p in paths):
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"a rank exited ({p.returncode}) before {[x.name for x in paths]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {[x.name for x in paths]}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("webapp_control")
    out, dyn, sync, store = tmp / "job", tmp / "dyn", tmp / "sync", tmp / "store"
    sync.mkdir()
    cfg = {
        "backend": "torch",
        "profile_type": "dynamic",
        "static_param": {"save_path": str(out)},
        "dynamic_param": {"config_path": str(dyn), "poll_interval_s": 0},
    }
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        cmd = [sys.executable, str(SCRIPTS / "train.py"), "--config", json.dumps(cfg), "--steps", "10"]
        cmd += ["--pause-at", "3,4", "--sync", str(sync)]
        err = open(tmp / f"rank{rank}.err", "w")  # noqa: SIM115 - closed with the process below
        procs.append((subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True), err))
    server, url = start_server(store, {"RANKSCOPE_TOKEN": TOKEN}, ("--control", str(dyn)))
    try:
        yield {"url": url, "out": out, "dyn": dyn, "sync": sync, "store": store, "procs": [p for p, _ in procs]}
    finally:
        stop_server(server)
        for p, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
            err.close()


def _text(page: Any, sel: str) -> str:
    return page.evaluate("(s) => (document.querySelector(s) || {}).innerText || ''", sel)


def _wait_text(page: Any, sel: str, part: str) -> None:
    page.wait_for_function(
        "([s, t]) => ((document.querySelector(s) || {}).innerText || '').includes(t)",
        arg=[sel, part],
        timeout=WAIT_S * 1000,
    )


def test_a_window_asked_in_the_browser_is_recorded_by_the_running_job(job: dict, page: Any) -> None:
    sync, dyn, procs = job["sync"], job["dyn"], job["procs"]
    config = dyn / CONFIG_NAME
    _wait_files([sync / "ready_3.r0", sync / "ready_3.r1"], procs)  # both ranks wait after step 3
    # without the token the server answers nothing
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(job["url"] + "profiling", timeout=30)
    assert denied.value.code == 401
    page.goto(job["url"] + f"profiling?token={TOKEN}")
    page.wait_for_selector("#pf-armed")
    settle(page)
    assert _text(page, "#pf-armed") == "2 collector(s) running; armed: none."
    assert json.loads(_text(page, "#pf-config"))["start_step"] == 0  # the file the collector generated: off
    log = _text(page, "#pf-log")
    assert "rank=0 watching" in log and "rank=1 watching" in log
    before = config.read_bytes()
    # a request the form refuses: nothing written
    page.fill("#pf-start", "7")
    page.fill("#pf-end", "6")
    page.click("#pf-write")
    _wait_text(page, "#pf-result", "Not written: the last step (6) is before the first (7)")
    assert config.read_bytes() == before
    # steps 6..7 on rank 1, with record_shapes
    page.fill("#pf-start", "6")
    page.fill("#pf-end", "7")
    page.fill("#pf-ranks", "1")
    page.locator("#pf-switches label", has_text="record_shapes").click()
    page.click("#pf-write")
    _wait_text(page, "#pf-result", "Written at")
    written = json.loads(config.read_text())
    assert (written["start_step"], written["active"], written["ranks"], written["record_shapes"]) == (6, 2, [1], True)
    assert parse_request(written)[1] == []  # what the collector will read is valid
    assert not [p.name for p in dyn.iterdir() if p.name.endswith(".tmp")]  # no temporary file left
    _wait_text(page, "#pf-config", '"start_step": 6')
    # the job goes on; after step 4 both ranks have read the edit: rank 1 armed, rank 0 not selected
    (sync / "go_3").touch()
    _wait_files([sync / "ready_4.r0", sync / "ready_4.r1"], procs)
    _wait_text(page, "#pf-armed", "armed: rank 1.")
    rows = {
        r.locator("td").nth(0).inner_text(): r.locator("td").nth(1).inner_text()
        for r in page.locator("#pf-states tbody tr").all()
    }
    assert rows == {"0": "not selected", "1": "armed"}
    (sync / "go_4").touch()
    for p in procs:
        assert p.wait(timeout=WAIT_S) == 0
    _wait_text(page, "#pf-log", "rank=1 stopped window steps 6..7, ranks 1: complete, captured steps [6, 7]")
    _wait_text(page, "#pf-armed", "0 collector(s) running; armed: none.")
    assert "rank=0 rank 0 not selected for window steps 6..7, ranks 1" in _text(page, "#pf-log")
    # the window's traces ingest, and show in the store and on the Training page
    ingest(job["out"], job["store"], "dyn")
    got = (
        Store(job["store"])
        .query("SELECT rank, producer, steps FROM collections WHERE run = 'dyn' ORDER BY rank, producer")
        .to_dict("records")
    )
    assert [(g["rank"], g["producer"]) for g in got] == [
        (0, "collector_scalars"),
        (1, "collector_scalars"),
        (1, "kineto"),
    ]
    assert list(got[2]["steps"]) == [6, 7]
    shapes = Store(job["store"]).query(
        "SELECT count(*) AS n FROM operators WHERE run = 'dyn' AND input_shapes IS NOT NULL", run="dyn"
    )
    assert int(shapes["n"].iloc[0]) > 0  # record_shapes reached the profiler
    page.goto(job["url"] + "training?run=dyn")
    page.wait_for_selector("#tr-windows")
    row = page.locator("#tr-windows tbody tr")
    assert row.count() == 1 and [row.locator("td").nth(i).inner_text() for i in (0, 1)] == ["1", "6..7"]


def test_control_needs_a_token_and_the_collectors_validation(tmp_path: Path) -> None:
    with pytest.raises(WebappError, match="needs a token"):
        create_app(tmp_path / "store", control=tmp_path / "dyn")
    res = CliRunner(env={"RANKSCOPE_TOKEN": None}).invoke(
        main, ["serve", "--store", str(tmp_path / "store"), "--port", "0", "--control", str(tmp_path / "dyn")]
    )
    assert res.exit_code != 0 and "needs a token" in res.output
    # the collector's own validation decides what is written
    path = tmp_path / CONFIG_NAME
    path.write_text("{}")
    problems = write_config(path, {"start_step": 5, "active": 0, "level": "level9"})
    assert any(p.startswith("active: 0 steps records nothing") for p in problems)
    assert any("level" in p for p in problems)
    assert path.read_text() == "{}"
    assert not (tmp_path / LOG_NAME).exists()
