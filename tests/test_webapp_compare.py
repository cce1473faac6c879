"""The Compare page in a real browser (Playwright + Debian chromium) against the real server
(`analyze serve --port 0`) over the real compare runs (tests/data/make_compare_runs.py, the session's
``compare_store``): the verdict, the per-rank bars and delta table and the operators grid show the
values ``analyzer.analyses.run_diff`` computes; the runs and steps picked are in the URL, and that
URL opened again restores the same comparison; an operator's links open both runs' timelines at
the step where it changed most."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from webapp_helpers import CHROMIUM, choose, grid_rows, start_server, stop_server

from analyzer.analyses import run_diff
from analyzer.analyses.diff import TOTAL
from analyzer.store import Store
from webapp.format import fmt_ns

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def server(compare_store: Path) -> Iterator[dict[str, Any]]:
    proc, url = start_server(compare_store)
    yield {"url": url, "store": Store(compare_store)}
    stop_server(proc)


def query(pg: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(pg.url).query)


def shown(pg: Any, verdict: str) -> None:
    """Wait until the page shows the comparison whose verdict is ``verdict``."""
    pg.wait_for_function(
        "(v) => (document.querySelector('#cmp-verdict') || {}).innerText === v", arg=verdict, timeout=120_000
    )


def dropdown_value(pg: Any, id_: str) -> str:
    return pg.inner_text(f"#{id_} .dash-dropdown-value").strip()


def delta_rows(pg: Any) -> dict[str, list[str]]:
    return pg.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#cmp-delta tbody tr')]
            .map(tr => [...tr.children].map(td => td.innerText))
            .map(cells => [cells[0], cells.slice(1)]))"""
    )


def test_compare_page_shows_the_diff_and_its_deep_link_restores_it(server: dict, page: Any) -> None:
    store: Store = server["store"]
    slow = run_diff(store, "base", "slow")
    # the deep link: both runs in the URL
    page.goto(server["url"] + "compare?base=base&new=slow")
    shown(page, slow.verdict)
    assert "slow is" in slow.verdict and "rank 2" in slow.verdict  # the known change, named
    assert dropdown_value(page, "cmp-base") == "base" and dropdown_value(page, "cmp-new") == "slow"
    # the delta table: every rank and the total, with the step times of the diff
    rows = delta_rows(page)
    bd = slow.breakdown[slow.breakdown["metric"] == "step_ns"].set_index("label")
    assert list(rows) == [*[f"rank {r}" for r in range(4)], TOTAL]
    for label, cells in rows.items():
        assert cells[0] == f"{fmt_ns(bd.loc[label, 'base_value'])} → {fmt_ns(bd.loc[label, 'new_value'])}"
        assert cells[2] == "beyond"  # a 0.4 s sleep per step is far beyond the step-to-step noise
    # the bars: base and new side by side for every rank
    page.wait_for_selector("#cmp-bars .bars path")
    bars = page.evaluate(
        "() => document.querySelector('#cmp-bars .js-plotly-plot').data.map(t => ({name: t.name, x: t.x, y: t.y}))"
    )
    computing = next(b for b in bars if b["name"] == "computing")
    assert computing["x"] == [[f"rank {r}" for r in range(4) for _ in (0, 1)], ["base", "slow"] * 4]
    cp = slow.breakdown[slow.breakdown["metric"] == "computing_ns"].set_index("label")
    want = [cp.loc[f"rank {r}", side] / 1e6 for r in range(4) for side in ("base_value", "new_value")]
    assert computing["y"] == pytest.approx(want)
    assert page.locator("#cmp-bars .bars path").count() >= 4 * 2 * 3  # 4 ranks x 2 runs x >= 3 segments
    # the operators grid: the most changed first, the allreduce that waits for rank 2
    ops = slow.operators[slow.operators["status"] != "same"]
    top = ops.loc[ops["delta_ns"].abs().idxmax()]
    page.wait_for_selector("#cmp-ops .ag-row")
    first = grid_rows(page, "#cmp-ops")[0]
    assert first["name"] == top["name"] and "all_reduce" in first["name"].replace("allreduce", "all_reduce")
    assert first["delta_ms"] == f"+{top['delta_ns'] / 1e6:,.3f}"
    base_href = page.locator("#cmp-ops .ag-row[row-index='0'] [col-id=base_link] a").get_attribute("href")
    new_href = page.locator("#cmp-ops .ag-row[row-index='0'] [col-id=new_link] a").get_attribute("href")
    for href, run, rank, step in (
        (base_href, "base", top["base_rank"], top["base_step"]),
        (new_href, "slow", top["new_rank"], top["new_step"]),
    ):
        q = parse_qs(urlsplit(href).query)
        assert urlsplit(href).path == "/timeline"
        assert q == {"run": [run], "ranks": [str(int(rank))], "step": [str(int(step))]}

    # steps chosen (as msprof-analyze's compare): the URL follows, and opened again it restores that comparison
    chosen = run_diff(store, "base", "slow", 3, 5)
    choose(page, "#cmp-base-step", "step 3")
    page.wait_for_function("() => location.search.includes('base_step=3')")
    choose(page, "#cmp-new-step", "step 5")
    shown(page, chosen.verdict)
    page.wait_for_function("() => location.search.includes('new_step=5')")
    assert query(page) == {"base": ["base"], "new": ["slow"], "base_step": ["3"], "new_step": ["5"]}
    assert page.inner_text("#cmp-steps").startswith("base: step 3; slow: step 5;")
    link = page.url
    page.goto("about:blank")
    page.goto(link)
    shown(page, chosen.verdict)
    assert dropdown_value(page, "cmp-base") == "base" and dropdown_value(page, "cmp-new") == "slow"
    assert dropdown_value(page, "cmp-base-step") == "step 3" and dropdown_value(page, "cmp-new-step") == "step 5"

    # an operator's link opens the new run's timeline at that step
    page.goto(new_href if new_href.startswith("http") else server["url"] + new_href.lstrip("/"))
    page.wait_for_function(
        "(s) => { const t = window.rankscopeTimeline; return t && t.state().run === 'slow' && t.state().step === s; }",
        arg=int(top["new_step"]),
        timeout=120_000,  # the new run's first timeline view, on a busy machine
    )


def test_overview_shows_the_runs_over_time_with_links_to_compare(server: dict, page: Any) -> None:
    from analyzer.analyses import trend

    want = trend(server["store"], "step_time", last=50)
    page.goto(server["url"] + "?run=slow")
    page.wait_for_selector("#ov-trend-table tbody tr", timeout=120_000)
    rows = page.evaluate(
        """() => [...document.querySelectorAll('#ov-trend-table tbody tr')]
            .map(tr => [...tr.children].map(td => td.innerText))"""
    )
    assert [r[0] for r in rows] == list(want["run"])  # oldest ingested first
    assert [r[1] for r in rows] == [fmt_ns(v) for v in want["value"]]
    # each run links to its comparison with the run before it
    runs = list(want["run"])
    i = runs.index("slow")
    href = page.locator("#ov-trend-table tbody tr").nth(i).locator("a").get_attribute("href")
    assert parse_qs(urlsplit(href).query) == {"base": [runs[i - 1]], "new": ["slow"]}
    # the chart marks every run (x) with its value; Plotly draws it after the table is in the page
    # (a clean clone on an idle machine read the graph before it existed: null)
    page.wait_for_function(
        "() => { const g = document.querySelector('#ov-trend-graph .js-plotly-plot');"
        " return !!(g && g.data && g.data.length); }"
    )
    xs = page.evaluate("() => document.querySelector('#ov-trend-graph .js-plotly-plot').data[0].x")
    assert xs == runs
