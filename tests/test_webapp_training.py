"""The Training page (issue 17 §5) in a real browser over a real training run made by the collector:
torch 2.13 CPU, 60 steps, a static profiling window on steps 40..42, steps 20 and 41 sleeping 1 s
(step-time outliers: one outside the window, one inside), and a scalar whose name is markup (a name
from the user). Expected values come from the collector's own rankscope_scalars.jsonl."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from webapp_helpers import CHROMIUM, REPO, choose, drawn, ingest, settle, start_server, stop_server

from analyzer.analyses import step_outliers
from analyzer.store import Store

SCRIPTS = Path(__file__).resolve().parent / "collector_scripts"
MARKUP = "<img src=x onerror=alert(3)>"
SLEEPS = (20, 41)
WINDOW = (40, 43)  # [start, end)

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("webapp_training")
    out = tmp / "job"
    cfg = {
        "backend": "torch",
        "static_param": {"save_path": str(out), "start_step": WINDOW[0], "end_step": WINDOW[1]},
    }
    cmd = [sys.executable, str(SCRIPTS / "train.py"), "--config", json.dumps(cfg), "--steps", "60"]
    cmd += ["--sleep-at", ",".join(map(str, SLEEPS)), "--sleep-s", "1.0", "--scalar", MARKUP]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = tmp / "store"
    ingest(out, store, "job")
    server, url = start_server(store)
    lines = (out / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()
    yield {"url": url, "store": Store(store), "records": [json.loads(x) for x in lines]}
    stop_server(server)


def test_step_outliers_name_the_slept_steps(job: dict) -> None:
    out = step_outliers(job["store"], "job").set_index("step")
    times = {r["step"]: r["step_time_ns"] for r in job["records"]}
    for s in SLEEPS:  # both slept steps, whatever else a busy machine made slow
        assert s in out.index and out.loc[s, "step_time_ns"] == times[s] >= 1e9
        assert out.loc[s, "step_time_ns"] > out.loc[s, "threshold_ns"] > out.loc[s, "median_ns"]
    assert bool(out.loc[41, "profiled"]) and not bool(out.loc[20, "profiled"])


def test_curves_are_bucketed_keeping_each_ranks_extremes_and_outliers_come_from_every_step(
    job: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Curves with fewer points than steps (``data.scalars`` at 10 points: at most 5 buckets, here 4
    of 16 steps): every point is one of the rank's records, each bucket's lowest and highest record
    is drawn (the slept steps' step times among them), no bucket gives more than 2 points; with as
    many buckets as steps every record is drawn. The band's middle line is the mean of its bucket's
    records. Read from the ingest's ``agg_scalar_curve`` or, in a store without it, from the
    records: the same points. The outliers marked on the step-time chart are those of the analysis
    over every step, whatever the curves keep."""
    from dash import dcc

    from webapp import create_app, data
    from webapp.reader import reader

    create_app(job["store"])  # the pages register themselves with an app
    from webapp.pages import training

    rec = {r["step"]: r for r in job["records"]}
    values = {"step_time_ns": lambda r: r["step_time_ns"], "lr": lambda r: r["scalars"]["lr"]}
    with reader(job["store"], "job", None, ("scalars", "steps")) as rd:
        assert rd.has_files("job", None, "agg_scalar_curve")
        grid = data.scalar_grid(rd, "job", ["step_time_ns", "lr"], 5)
        assert list(grid["level"]) == [4, 4]  # steps 0..59: 4 buckets of 2^4 steps
        few = data.scalars(rd, "job", None, ["step_time_ns", "lr"], 10)
        every = data.scalars(rd, "job", None, ["lr"], 2 * len(rec))
        band = data.scalar_band(rd, "job", None, "step_time_ns", 10)
        with monkeypatch.context() as m:  # no level stored: the records themselves
            m.setattr(data, "SCALAR_LEVELS", ())
            pd.testing.assert_frame_equal(data.scalar_points.uncached(rd, "job", None, ["step_time_ns", "lr"], 10), few)
            raw_band = data.scalar_bands.uncached(rd, "job", None, ["step_time_ns"], 10).drop(columns="name")
            pd.testing.assert_frame_equal(raw_band, band, check_dtype=False)
        monkeypatch.setattr(training, "MIN_RANK_POINTS", 10)
        monkeypatch.setattr(training, "CHART_POINTS", 10)
        cards = training.render(rd, "job", [0], [0], "lr")
    assert sorted(set(few["name"])) == ["lr", "step_time_ns"]
    for name, value in values.items():
        got = few[few["name"] == name]
        assert list(got["step"]) == sorted(got["step"]) and len(got) <= 10
        assert all(value(rec[s]) == v for s, v in zip(got["step"], got["value"]))  # real records only
        for b in range(4):
            steps = [s for s in sorted(rec) if s >> 4 == b]
            kept = [v for s, v in zip(got["step"], got["value"]) if s in steps]
            assert 1 <= len(kept) <= 2
            assert min(kept) == min(value(rec[s]) for s in steps) and max(kept) == max(value(rec[s]) for s in steps)
    assert set(SLEEPS) <= set(few[few["name"] == "step_time_ns"]["step"])
    assert list(every["step"]) == sorted(rec) and list(every["value"]) == [rec[s]["scalars"]["lr"] for s in sorted(rec)]
    (b,) = band[band["step"] == 16].itertuples()  # steps 16..23 (8 buckets of 2^3 steps)
    assert b.mid == pytest.approx(sum(rec[s]["step_time_ns"] for s in range(16, 24)) / 8)
    graphs = [k for c in cards if isinstance(getattr(c, "children", None), list) for k in c.children]
    figs = [g.figure for g in graphs if isinstance(g, dcc.Graph)]
    step_fig = figs[1]
    (line,) = [t for t in step_fig.data if t.name == "rank 0"]
    assert len(line.x) <= 10 and max(line.y) == max(r["step_time_ns"] for r in job["records"]) / 1e6
    (marks,) = [t for t in step_fig.data if t.name == "outlier step"]
    out = step_outliers(job["store"], "job")
    assert list(marks.x) == list(out["step"]) and list(marks.y) == list(out["step_time_ns"] / 1e6)


def _opened(page: Any, x: float, y: float) -> str:
    """The address a click at (x, y) opens in the timeline, as the click's link gave it. The timeline then
    writes the address of its own view (the ranks left out when they are its default: rank 0 of this
    one-rank job); ``page.url`` read after the page changed may already be that one (it was, once, with
    the suite in two processes at load ~12), so the page's first navigation to the timeline is taken."""
    with page.expect_event("framenavigated", predicate=lambda frame: "/timeline" in frame.url) as nav:
        page.mouse.click(x, y)
    return nav.value.url


def _figure(page: Any, graph: str) -> dict[str, Any]:
    return page.evaluate(
        "(sel) => { const g = document.querySelector(sel + ' .js-plotly-plot');"
        " return {data: g._fullData.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y),"
        " mode: t.mode})), shapes: g.layout.shapes || [], title: g.layout.title.text}; }",
        graph,
    )


def test_training_page_shows_scalars_outliers_and_opens_a_profiled_step(job: dict, page: Any) -> None:
    rec = {r["step"]: r for r in job["records"]}
    page.goto(job["url"] + "training?run=job&scalar=lr")
    page.wait_for_selector("#tr-chart .scatterlayer")
    page.wait_for_selector("#tr-steptime .scatterlayer")
    settle(page)
    # the chosen scalar per step, as the collector wrote it
    lr = _figure(page, "#tr-chart")
    (line,) = [t for t in lr["data"] if t["name"] == "rank 0"]
    assert line["x"] == sorted(rec) and line["y"] == [rec[s]["scalars"]["lr"] for s in sorted(rec)]
    # step time in ms, the slept steps marked as outliers, the profiled steps shaded
    st = _figure(page, "#tr-steptime")
    (times,) = [t for t in st["data"] if t["name"] == "rank 0"]
    assert times["y"] == pytest.approx([rec[s]["step_time_ns"] / 1e6 for s in sorted(rec)])
    (marks,) = [t for t in st["data"] if t["name"] == "outlier step"]
    assert set(SLEEPS) <= set(marks["x"])
    for s in SLEEPS:
        assert marks["y"][marks["x"].index(s)] == pytest.approx(rec[s]["step_time_ns"] / 1e6)
    (shade,) = st["shapes"]
    assert (shade["x0"], shade["x1"]) == (WINDOW[0] - 0.5, WINDOW[1] - 1 + 0.5)
    # the outlier table: step 41 links to its profile, step 20 is not profiled
    rows = page.locator("#tr-outliers tbody tr")
    by_step = {rows.nth(i).locator("td").nth(1).inner_text(): rows.nth(i) for i in range(rows.count())}
    assert by_step["20"].locator("td").last.inner_text() == "not profiled"
    window = page.locator("#tr-windows tbody tr")
    assert window.count() == 1 and window.locator("td").nth(1).inner_text() == f"{WINDOW[0]}..{WINDOW[1] - 1}"
    assert window.locator("a").all_inner_texts() == [str(s) for s in range(*WINDOW)]
    # the deep link keeps run and scalar; a reload restores them
    page.wait_for_function("() => location.search.includes('scalar=lr')")
    page.reload()
    page.wait_for_selector("#tr-chart .scatterlayer")
    assert page.inner_text("#tr-scalar").strip().startswith("lr")
    # a click on the outlier of step 41 opens that step of rank 0 in the timeline
    settle(page)
    box = page.locator("#tr-steptime .nsewdrag").first.bounding_box()
    px = page.evaluate(
        "(s) => { const l = document.querySelector('#tr-steptime .js-plotly-plot')._fullLayout;"
        " return [l.xaxis.l2p(s[0]), l.yaxis.l2p(s[1])]; }",
        [41, rec[41]["step_time_ns"] / 1e6],
    )
    opened = _opened(page, box["x"] + px[0], box["y"] + px[1])
    assert "step=41" in opened and "ranks=0" in opened
    drawn(page)
    page.go_back()
    page.wait_for_selector("#tr-steptime .scatterlayer")
    settle(page)
    # a click on the rank's curve itself (its trace names the rank): the outlier markers taken away first
    page.evaluate(
        "() => { const g = document.querySelector('#tr-steptime .js-plotly-plot');"
        " return Plotly.deleteTraces(g, g.data.length - 1); }"
    )
    assert [t["name"] for t in _figure(page, "#tr-steptime")["data"]] == ["rank 0"]
    opened = _opened(page, box["x"] + px[0], box["y"] + px[1])
    assert "step=41" in opened and "ranks=0" in opened
    page.go_back()
    # the link of step 41 in the outlier table opens the same view. The table is drawn again by the callbacks
    # that run once the page is back (rows seen a moment ago may be gone): one locator, resolved when clicked
    step41 = page.locator("#tr-outliers tbody tr").filter(
        has=page.locator("td:nth-child(2)", has_text=re.compile(r"^\s*41\s*$"))
    )
    step41.locator("a", has_text="timeline").click()
    page.wait_for_function("() => location.pathname === '/timeline'")
    assert "step=41" in page.url
    drawn(page)


def test_a_scalar_named_with_markup_is_shown_as_text(job: dict, page: Any) -> None:
    page.goto(job["url"] + "training?run=job")
    page.wait_for_selector("#tr-chart .scatterlayer")
    settle(page)
    assert page.inner_text("#tr-scalar").strip().startswith("loss")  # the default: the loss
    choose(page, "#tr-scalar", MARKUP)
    page.wait_for_function("(m) => document.querySelector('#tr-content h2').innerText === m", arg=MARKUP)
    settle(page)
    assert page.locator("#tr-content img").count() == 0  # no element made of the name
    title = page.evaluate("() => document.querySelector('#tr-chart .gtitle').textContent")
    assert title == MARKUP
    assert MARKUP in page.evaluate("() => decodeURIComponent(location.search.replace(/\\+/g, ' '))")
    assert page.locator("#tr-chart img").count() == 0


def test_many_ranks_are_drawn_as_a_band_that_keeps_a_spike(job: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over more than MAX_RANK_LINES ranks a chart draws the lowest, mean and highest value per
    bucket of steps; the bucket holding a slept step keeps its full length."""
    from dash import dcc

    from webapp import create_app, data
    from webapp.reader import reader

    create_app(job["store"])  # the pages register themselves with an app
    from webapp.pages import training

    rec = {r["step"]: r for r in job["records"]}
    with reader(job["store"], "job", None, ("scalars", "steps")) as rd:
        band = data.scalar_band(rd, "job", None, "step_time_ns", 10)
        assert len(band) == 8 and list(band["step"]) == list(range(0, 60, 8))  # at most 10 buckets: of 2^3 steps
        (b,) = band[band["step"] == 16].itertuples()  # steps 16..23
        assert b.hi == rec[20]["step_time_ns"] and b.lo == min(rec[s]["step_time_ns"] for s in range(16, 24))
        monkeypatch.setattr(training, "MAX_RANK_LINES", 0)
        cards = training.render(rd, "job", [0], [0], "loss")
        # the Overview draws the same band (ui.add_band) over as many ranks
        from webapp.pages import overview

        monkeypatch.setattr(overview, "SCALAR_RANK_LINES", 0)
        with reader(job["store"], "job", None, ("scalars",)) as rd_scalars:
            ov = overview._scalars(rd_scalars, "job", [0])
    ov_figs = [g.figure for g in ov.children[1].children if isinstance(g, dcc.Graph)]  # [H2, the charts' grid]
    step_fig = next(f for f in ov_figs if f.layout.title.text == "step time (ms)")
    assert [t.name for t in step_fig.data] == [None, "lowest to highest rank", "mean over the ranks"]
    assert max(step_fig.data[1].y) == pytest.approx(max(r["step_time_ns"] for r in job["records"]) / 1e6)
    graphs = [k for c in cards if isinstance(getattr(c, "children", None), list) for k in c.children]
    figs = [g.figure for g in graphs if isinstance(g, dcc.Graph)]
    names = [[t.name for t in f.data] for f in figs]
    assert names[0] == [None, "lowest to highest rank", "mean over the ranks"]
    assert names[1] == [None, "lowest to highest rank", "mean over the ranks", "outlier step"]
    assert max(figs[1].data[1].y) == pytest.approx(max(r["step_time_ns"] for r in job["records"]) / 1e6)
