"""Names from traces are text on every page, in a real browser against the real server (with a token):
markup a hostile program wrote into every name field (run, process and thread, operator, kernel,
device, memory component, transport, communication group, training scalar) creates no element, runs
no script, and shows literally: in Dash components, AG Grid cells, Plotly titles, legends, ticks and
hover labels, and on the timeline's canvas and its details panel.

Each name gets ``<a href=//evil.example/FIELD>FIELD</a>`` (Plotly makes a link of it when it reads
it as its pseudo-HTML), the operator and scalar names ``<img src=x onerror=alert(1)>`` as well.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from webapp_helpers import ANALYZE, CHROMIUM, KINETO, NPU, ingest, stop_server

from webapp import ui

IMG = "<img src=x onerror=alert(1)>"
TOKEN = "escape-test-token"


def inj(field: str) -> str:
    return f"<a href=//evil.example/{field}>{field}</a>"


RUN = inj("run")

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")


def hostile_kineto(dst: Path) -> None:
    """The Kineto sample with markup in its process, thread, operator, group and scalar names."""
    shutil.copytree(KINETO, dst)
    for f in dst.rglob("*.pt.trace.json"):
        d = json.loads(f.read_text())
        for e in d["traceEvents"]:
            args = e.get("args") or {}
            if e.get("ph") == "M" and e.get("name") == "process_name" and args.get("name") == "python":
                args["name"] = inj("process")
            elif e.get("ph") == "M" and e.get("name") == "thread_name":
                args["name"] = args["name"].replace("(python)", f"({inj('thread')})")
            elif e.get("name") == "aten::mm":
                e["name"] = inj("op")
            elif e.get("name") == "aten::addmm":
                e["name"] = IMG
        for pg in (d.get("distributedInfo") or {}).get("pg_config") or []:
            pg["pg_desc"] = inj("group")
        f.write_text(json.dumps(d))
    for f in dst.rglob("rankscope_scalars.jsonl"):
        f.write_text(f.read_text().replace('"loss"', json.dumps(IMG + inj("scalar"))))


def hostile_npu(dst: Path) -> None:
    """The torch_npu sample with markup in its kernel, lane, transport, device and component names."""
    shutil.copytree(NPU, dst)
    for f in sorted(dst.rglob("*")):
        if f.suffix not in (".csv", ".json") or not f.is_file():
            continue
        t = f.read_text().replace("TransData", inj("kernel"))
        if f.suffix == ".json":
            t = t.replace('"HCCS"', json.dumps(inj("transport"))).replace('"CANN"', json.dumps(inj("lane")))
        if f.name in ("memory_record.csv", "operator_memory.csv") and "rank1" in str(f):
            t = re.sub(r"NPU:\d+", inj("device"), t)  # the memory legend names devices (there are two)
        if f.name == "memory_record.csv":
            t = re.sub(r"(?m)^GE,", inj("component") + ",", t)
        f.write_text(t)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("escape")
    hostile_kineto(tmp / "k")
    hostile_npu(tmp / "n")
    store = tmp / "store"
    ingest(tmp / "k", store, RUN)
    ingest(tmp / "n", store, "npu")
    proc = subprocess.Popen(
        [*ANALYZE, "serve", "--store", str(store), "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"(http://\S+)", line)
        if m:
            break
    else:
        raise AssertionError("no address printed")
    yield {"login": m.group(1), "url": m.group(1).split("?")[0]}
    stop_server(proc)


@pytest.fixture
def page(browser: Any, server: dict[str, Any]) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(90_000)  # as conftest's page: a first view on a busy machine
    problems: list[str] = []
    dialogs: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.goto(server["login"])  # the token once: a cookie, and the token leaves the address
    pg.wait_for_function("() => !location.search.includes('token')")
    yield pg
    ctx.close()
    assert not dialogs, f"a trace name ran as script: {dialogs}"
    assert not problems, problems


def settle(pg: Any) -> None:
    pg.wait_for_load_state("networkidle")
    pg.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")


def shows(pg: Any, *names: str, within: str = "body") -> None:
    """Wait until every name is shown as text inside ``within`` (HTML text or SVG text: Plotly's
    labels), then check that no markup of a name became an element."""
    pg.wait_for_function(
        """([sel, names]) => {
            const root = document.querySelector(sel);
            if (!root) { return false; }
            const svg = [...root.querySelectorAll('svg text')].map(t => t.textContent);
            const text = root.innerText + '\\n' + svg.join('\\n');
            return names.every(n => text.includes(n));
        }""",
        arg=[within, list(names)],
    )
    no_elements(pg)


NO_ELEMENTS_JS = """() => {
    const links = [...document.querySelectorAll('a')].filter(a => {
        const h = a.getAttribute('href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href');
        return h && new URL(h, location.href).hostname === 'evil.example';
    });
    const imgs = [...document.querySelectorAll('img[src="x"], [onerror]')];
    return [...links, ...imgs].map(e => e.outerHTML);
}"""


def no_elements(pg: Any) -> None:
    """No element made of a name's markup: a link to evil.example (HTML or SVG) or an <img onerror>."""
    made = pg.evaluate(NO_ELEMENTS_JS)
    assert made == [], made


def hover(pg: Any, selector: str, at: float = 0.0) -> None:
    """Move the mouse over the first element of ``selector`` (``at``: how far across, 0 = its left edge + 4 px)."""
    target = pg.locator(selector).first
    target.scroll_into_view_if_needed()
    box = target.bounding_box()
    pg.mouse.move(box["x"] + max(4.0, box["width"] * at), box["y"] + box["height"] / 2)


def test_overview(server: dict[str, Any], page: Any) -> None:
    page.goto(server["url"] + "?run=" + quote(RUN))
    page.wait_for_selector("#ov-steps-table")
    settle(page)
    shows(page, RUN)  # the run's name in the run picker
    shows(page, IMG + inj("scalar"), within="#ov-content")  # the scalar chart's title and axis (Plotly)


def test_timeline_canvas_and_details(server: dict[str, Any], page: Any) -> None:
    # every string drawn on a canvas, as the page draws it
    page.add_init_script(
        "window.__drawnText = []; const f = CanvasRenderingContext2D.prototype.fillText;"
        "CanvasRenderingContext2D.prototype.fillText = function (t, ...a) {"
        " window.__drawnText.push(String(t)); return f.call(this, t, ...a); };"
    )
    page.goto(server["url"] + "timeline?run=" + quote(RUN) + "&ranks=0")
    page.wait_for_function(
        "() => { const b = document.querySelector('#tl-box'); return b && b.dataset.ready === '1'; }"
    )
    for name in (inj("op"), IMG):
        page.wait_for_function("(t) => !!window.rankscopeTimeline.findDrawn(t)", arg=name)  # drawn, as text
    hit = page.evaluate("(t) => window.rankscopeTimeline.findDrawn(t)", inj("op"))
    box = page.locator("#tl-box canvas").bounding_box()
    page.mouse.click(box["x"] + hit["x"], box["y"] + hit["y"])
    shows(page, inj("op"), within="#tl-detail")
    # the lanes' labels: the process names the trace wrote, drawn as text (cut to the label column)
    drawn = page.evaluate("() => window.__drawnText")
    assert any(t.startswith("<a href=//evil.example/process>") for t in drawn), drawn
    no_elements(page)


def test_operators_grid_chart_hover_and_drill(server: dict[str, Any], page: Any) -> None:
    page.goto(server["url"] + "operators?run=" + quote(RUN) + "&source=operators&group=name&scope=across")
    page.wait_for_selector("#op-grid .ag-row")
    shows(page, inj("op"), IMG, within="#op-grid")
    shows(page, inj("op"), IMG, within="#op-topn-graph")  # Plotly's tick labels
    # the hover label of the operator's bar names it literally (Plotly's own hover, on that point)
    page.evaluate(
        """() => { const gd = document.querySelector('#op-topn-graph .js-plotly-plot');
            const i = gd.data[0].y.findIndex(y => y.includes('evil.example/op'));
            Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: i}]); }"""
    )
    shows(page, inj("op"), within="#op-topn-graph .hoverlayer")
    page.locator("#op-grid .ag-row [col-id=key]", has_text=IMG).first.click()
    page.wait_for_function("(t) => document.querySelector('#op-drill-name')?.innerText === t", arg=IMG)
    no_elements(page)
    # kernels of the torch_npu run
    page.goto(server["url"] + "operators?run=npu&source=kernels&group=name&scope=across&q=" + quote("evil"))
    page.wait_for_selector("#op-grid .ag-row")
    shows(page, f"trans_{inj('kernel')}_0", within="#op-grid")
    shows(page, inj("kernel"), within="#op-topn-graph")


def test_memory_legend_hover_and_components(server: dict[str, Any], page: Any) -> None:
    page.goto(server["url"] + "memory?run=npu&ranks=0,1")
    page.wait_for_selector("#mem-curves .legendtext")
    settle(page)
    shows(page, inj("device"), within="#mem-curves")  # the clickable legend entry
    # the unified hover label names the series (and so the device) literally
    hover(page, "#mem-curves .nsewdrag", at=0.6)
    shows(page, inj("device"), within="#mem-curves .hoverlayer")
    page.click("#mem-component")
    shows(page, inj("component"))
    page.keyboard.press("Escape")


def test_communication_legend_grid_and_groups(server: dict[str, Any], page: Any) -> None:
    page.goto(server["url"] + "communication?run=npu")
    page.wait_for_selector("#cm-bw-graph .legendtext")
    settle(page)
    shows(page, inj("transport"), within="#cm-bw-graph")
    shows(page, inj("transport"))  # the per-transport table too
    page.goto(server["url"] + "communication?run=" + quote(RUN))
    page.wait_for_selector("#cm-ops .ag-row")
    settle(page)
    shows(page, inj("group"), within="#cm-ops")


def test_every_figure_is_built_by_ui_figure() -> None:
    """The escape happens when a ui.Figure is sent: no page may build a Plotly figure another way."""
    root = Path(ui.__file__).parent
    for f in root.rglob("*.py"):
        if f.name == "ui.py":
            continue
        text = f.read_text()
        assert not re.search(r"\bgo\.Figure\(|make_subplots|px\.\w+\(", text), f
    fig = ui.figure(title="<b>x</b>")
    fig.add_bar(name=IMG, x=[inj("x")], y=[1], hovertemplate="%{x}<br>%{y}<extra>%{fullData.name}</extra>")
    sent = fig.to_plotly_json()
    assert sent["data"][0]["name"] == "&lt;img src=x onerror=alert(1)&gt;"
    assert sent["data"][0]["x"] == ["&lt;a href=//evil.example/x&gt;x&lt;/a&gt;"]
    assert sent["data"][0]["hovertemplate"] == "%{x}<br>%{y}<extra>%{fullData.name}</extra>"  # ours, as written
    assert sent["layout"]["title"]["text"] == "&lt;b&gt;x&lt;/b&gt;"
