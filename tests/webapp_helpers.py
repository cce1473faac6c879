"""Helpers of the web app tests: ingest the sample data, read the source traces for expected
values, call Dash callbacks over HTTP, start the real server."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
KINETO = SAMPLES / "kineto_gloo_2rank"
NPU = SAMPLES / "torch_npu_text_level1"
ANALYZE = (
    [sys.executable, "-m", "analyzer"]
    if not (Path(sys.executable).parent / "analyze").exists()
    else [str(Path(sys.executable).parent / "analyze")]
)


# the browser tests: Debian chromium driven by Playwright (never `playwright install`)
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def ingest(folder: Path, store: Path, run: str) -> None:
    """`analyze ingest FOLDER --run RUN --store STORE` through the real CLI (in process)."""
    from analyzer.cli import main

    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store)], catch_exceptions=False)
    assert res.exit_code == 0, res.output


def trace_files(rank: int) -> list[Path]:
    return sorted((KINETO / f"rank_{rank}").rglob("*.pt.trace.json"))


def trace_events(rank: int) -> list[dict[str, Any]]:
    """Every event of the rank's Kineto trace files (the source of expected values)."""
    out: list[dict[str, Any]] = []
    for f in trace_files(rank):
        out += json.loads(f.read_text())["traceEvents"]
    return out


def union_ns(intervals: list[tuple[float, float]]) -> float:
    """Covered length of possibly overlapping intervals."""
    total, reach = 0.0, None
    for a, b in sorted(intervals):
        if reach is None or a > reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def callback_body(
    deps: list[dict[str, Any]],
    first_output: str,
    inputs: dict[str, Any],
    state: dict[str, Any] | None = None,
    changed: list[str] | None = None,
) -> dict[str, Any]:
    """The body the browser POSTs to ``/_dash-update-component`` for the callback (of ``deps``, the
    app's ``/_dash-dependencies``) whose outputs start with ``first_output``; ``inputs`` / ``state``
    map "id.property" to values. Several callbacks may write one output (navigate.href): the first
    whose inputs include those given is taken, else the first of that output. KeyError when the app
    has no such callback. (The web app tests, and bench_webapp / bench_load, call callbacks through it.)"""
    of_output = [d for d in deps if d["output"].lstrip(".").startswith(first_output)]
    if not of_output:
        raise KeyError(first_output)
    d = next((d for d in of_output if {f"{i['id']}.{i['property']}" for i in d["inputs"]} >= set(inputs)), of_output[0])

    def items(specs: list[dict[str, Any]], values: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"id": s["id"], "property": s["property"], "value": values.get(f"{s['id']}.{s['property']}")} for s in specs
        ]

    outs = [
        {"id": o.split(".")[0], "property": o.split(".")[1].split("@")[0]} for o in d["output"].strip(".").split("...")
    ]
    return {
        "output": d["output"],
        "outputs": outs if len(outs) > 1 else outs[0],
        "inputs": items(d["inputs"], inputs),
        "state": items(d["state"], state or {}),
        "changedPropIds": changed or [],
    }


class DashClient:
    """Calls a Dash app's callbacks the way the browser does (POST /_dash-update-component)."""

    def __init__(self, app: Any):
        self.http = app.server.test_client()
        assert self.http.get("/").status_code == 200
        self.deps = self.http.get("/_dash-dependencies").get_json()

    def call(
        self,
        first_output: str,
        inputs: dict[str, Any],
        state: dict[str, Any] | None = None,
        changed: list[str] | None = None,
    ) -> dict[str, Any]:
        body = callback_body(self.deps, first_output, inputs, state, changed)
        r = self.http.post("/_dash-update-component", json=body)
        assert r.status_code in (200, 204), r.get_data(as_text=True)[:500]
        return r.get_json()["response"] if r.status_code == 200 else {}

    def page(self, path: str, search: str = "") -> str:
        """The page layout the router renders for path?search, as JSON text."""
        out = self.call("_pages_content.children", {"_pages_location.pathname": path, "_pages_location.search": search})
        return json.dumps(out["_pages_content"]["children"])


def _ids_and_props(tree: Any, props: dict[tuple[str, str], Any]) -> None:
    """Every (id, property) -> value of the components with a string id in a (JSON) component tree."""
    if isinstance(tree, list):
        for x in tree:
            _ids_and_props(x, props)
    elif isinstance(tree, dict):
        p = tree.get("props") if "namespace" in tree else None
        if isinstance(p, dict) and isinstance(p.get("id"), str):
            props.update({(p["id"], k): v for k, v in p.items()})
            props[(p["id"], "")] = True  # the component exists
        for v in (p if isinstance(p, dict) else tree).values():
            if isinstance(v, (list, dict)):
                _ids_and_props(v, props)


def render_page(http: Any, address: str, headers: dict[str, str] | None = None) -> list[Any]:
    """What the browser receives for ``address`` (path?query): the shell, the page's layout and the
    answer of every callback Dash calls when the page loads (those with every input on the page and
    not ``prevent_initial_call``, server side; each once, in the order their inputs appear, the
    outputs of one feeding the inputs of the next). Sent with the address as Referer (the page's
    language) and ``headers``. A callback that fails fails the call."""
    path, _, query = address.partition("?")
    hdrs = {"Referer": "http://localhost" + address, **(headers or {})}
    deps = http.get("/_dash-dependencies").get_json()
    shell = http.get("/_dash-layout", headers=hdrs).get_json()
    props: dict[tuple[str, str], Any] = {}
    _ids_and_props(shell, props)
    search = "?" + query if query else ""
    answers: list[Any] = [shell]

    def post(d: dict[str, Any], inputs: dict[str, Any], state: dict[str, Any]) -> None:
        body = {**callback_body([d], d["output"].lstrip("."), inputs, state), "output": d["output"]}
        r = http.post("/_dash-update-component", json=body, headers=hdrs)
        assert r.status_code in (200, 204), f"{address} {d['output'][:80]}: {r.get_data(as_text=True)[:500]}"
        if r.status_code == 200:
            out = r.get_json()["response"]
            answers.append(out)
            for cid, values in out.items():
                props.update({(cid, k): v for k, v in values.items()})
                props[(cid, "")] = True
                _ids_and_props(values, props)

    router = next(d for d in deps if d["output"].lstrip(".").startswith("_pages_content.children"))
    post(router, {"_pages_location.pathname": path, "_pages_location.search": search}, {})
    done: set[int] = set()
    for _ in range(4):  # a callback whose inputs another one creates runs in a later round
        ran = False
        for i, d in enumerate(deps):
            ids = [x["id"] for x in d["inputs"]]
            if (
                i in done
                or d.get("clientside_function")
                or d["prevent_initial_call"] is True
                or not all(isinstance(x, str) and (x, "") in props for x in ids)
            ):
                continue
            done.add(i)
            ran = True
            key = lambda x: f"{x['id']}.{x['property']}"  # noqa: E731
            post(
                d,
                {key(x): props.get((x["id"], x["property"])) for x in d["inputs"]},
                {key(x): props.get((x["id"], x["property"])) for x in d["state"] if isinstance(x["id"], str)},
            )
        if not ran:
            break
    return answers


# properties whose text a user reads (not ids, class names, values or styles)
SHOWN_PROPS = {
    "children",
    "label",
    "placeholder",
    "title",
    "headerName",
    "headerTooltip",
    "text",
    "hovertext",
    "hovertemplate",
    "name",
    "labels",
    "tooltip",
    "x",
    "y",
    "ticktext",
}
NOT_SHOWN = {"id", "className", "style", "href", "value", "field", "colId", "type", "namespace", "bdata", "dtype"}


def shown_texts(tree: Any, shown: bool = False) -> list[str]:
    """Every text a user can read in answers of ``render_page``: the children, labels, titles,
    tooltips and hover texts of components, grid cells, a figure's texts and category labels
    (``shown``: ``tree`` is the value of such a property)."""
    out: list[str] = []
    if isinstance(tree, str):
        if shown:
            out.append(tree)
    elif isinstance(tree, list):
        for v in tree:
            out += shown_texts(v, shown)
    elif isinstance(tree, dict):
        if shown and "namespace" not in tree and "props" not in tree and all(isinstance(v, str) for v in tree.values()):
            return list(tree.values())  # a dropdown's labels, AG Grid's locale texts
        for k, v in tree.items():
            if k in NOT_SHOWN:
                continue
            if k == "rowData" and isinstance(v, list):
                out += [c for row in v if isinstance(row, dict) for c in row.values() if isinstance(c, str)]
            else:
                out += shown_texts(v, k in SHOWN_PROPS)
    return out


def plotly_array(v: object) -> np.ndarray:
    """A figure's array as JSON carries it: a list, or Plotly's typed array (dtype, bdata, shape)."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        shape = [int(x) for x in str(v.get("shape", len(a))).split(",")]
        return a.reshape(shape).astype(float)
    return np.array(
        [np.nan if x is None else x for x in v]
        if not v or not isinstance(v[0], list)
        else [[np.nan if x is None else x for x in row] for row in v],
        dtype=float,
    )


def props_of(tree: Any) -> list[dict[str, Any]]:
    """The props of every component in a (JSON) component tree, depth first."""
    out: list[dict[str, Any]] = []
    if isinstance(tree, list):
        for t in tree:
            out += props_of(t)
    elif isinstance(tree, dict) and "props" in tree:
        out.append(tree["props"])
        out += props_of(tree["props"].get("children"))
    return out


def texts(component: Any) -> list[str]:
    """Every string child in a (JSON) component tree."""
    out: list[str] = []
    if isinstance(component, str):
        out.append(component)
    elif isinstance(component, list):
        for c in component:
            out += texts(c)
    elif isinstance(component, dict):
        if "props" in component:
            out += texts(component["props"].get("children"))
        else:
            for v in component.values():
                out += texts(v)
    return out


class ServerProcess(subprocess.Popen[str]):
    """An `analyze serve` started by ``start_server``: its output goes to the file ``log_path``
    (never to a pipe nobody reads: a server that wrote more than the pipe holds would block)."""

    log_path: Path

    def log(self) -> str:
        """What the server printed so far (its address, warnings, the traceback of a failed request)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


# the servers started and not yet stopped: conftest adds their output to a failing test's report
RUNNING: list[ServerProcess] = []


def start_server(
    store: Path, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> tuple[ServerProcess, str]:
    """`analyze serve --store STORE --port 0 [ARGS]`: the real server on a free port; returns (process, URL).
    Its output (unbuffered) goes to a file beside the store (``ServerProcess.log``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    store.parent.mkdir(parents=True, exist_ok=True)
    fd, log_name = tempfile.mkstemp(prefix=f"{store.name}-serve-", suffix=".log", dir=store.parent)
    with os.fdopen(fd, "w") as out:
        proc = ServerProcess(
            [*ANALYZE, "serve", "--store", str(store), "--port", "0", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
    proc.log_path = Path(log_name)
    RUNNING.append(proc)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        exited = proc.poll() is not None  # before reading: what it printed before it ended is in the file
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", proc.log())
        if m:
            return proc, m.group(1)
        if exited:
            break
        time.sleep(0.05)
    stop_server(proc)
    raise AssertionError(f"analyze serve printed no URL (exit code {proc.returncode}):\n" + proc.log())


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc in RUNNING:
        RUNNING.remove(proc)  # type: ignore[arg-type]


def iter_pages() -> Iterator[str]:
    yield from ("/", "/timeline", "/operators", "/memory", "/communication")


def choose(pg: Any, dropdown: str, label: str) -> None:
    """Pick ``label`` in the dcc.Dropdown ``dropdown`` the way a user does."""
    pg.click(dropdown)
    pg.locator(".dash-dropdown-option", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first.click()
    pg.keyboard.press("Escape")


def grid_rows(pg: Any, grid: str) -> list[dict[str, str]]:
    """The rendered rows of an AG Grid as {column id: text}, in display order (pinned and
    scrolled parts of a row joined by row index)."""
    return pg.evaluate(
        """(sel) => {
            const rows = {};
            for (const row of document.querySelectorAll(sel + ' .ag-row')) {
                const i = row.getAttribute('row-index');
                rows[i] = rows[i] || {};
                for (const cell of row.querySelectorAll('[col-id]'))
                    rows[i][cell.getAttribute('col-id')] = cell.innerText;
            }
            return Object.keys(rows).sort((a, b) => a - b).map(k => rows[k]);
        }""",
        grid,
    )


def sort_descending(pg: Any, grid: str, col: str) -> None:
    """Click the header of the AG Grid ``grid``'s column ``col`` until it sorts descending (each
    click waited for: its ``aria-sort`` changes), then wait until the rendered rows are in that
    order (numbers as the grid shows them), not a fixed time a busy machine may outlast."""
    sel = f"{grid} [role=columnheader][col-id={col}]"
    header = pg.locator(sel)
    for _ in range(3):
        was = header.get_attribute("aria-sort")
        if was == "descending":
            break
        header.locator(".ag-header-cell-label").click()
        pg.wait_for_function(
            "([sel, was]) => { const h = document.querySelector(sel);"
            " return h && h.getAttribute('aria-sort') !== was; }",
            arg=[sel, was],
        )
    assert header.get_attribute("aria-sort") == "descending"
    pg.wait_for_function(
        """([grid, col]) => {
            const rows = [...document.querySelectorAll(grid + ' .ag-row')];
            const byIndex = {};
            for (const r of rows) {
                const c = r.querySelector(`[col-id="${col}"]`);
                if (c) byIndex[r.getAttribute('row-index')] = parseFloat(c.innerText.replace(/,/g, ''));
            }
            const v = Object.keys(byIndex).sort((a, b) => a - b).map(k => byIndex[k]);
            return v.length > 1 && v.every((x, i) => i === 0 || v[i - 1] >= x);
        }""",
        arg=[grid, col],
    )


def settle(pg: Any) -> None:
    """Wait until Dash has no callback in flight."""
    pg.wait_for_load_state("networkidle")
    pg.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")


def tl_state(pg: Any) -> dict[str, Any]:
    return pg.evaluate("() => window.rankscopeTimeline.state()")


def drawn(pg: Any, after: int = -1) -> dict[str, Any]:
    """Wait until the timeline has drawn a frame after frame ``after`` with every tile it needs in,
    and return its state."""
    pg.wait_for_function(
        "(after) => { const b = document.querySelector('#tl-box');"
        " return b && b.dataset.ready === '1' && Number(b.dataset.seq) > after; }",
        arg=after,
    )
    return tl_state(pg)
