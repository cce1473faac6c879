"""The timeline in a real browser on a large store: how fast a view is redrawn, and what it costs.

The 64-rank store of ``bench_webapp.py`` (20 M slices, built once by its builder and kept in
``bench/out/webapp_store``) is served by the real server (``analyze serve --port 0``) and opened in
Debian chromium driven by Playwright, 1920 x 1080. Measured, in the page (``performance.now()``):

- **wheel zoom, local redraw**: from the wheel event to the end of the frame drawn from the tiles
  the browser holds (``rankscopeTimeline.state().stats.inputToDrawMs``), the figure the user feels;
- **wheel zoom, complete**: from the same event until every tile of the new view is in and drawn,
  with the tile cache emptied first: what each view costs when every zoom waits for the server, as
  a figure re-rendered on the server does (the baseline, measured in the same run);
- **pan across the whole run** (``D`` held from the first event to the last, a thirtieth of the
  run in view): frames drawn, the slowest frames, and the bytes fetched;
- **jump to a step**: to the first frame and to the complete view;
- **bytes per view**: what the server sent (gzip, as received, and raw), per view.

    python bench/bench_timeline.py                # 8 ranks (the page's default) then 64 ranks folded
    python bench/bench_timeline.py --repeat 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from bench_webapp import OUT, RUN, build_store  # noqa: E402 - the same store as the server benchmark
from webapp_helpers import ARGS, CHROMIUM  # noqa: E402 - Debian's chromium and its flags, as the browser tests

# in the page: dispatch a wheel event over the canvas and time the local frame and the complete view
WHEEL_JS = """
async ([x, y, dy, clear]) => {
  const tl = window.rankscopeTimeline, box = document.querySelector('#tl-box');
  const c = box.querySelector('canvas'), r = c.getBoundingClientRect();
  if (clear) { tl.clearCache(); await new Promise(res => requestAnimationFrame(() => requestAnimationFrame(res))); }
  const before = tl.state().stats, bytes0 = before.bytes, raw0 = before.rawBytes, seq0 = Number(box.dataset.seq);
  const t0 = performance.now();
  c.dispatchEvent(new WheelEvent('wheel', {clientX: r.left + x, clientY: r.top + y, deltaY: dy, deltaMode: 0,
                                           bubbles: true, cancelable: true}));
  await new Promise(res => { const f = () => Number(box.dataset.seq) > seq0 ? res() : requestAnimationFrame(f); f(); });
  const local = tl.state().stats.inputToDrawMs;
  await new Promise(res => { const f = () => box.dataset.ready === '1' ? res() : requestAnimationFrame(f); f(); });
  const done = performance.now() - t0, s = tl.state().stats;
  return {local, done, bytes: s.bytes - bytes0, raw: s.rawBytes - raw0, level: s.level, slices: s.slices};
}
"""

PAN_JS = """
async ([seconds]) => {
  const tl = window.rankscopeTimeline, box = document.querySelector('#tl-box');
  const s0 = tl.state(), bytes0 = s0.stats.bytes, raw0 = s0.stats.rawBytes, end = s0.events[1];
  const frames = [];
  let last = Number(box.dataset.seq);
  document.dispatchEvent(new KeyboardEvent('keydown', {key: 'd', bubbles: true}));
  const t0 = performance.now();
  await new Promise(res => {
    const f = () => {
      const seq = Number(box.dataset.seq);
      if (seq > last) { frames.push(tl.state().stats.drawMs); last = seq; }
      if (tl.state().b >= end || performance.now() - t0 > seconds * 1000) { res(); } else { requestAnimationFrame(f); }
    };
    f();
  });
  document.dispatchEvent(new KeyboardEvent('keyup', {key: 'd', bubbles: true}));
  const s = tl.state();
  return {frames, seconds: (performance.now() - t0) / 1000, covered: (s.b - s0.a) / (end - s0.events[0]),
          bytes: s.stats.bytes - bytes0, raw: s.stats.rawBytes - raw0};
}
"""

STEP_JS = """
async ([step]) => {
  const tl = window.rankscopeTimeline, box = document.querySelector('#tl-box');
  const seq0 = Number(box.dataset.seq), bytes0 = tl.state().stats.bytes, raw0 = tl.state().stats.rawBytes;
  const t0 = performance.now();
  tl.jumpToStep(step);
  await new Promise(res => { const f = () => Number(box.dataset.seq) > seq0 ? res() : requestAnimationFrame(f); f(); });
  const first = performance.now() - t0;
  await new Promise(res => { const f = () => box.dataset.ready === '1' ? res() : requestAnimationFrame(f); f(); });
  const s = tl.state().stats;
  return {first, done: performance.now() - t0, bytes: s.bytes - bytes0, raw: s.rawBytes - raw0};
}
"""


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def start_server(store: Path) -> tuple[subprocess.Popen[str], str]:
    analyze = REPO / ".venv" / "bin" / "analyze"
    cmd = [str(analyze)] if analyze.exists() else [sys.executable, "-m", "analyzer"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--store", str(store), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "http://" in line:
            return proc, line.split(" at ")[-1].strip()
    proc.kill()
    raise RuntimeError("analyze serve printed no URL")


def wait_ready(pg: Any, timeout_ms: int = 600_000) -> None:
    pg.wait_for_function(
        "() => { const b = document.querySelector('#tl-box'); return b && b.dataset.ready === '1'; }",
        timeout=timeout_ms,
    )


def scenario(pg: Any, url: str, label: str, repeat: int) -> dict[str, Any]:
    t = time.perf_counter()
    pg.goto(url)
    wait_ready(pg)  # the first view of these ranks: the server builds their lane indexes
    first_view = time.perf_counter() - t
    st = pg.evaluate("() => window.rankscopeTimeline.state()")
    box = pg.locator("#tl-box canvas").bounding_box()
    x, y = box["width"] * 0.55, min(260.0, box["height"] / 2)
    local, done, base, views = [], [], [], []
    for _ in range(repeat):
        # zoom in 4x then out 4x at the cursor: the second wheel finds the first level cached
        for dy in (-770, 770):
            r = pg.evaluate(WHEEL_JS, [x, y, dy, False])
            local.append(r["local"])
            done.append(r["done"])
            views.append(r)
        # the baseline: the same zoom, nothing cached (a server round trip before the view is whole)
        r = pg.evaluate(WHEEL_JS, [x, y, -770, True])
        base.append(r["done"])
        views.append(r)
        pg.evaluate(WHEEL_JS, [x, y, 770, False])
    jumps = []
    meta = pg.evaluate("async (u) => (await fetch(u)).json()", f"/_timeline/meta?run={RUN}&ranks={st['ranks'][0]}")
    steps = sorted({s[1] for s in meta["steps"]})
    for k in range(min(repeat, len(steps))):
        jumps.append(pg.evaluate(STEP_JS, [steps[(k * 37) % len(steps)]]))
    # pan across the whole run (D held) with a thirtieth of it in view, from its first event
    ev = st["events"]
    pg.evaluate("([a, b]) => window.rankscopeTimeline.setWindow(a, b)", [ev[0], ev[0] + (ev[1] - ev[0]) / 30])
    wait_ready(pg)
    pan = pg.evaluate(PAN_JS, [180])
    return {
        "label": label,
        "first_view_s": first_view,
        "lanes": len(st["lanes"]),
        "rows": len(st["rows"]),
        "local": local,
        "done": done,
        "baseline": base,
        "views": views,
        "jumps": jumps,
        "pan": pan,
    }


def report(r: dict[str, Any]) -> None:
    kib = [v["bytes"] / 1024 for v in r["views"] if v["bytes"]]
    raw = [v["raw"] / 1024 for v in r["views"] if v["raw"]]
    print(f"\n{r['label']}: {r['rows']} rows ({r['lanes']} lanes expanded); first view {r['first_view_s']:.1f} s")
    print(f"  {'':50} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, xs in (
        ("wheel zoom -> local redraw", r["local"]),
        ("wheel zoom -> view complete (cached or not)", r["done"]),
        ("baseline: wheel zoom, nothing cached -> complete", r["baseline"]),
        ("jump to a step -> first frame", [j["first"] for j in r["jumps"]]),
        ("jump to a step -> complete", [j["done"] for j in r["jumps"]]),
        ("pan frames (draw time)", r["pan"]["frames"]),
    ):
        if xs:
            print(f"  {name:<50} {pct(xs, 0.5):8.1f} {pct(xs, 0.95):8.1f} {max(xs):8.1f}")
    ratio = statistics.median(r["baseline"]) / statistics.median(r["local"])
    print(f"  baseline / local redraw (medians): {ratio:.0f}x")
    if kib:
        print(
            f"  bytes per view that fetched tiles: median {statistics.median(kib):.1f} KiB gzip "
            f"({statistics.median(raw):.1f} KiB raw), max {max(kib):.1f} KiB"
        )
    p = r["pan"]
    print(
        f"  pan with D across {p['covered'] * 100:.0f} % of the run in {p['seconds']:.1f} s: "
        f"{len(p['frames'])} frames, "
        f"{p['bytes'] / 1024:.0f} KiB gzip ({p['raw'] / 1024:.0f} KiB raw)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=str(OUT / "webapp_store"))
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--json", help="write the raw figures there")
    args = ap.parse_args()
    dest = Path(args.store)
    if not (dest / "bench_meta.json").exists():
        source = (REPO / "sample_data" / "torch_npu_text_level1").resolve()
        print(f"building {dest} (64 ranks, ~20 M slices) ...")
        info = build_store(source, dest, 64, 20_000_000)
        want = {"source": str(source), "ranks": 64, "slices": 20_000_000}
        (dest / "bench_meta.json").write_text(json.dumps({"want": want, "info": info}, indent=2))
    info = json.loads((dest / "bench_meta.json").read_text())["info"]
    print(f"store: {info['ranks']} ranks, {info['slices']:,} slices")

    from playwright.sync_api import sync_playwright

    proc, url = start_server(dest)
    out = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            pg = browser.new_page(viewport={"width": 1920, "height": 1080})
            pg.set_default_timeout(600_000)
            for label, query in (
                ("2 ranks, lanes expanded", "ranks=0-1"),
                ("8 ranks (folded)", "ranks=0-7"),
                ("64 ranks (folded)", "ranks=0-63"),
            ):
                r = scenario(pg, f"{url}timeline?run={RUN}&{query}", label, args.repeat)
                report(r)
                out.append(r)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
