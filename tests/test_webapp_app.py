"""The web app over HTTP: pages and callbacks as the browser requests them (Flask test client),
bad URLs, the empty store, and `analyze serve` serving while `analyze ingest` writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pytest
from webapp_helpers import (
    ANALYZE,
    KINETO,
    NPU,
    DashClient,
    ServerProcess,
    ingest,
    iter_pages,
    plotly_array,
    props_of,
    start_server,
    stop_server,
    texts,
    trace_events,
)

from webapp import create_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Path:
    return ingested(tmp_path_factory.mktemp("webapp_app") / "store", (KINETO, "gloo"), (NPU, "npu"))


@pytest.fixture(scope="module")
def client(store: Path) -> DashClient:
    return DashClient(create_app(store))


def test_every_page_renders_with_real_values(client: DashClient) -> None:
    ov = client.page("/", "?run=gloo")
    assert "Runs" in ov and '"gloo"' in ov and '"npu"' in ov
    for path in ("/timeline", "/operators", "/memory", "/communication"):
        page = client.page(path, "?run=npu")
        assert "npu" in page and "msg-error" not in page, path
    page = client.page("/compare", "?base=gloo&new=npu")
    assert '"gloo"' in page and '"npu"' in page and "msg-error" not in page


def test_compare_page_compares_two_formats(client: DashClient, store: Path) -> None:
    """A torch_npu run against a Kineto run: the same metric names, the different operators listed as such."""
    from analyzer.analyses import run_diff
    from analyzer.store import Store

    d = run_diff(Store(store), "gloo", "npu")
    inputs = {"cmp-base.value": "gloo", "cmp-new.value": "npu", "cmp-base-step.value": "aligned"}
    out = client.call("cmp-content.children", {**inputs, "cmp-new-step.value": "aligned"})
    words = texts(out["cmp-content"]["children"])
    assert d.verdict in words and "different formats" in " ".join(words)
    assert out["view-url"]["data"] == "/compare?base=gloo&new=npu"
    grid = next(p for p in props_of(out["cmp-content"]["children"]) if p.get("id") == "cmp-ops")
    ops = d.operators[d.operators["status"] != "same"]
    assert {r["status"] for r in grid["rowData"]} >= {"new", "vanished"}
    assert len(grid["rowData"]) == min(len(ops), 200)
    # the same run on both sides is a message, not an error
    out = client.call("cmp-content.children", {**inputs, "cmp-new-step.value": "aligned", "cmp-base.value": "npu"})
    assert "the same run" in json.dumps(out) and out["view-url"]["data"] == "/compare?base=npu&new=npu"


def test_overview_callback_has_the_step_breakdown(client: DashClient) -> None:
    out = client.call("ov-content.children", {"ov-run.value": "gloo", "ov-ranks.value": [], "ov-step.value": "mean"})
    body = json.dumps(out)
    assert "Step time per rank" in body and "msprof-analyze" in body and "What each rank recorded" in body
    assert "no communication matrix" in body  # the Kineto reader's sentence for what is missing
    words = texts(out["ov-content"]["children"])
    assert "0-1" in words  # the ranks
    steps = sorted(
        {
            int(e["name"].split("#")[1])
            for r in (0, 1)
            for e in trace_events(r)
            if str(e.get("name", "")).startswith("ProfilerStep#")
        }
    )
    assert f"{len(steps)} ({steps[0]}–{steps[-1]})" in words
    assert out["view-url"]["data"] == "/?run=gloo"


def test_overview_findings_link_their_evidence_into_the_timeline(client: DashClient, store: Path) -> None:
    from analyzer.analyses import advise
    from analyzer.store import Store

    adv = advise(Store(store), "npu")
    out = client.call("ov-findings.children", {"ov-run.value": "npu"})
    body = json.dumps(out)
    words = texts(out["ov-findings"]["children"])
    assert f"Findings ({len(adv)})" in words
    for f in adv.to_dict("records"):
        assert f["title"] in words and f["detail"] in words
    gaps = next(f for f in adv.to_dict("records") if f["rule"] == "high_free")["evidence"]
    g = gaps[0]
    assert f"/timeline?run=npu&ranks={g['rank']}&hl={g['rank']}:{g['start_ns']}:{g['end_ns']}" in body


def _config(page: str) -> dict:
    """The timeline renderer's config in a page layout (the tl-config store's data)."""

    def find(node: object) -> dict | None:
        if isinstance(node, dict):
            props = node.get("props") or {}
            if props.get("id") == "tl-config":
                return props["data"]
            for v in node.values():
                got = find(v)
                if got is not None:
                    return got
        if isinstance(node, list):
            for v in node:
                got = find(v)
                if got is not None:
                    return got
        return None

    cfg = find(json.loads(page))
    assert cfg is not None, page[:300]
    return cfg


def test_timeline_layout_passes_the_checked_view_to_the_renderer(client: DashClient, store: Path) -> None:
    cfg = _config(client.page("/timeline", "?run=npu"))
    assert (cfg["run"], cfg["ranks"], cfg["step"], cfg["clock"], cfg["hl"]) == ("npu", [0, 1], None, "aligned", [])
    assert cfg["groups"] == ["host", "device", "communication", "overlap"]
    url = "?run=npu&ranks=1&step=50&groups=device,communication&clock=raw&fold=1.device&pin=1.3&hl=1:5:9&sel=1:ab:7"
    cfg = _config(client.page("/timeline", url))
    assert cfg["ranks"] == [1] and cfg["step"] == 50 and cfg["groups"] == ["device", "communication"]
    assert (cfg["clock"], cfg["fold"], cfg["pin"]) == ("raw", ["1.device"], ["1.3"])
    assert cfg["hl"] == [[1, "5", "9"]] and cfg["sel"] == {"rank": 1, "collection_id": "ab", "event": 7}
    a = 1736408883700000000
    cfg = _config(client.page("/timeline", f"?run=npu&start_ns={a}&end_ns={a + 5_000_000}"))
    assert (cfg["start_ns"], cfg["end_ns"], cfg["step"]) == (str(a), str(a + 5_000_000), None)
    # what cannot be used is said, and left out
    page = client.page("/timeline", "?run=npu&hl=0:x:1&clock=sideways&sel=zz")
    assert "expected RANK:START_NS:END_NS" in page and "must be aligned or raw" in page and "sel=" in page
    cfg = _config(page)
    assert cfg["hl"] == [] and cfg["clock"] == "aligned" and cfg["sel"] is None


def _slice(store: Path, run: str, sql_where: str) -> dict:
    from analyzer.store import Store

    row = (
        Store(store)
        .query(
            f"SELECT s.rank, s.collection_id, s.event_id, s.name, s.ts_ns FROM slices s "
            f"JOIN lanes l USING (run, rank, collection_id, pid, tid) WHERE s.run = ? AND {sql_where} "
            f"ORDER BY s.ts_ns LIMIT 1",
            [run],
            run=run,
        )
        .iloc[0]
    )
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.to_dict().items()}


def test_timeline_details_of_a_collective_list_its_members_on_every_rank(client: DashClient, store: Path) -> None:
    s = _slice(store, "npu", "s.rank = 0 AND s.name = 'hcom_allReduce__586_0_1' AND l.lane_group = 'communication'")
    sel = {"run": "npu", "rank": 0, "collection_id": s["collection_id"], "event": s["event_id"], "origin": "0"}
    out = client.call("tl-detail.children", {"tl-selected.data": sel})
    words = texts(out["tl-detail"]["children"])
    assert "hcom_allReduce__586_0_1" in words and "duration" in words
    body = json.dumps(out)
    assert "Collective: allreduce over 2 of 2 ranks" in body
    from analyzer.store import Store

    ops = Store(store).query(
        "SELECT rank, ts_ns, dur_ns FROM comm_ops WHERE run = 'npu' AND name = 'hcom_allReduce__586_0_1' ORDER BY rank",
        run="npu",
    )
    for r, ts, dur in ops.itertuples(index=False):
        assert f"{ts / 1e6:.6f} ms" in words  # each member's entry, on its own clock
        assert f"{r}:{ts}:{ts + dur}" in body  # and the link that shows the instance on all of them
    assert "/timeline?run=npu&ranks=0-1&hl=" in body


def test_timeline_details_of_a_device_task_show_its_kernel_row(client: DashClient, store: Path) -> None:
    import csv

    rows = list(csv.DictReader((NPU / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").open()))
    k = next(r for r in rows if r["Type"] == "MatMulV2")
    s = _slice(store, "npu", f"s.rank = 0 AND s.name = '{k['Name']}' AND l.lane_group = 'device'")
    sel = {"run": "npu", "rank": 0, "collection_id": s["collection_id"], "event": s["event_id"], "origin": "0"}
    out = client.call("tl-detail.children", {"tl-selected.data": sel})
    kernel = json.dumps(out)
    assert "tl-detail-kernel" in kernel and "MatMulV2" in kernel and k["Input Shapes"].strip('"') in kernel
    assert "Collective" not in kernel


def test_bad_urls_give_inline_messages_never_tracebacks(client: DashClient) -> None:
    cases = [
        ("/", "?run=nope", "no run named 'nope'"),
        ("/timeline", "?run=nope", "no run named 'nope'"),
        ("/timeline", "?run=gloo&ranks=abc", "expected rank numbers"),
        ("/timeline", "?run=gloo&ranks=5", "has no rank 5"),
        ("/timeline", "?run=gloo&start_ns=50&end_ns=10", "must be after start_ns"),
        ("/timeline", "?run=gloo&start_ns=x&end_ns=10", "not an integer"),
        ("/timeline", "?run=gloo&step=1&step=2", "given more than once"),
        ("/operators", "?run=gloo&group=bogus", "must be one of"),
        ("/operators", "?run=gloo&top=0", "must be at least 1"),
        ("/memory", "?run=gloo&component=HBM", "no such memory counter"),
        ("/", "?run=gloo&step=99", "the run has no step 99"),
        ("/timeline", "?run=gloo&step=99", "the selected ranks have no step 99"),
        ("/timeline", "?run=gloo&start_ns=1&end_ns=5", "lies outside"),
        ("/memory", "?run=gloo&start_ns=1&end_ns=5", "lies outside the run"),
        ("/memory", "?run=gloo&start_ns=5", "start_ns and end_ns go together"),
        ("/communication", "?run=gloo&matrix=speed", "must be one of"),
        ("/compare", "?base=nope&new=npu", "URL parameter base: no run named 'nope'"),
        ("/compare", "?base=gloo&new=npu&new_step=9999", "run 'npu' has no step 9999"),
        ("/compare", "?base=gloo&new_step=x", "not an integer"),
        ("/overview-typo", "", "Page not found"),
    ]
    for path, search, want in cases:
        page = client.page(path, search)
        assert want in page, (path, search, page[:500])
        assert "Traceback" not in page and "Internal error" not in page, (path, search)
    # a callback given a run that vanished answers with a message too
    out = client.call(
        "op-grid.rowData",
        {
            "op-run.value": "gone",
            "op-ranks.value": [],
            "op-source.value": "operators",
            "op-group.value": "name",
            "op-scope.value": "across",
        },
    )
    assert "no run named 'gone'" in json.dumps(out)


def test_empty_store_page_tells_how_to_ingest(tmp_path: Path) -> None:
    c = DashClient(create_app(tmp_path / "nothing_here"))
    for path in ("/", "/timeline", "/operators", "/memory", "/communication", "/compare"):
        page = c.page(path)
        assert "No profiling data yet" in page and "analyze ingest" in page, path


def test_the_app_takes_arrow_buffers_from_the_system_allocator_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow's default pool keeps freed pages resident (the server's memory grew with the rank
    count): the app uses the C library's allocator, unless ARROW_DEFAULT_MEMORY_POOL names a pool."""
    import pyarrow as pa

    before = pa.default_memory_pool()
    other = pa.mimalloc_memory_pool() if before.backend_name == "system" else before
    try:
        pa.set_memory_pool(other)
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", other.backend_name)
        create_app(tmp_path / "store")
        assert pa.default_memory_pool().backend_name == other.backend_name
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
        create_app(tmp_path / "store")
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)


def test_serve_while_ingesting_and_reload_shows_the_new_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest(KINETO, store, "first")
    proc, url = start_server(store)
    errors: list[str] = []
    seen: list[bool] = []
    stop = threading.Event()

    def poll() -> None:
        body = json.dumps(
            {
                "output": ".._pages_content.children..._pages_store.data..",
                "outputs": [
                    {"id": "_pages_content", "property": "children"},
                    {"id": "_pages_store", "property": "data"},
                ],
                "inputs": [
                    {"id": "_pages_location", "property": "pathname", "value": "/"},
                    {"id": "_pages_location", "property": "search", "value": ""},
                ],
                "changedPropIds": [],
            }
        ).encode()
        while not stop.is_set():
            try:
                req = urllib.request.Request(
                    url + "_dash-update-component", data=body, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=120) as r:
                    text = r.read().decode()
                if "msg-error" in text or "Traceback" in text:
                    errors.append(text[:300])
                seen.append("second" in text)
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(exc))
            time.sleep(0.05)

    t = threading.Thread(target=poll)
    t.start()
    try:
        # the first answer before the ingest starts (a fixed pause was outlasted by the server's
        # first request on a busy machine: that answer could then already show the new run)
        deadline = time.monotonic() + 120
        while not (seen or errors) and time.monotonic() < deadline:
            time.sleep(0.05)
        res = subprocess.run(
            [*ANALYZE, "ingest", str(NPU), "--run", "second", "--store", str(store)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        deadline = time.monotonic() + 120
        while not (seen and seen[-1]) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        t.join()
        stop_server(proc)
    assert not errors, errors[:3]
    assert len(seen) >= 3 and not seen[0] and seen[-1], (
        "the page served during the ingest did not show the new run after it"
    )


@pytest.fixture(scope="module")
def rank0_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, ServerProcess]]:
    """`analyze serve` over a store of rank 0 of the Kineto sample (run "r"): (store, URL, process).
    The tests using it only read from it."""
    store = tmp_path_factory.mktemp("rank0") / "s"
    ingest(KINETO / "rank_0", store, "r")
    proc, url = start_server(store)
    try:
        yield store, url, proc
    finally:
        stop_server(proc)


SETTLE_CHILD = r"""
import gc, sys
import waitress
class Server:  # the server's loop replaced: say what the collector sees once the app is built
    effective_port = 1
    def run(self):
        print("frozen", gc.get_freeze_count(), flush=True)
    def close(self):
        pass
waitress.create_server = lambda *a, **k: Server()
from webapp.app import serve
serve(sys.argv[1], port=0, echo=lambda s: None)
"""


def test_serve_puts_the_long_lived_objects_out_of_the_collectors_passes(store: Path) -> None:
    """`analyze serve` builds the app, then freezes what the process holds (``warmup.settle``:
    ``gc.freeze``), so a full collection inside a request no longer walks the modules', the app's
    and Plotly's ~150 000 objects (that pass was the p95 of the cheap views: bench/README.md)."""
    proc = subprocess.run([sys.executable, "-c", SETTLE_CHILD, str(store)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frozen = int(proc.stdout.split()[-1])
    assert frozen > 50_000, proc.stdout


def test_serve_reports_a_busy_port(rank0_server: tuple[Path, str, ServerProcess]) -> None:
    store, url, _ = rank0_server
    port = url.rsplit(":", 1)[1].strip("/")
    res = subprocess.run(
        [*ANALYZE, "serve", "--store", str(store), "--port", port],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "in use" in (res.stdout + res.stderr).lower()
    assert "Traceback" not in res.stdout + res.stderr


def test_serve_is_a_production_server_serving_requests_at_once(rank0_server: tuple[Path, str, ServerProcess]) -> None:
    """`analyze serve` runs on waitress (not a development server) and serves concurrent users:
    every page and the app's layout, 8 clients at once, all answered."""
    from concurrent.futures import ThreadPoolExecutor

    _, url, proc = rank0_server
    paths = [*iter_pages(), "_dash-layout", "_dash-dependencies"] * 4

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url + path.lstrip("/"), timeout=120) as res:
                res.read()
                return res.status, res.headers.get("Server", "")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")[:300]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(get, paths))
    assert all(code == 200 for code, _ in answers), f"{answers}\nthe server's output:\n{proc.log()[-20_000:]}"
    assert {server for _, server in answers} == {"waitress"}


def test_concurrent_first_requests_wait_for_dash_to_set_itself_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dash sets itself up in hooks of the first request, each behind a flag it sets before the
    work: a request arriving meanwhile went on with the app half set up (the router's callback
    registered while the first request iterated the callbacks: an HTTP 500 "dictionary changed size
    during iteration" of `analyze serve` under load). Here Dash's setup is held inside its last
    step (``validate_background_callbacks``) until another request goes past the hooks, or 3 s:
    none may, and every request is answered whole."""
    from dash import _validate
    from flask import request

    app = create_app(tmp_path / "store")
    setting_up, went_on = threading.Event(), threading.Event()
    during: list[str] = []
    real = _validate.validate_background_callbacks

    def held(callback_map: dict[str, Any]) -> None:
        setting_up.set()
        went_on.wait(3)  # a request let through now gets past the hooks at once
        real(callback_map)
        setting_up.clear()

    monkeypatch.setattr(_validate, "validate_background_callbacks", held)

    @app.server.before_request
    def past_the_hooks() -> None:
        if setting_up.is_set():
            during.append(request.path)
            went_on.set()

    paths = ["/", "/_dash-layout", "/_dash-dependencies", "/timeline"] * 2
    got: list[tuple[str, int, bytes]] = []

    def get(path: str) -> None:
        r = app.server.test_client().get(path)
        got.append((path, r.status_code, r.get_data()))

    threads = [threading.Thread(target=get, args=(p,)) for p in paths]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not during, f"served while Dash set itself up: {during}"
    assert sorted(p for p, _, _ in got) == sorted(paths) and {code for _, code, _ in got} == {200}, got
    for path, _, body in got:
        if path == "/_dash-dependencies":  # the pages' router is there for every request
            assert any(d["output"].startswith(".._pages_content.children") for d in json.loads(body))


def test_small_display_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pandas as pd

    from webapp import ui

    create_app(tmp_path / "store")  # the pages register themselves with an app
    from webapp.pages import memory, operators, overview

    assert overview.scalar_label("step_time_ns") == "step time" and overview.scalar_label("loss") == "loss"
    assert memory._peak(0) == "-" and memory._peak(None) == "-" and memory._peak(2**20) == "1.00 MiB"

    # drill bars: the slower rank is red only when it is more than 5 % slower than the fastest
    def colors(totals: list[float]) -> list[str]:
        n = len(totals)
        df = pd.DataFrame(
            {
                "rank": range(n),
                "count": [1] * n,
                "total_ns": totals,
                "avg_ns": totals,
                "min_ns": totals,
                "p25_ns": totals,
                "p50_ns": totals,
                "p75_ns": totals,
                "p99_ns": totals,
                "max_ns": totals,
                "self_ns": totals,
            }
        )
        monkeypatch.setattr(operators.data, "operator_drill", lambda *a, **k: df)
        out = operators.drill(None, "r", "kernels", "name", "op", None, list(range(n)))  # type: ignore[arg-type]
        return list(out[2].figure["data"][0]["marker"]["color"])

    red = ui.COLORS["comm_not_overlapped"]
    assert red not in colors([1000.0, 1004.0])
    assert colors([1000.0, 1100.0]) == [ui.COLORS["computing"], red]
    # grid columns: as wide as the content, the first one gives way to a budget
    cols = ui.fit_columns(
        [{"field": "key", "headerName": "name"}, {"field": "n", "headerName": "calls"}],
        [{"key": "x" * 80, "n": 1234567}],
        max_px=400,
        budget_px=350,
    )
    assert cols[0]["width"] == 350 - cols[1]["width"] and cols[1]["width"] >= len("1,234,567") * 7


def test_memory_counters_grouped_largest_first_and_curves_hold_their_value(client: DashClient, store: Path) -> None:
    from analyzer.store import Store

    st = Store(store)
    peaks = st.query(
        "SELECT component, count(allocated_bytes) AS n_alloc, max(greatest(coalesce(allocated_bytes, 0), "
        "coalesce(reserved_bytes, 0), coalesce(active_bytes, 0))) AS peak FROM memory_samples WHERE run = 'npu' "
        "GROUP BY ALL",
        run="npu",
    )
    page = json.loads(client.page("/memory", "?run=npu"))
    dd = _find(page, "mem-component")
    opts = dd["props"]["options"]
    values = [o["value"] for o in opts if not o.get("disabled")]
    assert sorted(values) == sorted(peaks["component"])  # every counter, once
    heads = [i for i, o in enumerate(opts) if o.get("disabled")]
    groups = [opts[a + 1 : b] for a, b in zip(heads, heads[1:] + [len(opts)])]
    alloc = peaks[peaks["n_alloc"] > 0].sort_values("peak", ascending=False)["component"].tolist()
    modules = peaks[(peaks["n_alloc"] == 0) & (peaks["peak"] > 0)].sort_values("peak", ascending=False)
    assert [o["value"] for o in groups[0]] == alloc  # the allocators first, largest peak first
    assert [o["value"] for o in groups[1]] == modules["component"].tolist()
    assert {o["value"] for o in groups[2]} == set(peaks[peaks["peak"] <= 0]["component"])  # never above 0: last
    assert len(groups[2]) > 40 and "never above 0" in opts[heads[2]]["label"].lower()
    # zoomed between two samples of a driver-module counter: each rank's curve holds its value across
    # the window (not an empty chart), and the status counts the samples inside the window: none
    s = st.query(
        "SELECT rank, ts_ns, reserved_bytes FROM memory_samples WHERE run = 'npu' AND component = 'HCCL' "
        "AND rank = 0 ORDER BY ts_ns",
        run="npu",
    )
    i = int(s["reserved_bytes"].to_numpy().argmax())
    a, b = int(s["ts_ns"].iloc[i]) + 1, int(s["ts_ns"].iloc[i + 1]) - 1
    out = client.call(
        "mem-curves.figure",
        {
            "mem-run.value": "npu",
            "mem-ranks.value": [0],
            "mem-component.value": "HCCL",
            "mem-series.value": ["allocated", "reserved", "active"],
        },
        state={"mem-window.data": None, "mem-want.data": {"start_ns": str(a), "end_ns": str(b)}},
    )
    traces = [t for t in out["mem-curves"]["figure"]["data"] if t.get("name")]
    assert [t["name"] for t in traces] == ["rank 0 reserved"]  # allocated / active: not recorded by HCCL
    assert len(plotly_array(traces[0]["x"])) == 2
    assert list(plotly_array(traces[0]["y"])) == [float(s["reserved_bytes"].iloc[i]) / 2**20] * 2
    assert "HCCL: 0 samples in view" in json.dumps(out["mem-status"])


def test_cpu_memory_draws_no_flat_reserved_line(client: DashClient) -> None:
    out = client.call(
        "mem-curves.figure",
        {
            "mem-run.value": "gloo",
            "mem-ranks.value": [0, 1],
            "mem-component.value": "allocator",
            "mem-series.value": ["allocated", "reserved", "active"],
        },
        state={"mem-window.data": None, "mem-want.data": {}},
    )
    names = [t["name"] for t in out["mem-curves"]["figure"]["data"] if t.get("name")]
    assert "rank 0 allocated" in names and "rank 1 allocated" in names
    assert not [n for n in names if "reserved" in n]  # a CPU run's allocator reserves nothing: 0 throughout


def test_matrix_draws_self_links_apart_from_the_colour_scale(client: DashClient, store: Path) -> None:
    from analyzer import analyses
    from analyzer.store import Store

    pairs = analyses.rank_pairs(Store(store), "npu", None)
    local = pairs["transport"] == "LOCAL"
    assert local.any() and (pairs[local]["src_rank"] == pairs[local]["dst_rank"]).all()
    out = client.call("cm-content.children", {"cm-run.value": "npu", "cm-ranks.value": [], "cm-metric.value": "x"})
    body = out["cm-content"]["children"]
    graph = _find(body, "cm-matrix")
    between, selfs = graph["props"]["figure"]["data"]
    # the colour scale spans the links between ranks; the local copies (~0.4 TB/s) are grey, apart
    assert between["zmax"] * 2**20 == pytest.approx(float(pairs[~local]["bytes"].max()))
    z, z_self = plotly_array(between["z"]), plotly_array(selfs["z"])
    assert sorted(z_self[np.isfinite(z_self)]) == pytest.approx(sorted(pairs[local]["bytes"] / 2**20))
    assert np.isnan(np.diag(z)).all() and np.isfinite(np.diag(z_self)).all()  # the diagonal is grey, not coloured
    assert "Grey: a rank's copies inside its own device" in json.dumps(body)


def test_operators_drill_forgets_an_operator_the_view_does_not_have(client: DashClient) -> None:
    state = {
        "op-run.value": "npu",
        "op-ranks.value": [],
        "op-source.value": "kernels",
        "op-group.value": "name",
    }
    # the URL's operator is not in this run: the drill says so and drops it from the address
    out = client.call(
        "op-drill.children",
        {"op-grid.selectedRows": None, "op-grid.rowData": []},
        state={**state, "op-want-drill.data": {"op": "aten::mm", "shape": None, "group": "name"}},
    )
    assert "not found" in json.dumps(out["op-drill"]) and out["op-drill-key"]["data"] == {}
    # once the page cleared its drill, the URL's operator does not come back (it would be stale)
    out = client.call(
        "op-drill.children",
        {"op-grid.selectedRows": None, "op-grid.rowData": []},
        state={
            **state,
            "op-want-drill.data": {"op": "aclnnMm_MatMulCommon_MatMulV2", "shape": None, "group": "name"},
            "op-drill-key.data": {},
        },
    )
    assert out["op-drill-key"]["data"] == {} and "Select a row" in json.dumps(out["op-drill"])


def test_grid_columns_keep_header_words_whole_and_wrap_long_names(tmp_path: Path) -> None:
    from webapp import ui

    name = "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad_0123456789"
    cols = ui.fit_columns(
        [
            {"field": "key", "headerName": "name", "filter": "agTextColumnFilter"},
            {"field": "n", "headerName": "rank max total (ms)", "filter": "agNumberColumnFilter"},
        ],
        [{"key": name, "n": 1.5}],
        max_px=420,
        budget_px=400,
    )
    key, num = cols
    assert key["width"] < len(name) * ui.GRID_CHAR_PX  # cut by the budget: so it wraps, whole
    assert key["wrapText"] and key["autoHeight"] and key["cellClass"] == "cell-wrap"
    assert "wrapText" not in num  # numbers fit
    assert num["minWidth"] >= len("total") * ui.GRID_CHAR_PX  # never narrower than a header word
    # a signed change ("+153.5 %", as the Compare page's d3 formatter writes it) is as wide as its sign too
    signed = {"function": "params.value == null ? '' : d3.format('+.1f')(params.value) + ' %'"}
    (pct,) = ui.fit_columns([{"field": "d", "headerName": "Δ", "valueFormatter": signed}], [{"d": 153.5}])
    assert pct["width"] >= len("+153.5 %") * ui.GRID_CHAR_PX + ui.GRID_CELL_PAD_PX - 1


def _find(tree: object, id_: str) -> dict:
    """The component with ``id_`` in a (JSON) layout tree."""
    if isinstance(tree, dict):
        if tree.get("props", {}).get("id") == id_:
            return tree
        for v in tree.get("props", {}).values() if "props" in tree else tree.values():
            try:
                return _find(v, id_)
            except KeyError:
                pass
    elif isinstance(tree, list):
        for v in tree:
            try:
                return _find(v, id_)
            except KeyError:
                pass
    raise KeyError(id_)


def test_advisor_page_lists_every_finding_with_numbers_thresholds_and_evidence_links(
    client: DashClient, store: Path
) -> None:
    from analyzer.analyses import advise
    from analyzer.store import Store

    adv = advise(Store(store), "npu")
    assert len(adv) >= 3
    inputs = {"adv-run.value": "npu", "adv-ranks.value": [], "adv-severity.value": ["high", "medium", "low"]}
    out = client.call(
        "adv-content.children",
        {**inputs, "adv-rule.value": None},
        state={"adv-want.data": {"run": "npu", "finding": 1}},
    )
    body = out["adv-content"]["children"]
    words = texts(body)
    assert f"{len(adv)} findings ({(adv['severity'] == 'medium').sum()} medium); {len(adv)} shown." in words
    for i, f in enumerate(adv.to_dict("records")):
        card = _find(body, f"adv-f-{i}")
        w = texts(card)
        assert f["title"] in w and f["detail"] in w
        # the measured value against the rule's threshold, as the sentence rounds them
        assert f"{f['value']:.1%}" in texts(_find(card, f"adv-value-{i}"))
        assert f"{f['threshold']:.0%}" in texts(_find(card, f"adv-threshold-{i}"))
        assert len(json.dumps(_find(card, f"adv-ev-{i}")).split('"Tr"')) - 2 == len(f["evidence"])  # every row
    assert "current" in _find(body, "adv-f-1")["props"]["className"]  # the finding the link names
    assert out["view-url"]["data"] == "/advisor?run=npu&finding=1"
    # each idle gap links to its window in the timeline and to the kernel after it on the Operators page
    i, gaps = next((i, f["evidence"]) for i, f in enumerate(adv.to_dict("records")) if f["rule"] == "high_free")
    table = json.dumps(_find(body, f"adv-ev-{i}"))
    for g in gaps:
        assert f"/timeline?run=npu&ranks={g['rank']}&hl={g['rank']}:{g['start_ns']}:{g['end_ns']}" in table
        op = urlencode({"run": "npu", "source": "kernels", "group": "name", "op": g["task_after"]})
        assert "/operators?" + op in table
    # filters: a rule and a rank; the address says so
    out = client.call("adv-content.children", {**inputs, "adv-rule.value": "host_bound", "adv-ranks.value": [1]})
    shown = [f for f in adv.to_dict("records") if f["rule"] == "host_bound" and 1 in f["ranks"]]
    assert len(shown) == 1 and shown[0]["title"] in texts(out["adv-content"]["children"])
    assert f"{len(adv)} findings ({len(adv)} medium); 1 shown." in texts(out["adv-content"]["children"])
    assert out["view-url"]["data"] == "/advisor?run=npu&ranks=1&rule=host_bound"
    # the layout restores the filters from the address; a wrong value is a note
    page = client.page("/advisor", "?run=npu&ranks=1&rule=host_bound&severity=high,bogus")
    assert '"value": "host_bound"' in page and "bogus is not one of" in page


def test_cluster_grid_places_every_rank_and_draws_slow_links(tmp_path: Path) -> None:
    import pandas as pd

    from analyzer.analyses.parallel_layout import infer_layout
    from analyzer.analyses.slow_link import COLUMNS

    create_app(tmp_path / "store")  # the pages register themselves with an app
    from webapp.pages import cluster

    # Megatron's tp-dp-pp order on 8 ranks: TP 2 (stride 1), DP 2 (stride 2), PP 2 (stride 4, p2p)
    groups = pd.DataFrame(
        [((0, 1), "tp"), ((2, 3), "tp"), ((4, 5), "tp"), ((6, 7), "tp"), ((0, 2), "dp"), ((1, 3), "dp")]
        + [((4, 6), "dp"), ((5, 7), "dp"), ((0, 4), "pp"), ((1, 5), "pp"), ((2, 6), "pp"), ((3, 7), "pp")],
        columns=["ranks", "label"],
    ).assign(traffic=None, source="comm_groups", group_name="g")
    _, lay = infer_layout(groups, list(range(8)))
    cells, x_title, rows = cluster.grid_cells(lay)
    assert x_title.startswith("tp") and rows == ["pp 0 · dp 0", "pp 0 · dp 1", "pp 1 · dp 0", "pp 1 · dp 1"]
    at = {int(r): (int(x), int(y)) for r, x, y in cells.itertuples(index=False)}
    assert at == {r: (r % 2, r // 2) for r in range(8)}  # rank = tp + 2 dp + 4 pp
    judged = pd.DataFrame(
        [
            {"level": "link", "transport": "HCCS", "n": 8, "min_bytes_per_s": 9e9, "gap_ratio": 0.4,
             "slow": True, "slow_src": 2, "slow_dst": 6},
            {"level": "rank", "step": 3, "transport": "RDMA", "min_bytes_per_s": 5e9, "max_bytes_per_s": 20e9,
             "slow": True, "slow_rank": 5, "fast_rank": 4},
            {"level": "rank", "step": 3, "transport": "<b>SDMA</b>", "slow": False},
        ],
        columns=COLUMNS,
    )  # fmt: skip
    steps = lay.assign(metric="step_ns", value=[1e6 * (r + 1) for r in range(8)])
    fig, said, n = cluster.figure(steps, "step_ns", judged)
    assert n == 2 and "slow HCCS link 2 → 6: 9.00 GB/s, 40.0% below the median of its 8 peer links" in said
    (arrow,) = [a for a in fig.layout.annotations if a.showarrow]
    assert (arrow.ax, arrow.ay, arrow.x, arrow.y) == (*at[2], *at[6])  # from the slow link's source to its destination
    (box,) = fig.layout.shapes  # the rank slow on RDMA
    assert ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2) == at[5]
    assert fig.data[0].z[at[7][1]][at[7][0]] == 8.0  # ms
    # no layout: the ranks in order, row by row
    cells, x_title, rows = cluster.grid_cells(pd.DataFrame({"rank": [0, 1, 2, 3, 4]}))
    assert "no parallel layout" in x_title and rows == ["0-2", "3-4"]


def test_communication_page_shows_group_idle_and_the_producers_communication(client: DashClient) -> None:
    """Issue 11 §1.6 / §1.9: the groups' idle share (93.4 % of the Level1 sample's elapsed time) and,
    per rank, the step breakdown's Communication with its definition beside the producer's own."""
    out = client.call("cm-content.children", {"cm-run.value": "npu", "cm-ranks.value": [], "cm-metric.value": "x"})
    body = out["cm-content"]["children"]
    groups = json.dumps(_find(body, "cm-group-table"))
    assert "idle share" in groups and "93.4%" in groups
    defs = json.dumps(_find(body, "cm-definition-table"))
    assert "Communication (producer's)" in defs and "op spans" in defs
    assert "105.992 ms" in defs and "100.375 ms" in defs  # ours and step_trace_time.csv agree on both ranks


# ---------------------------------------------------------------------------------------------
# answers kept whole (webapp.answers)
# ---------------------------------------------------------------------------------------------


def _post(client: DashClient, first_output: str, inputs: dict[str, Any], **headers: str) -> Any:
    from webapp_helpers import callback_body

    return client.http.post(
        "/_dash-update-component", json=callback_body(client.deps, first_output, inputs), headers=headers
    )


def test_a_callback_answer_is_kept_per_catalog_state_inputs_and_language(client: DashClient, store: Path) -> None:
    """The second request with the same body is the first's answer, byte for byte (gzip-compressed
    for a client that accepts it); other inputs, another language or a new catalog state are not."""
    import gzip
    import os

    from webapp.answers import ANSWERS

    inputs = {"cm-run.value": "gloo", "cm-ranks.value": [], "cm-metric.value": "bytes"}
    first = _post(client, "cm-content.children", inputs)
    assert first.status_code == 200 and "Content-Encoding" not in first.headers
    n = len(ANSWERS)
    again = _post(client, "cm-content.children", inputs, **{"Accept-Encoding": "gzip, deflate"})
    assert again.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in again.headers["Vary"]
    assert gzip.decompress(again.get_data()) == first.get_data()
    assert _post(client, "cm-content.children", inputs).get_data() == first.get_data()  # decompressed
    assert len(ANSWERS) == n  # served, not computed again
    # other inputs: another answer
    other = _post(client, "cm-content.children", {**inputs, "cm-metric.value": "transit_ns"})
    assert other.status_code == 200 and other.get_data() != first.get_data() and len(ANSWERS) == n + 1
    # the same inputs in another language: written in that language, kept apart
    zh = _post(client, "cm-content.children", inputs, **{"Accept-Language": "zh-CN"})
    assert zh.get_data() != first.get_data() and len(ANSWERS) == n + 2
    assert _post(client, "cm-content.children", inputs).get_data() == first.get_data()
    # a commit (here: the catalog file touched) changes the catalog's state: computed again
    from analyzer.store.layout import CATALOG_FILE

    catalog = store / CATALOG_FILE
    st = catalog.stat()
    os.utime(catalog, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert _post(client, "cm-content.children", inputs).get_data() == first.get_data()
    assert len(ANSWERS) == n + 3


def test_answers_showing_an_error_or_of_unkept_callbacks_are_not_kept(client: DashClient) -> None:
    from webapp.answers import ANSWERS

    n = len(ANSWERS)
    missing = {"cm-run.value": "no-such-run", "cm-ranks.value": [], "cm-metric.value": "bytes"}
    for _ in range(2):
        r = _post(client, "cm-content.children", missing)
        assert r.status_code == 200 and b"no-such-run" in r.get_data()
    assert len(ANSWERS) == n
    # the Compare page's content is not declared kept
    cmp = {"cmp-base.value": "gloo", "cmp-new.value": "npu", "cmp-base-step.value": "aligned"}
    assert _post(client, "cmp-content.children", {**cmp, "cmp-new-step.value": "aligned"}).status_code == 200
    assert len(ANSWERS) == n


def test_answer_cache_waits_for_an_answer_under_way_and_stays_in_its_budget() -> None:
    from webapp.answers import AnswerCache

    cache = AnswerCache(budget=100)
    claim = cache.claim("k")
    assert claim is not None and not isinstance(claim, tuple)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(cache.claim("k", wait=120)))
    waiter.start()  # waits for the claim (or, if it comes late, finds the answer kept): the same answer
    cache.put("k", b"x" * 40, "application/json")
    cache.release("k", claim)
    waiter.join(120)
    assert got == [(b"x" * 40, "application/json")]  # the first request's answer, not a claim of its own
    cache.put("a", b"y" * 40, "application/json")
    cache.put("b", b"z" * 40, "application/json")  # 120 bytes > 100: the least recently used goes
    assert cache.get("k") is None and cache.get("a") is not None and cache.nbytes == 80
    cache.put("huge", b"h" * 101, "application/json")  # larger than the budget: never kept
    assert cache.get("huge") is None and len(cache) == 2
    # a request whose wait ends without a kept answer computes it itself (None: no claim)
    mine = cache.claim("slow")
    assert cache.claim("slow", wait=0.0) is None
    cache.release("slow", mine)  # type: ignore[arg-type]


EXIT_CHILD = """
import atexit, sys, threading
# registered before the web app's: atexit runs handlers last-in first-out, so this one runs after it
def report():
    alive = [t.name for t in threading.enumerate() if t.name.startswith("rankscope-warm-")]
    print("alive at exit:", alive, flush=True)
atexit.register(report)
from analyzer.store import Store
from webapp import warmup
from webapp.reader import Reader
store = Store(sys.argv[1])
with Reader(store, "npu") as rd:
    assert warmup.warm_up(rd, "npu", [0, 1])
print("exiting", flush=True)
"""


def test_exit_during_warm_up_is_clean(store: Path) -> None:
    """A process that exits while the warm-up thread computes (a server stopped right after its
    first page, a test run ending) waits for that thread to end its current job: a daemon thread
    still inside DuckDB when the interpreter finalises aborts the process ("FATAL: exception not
    rethrown", exit code 134; seen in 2 of 8 runs of a test module). The child starts a warm-up and
    exits at once; a handler of its own that runs after the web app's finds no warm-up alive."""
    env = {**os.environ, "RANKSCOPE_WEB_WARMUP": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_CHILD, str(store)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FATAL" not in proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["exiting", "alive at exit: []"], proc.stdout
