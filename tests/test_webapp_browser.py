"""The web app in a real browser (Playwright + Debian chromium) against the real server
(`analyze serve --port 0`) over a store ingested from sample_data/: on every page, real values from
the data appear, interactions work, the console stays clean, and trace names are shown as text.

RANKSCOPE_SCREENSHOTS=1 also writes the README's screenshots to docs/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from webapp_helpers import (
    CHROMIUM,
    KINETO,
    NPU,
    REPO,
    choose,
    drawn,
    grid_rows,
    ingest,
    settle,
    sort_descending,
    start_server,
    stop_server,
    tl_state,
    trace_events,
)

from analyzer.analyses import stragglers
from analyzer.analyses.step_breakdown import aggregated_ranks, from_aggregates, from_facts
from analyzer.store import Store
from webapp.format import fmt_bytes, fmt_ns

SHOTS = REPO / "docs" / "screenshots"
GLOO_4RANK = REPO / "tests" / "data" / "kineto_gloo_4rank_slow"
XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(2)>"
ZH_NAME = "<i>矩阵乘</i>{rank} [b]名称"  # Chinese, markup, a format field and rich markup: shown as written

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("webapp_browser")
    store = ingested(tmp / "store", (KINETO, "gloo"), (NPU, "npu"))
    # a copy of the sample whose operator names are markup, as a hostile program could write them
    xss = tmp / "xss"
    shutil.copytree(KINETO, xss)
    for f in xss.rglob("*.pt.trace.json"):
        text = f.read_text()
        text = text.replace('"name": "aten::mm"', '"name": ' + json.dumps(XSS_SCRIPT))
        text = text.replace('"name": "aten::addmm"', '"name": ' + json.dumps(XSS_IMG))
        text = text.replace('"name": "aten::mul"', '"name": ' + json.dumps(ZH_NAME, ensure_ascii=False))
        f.write_text(text)
    ingest(xss, store, "xss")
    ingest(GLOO_4RANK, store, "gloo4")  # PP 2 x DP 2, rank 1 deliberately slow (tests/data/make_slow_rank.py)
    proc, url = start_server(store)
    yield {"url": url, "store": Store(store)}
    stop_server(proc)


def shot(pg: Any, name: str) -> None:
    pg.wait_for_timeout(300)
    if os.environ.get("RANKSCOPE_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def columns_in_view(pg: Any, grid: str) -> list[str]:
    """The column ids of an AG Grid whose header lies wholly inside the grid without scrolling."""
    return pg.evaluate(
        """(sel) => { const g = document.querySelector(sel + ' .ag-root-wrapper').getBoundingClientRect();
            return [...document.querySelectorAll(sel + ' .ag-header-row-column .ag-header-cell')]
              .filter(h => { const b = h.getBoundingClientRect();
                  return b.width > 20 && b.left >= g.left - 1 && b.right <= g.right + 1; })
              .map(h => h.getAttribute('col-id')); }""",
        grid,
    )


def step_span_ms(store: Store, run: str, step: int, ranks: list[int]) -> float:
    """Length of ``step`` over ``ranks`` (earliest start to latest end), in ms."""
    st = store.query(
        f"SELECT min(start_ns) AS a, max(end_ns) AS b FROM steps WHERE run = ? AND step = ? "
        f"AND rank IN ({','.join(str(int(r)) for r in ranks)}) AND source <> 'collector'",
        [run, step],
        run=run,
    ).iloc[0]
    return (int(st["b"]) - int(st["a"])) / 1e6


def shown_window_ms(pg: Any) -> float:
    """The timeline's window length (ms) as its renderer holds it."""
    st = tl_state(pg)
    return (st["b"] - st["a"]) / 1e6


def canvas_box(pg: Any) -> dict[str, float]:
    return pg.locator("#tl-box canvas").bounding_box()


def click_slice(pg: Any, text: str) -> dict[str, Any]:
    """Click the first drawn slice whose name contains ``text``."""
    hit = pg.evaluate("(t) => window.rankscopeTimeline.findDrawn(t)", text)
    assert hit, f"no slice named like {text!r} is drawn"
    box = canvas_box(pg)
    pg.mouse.click(box["x"] + hit["x"], box["y"] + hit["y"])
    return hit


def in_viewport(pg: Any, selector: str) -> bool:
    return pg.evaluate(
        "(sel) => { const r = document.querySelector(sel).getBoundingClientRect();"
        " return r.top >= 0 && r.left >= 0 && r.top < innerHeight - 40 && r.right <= innerWidth; }",
        selector,
    )


def aligned_offsets(store: Store, run: str) -> dict[int, int]:
    """The clock offsets the timeline applies: those of the ranks the analysis could align."""
    from analyzer.analyses import clock_offsets

    off = clock_offsets(store, run)
    return {
        int(r): int(o) if s in ("aligned", "reference") and not pd.isna(o) else 0
        for r, o, s in zip(off["rank"], off["offset_ns"], off["status"])
    }


# ---------------------------------------------------------------------------------------------


def test_overview_shows_runs_steps_and_breakdown_and_follows_the_rank_choice(server: dict, page: Any) -> None:
    page.goto(server["url"] + "?run=gloo")
    page.wait_for_selector("#ov-steps-table")
    settle(page)
    assert "npu" in page.inner_text("#ov-runs") and "xss" in page.inner_text("#ov-runs")
    steps = sorted(
        {int(e["name"].split("#")[1]) for e in trace_events(0) if str(e.get("name", "")).startswith("ProfilerStep#")}
    )
    assert page.inner_text("#ov-stat-steps") == f"{len(steps)} ({steps[0]}–{steps[-1]})"
    # the step time column is the mean ProfilerStep duration of the trace; the breakdown is the one the
    # ingest stored (agg_step_breakdown, built in the worker), equal to the analysis over the facts
    store = server["store"]
    assert aggregated_ranks(store.catalog_snapshot(), "gloo", None) == ([0, 1], [])
    bd = from_aggregates(store, "gloo", [0, 1])
    pd.testing.assert_frame_equal(bd, from_facts(store, "gloo"))
    table = page.inner_text("#ov-steps-table")
    for r in (0, 1):
        prof = [e["dur"] * 1000 for e in trace_events(r) if str(e.get("name", "")).startswith("ProfilerStep#")]
        assert fmt_ns(sum(prof) / len(prof)) in table
        assert fmt_ns(bd[bd["rank"] == r]["computing_ns"].astype(float).mean()) in table
    assert "no communication matrix" in page.inner_text("#ov-missing")
    shot(page, "overview")
    # the collector's scalars: one curve per rank and scalar
    assert page.locator(".js-plotly-plot .gtitle", has_text="loss").count() == 1
    # choose rank 1 only: the table and the address follow
    choose(page, "#ov-ranks", "rank 1")
    page.wait_for_function(
        "() => { const t = document.querySelector('#ov-steps-table tbody');"
        " return t && t.innerText.trim().split('\\n').map(l => l.split('\\t')[0]).join(',') === '1'; }"
    )
    page.wait_for_function("() => location.search.includes('ranks=1')")
    # a cell of the rank x step heat map opens that rank and step in the timeline
    page.locator("#ov-heatmap").scroll_into_view_if_needed()
    cell = page.locator("#ov-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(cell["x"] + cell["width"] * 0.75, cell["y"] + cell["height"] / 2)
    page.wait_for_function(
        "() => location.pathname === '/timeline' && /run=gloo&ranks=1&step=\\d+/.test(location.search)"
    )
    st = drawn(page)
    # ... and the timeline shows that step (not the whole run), and the address keeps it
    n = int(re.search(r"step=(\d+)", page.url).group(1))
    assert re.search(rf"[?&]step={n}(&|$)", page.url), page.url
    assert page.inner_text("#tl-step").strip() == f"step {n}"
    assert (st["mode"], st["step"], st["ranks"]) == ("step", n, [1])
    assert shown_window_ms(page) == pytest.approx(
        step_span_ms(server["store"], "gloo", n, [1]) * 1.04, rel=1e-3, abs=0.01
    )


def test_overview_marks_the_straggler_and_picks_ranks_by_layout(server: dict, page: Any) -> None:
    # PP 2 x DP 2, rank 1 slow: the heat map outlines the straggler the analysis names
    page.goto(server["url"] + "?run=gloo4")
    page.wait_for_selector("#ov-heatmap-note")
    settle(page)
    st = stragglers(server["store"], "gloo4")
    named = [int(r) for r in st.loc[st["straggler"].astype(bool), "rank"]]
    assert named == [1]
    assert "Outlined: the straggler rank 1" in page.inner_text("#ov-heatmap-note")
    assert "straggler" in page.inner_text("#ov-steps-table")
    # a pick by layout coordinate: the second pipeline stage's ranks, in the control and the address
    choose(page, "#ov-pick", "pp = 1 (2 ranks)")
    page.wait_for_function("() => location.search.includes('ranks=2-3')")
    page.wait_for_function(
        "() => { const t = document.querySelector('#ov-steps-table tbody');"
        " return t && t.innerText.trim().split('\\n').map(l => l.split('\\t')[0]).join(',') === '2,3'; }"
    )
    # the timeline picks by layout coordinate too: the first data-parallel index, drawn and in the address
    page.goto(server["url"] + "timeline?run=gloo4")
    st = drawn(page)
    choose(page, "#tl-pick", "dp = 0 (2 ranks)")
    page.wait_for_function("() => { const s = window.rankscopeTimeline.state(); return s.ranks.join(',') === '0,2'; }")
    drawn(page, st["seq"])
    page.wait_for_function("() => new URLSearchParams(location.search).get('ranks') === '0,2'")


def test_timeline_opens_a_step_as_named_slices_on_aligned_clocks(server: dict, page: Any) -> None:
    store = server["store"]
    page.goto(server["url"] + "timeline?run=npu&step=50")
    st = drawn(page)
    origin = int(st["origin"])
    off = aligned_offsets(store, "npu")
    assert off[1] != 0  # the sample's two ranks are aligned by their collectives
    steps = store.query(
        "SELECT rank, start_ns, end_ns FROM steps WHERE run = 'npu' AND step = 50 AND source <> 'collector'", run="npu"
    )
    a = min(int(x) - off[int(r)] for r, x in zip(steps["rank"], steps["start_ns"])) - origin
    b = max(int(x) - off[int(r)] for r, x in zip(steps["rank"], steps["end_ns"])) - origin
    pad = (b - a) // 50
    assert (st["a"], st["b"], st["mode"], st["clock"]) == (a - pad, b + pad, "step", "aligned")
    # the step's events are drawn as named slices (the short ones as occupancy), not as busy bars
    assert st["stats"]["slices"] > 50 and st["stats"]["labelled"] > 5
    assert "ProfilerStep#50" in st["stats"]["labels"]
    assert page.get_attribute("#tl-status-text", "data-mode") == "slices"
    # each rank's header shows its offset and residual (rank 0 is the reference)
    clock = {c["rank"]: c for c in st["clockInfo"]}
    assert clock[1]["offset"] == off[1] and 0 < clock[1]["residual"] < 10_000
    sign = "−" if off[1] < 0 else "+"
    assert st["headers"] == [
        "rank 0 clock reference",
        f"rank 1 offset {sign}{abs(off[1]) / 1e3:.3f} µs ± {clock[1]['residual']} ns",
    ]
    assert st["stats"]["headers"][0] == "rank 0 clock reference"  # drawn in the rank's header row
    # "whole run" fits the events of the ranks, not the counters and memory samples around them
    page.click("#tl-reset")
    st = drawn(page, st["seq"])
    ev = store.query(
        "SELECT rank, min(ts_ns) AS a, max(ts_ns + coalesce(dur_ns, 0)) AS b FROM slices WHERE run = 'npu' "
        "GROUP BY rank",
        run="npu",
    )
    lo = min(int(x) - off[int(r)] for r, x in zip(ev["rank"], ev["a"])) - origin
    hi = max(int(x) - off[int(r)] for r, x in zip(ev["rank"], ev["b"])) - origin
    pad = max((hi - lo) / 100, 1000)
    assert st["a"] == pytest.approx(lo - pad, abs=1) and st["b"] == pytest.approx(hi + pad, abs=1)
    coll = store.query("SELECT min(start_ns) AS a, max(end_ns) AS b FROM collections WHERE run = 'npu'", run="npu")
    assert st["b"] - st["a"] < 0.6 * (int(coll["b"].iloc[0]) - int(coll["a"].iloc[0]))
    page.wait_for_function("() => !location.search.includes('step=')")
    # the raw clocks: rank 1's lanes move by its offset, the address says so
    page.locator("#tl-clock label").click()
    page.wait_for_function("() => window.rankscopeTimeline.state().clock === 'raw'")
    st = drawn(page, st["seq"])
    assert st["offsets"] == {"0": 0, "1": 0}
    page.wait_for_function("() => location.search.includes('clock=raw')")
    hi_raw = max(int(x) for x in ev["b"]) - origin
    assert st["b"] == pytest.approx(hi_raw + max((hi_raw - (min(int(x) for x in ev["a"]) - origin)) / 100, 1000), abs=1)


def test_timeline_wheel_drag_and_keys_are_history_entries(server: dict, page: Any) -> None:
    page.goto(server["url"] + "timeline?run=gloo")
    st = drawn(page)
    box = canvas_box(page)
    views = [(page.url, st["a"], st["b"])]
    # the wheel zooms in at the cursor: the time under it stays put
    x, y = 600, 200
    data_w = box["width"] - 250
    t_under = st["a"] + (x - 250) / data_w * (st["b"] - st["a"])
    page.mouse.move(box["x"] + x, box["y"] + y)
    page.mouse.wheel(0, -500)
    st = drawn(page, st["seq"])
    assert st["b"] - st["a"] < 0.5 * (views[0][2] - views[0][1])
    assert st["a"] + (x - 250) / data_w * (st["b"] - st["a"]) == pytest.approx(t_under, abs=2)
    assert st["stats"]["inputToDrawMs"] is not None  # the frame after the wheel event was drawn locally
    page.wait_for_function("(u) => location.href !== u && location.search.includes('start_ns=')", arg=views[-1][0])
    views.append((page.url, round(st["a"]), round(st["b"])))
    # a drag pans by the dragged share of the window
    page.mouse.move(box["x"] + x, box["y"] + y)
    page.mouse.down()
    page.mouse.move(box["x"] + x - 100, box["y"] + y, steps=4)
    page.mouse.move(box["x"] + x - 200, box["y"] + y, steps=4)
    page.mouse.up()
    before = st
    st = drawn(page, st["seq"])
    span = before["b"] - before["a"]
    assert st["b"] - st["a"] == pytest.approx(span, rel=1e-9)
    assert st["a"] - before["a"] == pytest.approx(200 / data_w * span, rel=0.02)
    page.wait_for_function("(u) => location.href !== u", arg=views[-1][0])
    views.append((page.url, round(st["a"]), round(st["b"])))
    # W zooms in while it is held, D pans right
    for key, check in (("w", "s.b - s.a < {span} * 0.7"), ("d", "s.a > {a} + ({span}) * 0.2")):
        page.keyboard.down(key)
        page.wait_for_function(
            "() => { const s = window.rankscopeTimeline.state(); return "
            + check.format(span=st["b"] - st["a"], a=st["a"])
            + "; }"
        )
        page.keyboard.up(key)
        page.wait_for_function("(u) => location.href !== u", arg=views[-1][0])
        st = drawn(page)
        views.append((page.url, round(st["a"]), round(st["b"])))
    # Back walks the views in reverse, Forward walks them again, each restoring its window
    same = (
        "([u, a, b]) => { const s = window.rankscopeTimeline.state(); return location.href === u &&"
        " Math.abs(s.a - a) <= 1 && Math.abs(s.b - b) <= 1; }"
    )
    for url, a, b in reversed(views[:-1]):
        page.go_back()
        page.wait_for_function(same, arg=[url, a, b])
    assert tl_state(page)["mode"] == "whole" and "start_ns" not in page.url
    for url, a, b in views[1:]:
        page.go_forward()
        page.wait_for_function(same, arg=[url, a, b])
    # the address alone restores the view
    page.goto(views[2][0])
    st = drawn(page)
    assert (round(st["a"]), round(st["b"])) == (views[2][1], views[2][2])


def test_timeline_ranks_lanes_clock_and_run_changes_are_history_entries(server: dict, page: Any) -> None:
    page.goto(server["url"] + "timeline?run=gloo")
    st = drawn(page)
    assert (st["run"], st["ranks"], st["clock"]) == ("gloo", [0, 1], "aligned")
    seen = [page.url]

    def changed(check: str) -> dict[str, Any]:
        page.wait_for_function("(u) => location.href !== u", arg=seen[-1])
        page.wait_for_function("() => { const s = window.rankscopeTimeline.state(); return " + check + "; }")
        seen.append(page.url)
        return drawn(page)

    choose(page, "#tl-ranks", "rank 1")  # unticks rank 1
    st = changed("s.ranks.join() === '0'")
    assert "ranks=0" in page.url and st["lanes"] and all(k.startswith("0.") for k in st["lanes"])
    page.locator("#tl-groups label", has_text="other").click()
    changed("s.groups.includes('other')")
    page.locator("#tl-clock label").click()
    changed("s.clock === 'raw'")
    choose(page, "#tl-run", "npu")
    st = changed("s.run === 'npu'")
    assert st["ranks"] == [0, 1] and "run=npu" in page.url
    # Back walks the changes in reverse, Forward walks them again
    checks = [
        "s.run === 'gloo' && s.clock === 'raw'",
        "s.run === 'gloo' && s.clock === 'aligned' && s.groups.includes('other')",
        "s.run === 'gloo' && !s.groups.includes('other') && s.ranks.join() === '0'",
        "s.run === 'gloo' && s.ranks.join() === '0,1'",
    ]
    for url, check in zip(reversed(seen[:-1]), checks):
        page.go_back()
        page.wait_for_function("(u) => location.href === u", arg=url)
        page.wait_for_function("() => { const s = window.rankscopeTimeline.state(); return " + check + "; }")
    for url in seen[1:]:
        page.go_forward()
        page.wait_for_function("(u) => location.href === u", arg=url)
    page.wait_for_function("() => window.rankscopeTimeline.state().run === 'npu'")
    assert drawn(page)["run"] == "npu"
    assert page.inner_text("#tl-run").strip() == "npu"


def test_timeline_details_in_view_fold_pin_measure_and_search(server: dict, page: Any) -> None:
    store = server["store"]
    mm = store.query(
        "SELECT ts_ns, dur_ns FROM slices WHERE run = 'gloo' AND rank = 0 AND name = 'aten::mm' ORDER BY ts_ns LIMIT 1",
        run="gloo",
    ).iloc[0]
    start, end = int(mm["ts_ns"]) - 100_000, int(mm["ts_ns"] + mm["dur_ns"]) + 100_000
    page.goto(server["url"] + f"timeline?run=gloo&ranks=0&start_ns={start}&end_ns={end}")
    st = drawn(page)
    origin = int(st["origin"])  # times in the page are ns after it
    assert (st["a"], st["b"]) == (start - origin, end - origin)
    # a click opens the event beside the canvas, in view, with its shapes and Python stack
    hit = click_slice(page, "aten::mm")
    page.wait_for_selector("#tl-detail-table")
    detail = page.inner_text("#tl-detail-table")
    assert "aten::mm" in detail and "input shapes" in detail and "host" in detail
    assert f"duration\t{fmt_ns(int(hit['dur']))}" in detail and f"t = {origin + int(hit['start'])} ns" in detail
    assert page.locator("#tl-detail-stack").count() == 1
    assert in_viewport(page, "#tl-detail-table") and in_viewport(page, "#tl-box")
    page.wait_for_function("() => location.search.includes('sel=0:')")
    page.mouse.move(5, 5)
    shot(page, "timeline")
    # fold rank 0 (its groups become one row each), then unfold it
    box = canvas_box(page)
    row = page.evaluate("() => window.rankscopeTimeline.rowOf('0')")
    page.mouse.click(box["x"] + 40, box["y"] + row["y"] + 6)
    page.wait_for_function("() => window.rankscopeTimeline.state().fold.includes('0')")
    st = drawn(page)
    assert {r["kind"] for r in st["rows"]} == {"rank", "summary"}
    page.wait_for_function("() => location.search.includes('fold=0')")
    page.mouse.click(box["x"] + 40, box["y"] + row["y"] + 6)
    page.wait_for_function("() => !window.rankscopeTimeline.state().fold.includes('0')")
    # pin a lane on top: it is drawn above the scrolled lanes and the address keeps it
    lane = tl_state(page)["lanes"][-1]
    r = page.evaluate("(k) => window.rankscopeTimeline.rowOf(k)", lane)
    page.mouse.click(box["x"] + 250 - 12, box["y"] + r["y"] + 6)
    page.wait_for_function("(k) => window.rankscopeTimeline.state().pin.includes(k)", arg=lane)
    page.wait_for_function("(k) => new URLSearchParams(location.search).get('pin') === k", arg=lane)
    assert page.evaluate("(k) => window.rankscopeTimeline.rowOf(k).y", lane) < r["y"]
    # shift-drag measures a range: its length, and the slices in it by name
    st = drawn(page)
    y = box["y"] + 60
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + 300, y)
    page.mouse.down()
    page.mouse.move(box["x"] + 500, y, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#tl-range-table")
    m = tl_state(page)["measure"]
    lo, hi = sorted((m["a"], m["b"]))
    assert (hi - lo) / (st["b"] - st["a"]) == pytest.approx(200 / (box["width"] - 250), rel=0.02)
    want = store.query(
        "SELECT count(*) AS n FROM slices s JOIN lanes l USING (run, rank, collection_id, pid, tid) "
        "WHERE s.run = 'gloo' AND s.rank = 0 AND l.lane_group IN ('host', 'device', 'communication', 'overlap') "
        "AND ((coalesce(s.dur_ns, 0) = 0 AND s.ts_ns >= ? AND s.ts_ns < ?) "
        "OR (s.dur_ns > 0 AND s.ts_ns < ? AND s.ts_ns + s.dur_ns > ?))",
        [origin + round(lo), origin + round(hi), origin + round(hi), origin + round(lo)],
        run="gloo",
    )["n"][0]
    assert f"{int(want):,} slices in the range" in page.inner_text("#tl-range")
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.querySelector('#tl-range').hidden")
    # search: the matches of a name one after the other, in time order, and back
    n = sum(1 for e in trace_events(0) if e.get("name") == "gloo:all_reduce" and e.get("ph") == "X")
    page.fill("#tl-search", "gloo:all_reduce")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => (window.rankscopeTimeline.state().search.hit || {}).name === 'gloo:all_reduce'")
    first = tl_state(page)["search"]
    assert first["matches"] == n and page.inner_text("#tl-search-count") == f"{n} matches"
    page.click("#tl-search-next")
    page.wait_for_function("(e) => window.rankscopeTimeline.state().search.hit.event !== e", arg=first["hit"]["event"])
    second = tl_state(page)["search"]["hit"]
    assert second["start"] >= first["hit"]["start"]
    page.click("#tl-search-prev")
    page.wait_for_function("(e) => window.rankscopeTimeline.state().search.hit.event === e", arg=first["hit"]["event"])
    st = drawn(page)
    h = st["search"]["hit"]
    assert st["a"] <= h["start"] and h["start"] + h["dur"] <= st["b"] and st["sel"]["event"] == h["event"]
    page.wait_for_selector("#tl-detail-table")
    page.wait_for_function("() => document.querySelector('#tl-detail-table').innerText.includes('gloo:all_reduce')")


def test_timeline_link_with_a_step_or_a_window_restores_that_view(server: dict, page: Any) -> None:
    steps = (
        server["store"]
        .query(
            "SELECT DISTINCT step FROM steps WHERE run = 'gloo' AND source <> 'collector' ORDER BY step", run="gloo"
        )["step"]
        .astype(int)
        .tolist()
    )
    n = steps[0]
    page.goto(server["url"] + f"timeline?run=gloo&step={n}")
    drawn(page)
    assert shown_window_ms(page) == pytest.approx(
        step_span_ms(server["store"], "gloo", n, [0, 1]) * 1.04, rel=1e-3, abs=0.01
    )
    assert re.search(rf"[?&]step={n}(&|$)", page.url), page.url
    assert page.inner_text("#tl-step").strip() == f"step {n}"
    # a window link: exactly that window, kept in the address
    a = int(
        server["store"]
        .query("SELECT min(start_ns) AS a FROM steps WHERE run = 'gloo' AND step = ?", [n], run="gloo")
        .iloc[0]["a"]
    )
    a += 1_000_000
    b = a + 3_000_000
    page.goto(server["url"] + f"timeline?run=gloo&start_ns={a}&end_ns={b}")
    drawn(page)
    assert shown_window_ms(page) == pytest.approx(3.0, abs=1e-6)
    assert f"start_ns={a}" in page.url and f"end_ns={b}" in page.url
    # out of range: said inline, then the whole run
    for q, said in (("step=99", "no step 99"), ("start_ns=1&end_ns=5", "outside")):
        page.goto(server["url"] + f"timeline?run=gloo&{q}")
        drawn(page)
        assert said in page.inner_text("#tl-notes")
        assert "step=" not in page.url and "start_ns=" not in page.url


def test_operators_grid_sort_filter_search_and_drill(server: dict, page: Any) -> None:
    page.goto(server["url"] + "operators?run=gloo&source=operators&group=name&scope=across")
    page.wait_for_selector("#op-grid .ag-row")
    settle(page)
    n_mm = sum(1 for r in (0, 1) for e in trace_events(r) if e.get("name") == "aten::mm" and e.get("ph") == "X")
    rows = grid_rows(page, "#op-grid")
    mm = next(r for r in rows if r["key"] == "aten::mm")
    assert mm["count"].replace(",", "") == str(n_mm) and mm["ranks"] == "2"
    assert {"key", "count", "total_ms", "spread_pct", "max_rank", "timeline"} <= set(columns_in_view(page, "#op-grid"))
    totals = [float(r["total_ms"].replace(",", "")) for r in rows]
    assert totals == sorted(totals, reverse=True)  # sorted by total time
    # search box: every row left mentions the text
    page.fill("#op-search", "aten::add")
    page.wait_for_function(
        "() => { const k = [...document.querySelectorAll('#op-grid .ag-row [col-id=key]')];"
        " return k.length > 0 && k.every(c => c.innerText.includes('aten::add')); }"
    )
    keys = [r["key"] for r in grid_rows(page, "#op-grid")]
    assert keys and all("aten::add" in k for k in keys), keys
    page.wait_for_function("() => location.search.includes('q=aten')")
    # the top-N chart follows the grid's filter
    page.wait_for_function(
        "() => { const t = [...document.querySelectorAll('#op-topn-graph .ytick text')].map(e => e.textContent);"
        " return t.length > 0 && t.every(x => x.includes('aten::add')); }"
    )
    page.fill("#op-search", "")
    page.wait_for_function(
        "() => ![...document.querySelectorAll('#op-grid .ag-row [col-id=key]')]"
        ".every(c => c.innerText.includes('aten::add'))"
    )
    # sort by calls: click the header until it sorts descending
    sort_descending(page, "#op-grid", "count")
    counts = [int(r["count"].replace(",", "")) for r in grid_rows(page, "#op-grid")]
    assert counts == sorted(counts, reverse=True) and len(counts) > 3
    # the name column's own filter, then select the aten::mm row: the drill-down shows it on both
    # ranks with the trace's counts
    page.locator(
        "#op-grid .ag-floating-filter[aria-colindex='1'] input, #op-grid .ag-floating-filter input"
    ).first.fill("aten::m")
    page.wait_for_function(
        "() => { const k = [...document.querySelectorAll('#op-grid .ag-row [col-id=key]')];"
        " return k.length > 0 && k.every(c => c.innerText.includes('aten::m')); }"
    )
    page.locator("#op-grid .ag-row [col-id=key]", has_text=re.compile(r"^aten::mm$")).first.click()
    page.wait_for_selector("#op-drill-table")
    settle(page)
    assert page.inner_text("#op-drill-name") == "aten::mm"
    drill = page.inner_text("#op-drill-table tbody").splitlines()
    for r in (0, 1):
        n = sum(1 for e in trace_events(r) if e.get("name") == "aten::mm" and e.get("ph") == "X")
        assert any(line.split("\t")[:2] == [str(r), str(n)] for line in drill), drill
    page.wait_for_function("() => location.search.includes('op=aten')")
    # the top-N chart names the operators the grid shows: the filtered ones, then all once cleared
    assert set(page.locator("#op-topn-graph .ytick text").all_text_contents()) == {"aten::mm", "aten::mul"}
    page.locator("#op-grid .ag-floating-filter input").first.fill("")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#op-topn-graph .ytick text')]"
        ".some(e => e.textContent === 'gloo:all_reduce')"
    )
    sort_descending(page, "#op-grid", "total_ms")  # back to the largest total first
    totals = [float(r["total_ms"].replace(",", "")) for r in grid_rows(page, "#op-grid")]
    assert totals == sorted(totals, reverse=True) and grid_rows(page, "#op-grid")[0]["key"] == "gloo:all_reduce"
    page.mouse.move(5, 5)
    shot(page, "operators")


def test_operators_drill_link_by_shape_and_grouping_switch(server: dict, page: Any) -> None:
    op = "aclnnMm_MatMulCommon_MatMulV2"
    per_rank = server["store"].query(
        "SELECT rank, count(*) AS n FROM kernels WHERE run = 'npu' AND name = ? GROUP BY rank ORDER BY rank",
        [op],
        run="npu",
    )
    assert len(per_rank) == 2
    # a link naming the operator but no shape, grouped by shape: every shape of it, not "not found"
    page.goto(server["url"] + f"operators?run=npu&source=kernels&group=shape&op={op}")
    page.wait_for_selector("#op-drill-table")
    settle(page)
    assert page.inner_text("#op-drill-name") == f"{op} (all input shapes)"
    drill = page.inner_text("#op-drill-table tbody").splitlines()
    for r, n in per_rank.itertuples(index=False):
        assert any(line.split("\t")[:2] == [str(r), str(n)] for line in drill), drill
    # drill a row grouped by name, then group by name + shape: the same operator stays drilled
    page.goto(server["url"] + "operators?run=npu&source=kernels&group=name")
    page.wait_for_selector("#op-grid .ag-row")
    settle(page)
    page.locator("#op-grid .ag-row [col-id=key]", has_text=re.compile(rf"^{op}$")).first.click()
    page.wait_for_function(f"() => document.querySelector('#op-drill-name')?.innerText === '{op}'")
    page.locator("#op-group label", has_text="by name + input shape").click()
    page.wait_for_function(f"() => document.querySelector('#op-drill-name')?.innerText === '{op} (all input shapes)'")
    assert "not found" not in page.inner_text("#op-drill")
    page.wait_for_function("() => location.search.includes('group=shape') && location.search.includes('op=aclnnMm')")
    # a type is not a name: switching to "by type" clears the drill instead of looking the name up as a type
    page.locator("#op-group label", has_text="by type").click()
    page.wait_for_function("() => !location.search.includes('op=')")
    assert "not found" not in page.inner_text("#op-drill")


def test_operators_status_counts_the_search_and_headers_survive_a_two_column_sort(server: dict, page: Any) -> None:
    page.goto(server["url"] + "operators?run=npu&source=kernels&group=name&scope=across")
    page.wait_for_selector("#op-grid .ag-row")
    settle(page)
    names = server["store"].query("SELECT DISTINCT name FROM kernels WHERE run = 'npu'", run="npu")["name"]
    q = "MatMul"
    want = sum(1 for n in names if q.lower() in str(n).lower())
    assert 0 < want < len(names)
    page.fill("#op-search", q)
    said = f"Showing {want} of {len(names)} (search \u201c{q}\u201d)."
    page.wait_for_function("(s) => document.querySelector('#op-shown').innerText.trim() === s", arg=said)
    assert len(grid_rows(page, "#op-grid")) == want
    page.fill("#op-search", "")
    page.wait_for_function("() => document.querySelector('#op-shown').innerText === ''")
    # sort by calls, then shift-click avg: the sort order numbers must not squeeze the header words
    page.locator("#op-grid .ag-header-cell[col-id=count] .ag-header-cell-label").click()
    page.keyboard.down("Shift")
    page.locator("#op-grid .ag-header-cell[col-id=avg_ms] .ag-header-cell-label").click()
    page.keyboard.up("Shift")
    page.wait_for_selector("#op-grid .ag-header-cell[col-id=avg_ms] .ag-sort-order:not(.ag-hidden)")
    squeezed = page.evaluate(
        """() => [...document.querySelectorAll('#op-grid .ag-header-row-column .ag-header-cell-text')]
            .filter(t => { const r = document.createRange(); r.selectNodeContents(t);
                           const words = t.innerText.split(/\\s+/).length;
                           return r.getClientRects().length > words; })
            .map(t => t.innerText)"""
    )
    assert squeezed == [], squeezed  # no header has more lines than words
    # the key column shows whole names (wrapped when longer than the column), never cut
    cut = page.evaluate(
        "() => [...document.querySelectorAll('#op-grid .ag-row [col-id=key]')]"
        ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText)"
    )
    assert cut == []


def test_memory_curves_peaks_and_blocks(server: dict, page: Any) -> None:
    page.goto(server["url"] + "memory?run=gloo")
    page.wait_for_selector("#mem-peaks-table")
    settle(page)
    table = page.inner_text("#mem-peaks-table")
    # the whole run is drawn from the curves downsampled at ingest: each rank's highest point is its
    # peak in the trace, as the peaks table says
    assert "downsampled at ingest" in page.inner_text("#mem-status")
    tops = page.evaluate(
        """() => Object.fromEntries(document.querySelector('#mem-curves .js-plotly-plot')._fullData
            .filter(d => d.name && d.name.endsWith('allocated')).map(d => [d.name, Math.max(...Array.from(d.y))]))"""
    )
    for r in (0, 1):
        peak = max(e["args"]["Total Allocated"] for e in trace_events(r) if e.get("name") == "[memory]")
        assert fmt_bytes(peak) in table
        assert tops[f"rank {r} allocated"] == pytest.approx(peak / 2**20, rel=1e-9)
    assert page.locator("#mem-curves .scatterlayer .trace").count() >= 2
    assert page.locator("#mem-blocks .ag-row").count() > 0
    assert {"rank", "name", "size_mib", "alloc_ms", "lifetime_ms", "released"} <= set(
        columns_in_view(page, "#mem-blocks")
    )
    # drag-zoom: the window goes to the address (start_ns / end_ns, as on the timeline) and a reload keeps it
    xrange = "() => document.querySelector('#mem-curves .js-plotly-plot').layout.xaxis.range"
    whole = page.evaluate(xrange)
    box = page.locator("#mem-curves .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=4)
    page.mouse.up()
    page.wait_for_function("() => location.search.includes('start_ns=') && location.search.includes('end_ns=')")
    settle(page)
    zoomed = page.evaluate(xrange)
    assert zoomed[1] - zoomed[0] == pytest.approx((whole[1] - whole[0]) * 0.2, rel=0.05)
    assert "every sample in view" in page.inner_text("#mem-status")  # finer than the stored buckets
    page.reload()
    page.wait_for_selector("#mem-curves .nsewdrag")
    settle(page)
    assert page.evaluate(xrange) == pytest.approx(zoomed, abs=1e-3)
    # the NPU run: the allocator counters of torch_npu
    page.goto(server["url"] + "memory?run=npu")
    page.wait_for_selector("#mem-peaks-table")
    page.wait_for_selector("#mem-curves .scatterlayer .trace")
    settle(page)
    assert "PTA" in page.inner_text("#mem-component")
    assert "PTA" in page.inner_text("#mem-status")
    shot(page, "memory")


def test_communication_per_rank_matrix_and_collectives(server: dict, page: Any) -> None:
    page.goto(server["url"] + "communication?run=gloo")
    page.wait_for_selector("#cm-rank-table")
    settle(page)
    table = page.inner_text("#cm-rank-table")
    for r in (0, 1):
        ar = [e["dur"] * 1000 for e in trace_events(r) if e.get("name") == "gloo:all_reduce" and e.get("ph") == "X"]
        assert fmt_ns(sum(ar)) in table
    assert len(grid_rows(page, "#cm-ops")) == len([e for e in trace_events(0) if e.get("name") == "gloo:all_reduce"])
    page.goto(server["url"] + "communication?run=npu&matrix=bandwidth_bytes_per_s")
    page.wait_for_selector("#cm-matrix")
    settle(page)
    assert page.locator("#cm-matrix .heatmaplayer, #cm-matrix .hm").count() >= 1
    assert "HCCS" in " ".join(page.locator("#cm-bw-graph .legendtext").all_text_contents())
    # the matrix colours start at 0 (links 1 % apart do not look like opposite ends); the two byte
    # counts (payload per rank, traffic per transport) are told apart
    assert page.evaluate("() => document.querySelector('#cm-matrix .js-plotly-plot').data[0].zmin") == 0
    assert "data size" in page.inner_text("#cm-rank-table thead") and "SDMA" in page.inner_text("#cm-bw-note")
    assert len(grid_rows(page, "#cm-ops")) == 4
    assert {"name", "max_ms", "min_ms", "slowest_rank", "fastest_rank"} <= set(columns_in_view(page, "#cm-ops"))
    # the operation names differ only at their end: shown whole
    cut = page.evaluate(
        "() => [...document.querySelectorAll('#cm-ops .ag-row [col-id=name]')]"
        ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText)"
    )
    assert cut == []
    shot(page, "communication")


def landed(pg: Any) -> dict[str, Any]:
    """Wait for the timeline a link opened: drawn, and the highlighted call selected."""
    pg.wait_for_function("() => location.pathname === '/timeline' && location.search.includes('hl=')")
    pg.wait_for_function(
        "() => { const t = window.rankscopeTimeline, s = t && t.state(); return s && s.mounted && s.sel; }"
    )
    return drawn(pg)


def covers(st: dict[str, Any], rank: int, a: int, b: int) -> bool:
    """Whether the view shows [a, b] (absolute ns on ``rank``'s clock) whole."""
    origin, off = int(st["origin"]), int(st["offsets"][str(rank)])
    return st["a"] <= a - origin - off and b - origin - off <= st["b"]


def test_links_into_the_timeline_from_operators_collectives_memory_and_findings(server: dict, page: Any) -> None:
    store = server["store"]
    # the operators grid: an operator's slowest call, on its rank, selected with its details
    slow = store.query(
        "SELECT rank, ts_ns, dur_ns FROM operators WHERE run = 'gloo' AND name = 'aten::mm' "
        "ORDER BY dur_ns DESC LIMIT 1",
        run="gloo",
    ).iloc[0]
    r, ts, dur = int(slow["rank"]), int(slow["ts_ns"]), int(slow["dur_ns"])
    page.goto(server["url"] + "operators?run=gloo&source=operators&group=name&scope=across&q=aten::mm")
    page.wait_for_function(
        "() => { const k = [...document.querySelectorAll('#op-grid .ag-row [col-id=key]')];"
        " return k.length === 1 && k[0].innerText === 'aten::mm'; }"
    )
    link = page.locator("#op-grid .ag-row [col-id=timeline] a")
    assert link.inner_text() == f"rank {r}"
    link.click()
    st = landed(page)
    assert st["ranks"] == [r] and st["hl"] == [[r, str(ts), str(ts + dur)]]
    assert covers(st, r, ts, ts + dur) and (st["b"] - st["a"]) < 3 * dur
    assert st["sel"]["rank"] == r and st["sel"]["start"] == ts - int(st["origin"]) and st["sel"]["dur"] == dur
    page.wait_for_function("() => (document.querySelector('#tl-detail-table') || {}).innerText?.includes('aten::mm')")
    assert f"duration\t{fmt_ns(dur)}" in page.inner_text("#tl-detail-table")
    # the collectives grid: the slowest instance, its window on every member rank
    page.goto(server["url"] + "communication?run=npu")
    page.wait_for_selector("#cm-ops .ag-row [col-id=timeline] a")
    settle(page)
    first = page.locator("#cm-ops .ag-row[row-index='0']")
    name = first.locator("[col-id=name]").inner_text()
    ops = store.query(
        "SELECT rank, ts_ns, dur_ns FROM comm_ops WHERE run = 'npu' AND name = ? ORDER BY dur_ns DESC",
        [name],
        run="npu",
    )
    assert len(ops) == 2
    link = page.locator("#cm-ops .ag-row[row-index='0'] [col-id=timeline] a")
    assert link.inner_text() == "on 2 ranks"
    link.click()
    st = landed(page)
    assert st["ranks"] == [0, 1]
    assert st["hl"] == [[int(o.rank), str(o.ts_ns), str(o.ts_ns + o.dur_ns)] for o in ops.itertuples()]
    assert all(covers(st, int(o.rank), int(o.ts_ns), int(o.ts_ns + o.dur_ns)) for o in ops.itertuples())
    page.wait_for_selector("#tl-members")
    members = page.inner_text("#tl-members")
    assert "Collective: allreduce over 2 of 2 ranks" in page.inner_text("#tl-detail")
    origin = int(st["origin"])
    for o in ops.itertuples():
        assert f"{(int(o.ts_ns) - origin) / 1e6:.6f} ms" in members  # each member's entry time
    # a memory peak: the millisecond around it on its rank
    page.goto(server["url"] + "memory?run=npu")
    page.wait_for_selector("#mem-peaks-table a")
    settle(page)
    row0 = page.locator("#mem-peaks-table tbody tr").first
    rank = int(row0.locator("td").first.inner_text())
    row0.locator("a").click()
    page.wait_for_function("() => location.pathname === '/timeline' && location.search.includes('hl=')")
    st = drawn(page)
    (hr, ha, hb), *_ = st["hl"]
    assert hr == rank and ha == hb
    assert st["b"] - st["a"] == pytest.approx(2e6, rel=1e-6) and covers(st, rank, int(ha), int(hb))
    # an advisor finding's evidence: an idle gap of the device on its rank
    page.goto(server["url"] + "?run=npu")
    page.wait_for_selector("#ov-findings a")
    ev = page.locator("#ov-findings a").first
    href = ev.get_attribute("href")
    m = re.search(r"hl=(\d+):(\d+):(\d+)", href)
    assert m, href
    ev.click()
    st = landed(page)
    assert covers(st, int(m.group(1)), int(m.group(2)), int(m.group(3)))


def test_advisor_page_opens_a_finding_and_its_evidence(server: dict, page: Any) -> None:
    from analyzer.analyses import advise

    adv = advise(server["store"], "npu")
    i = next(k for k, f in enumerate(adv.to_dict("records")) if f["rule"] == "high_free")
    gap = adv["evidence"].iloc[i][0]
    # from the Overview's findings card to the Advisor page
    page.goto(server["url"] + "?run=npu")
    page.click("#ov-to-advisor")
    page.wait_for_selector("#adv-summary")
    assert page.inner_text("#adv-summary").startswith(f"{len(adv)} findings")
    # a link to one finding opens it, marked and scrolled into view
    page.goto(server["url"] + f"advisor?run=npu&finding={i}")
    page.wait_for_selector(f"#adv-f-{i}.current")
    assert in_viewport(page, f"#adv-f-{i}")
    assert page.inner_text(f"#adv-value-{i}") == f"{adv['value'].iloc[i]:.1%}"
    assert page.inner_text(f"#adv-threshold-{i}") == f"{adv['threshold'].iloc[i]:.0%}"
    assert gap["task_after"] in page.inner_text(f"#adv-ev-{i}")
    page.locator(f"#adv-ev-{i} tbody tr").first.locator("a", has_text="timeline").click()
    st = landed(page)
    assert covers(st, int(gap["rank"]), int(gap["start_ns"]), int(gap["end_ns"]))
    page.go_back()
    page.wait_for_selector(f"#adv-f-{i}")
    # the severity filter: none of this run's findings is high; the address keeps the choice
    page.locator("#adv-severity label", has_text="medium").click()
    page.wait_for_function("() => location.search.includes('severity=high,low')")
    page.wait_for_function("() => document.querySelector('#adv-content').innerText.includes('No finding matches')")
    page.reload()
    page.wait_for_selector("#adv-summary")
    assert "No finding matches" in page.inner_text("#adv-content")
    shot(page, "advisor")


def test_cluster_grid_colours_the_layout_and_opens_a_rank(server: dict, page: Any) -> None:
    from analyzer.analyses import layout_metric, slow_ranks

    lay = layout_metric(server["store"], "gloo4", "step_ns").set_index("rank")
    page.goto(server["url"] + "cluster?run=gloo4&rank=1")
    page.wait_for_selector("#cl-grid .heatmaplayer")
    settle(page)
    assert page.inner_text("#cl-found").startswith("Layout: DP 2 × PP 2.")
    fig = page.evaluate(
        "() => { const g = document.querySelector('#cl-grid .js-plotly-plot'), d = g._fullData[0];"
        " const rows = (a) => Array.from(a, (r) => Array.from(r));"
        " return {z: rows(d.z), ranks: rows(d.customdata), ticks: g.layout.yaxis.ticktext,"
        " shapes: g.layout.shapes}; }"
    )
    # rows: the pipeline stages; columns: the index inside the DP group; each cell its rank's mean step time
    assert fig["ticks"] == ["pp 0", "pp 1"]
    for y, row in enumerate(fig["ranks"]):
        for x, rank in enumerate(row):
            assert (lay.loc[rank, "pp"], lay.loc[rank, "dp"]) == (y, x)
            assert fig["z"][y][x] == pytest.approx(lay.loc[rank, "value"] / 1e6)
    (mark,) = fig["shapes"]  # rank 1 marked, as the link asked
    assert (mark["x0"] + mark["x1"]) / 2 == lay.loc[1, "dp"] and (mark["y0"] + mark["y1"]) / 2 == lay.loc[1, "pp"]
    # colour by slow-rank votes: rank 1, the sleeping one, has them; the address keeps the metric
    choose(page, "#cl-metric", "slow-rank votes (the rank others waited for)")
    page.wait_for_function("() => location.search.includes('metric=slow_rank_votes')")
    votes = slow_ranks(server["store"], "gloo4").set_index("rank")["votes"]
    page.wait_for_function(
        "(v) => (document.querySelector('#cl-found') || {}).innerText?.includes(v)",
        arg=f"Highest: rank 1 ({int(votes[1])})",
    )
    page.reload()
    page.wait_for_selector("#cl-grid .heatmaplayer")
    assert "Highest: rank 1" in page.inner_text("#cl-found")
    assert "judged" in page.inner_text("#cl-slow")  # Kineto: no per-link bandwidth to judge, none slow
    # a click on rank 2's cell opens rank 2 in the timeline
    box = page.locator("#cl-grid .nsewdrag").first.bounding_box()
    x, y = int(lay.loc[2, "dp"]), int(lay.loc[2, "pp"])
    page.mouse.click(box["x"] + box["width"] * (x + 0.5) / 2, box["y"] + box["height"] * (y + 0.5) / 2)
    page.wait_for_function("() => location.pathname === '/timeline'")
    assert "ranks=2" in page.url
    drawn(page)


def test_trace_names_are_shown_as_text(server: dict, page: Any) -> None:
    page.goto(server["url"] + "operators?run=xss&source=operators&group=name&scope=across")
    page.wait_for_selector("#op-grid .ag-row")
    settle(page)
    keys = [r["key"] for r in grid_rows(page, "#op-grid")]
    assert XSS_SCRIPT in keys and XSS_IMG in keys
    # the top-N chart follows the grid (a callback after it): wait for it to name the operator
    page.wait_for_function(
        "(n) => [...document.querySelectorAll('#op-topn-graph .ytick text')].some(t => t.textContent.includes(n))",
        arg=XSS_SCRIPT,
    )
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("() => [...document.scripts].some(s => s.textContent.includes('alert(1)'))") is False
    # the drill-down and the timeline's event details show the name literally too
    page.locator("#op-grid .ag-row [col-id=key]", has_text=XSS_IMG).first.click()
    page.wait_for_selector("#op-drill-name")
    assert page.inner_text("#op-drill-name") == XSS_IMG
    assert page.locator("img[src='x']").count() == 0
    # the Compare page (gloo against xss: the renamed operators are new ones there, aten::mm vanished)
    page.goto(server["url"] + "compare?base=gloo&new=xss")
    page.wait_for_selector("#cmp-ops .ag-row", timeout=120_000)
    page.fill("#cmp-ops input[aria-label='name Filter Input']", "<")
    page.wait_for_function(
        "(n) => [...document.querySelectorAll('#cmp-ops [col-id=name]')].some(c => c.innerText === n)", arg=XSS_IMG
    )
    names = {r["name"] for r in grid_rows(page, "#cmp-ops")}
    assert XSS_SCRIPT in names and XSS_IMG in names
    assert page.locator("img[src='x']").count() == 0
    # the timeline: found by name, drawn on the canvas with its name, shown literally in the details,
    # the hover tip and the measured range
    page.goto(server["url"] + "timeline?run=xss&ranks=0")
    drawn(page)
    page.fill("#tl-search", "onerror")
    page.press("#tl-search", "Enter")
    page.wait_for_function("(n) => (window.rankscopeTimeline.state().search.hit || {}).name === n", arg=XSS_IMG)
    st = drawn(page)
    assert XSS_IMG in st["stats"]["labels"]  # fillText: the canvas draws characters, never markup
    page.wait_for_function(
        "(n) => (document.querySelector('#tl-detail-table') || {}).innerText?.includes(n)", arg=XSS_IMG
    )
    hit = click_slice(page, XSS_IMG)
    box = canvas_box(page)
    page.mouse.move(box["x"] + hit["x"] + 1, box["y"] + hit["y"])
    page.wait_for_function(
        "(n) => { const t = document.querySelector('.tl-tip'); return t && !t.hidden && t.innerText.includes(n); }",
        arg=XSS_IMG,
    )
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + hit["x"] - 30, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + hit["x"] + 30, box["y"] + 40, steps=3)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_function(
        "(n) => (document.querySelector('#tl-range-table') || {}).innerText?.includes(n)", arg=XSS_IMG
    )
    assert page.locator("img[src='x']").count() == 0 and page.locator("img").count() == 0


def test_pages_in_chinese_by_the_url_and_links_keep_the_language(server: dict, page: Any) -> None:
    page.goto(server["url"] + "operators?run=xss&source=operators&group=name&scope=across&lang=zh")
    page.wait_for_selector("#op-grid .ag-row")
    settle(page)
    assert page.inner_text("#nav-operators") == "算子" and page.inner_text("h1") == "算子"
    assert "个 Host 侧算子" in page.inner_text("#op-status")
    assert page.title() == "rankscope · 算子"
    headers = page.eval_on_selector_all("#op-grid .ag-header-cell-text", "els => els.map(e => e.innerText)")
    assert "名称" in headers and "总耗时 (ms)" in headers
    # a trace name with Chinese characters and markup: found by the search, shown as written
    page.fill("#op-search", "矩阵")
    page.wait_for_function(
        "() => new Set([...document.querySelectorAll('#op-grid .ag-row')].map(r => r.getAttribute('row-index')))"
        ".size === 1"
    )
    assert [r["key"] for r in grid_rows(page, "#op-grid")] == [ZH_NAME]
    page.wait_for_function("() => document.querySelector('#op-shown').innerText.includes('显示')")
    assert "搜索“矩阵”" in page.inner_text("#op-shown")
    page.locator("#op-grid .ag-row [col-id=key]").first.click()
    page.wait_for_selector("#op-drill-name")
    assert page.inner_text("#op-drill-name") == ZH_NAME
    assert page.locator("#op-drill-table th", has_text="相对最快").count() == 1
    assert page.locator("i").count() == 0 and page.locator("img[src='x']").count() == 0
    # the address keeps the language, and so does every link the page writes
    page.wait_for_function("() => location.search.includes('op=')")
    assert "lang=zh" in page.evaluate("() => location.search")
    href = page.locator("#op-grid .ag-row [col-id=timeline] a").first.get_attribute("href")
    assert href.startswith("/timeline?") and "lang=zh" in href
    assert page.locator("#op-grid .ag-row [col-id=timeline] a").first.inner_text().startswith("卡 ")
    # into the timeline by that link: the renderer writes its view to the address with the language
    page.locator("#op-grid .ag-row [col-id=timeline] a").first.click()
    st = drawn(page)
    page.wait_for_function("() => location.pathname === '/timeline' && location.search.includes('hl=')")
    assert "lang=zh" in page.evaluate("() => location.search")
    assert page.inner_text("h1") == "时间线" and st["stats"]["headers"][0].startswith("卡 ")
    assert "窗口" in page.inner_text("#tl-status-text")
    # the linked call is selected: its name in the details, as written (the canvas draws it as characters)
    page.wait_for_function(
        "(n) => (document.querySelector('#tl-detail-table') || {}).innerText?.includes(n)", arg=ZH_NAME
    )
    assert "名称" in page.inner_text("#tl-detail-table") and page.locator("i").count() == 0
    page.wait_for_function("() => document.querySelector('#nav-cluster').getAttribute('href').includes('lang=zh')")
    # the navigation: another page in the same language, the run carried over
    page.click("#nav-cluster")
    page.wait_for_selector("#cl-grid .nsewdrag")
    assert page.inner_text("h1") == "集群" and "lang=zh" in page.evaluate("() => location.search")
    assert "run=xss" in page.evaluate("() => location.search")
    # the switch: the same view in English
    page.wait_for_function("() => document.querySelector('#lang-en').getAttribute('href').includes('run=xss')")
    page.click("#lang-en")
    page.wait_for_selector("#cl-grid .nsewdrag")
    assert page.inner_text("h1") == "Cluster" and page.inner_text("#nav-cluster") == "Cluster"
    search = page.evaluate("() => location.search")
    assert "lang=en" in search and "run=xss" in search


def test_a_page_in_the_browsers_language(server: dict, browser: Any) -> None:
    from analyzer import messages
    from analyzer.analyses import advise

    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, locale="zh-CN")
    pg = ctx.new_page()
    pg.set_default_timeout(90_000)  # as conftest's page: a first view on a busy machine
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(str(e)))
    try:
        pg.goto(server["url"] + "advisor?run=gloo4")
        pg.wait_for_selector("#adv-summary")
        assert pg.inner_text("h1") == "专家建议" and pg.inner_text("#nav-memory") == "内存"
        assert "条发现" in pg.inner_text("#adv-summary")
        assert pg.locator("label", has_text="严重程度").count() == 1
        # chosen by the browser, not the URL: the links the page writes leave the language out
        assert "lang=" not in pg.evaluate("() => location.search")
        assert "lang=" not in (pg.locator("#adv-link-0").get_attribute("href") or "")
        assert pg.locator("#lang-zh.current").count() == 1
        assert pg.evaluate("() => document.documentElement.lang") == "zh-CN"
        # a real finding in Chinese with its numbers: the npu run's idle rank
        adv = advise(server["store"], "npu")
        i, f = next((k, f) for k, f in enumerate(adv.to_dict("records")) if f["rule"] == "high_free")
        pg.goto(server["url"] + f"advisor?run=npu&finding={i}")
        pg.wait_for_selector(f"#adv-f-{i}.current")
        shown = pg.inner_text(f"#adv-f-{i}")
        title, detail = messages.render(f["title_msg"], "zh"), messages.render(f["detail_msg"], "zh")
        rank, share = f["ranks"][0], f"{f['value']:.1%}"
        assert title == f"卡 {rank} 有 {share} 的迭代时间空闲" and title in shown
        assert detail.startswith("卡 ") and f"阈值 {f['threshold']:.0%}" in detail and detail in shown
        assert f["title"] not in shown and "idle" not in shown
    finally:
        ctx.close()
    assert not problems, problems


def test_bad_urls_and_the_empty_store(server: dict, page: Any, tmp_path: Path) -> None:
    page.goto(server["url"] + "timeline?run=nope")
    page.wait_for_selector(".msg")
    assert "no run named 'nope'" in page.inner_text(".msg")
    page.goto(server["url"] + "operators?run=gloo&group=bogus&ranks=0,9")
    page.wait_for_selector("#op-grid .ag-row")
    notes = page.inner_text("#op-notes")
    assert "must be one of" in notes and "has no rank 9" in notes
    proc, url = start_server(tmp_path / "empty")
    try:
        page.goto(url)
        page.wait_for_selector("#empty-store")
        text = page.inner_text("#empty-store")
        assert "No profiling data yet" in text and "analyze ingest" in text
    finally:
        stop_server(proc)


def test_pipeline_view_shows_each_stage_and_opens_a_bar_in_the_timeline(server: dict, page: Any) -> None:
    """Issue 17 item 4: the PP job's stages, micro-batches and bubbles (``analyses.pipeline``) from a
    deep link; the step picked is in the address and restored by a reload; a bar opens its stretch."""
    from analyzer.analyses import pipeline, pipeline_stages

    st = pipeline_stages(server["store"], "gloo4")
    seg = pipeline(server["store"], "gloo4")
    page.goto(server["url"] + "pipeline?run=gloo4&step=4&group=1")
    page.wait_for_selector("#pp-chart .bars")
    settle(page)
    shot(page, "pipeline")
    mine = st[(st["pp_group"] == 1) & (st["step"] == 4)].sort_values("stage")
    assert list(mine["rank"]) == [1, 3]
    summary = page.inner_text("#pp-summary")
    assert summary.startswith("2 stages, 2 micro-batches forward and 2 backward")
    assert f"{mine['bubble_pct'].mean():.1f} %" in summary
    rows = page.eval_on_selector_all("#pp-stages tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText))")
    assert [[r[0], r[1], r[2], r[3], r[7]] for r in rows] == [
        [str(int(x.stage)), str(int(x.rank)), "2", "2", fmt_ns(x.bubble_ns)] for x in mine.itertuples()
    ]
    # the bars are the segments: per kind, as many as the analysis has, on the rows of their stage
    fig = page.evaluate(
        "() => { const g = document.querySelector('#pp-chart .js-plotly-plot');"
        " return g._fullData.map(d => ({name: d.name, n: d.x.length, y: Array.from(d.y), text: Array.from(d.text)})); }"
    )
    here = seg[(seg["pp_group"] == 1) & (seg["step"] == 4)]
    got = {d["name"].split(" (")[0]: d for d in fig}
    for kind in ("forward", "backward", "bubble"):
        assert got[kind]["n"] == (here["kind"] == kind).sum() > 0
    assert set(got["forward"]["text"]) == {"F0", "F1"} and set(got["backward"]["text"]) == {"B0", "B1"}
    assert "stage 1 · rank 3" in got["bubble"]["y"]
    # GPipe's last stage runs forward 1 then backward 0 with no p2p op between: split at the autograd engine
    assert "forward + backward" not in got and not page.locator("#pp-combined").count()
    # another step: the address follows, a reload restores it
    choose(page, "#pp-step", "step 6")
    page.wait_for_function("() => location.search.includes('step=6')")
    page.wait_for_function("() => document.querySelector('#pp-content h2').innerText === 'Group 1, step 6'")
    page.reload()
    page.wait_for_selector("#pp-chart .bars")
    assert page.inner_text("#pp-content h2") == "Group 1, step 6"
    # a click on stage 1's first bubble opens that stretch of rank 3 in the timeline
    first = seg[(seg["rank"] == 3) & (seg["step"] == 6) & (seg["kind"] == "bubble")].iloc[0]
    xy = page.evaluate(
        """(a) => { const g = document.querySelector('#pp-chart .js-plotly-plot'), L = g._fullLayout;
            const d = g._fullData.find(t => t.name.startsWith('bubble'));
            const i = d.customdata.findIndex(c => c[0] === 3 && c[1] === a);
            const x = d.base[i] + d.x[i] / 2, y = d.y[i];
            const r = g.querySelector('.nsewdrag').getBoundingClientRect();
            return [r.left + L.xaxis.l2p(x), r.top + L.yaxis.l2p(L.yaxis.d2l(y))]; }""",
        str(int(first["start_ns"])),
    )
    page.mouse.click(xy[0], xy[1])
    page.wait_for_function("() => location.pathname === '/timeline'")
    assert f"hl=3:{int(first['start_ns'])}:{int(first['end_ns'])}" in page.url.replace("%3A", ":")
    drawn(page)


def test_timeline_counter_tracks_under_their_rank(server: dict, page: Any) -> None:
    """Issue 17 item 4: with the "counters" lane group on (in the address), each rank's memory and
    counter tracks are drawn under its lanes from the samples of the view; hover reads a value."""
    store = server["store"]
    page.goto(server["url"] + "timeline?run=npu&ranks=0&groups=device,counters")
    page.wait_for_function(
        "() => { const s = window.rankscopeTimeline.state(); return s.counters && s.stats.counterBuckets > 0; }"
    )
    st = tl_state(page)
    assert "groups=device,counters" in page.url and "counters" in st["groups"]
    labels = [c["label"] for c in st["counterTracks"]]
    assert labels[:3] == ["PTA+GE (NPU:0)", "PTA (NPU:0)", "GE (NPU:0)"]
    kinds = [r["kind"] for r in st["rows"]]
    assert kinds.index("counter") > kinds.index("lane")  # under the lanes
    # the rank's top 16 tracks are drawn, the others behind a row that says how many: none dropped
    top = [c["key"] for c in st["counterTracks"] if c["top"]]
    assert len(top) == 16 < len(labels) and [r["key"] for r in st["rows"] if r["kind"] == "counter"] == top
    more = [(r["key"], r["hidden"], r["total"]) for r in st["rows"] if r["kind"] == "more"]
    assert more == [("0.allcounters", len(labels) - 16, len(labels))]  # below the tracks: "▸ 8 more counter tracks"
    assert f"counters · 16 of {len(labels)} shown" in st["stats"]["headers"]
    assert "PTA+GE (NPU:0) [bytes]" in st["stats"]["counterLabels"]
    # what is drawn is the samples of the view: the last bucket holds the last sample before the view ends
    origin, data = int(st["origin"]), st["counters"]
    raw = store.query(
        "SELECT ts_ns, allocated_bytes::DOUBLE AS v FROM memory_samples WHERE run = 'npu' AND rank = 0 "
        "AND component = 'PTA+GE' AND allocated_bytes IS NOT NULL ORDER BY ts_ns",
        run="npu",
    )
    inside = raw[(raw["ts_ns"] >= origin + data["a"]) & (raw["ts_ns"] < origin + data["b"])]
    assert data["tracks"]["0.c0"]["last"][-1] == inside["v"].iloc[-1]
    assert max(data["tracks"]["0.c0"]["hi"]) == inside["v"].max()
    # hover over the track: its value at the cursor
    row = page.evaluate("() => window.rankscopeTimeline.rowOf('0.c0')")
    box = canvas_box(page)
    t = data["tracks"]["0.c0"]["t"]
    x_rel = (data["a"] + t[len(t) // 2] - st["a"]) / (st["b"] - st["a"])
    x = box["x"] + row["label"] + x_rel * (box["width"] - row["label"]) + 2
    page.mouse.move(x, box["y"] + row["y"] + row["h"] / 2)
    page.wait_for_selector(".tl-tip:not([hidden])")
    tip = page.inner_text(".tl-tip")
    assert tip.startswith("PTA+GE (NPU:0)") and ("GiB" in tip or "MiB" in tip) and "rank 0 · counter" in tip
    # the others opened: every track drawn and loaded, the address keeps it
    page.evaluate("() => window.rankscopeTimeline.toggleFold('0.allcounters')")
    page.wait_for_function("() => location.search.includes('fold=0.allcounters')")
    last = st["counterTracks"][-1]["key"]
    page.wait_for_function(
        "(k) => { const s = window.rankscopeTimeline.state(); return s.counters && s.counters.tracks[k]; }", arg=last
    )
    st = tl_state(page)
    assert [r["key"] for r in st["rows"] if r["kind"] == "counter"] == [c["key"] for c in st["counterTracks"]]
    # folding the counters group is a view of its own: the address keeps it, a reload restores it
    page.evaluate("() => window.rankscopeTimeline.toggleFold('0.counters')")
    page.wait_for_function("() => /fold=[^&]*0\\.counters/.test(location.search)")
    page.reload()
    page.wait_for_function("() => (window.rankscopeTimeline.state().rows || []).some(r => r.key === '0.counters')")
    st = tl_state(page)
    assert not [r for r in st["rows"] if r["kind"] == "counter"] and "counters" in st["groups"]


def test_timeline_flow_arrows_from_sends_to_their_recvs(server: dict, page: Any) -> None:
    """Issue 17 item 4: with send → recv arrows on (in the address), a step of the PP job draws one
    arrow per send paired with its recv (``analyses.send_recv_pairs``) from rank 0's lanes to rank
    2's and back; unchecking them leaves the address and the canvas."""
    from analyzer.analyses import send_recv_pairs

    page.goto(server["url"] + "timeline?run=gloo4&ranks=0,2&step=4&flows=p2p&fold=none")
    page.wait_for_function(
        "() => { const s = window.rankscopeTimeline.state(); return s.flows.data && s.stats.arrows > 0; }"
    )
    st = tl_state(page)
    origin, off = int(st["origin"]), {int(k): int(v) for k, v in st["offsets"].items()}
    pairs = send_recv_pairs(server["store"], "gloo4")
    pairs = pairs[pairs["src_rank"].isin([0, 2]) & pairs["dst_rank"].isin([0, 2])]
    send_view = pairs["send_ts_ns"] - origin - pairs["src_rank"].map(off)
    recv_view = pairs["recv_end_ns"] - origin - pairs["dst_rank"].map(off)
    seen = pairs[((send_view >= st["a"]) & (send_view < st["b"])) | ((recv_view >= st["a"]) & (recv_view < st["b"]))]
    arrows = st["flows"]["data"]["arrows"]
    # step 4 (and its padding): two activations forward, two gradients back, the next step's first send
    assert len(arrows) == len(seen) >= 4
    assert sorted((f["from"][1], f["to"][1]) for f in arrows) == sorted(zip(seen["src_rank"], seen["dst_rank"]))
    n = len(seen)
    assert st["stats"]["arrows"] == n and st["flows"]["note"] == f"{n} arrows"
    assert {f["from"][0].split(".")[0] for f in arrows} == {"0", "2"}  # ends on the lanes of their ranks
    rows = {r["key"]: r for r in st["rows"]}
    top = rows["2"]["y"]  # rank 2's block starts below rank 0's: forward arrows point down, backward up
    for end in st["stats"]["arrowEnds"]:
        assert (end["y1"] > end["y0"]) == end["label"].startswith("forward")
    assert top > 0
    # each end at its slice: its lane's row plus its nesting level (the same offset for every end)
    at = set()
    assert [e["label"] for e in st["stats"]["arrowEnds"]] == [f["label"] for f in arrows]  # drawn in order
    for f, shown in zip(arrows, st["stats"]["arrowEnds"]):
        for side, (lane, _, _, level) in (("0", f["from"]), ("1", f["to"])):
            assert level is not None and lane in rows
            at.add(round(shown["y" + side] - rows[lane]["y"] - level * 18, 3))
    assert len(at) == 1, at
    assert any(end[3] > 0 for f in arrows for end in (f["from"], f["to"])), arrows  # not all at the lane's top
    page.locator("#tl-flows label", has_text="send → recv").click()
    page.wait_for_function("() => !location.search.includes('flows=')")
    page.wait_for_function("() => window.rankscopeTimeline.state().stats.arrows === 0")
    page.go_back()
    page.wait_for_function("(n) => window.rankscopeTimeline.state().stats.arrows === n", arg=n)
