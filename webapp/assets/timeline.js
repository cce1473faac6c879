/* rankscope timeline: every selected rank on one canvas, fed by compact tiles.
 *
 * The server (webapp/timeline_api.py) sends the lanes of the ranks once (/_timeline/meta) and then
 * tiles (/_timeline/tiles, binary, see webapp/tiles.py): per lane, zoom level z (a bucket is 2^z ns,
 * a tile 1024 buckets) and index i, the occupancy of each bucket and the slices long enough to be
 * seen. Tiles are cached here, so zoom and pan redraw locally within a frame from whatever level is
 * cached, and the detail of the new level arrives asynchronously.
 *
 * Names written by the traced program are only ever drawn with fillText or set as textContent.
 * State for tests and benchmarks: window.rankscopeTimeline.state(), and data-* attributes on #tl-box.
 */
(function () {
  "use strict";
  if (window.rankscopeTimeline) { return; }

  var AXIS_H = 30, RANK_H = 22, GROUP_H = 17, ROW_H = 18, SUMMARY_H = 14, LANE_GAP = 4, LABEL_W = 250, COUNTER_H = 30;
  var MAX_ROWS = 16, PIN_MAX_FRACTION = 0.4, PIN_W = 18;
  var MAX_CACHE_TILES = 6000, BATCH = 256, MAX_INFLIGHT = 2, SETTLE_MS = 450, MIN_SPAN = 200;
  var GROUPS = ["host", "device", "communication", "overlap", "other", "counters"];
  var DEFAULT_GROUPS = ["host", "device", "communication", "overlap"];
  var GROUP_COLORS = { host: "#2f6fb0", device: "#27ae60", communication: "#d9534f", overlap: "#9b59b6", other: "#7f8c8d", counters: "#e67e22" };
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#8c564b", "#17becf"];
  var DARK_TEXT = { "#edc948": 1, "#ff9da7": 1, "#bab0ac": 1, "#76b7b2": 1, "#f28e2b": 1 };

  var S = {
    mounted: false, run: null, fp: null, origin: null, ranks: [], allRanks: [], groups: DEFAULT_GROUPS.slice(),
    clock: "aligned", mode: "whole", step: null, a: 0, b: 1, fold: null, pin: [], hl: [], sel: null,
    meta: null, metas: {}, clockMap: {}, defaultFold: [],
    box: null, canvas: null, ctx: null, spacer: null, tip: null, width: 0, height: 0, dpr: 1,
    rows: [], pinRows: [], rowsH: 0, pinH: 0,
    cache: new Map(), inflight: new Map(), want: [], wantSet: new Set(), requests: 0,
    drag: null, measure: null, keys: new Set(), mouse: null, animT: null, commitTimer: null,
    search: { q: "", hit: null, matches: null, busy: false }, autoSelect: false,
    counters: { data: null, busy: false, timer: null, sig: null },
    flows: { kinds: [], data: null, busy: false, timer: null, sig: null, note: "" },
    frame: null, inputAt: null, seq: 0,
    stats: { drawMs: 0, inputToDrawMs: null, slices: 0, labelled: 0, occupancy: 0, missing: 0, labels: [],
      level: 0, bytes: 0, rawBytes: 0, tilesFetched: 0, requests: 0, fetchMs: [], headers: [], counterBuckets: 0, counterLabels: [], arrows: 0, arrowEnds: [] }
  };

  // -------------------------------------------------------------------------------------------
  // small helpers
  // -------------------------------------------------------------------------------------------

  function hashName(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  var colorCache = new Map();
  function colorOf(name) {
    var c = colorCache.get(name);
    if (c === undefined) {
      c = PALETTE[hashName(name) % PALETTE.length];
      if (colorCache.size > 50000) { colorCache.clear(); }
      colorCache.set(name, c);
    }
    return c;
  }
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) { return (ns / 1e9).toFixed(3) + " s"; }
    if (a >= 1e6) { return (ns / 1e6).toFixed(3) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toFixed(3) + " µs"; }
    return Math.round(ns) + " ns";
  }
  function fmtAt(t, step) {
    // a time after the run's first event, with as many digits as the tick step needs
    if (step >= 1e6) { return (t / 1e6).toFixed(Math.max(0, Math.ceil(-Math.log10(step / 1e6) + 1e-9))) + " ms"; }
    if (step >= 1e3) { return (t / 1e6).toFixed(Math.min(6, 3 + Math.max(0, Math.ceil(-Math.log10(step / 1e3) + 1e-9)))) + " ms"; }
    return (t / 1e6).toFixed(Math.min(9, 6 + Math.max(0, Math.ceil(-Math.log10(step) + 1e-9)))) + " ms";
  }
  function niceStep(span, px) {
    var raw = span / Math.max(1, px / 110), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function levelFor(nsPerPx) {
    if (nsPerPx < 2) { return 0; }
    var maxLevel = S.meta ? S.meta.limits.max_level : 46;
    return Math.min(maxLevel, Math.floor(Math.log2(nsPerPx)));
  }
  function buckets() { return S.meta ? S.meta.limits.buckets : 1024; }
  function tileSpan(z) { return buckets() * Math.pow(2, z); }
  function offsetOf(rank) {
    if (S.clock !== "aligned") { return 0; }
    var c = S.clockMap[rank];
    return c && c.offset != null && (c.status === "aligned" || c.status === "reference") ? c.offset : 0;
  }
  function relOf(abs) { return Number(BigInt(abs) - BigInt(S.origin)); }
  function absOf(rel) { return (BigInt(S.origin) + BigInt(Math.round(rel))).toString(); }
  function formatRanks(rs) {
    var out = [], s = null, p = null;
    rs.slice().sort(function (x, y) { return x - y; }).concat([null]).forEach(function (r) {
      if (r !== null && p !== null && r === p + 1) { p = r; return; }
      if (s !== null) { out.push(s === p ? String(s) : s + "-" + p); }
      s = p = r;
    });
    return out.join(",");
  }
  function sameList(x, y) { return x.length === y.length && x.every(function (v, i) { return v === y[i]; }); }
  function setProps(id, props) {
    // a Dash component's props (dcc.Store renders no element: the page names the ones it has)
    var dc = window.dash_clientside;
    if (!dc || !dc.set_props || !S.box || !document.body.contains(S.box)) { return; }
    if (id !== "view-url" && id.indexOf("tl-") !== 0) { return; }
    try { dc.set_props(id, props); } catch (e) { /* the page is being replaced */ }
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text != null) { e.textContent = text; }
    return e;
  }

  // -------------------------------------------------------------------------------------------
  // the tile format (webapp/tiles.py: encode)
  // -------------------------------------------------------------------------------------------

  function pad8(n) { return (8 - n % 8) % 8; }
  function decode(buf) {
    var dv = new DataView(buf);
    var magic = String.fromCharCode(dv.getUint8(0), dv.getUint8(1), dv.getUint8(2), dv.getUint8(3));
    if (magic !== "RSTL") { throw new Error("not a rankscope tile response"); }
    if (dv.getUint32(4, true) !== 1) { throw new Error("unknown tile format version"); }
    var hlen = dv.getUint32(8, true);
    var head = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 12, hlen)));
    var pos = 12 + hlen, n;
    function take(Ctor, count) {
      var a = new Ctor(buf, pos, count);
      var size = count * Ctor.BYTES_PER_ELEMENT;
      pos += size + pad8(size);
      return a;
    }
    return head.tiles.map(function (t) {
      n = t.n;
      return {
        lane: t.lane, z: t.z, i: t.i, n: n, cut: t.cut, instants: t.instants, names: head.names,
        occ: take(Uint8Array, head.buckets), start: take(Float64Array, n), dur: take(Float64Array, n),
        event: take(Float64Array, n), name: take(Uint32Array, n), depth: take(Uint8Array, n),
        member: take(Uint8Array, n), img: null
      };
    });
  }

  // -------------------------------------------------------------------------------------------
  // tile cache and fetching
  // -------------------------------------------------------------------------------------------

  function tkey(lane, z, i) { return S.fp + "|" + lane + "|" + z + "|" + i; }
  function getTile(lane, z, i) {
    var k = tkey(lane, z, i), t = S.cache.get(k);
    if (t) { S.cache.delete(k); S.cache.set(k, t); }
    return t;
  }
  function putTile(t) {
    S.cache.set(tkey(t.lane, t.z, t.i), t);
    while (S.cache.size > MAX_CACHE_TILES) { S.cache.delete(S.cache.keys().next().value); }
  }
  function want(lane, z, i) {
    var k = tkey(lane, z, i);
    if (S.wantSet.has(k) || S.inflight.has(k)) { return; }
    S.wantSet.add(k);
    S.want.push([lane, z, i]);
  }
  function fetchWanted() {
    if (!S.meta) { return; }
    while (S.want.length && S.requests < MAX_INFLIGHT) {
      var batch = S.want.splice(0, BATCH);
      var run = S.run, fp = S.fp;
      // the keys are made once: the view may change (another fingerprint) before the answer, and
      // the same keys must leave ``inflight`` then, or ``pending()`` never comes back to 0
      var keys = batch.map(function (w) { return tkey(w[0], w[1], w[2]); });
      keys.forEach(function (k) { S.wantSet.delete(k); S.inflight.set(k, true); });
      S.requests++;
      S.stats.requests++;
      var t0 = performance.now();
      fetch("/_timeline/tiles", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ run: run, fp: fp, tiles: batch })
      }).then(function (r) {
        if (r.status === 409) { throw new Error("stale"); }
        if (!r.ok) { return r.json().then(function (e) { throw new Error(e.error || r.statusText); }); }
        S.stats.bytes += Number(r.headers.get("Content-Length") || 0);
        S.stats.rawBytes += Number(r.headers.get("X-Raw-Bytes") || 0);
        return r.arrayBuffer();
      }).then(function (buf) {
        S.stats.fetchMs.push(performance.now() - t0);
        if (S.stats.fetchMs.length > 200) { S.stats.fetchMs.shift(); }
        if (fp === S.fp) {
          decode(buf).forEach(function (t) { putTile(t); });
          S.stats.tilesFetched += batch.length;
        }
      }).catch(function (e) {
        if (String(e.message) === "stale") { reloadMeta(); } else { status(T("tiles_error", { error: e.message }), true); }
      }).then(function () {
        keys.forEach(function (k) { S.inflight.delete(k); });
        S.requests--;
        invalidate();
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // meta: lanes, steps, clock offsets
  // -------------------------------------------------------------------------------------------

  function metaUrl(run, ranksParam) {
    var u = "/_timeline/meta?run=" + encodeURIComponent(run);
    if (ranksParam) { u += "&ranks=" + encodeURIComponent(ranksParam); }
    return u;
  }
  function loadMeta(run, ranksParam) {
    var key = run + "|" + (ranksParam || "");
    if (S.metas[key]) { return Promise.resolve(S.metas[key]); }
    return fetch(metaUrl(run, ranksParam)).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) { throw new Error(j.error || r.statusText); } return j; });
    }).then(function (m) {
      S.metas[key] = m;
      S.metas[m.run + "|" + formatRanks(m.ranks)] = m;
      return m;
    });
  }
  function useMeta(m) {
    // tiles wanted for another view (run, ranks) are not fetched for this one: their lanes may not
    // exist here, and their keys (fingerprint first) would never be marked done
    if (m.fp !== S.fp) { S.want = []; S.wantSet.clear(); }
    S.meta = m; S.run = m.run; S.fp = m.fp; S.origin = m.origin; S.ranks = m.ranks.slice(); S.allRanks = m.all_ranks;
    S.clockMap = {};
    m.clock.forEach(function (c) { S.clockMap[c.rank] = c; });
    S.defaultFold = S.ranks.length > 4 ? S.ranks.map(String) : [];
    if (S.fold === null) { S.fold = new Set(S.defaultFold); }
  }
  function reloadMeta() {
    S.metas = {};
    loadMeta(S.run, formatRanks(S.ranks)).then(function (m) { useMeta(m); layout(); invalidate(); });
  }

  // -------------------------------------------------------------------------------------------
  // windows: whole run (the events), a step, the highlighted ranges
  // -------------------------------------------------------------------------------------------

  function eventsWindow() {
    var lo = Infinity, hi = -Infinity;
    S.ranks.forEach(function (r) {
      var e = S.meta.events[String(r)];
      if (!e) { return; }
      var off = offsetOf(r);
      lo = Math.min(lo, e[0] - off); hi = Math.max(hi, e[1] - off);
    });
    if (!isFinite(lo)) { return [0, 1e6]; }
    var pad = Math.max((hi - lo) / 100, 1000);
    return [lo - pad, hi + pad];
  }
  function stepWindow(step) {
    var lo = Infinity, hi = -Infinity;
    S.meta.steps.forEach(function (s) {
      if (s[1] !== step || S.ranks.indexOf(s[0]) < 0) { return; }
      var off = offsetOf(s[0]);
      lo = Math.min(lo, s[2] - off); hi = Math.max(hi, s[3] - off);
    });
    if (!isFinite(lo)) { return null; }
    var pad = Math.max(Math.floor((hi - lo) / 50), 1);
    return [lo - pad, hi + pad];
  }
  function hlWindow() {
    var lo = Infinity, hi = -Infinity;
    S.hl.forEach(function (h) {
      var off = offsetOf(h[0]), a = relOf(h[1]) - off, b = relOf(h[2]) - off;
      lo = Math.min(lo, a); hi = Math.max(hi, b);
    });
    if (!isFinite(lo)) { return null; }
    // a moment (a memory peak) opens on the millisecond around it; a call fills most of the view
    var pad = hi - lo < 1000 ? 1e6 : Math.max((hi - lo) * 0.35, 20000);
    return [lo - pad, hi + pad];
  }
  function steps() {
    var seen = {}, out = [];
    S.meta.steps.forEach(function (s) { if (!seen[s[1]] && S.ranks.indexOf(s[0]) >= 0) { seen[s[1]] = 1; out.push(s[1]); } });
    return out.sort(function (x, y) { return x - y; });
  }

  // -------------------------------------------------------------------------------------------
  // layout of the rows
  // -------------------------------------------------------------------------------------------

  function lanesOf(rank) {
    return S.meta.lanes.filter(function (l) { return l.rank === rank && S.groups.indexOf(l.group) >= 0; });
  }
  function countersOf(rank) {
    if (S.groups.indexOf("counters") < 0 || !S.meta.counters) { return []; }
    return S.meta.counters.filter(function (c) { return c.rank === rank; });
  }
  function laneRowH(l) { return Math.min(Math.max(l.depth, 1), MAX_ROWS) * ROW_H + LANE_GAP; }
  // the page's labels (webapp.labels, in its language: cfg.texts), {name} fields filled
  function T(key, values) {
    var text = (S.texts && S.texts[key]) || key;
    return text.replace(/\{(\w+)\}/g, function (m, k) { return values && values[k] !== undefined ? String(values[k]) : m; });
  }
  function clockText(rank) {
    var c = S.clockMap[rank];
    if (!c) { return ""; }
    if (c.status === "reference") { return T("clock_ref"); }
    if (c.offset == null) { return T("own_clock", { status: c.status_text || c.status }); }
    if (c.status !== "aligned") { return T("own_clock_res", { status: c.status_text || c.status, residual: c.residual != null ? " (±" + fmtDur(c.residual) + ")" : "" }); }
    var t = (S.clock === "aligned" ? "" : T("raw")) + T("offset", { sign: c.offset >= 0 ? "+" : "−", offset: fmtDur(Math.abs(c.offset)) });
    if (c.residual != null) { t += " ± " + fmtDur(c.residual); }
    return t;
  }
  function laneLabel(l) {
    var p = l.process || "", n = l.lane || "";
    return !p || n.indexOf(p) >= 0 ? n : p + " · " + n;
  }
  function summaryKeys(rank, group) {
    return S.meta.lanes.filter(function (l) { return l.rank === rank && l.group === group; }).map(function (l) { return l.key; });
  }
  function layout() {
    if (!S.meta) { return; }
    var rows = [], y = 0;
    S.ranks.forEach(function (rank) {
      var lanes = lanesOf(rank), tracks = countersOf(rank);
      if (!lanes.length && !tracks.length) { return; }
      var folded = S.fold.has(String(rank));
      rows.push({ kind: "rank", key: String(rank), rank: rank, y: y, h: RANK_H, folded: folded });
      y += RANK_H;
      var groups = GROUPS.filter(function (g) { return lanes.some(function (l) { return l.group === g; }); });
      groups.forEach(function (g) {
        var gk = rank + "." + g, gfold = folded || S.fold.has(gk);
        if (folded) {
          rows.push({ kind: "summary", key: gk, rank: rank, group: g, y: y, h: SUMMARY_H + 2, label: g });
          y += SUMMARY_H + 2;
          return;
        }
        rows.push({ kind: "group", key: gk, rank: rank, group: g, y: y, h: gfold ? GROUP_H + SUMMARY_H : GROUP_H, folded: gfold });
        y += gfold ? GROUP_H + SUMMARY_H : GROUP_H;
        if (gfold) { return; }
        lanes.forEach(function (l) {
          if (l.group !== g) { return; }
          var h = laneRowH(l);
          rows.push({ kind: "lane", key: l.key, rank: rank, group: g, lane: l, y: y, h: h, levels: Math.min(Math.max(l.depth, 1), MAX_ROWS) });
          y += h;
        });
      });
      if (folded || !tracks.length) { return; }
      // the rank's counter tracks (memory, the producer's counters) under its lanes: its top ones
      // (the server's order), the others behind a row that opens them (its key in S.fold: deep-linked)
      var ck = rank + ".counters", cfold = S.fold.has(ck), all = S.fold.has(rank + ".allcounters");
      var shown = all ? tracks : tracks.filter(function (c) { return c.top !== false; });
      rows.push({ kind: "group", key: ck, rank: rank, group: "counters", y: y, h: GROUP_H, folded: cfold, counters: true,
        shown: shown.length, total: tracks.length });
      y += GROUP_H;
      if (cfold) { return; }
      shown.forEach(function (c) {
        rows.push({ kind: "counter", key: c.key, rank: rank, group: "counters", track: c, y: y, h: COUNTER_H });
        y += COUNTER_H;
      });
      var top = tracks.filter(function (c) { return c.top !== false; }).length;
      if (top < tracks.length) {
        rows.push({ kind: "more", key: rank + ".allcounters", rank: rank, group: "counters", y: y, h: ROW_H + 4, open: all,
          hidden: tracks.length - top, total: tracks.length });
        y += ROW_H + 4;
      }
    });
    S.rows = rows; S.rowsH = y;
    var pins = [], py = 0;
    S.pin.forEach(function (key) {
      var l = S.meta.lanes.find(function (x) { return x.key === key; });
      if (l && S.groups.indexOf(l.group) >= 0) {
        var h = laneRowH(l);
        pins.push({ kind: "lane", pinned: true, key: key, rank: l.rank, group: l.group, lane: l, y: py, h: h, levels: Math.min(Math.max(l.depth, 1), MAX_ROWS) });
        py += h;
      } else if (/^\d+\.[a-z]+$/.test(key)) {
        var parts = key.split("."), r = Number(parts[0]);
        if (S.ranks.indexOf(r) >= 0 && S.groups.indexOf(parts[1]) >= 0 && summaryKeys(r, parts[1]).length) {
          pins.push({ kind: "summary", pinned: true, key: key, rank: r, group: parts[1], y: py, h: SUMMARY_H + 2, label: parts[1] });
          py += SUMMARY_H + 2;
        }
      }
    });
    S.pinRows = pins; S.pinH = pins.length ? py + 3 : 0;
    sizeCanvas();
  }

  // -------------------------------------------------------------------------------------------
  // DOM: canvas, scroll spacer, tooltip
  // -------------------------------------------------------------------------------------------

  function attach(box) {
    if (S.box === box && S.canvas && box.contains(S.canvas)) { return; }
    S.box = box;
    box.textContent = "";
    S.canvas = el("canvas", "tl-canvas");
    S.canvas.setAttribute("tabindex", "0");
    S.canvas.setAttribute("aria-label", "timeline");
    S.spacer = el("div", "tl-spacer");
    S.tip = el("div", "tl-tip");
    S.tip.hidden = true;
    box.appendChild(S.canvas);
    box.appendChild(S.spacer);
    document.body.appendChild(S.tip);
    S.ctx = S.canvas.getContext("2d");
    box.addEventListener("scroll", function () { invalidate(); }, { passive: true });
    S.canvas.addEventListener("wheel", onWheel, { passive: false });
    S.canvas.addEventListener("mousedown", onDown);
    S.canvas.addEventListener("mousemove", onHover);
    S.canvas.addEventListener("mouseleave", function () { S.mouse = null; S.tip.hidden = true; });
    S.canvas.addEventListener("dblclick", onDouble);
    if (window.ResizeObserver) { new ResizeObserver(function () { sizeCanvas(); invalidate(); }).observe(box); }
  }
  function sizeCanvas() {
    if (!S.box) { return; }
    var w = S.box.clientWidth, h = S.box.clientHeight, dpr = window.devicePixelRatio || 1;
    if (w !== S.width || h !== S.height || dpr !== S.dpr) {
      S.width = w; S.height = h; S.dpr = dpr;
      S.canvas.width = Math.round(w * dpr); S.canvas.height = Math.round(h * dpr);
      S.canvas.style.width = w + "px"; S.canvas.style.height = h + "px";
    }
    var total = AXIS_H + S.pinH + S.rowsH + 8;
    S.spacer.style.height = Math.max(0, total - h) + "px";
  }

  // -------------------------------------------------------------------------------------------
  // drawing
  // -------------------------------------------------------------------------------------------

  function invalidate() {
    if (S.frame === null && S.mounted) { S.frame = window.requestAnimationFrame(draw); }
  }
  function dataW() { return Math.max(10, S.width - LABEL_W); }
  function xOf(t) { return LABEL_W + (t - S.a) / (S.b - S.a) * dataW(); }
  function tOf(x) { return S.a + (x - LABEL_W) / dataW() * (S.b - S.a); }

  function occImage(t, color) {
    if (t.img) { return t.img; }
    var n = t.occ.length, c = document.createElement("canvas");
    c.width = n; c.height = 1;
    var g = c.getContext("2d"), im = g.createImageData(n, 1), d = im.data;
    var r = parseInt(color.slice(1, 3), 16), gg = parseInt(color.slice(3, 5), 16), b = parseInt(color.slice(5, 7), 16);
    for (var j = 0; j < n; j++) {
      var v = t.occ[j];
      d[4 * j] = r; d[4 * j + 1] = gg; d[4 * j + 2] = b;
      d[4 * j + 3] = v === 0 ? 0 : 40 + Math.round(v * 0.84);
    }
    g.putImageData(im, 0, 0);
    t.img = c;
    return c;
  }

  // the tiles that draw lane `key` at level z over the view: cached ones at z, else the nearest
  // cached level (coarser first), and the missing ones are asked for
  function tilesFor(key, rank, z, ask) {
    var off = offsetOf(rank), ra = S.a + off, rb = S.b + off, span = tileSpan(z), out = [], seen = new Set();
    var i0 = Math.floor(ra / span), i1 = Math.floor((rb - 1) / span);
    for (var i = i0; i <= i1; i++) {
      var t = getTile(key, z, i);
      if (t) { out.push(t); continue; }
      if (ask) { want(key, z, i); }
      var found = false;
      for (var k = 1; k <= 10 && !found; k++) {
        var ci = Math.floor(i / Math.pow(2, k)), ck = key + "|" + (z + k) + "|" + ci;
        var c = getTile(key, z + k, ci);
        if (c) { found = true; if (!seen.has(ck)) { seen.add(ck); out.push(c); } }
      }
      if (!found && z > 0) {
        var f0 = getTile(key, z - 1, 2 * i), f1 = getTile(key, z - 1, 2 * i + 1);
        if (f0 && f1) { out.push(f0, f1); found = true; }
      }
      if (!found) { S.stats.missing++; }
    }
    return out;
  }

  // call fn(tile, j, x, w, depth) for each slice of the lane drawn in the view (each once)
  function eachSlice(tilesList, rank, levels, fn) {
    var off = offsetOf(rank), a = S.a, scale = dataW() / (S.b - S.a), x0 = LABEL_W, xmax = S.width;
    for (var q = 0; q < tilesList.length; q++) {
      var t = tilesList[q], span = tileSpan(t.z), tStart = t.i * span, first = q === 0 || tilesList[q - 1].z !== t.z;
      for (var j = 0; j < t.n; j++) {
        var s = t.start[j], d = t.dur[j];
        if (!first && s < tStart) { continue; }  // drawn from the tile before
        var x = x0 + (s - off - a) * scale, w = d * scale;
        if (x + w < x0 || x > xmax) { continue; }
        fn(t, j, x, w, Math.min(t.depth[j], levels - 1));
      }
    }
  }

  function drawLane(g, row, y, z) {
    var tl = tilesFor(row.key, row.rank, z, true), color = GROUP_COLORS[row.group] || "#7f8c8d";
    var off = offsetOf(row.rank), scale = dataW() / (S.b - S.a);
    g.imageSmoothingEnabled = false;
    tl.forEach(function (t) {
      var span = tileSpan(t.z), x = LABEL_W + (t.i * span - off - S.a) * scale;
      g.drawImage(occImage(t, color), 0, 0, t.occ.length, 1, x, y + 1, span * scale, ROW_H - 2);
      S.stats.occupancy++;
    });
    if (row.kind !== "lane") { return; }
    g.font = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";
    g.textBaseline = "middle";
    var labels = S.stats.labels;
    eachSlice(tl, row.rank, row.levels, function (t, j, x, w, depth) {
      var name = t.names[t.name[j]], yy = y + depth * ROW_H, c = colorOf(name);
      S.stats.slices++;
      if (t.dur[j] === 0) {  // an instant: a small triangle
        g.fillStyle = c;
        g.beginPath(); g.moveTo(x, yy + 2); g.lineTo(x + 4, yy + ROW_H - 3); g.lineTo(x - 4, yy + ROW_H - 3); g.closePath(); g.fill();
        return;
      }
      var xa = Math.max(x, LABEL_W), xb = Math.min(x + Math.max(w, 1), S.width);
      g.fillStyle = c;
      g.fillRect(xa, yy + 1, Math.max(xb - xa, 1), ROW_H - 2);
      if (xb - xa > 28) {
        var room = Math.floor((xb - xa - 6) / 6.3);
        var text = name.length > room ? name.slice(0, Math.max(1, room - 1)) + "…" : name;
        g.fillStyle = DARK_TEXT[c] ? "#1d2733" : "#fff";
        g.fillText(text, xa + 3, yy + ROW_H / 2);
        S.stats.labelled++;
        if (labels.length < 5000) { labels.push(name); }
      }
    });
    var sel = S.sel;
    if (sel && (sel.lane === row.key || (sel.lane === null && sel.rank === row.rank && row.lane.members.indexOf(sel.collection_id) >= 0))) {
      eachSlice(tl, row.rank, row.levels, function (t, j, x, w, depth) {
        if (t.event[j] !== sel.event || row.lane.members[t.member[j]] !== sel.collection_id) { return; }
        if (sel.lane === null) { sel.lane = row.key; sel.member = t.member[j]; }
        g.strokeStyle = "#111"; g.lineWidth = 2;
        g.strokeRect(Math.max(x, LABEL_W) - 1, y + depth * ROW_H, Math.max(Math.min(w, S.width - x), 2) + 2, ROW_H);
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // counter tracks: asked for over the view (bounded buckets), drawn as a step line held between samples
  // -------------------------------------------------------------------------------------------

  function fmtValue(v, unit) {
    if (v == null) { return ""; }
    if (unit === "bytes") {
      var a = Math.abs(v);
      return a >= 1073741824 ? (v / 1073741824).toFixed(2) + " GiB" : a >= 1048576 ? (v / 1048576).toFixed(1) + " MiB" : (v / 1024).toFixed(1) + " KiB";
    }
    var t = Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toPrecision(3);
    return t + (unit ? " " + unit : "");
  }
  function counterRows() { return S.rows.filter(function (r) { return r.kind === "counter"; }); }
  function counterSig() {
    var keys = counterRows().map(function (r) { return r.key; });
    return keys.length ? [S.run, S.fp, S.clock, Math.round(S.a), Math.round(S.b), Math.round(dataW()), keys.join(",")].join("|") : null;
  }
  function wantCounters() {
    var sig = counterSig(), C = S.counters;
    if (!sig || sig === C.sig || C.busy) { return; }
    if (C.timer) { clearTimeout(C.timer); }
    C.timer = setTimeout(fetchCounters, 120);
  }
  function fetchCounters() {
    var C = S.counters;
    C.timer = null;
    var sig = counterSig();
    if (!sig || sig === C.sig) { return; }
    var keys = counterRows().map(function (r) { return r.key; }), a = S.a, b = S.b, parts = [], most = S.meta.limits.max_counters || 256;
    C.busy = true; C.sig = sig;
    for (var i = 0; i < keys.length; i += most) { parts.push(keys.slice(i, i + most)); }
    Promise.all(parts.map(function (part) {
      return fetch("/_timeline/counters", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ run: S.run, fp: S.fp, tracks: part, offsets: offsetsPayload(), a: a, b: b, n: Math.max(10, Math.round(dataW())) })
      }).then(function (r) {
        return r.json().then(function (j) { if (!r.ok) { throw new Error(j.error || r.statusText); } return j; });
      });
    })).then(function (answers) {
      var tracks = {};
      answers.forEach(function (j) { Object.keys(j.tracks).forEach(function (k) { tracks[k] = j.tracks[k]; }); });
      if (C.sig === sig) { C.data = { a: answers[0].a, b: answers[0].b, tracks: tracks, clock: S.clock, fp: S.fp }; }
    }).catch(function (e) {
      status(T("counters_error", { error: e.message }), true);
    }).then(function () { C.busy = false; invalidate(); });
  }
  function drawCounter(g, row, y) {
    var D = S.counters.data, c = row.track;
    if (!D || D.fp !== S.fp || D.clock !== S.clock || !D.tracks[row.key]) { return; }
    var d = D.tracks[row.key], lo = c.min, hi = c.max, top = y + 3, bottom = y + row.h - 3;
    if (hi <= lo) { hi = lo === 0 ? 1 : lo + Math.abs(lo) * 0.1; lo = Math.min(0, lo); }
    function yOf(v) { return bottom - (v - lo) / (hi - lo) * (bottom - top); }
    var end = Math.min(xOf(c.last - offsetOf(row.rank)), S.width), px = Math.max(xOf(c.first - offsetOf(row.rank)), LABEL_W);
    var prev = d.held, drawn = 0;
    g.fillStyle = "rgba(230, 126, 34, 0.28)";
    function hold(x0, x1, v) { if (v != null && x1 > x0) { g.fillRect(x0, yOf(v), x1 - x0, bottom - yOf(v)); } }
    for (var i = 0; i < d.t.length; i++) {
      var x = xOf(D.a + d.t[i]);
      hold(px, x, prev);
      g.fillStyle = "#e67e22";
      g.fillRect(x, yOf(d.hi[i]), Math.max(1, dataW() / Math.max(1, d.t.length * 4)), Math.max(1, yOf(d.lo[i]) - yOf(d.hi[i])));
      g.fillStyle = "rgba(230, 126, 34, 0.28)";
      prev = d.last[i]; px = x; drawn++;
    }
    hold(px, end, prev);
    S.stats.counterBuckets += drawn;
    g.fillStyle = "#8a4a12"; g.font = "10px system-ui, sans-serif"; g.textBaseline = "top";
    g.fillText(fmtValue(c.max, c.unit), LABEL_W + 3, y + 1);
  }
  function counterAt(row, mx) {
    var D = S.counters.data;
    if (!D || !D.tracks[row.key]) { return null; }
    var d = D.tracks[row.key], t = tOf(mx) - D.a, v = d.held, k = -1;
    for (var i = 0; i < d.t.length && d.t[i] <= t; i++) { v = d.last[i]; k = i; }
    return { value: v, lo: k >= 0 ? d.lo[k] : null, hi: k >= 0 ? d.hi[k] : null };
  }

  // -------------------------------------------------------------------------------------------
  // flow arrows: launch → device task, send → recv, a collective's members; asked for once the view
  // is zoomed in to named slices, at most the server's bound
  // -------------------------------------------------------------------------------------------

  var FLOW_KINDS = ["launch", "p2p", "collective"];
  var FLOW_COLORS = { launch: "#6c5ce7", p2p: "#d35400", collective: "#2c3e50" };
  var FLOW_MAX_SLICES = 20000;
  function flowSig() {
    var F = S.flows;
    if (!F.kinds.length || !S.meta || !S.stats.slices || S.stats.slices > FLOW_MAX_SLICES) { return null; }
    return [S.run, S.fp, S.clock, Math.round(S.a), Math.round(S.b), S.ranks.join(","), F.kinds.join(",")].join("|");
  }
  function wantFlows() {
    var F = S.flows, sig = flowSig();
    var note = !F.kinds.length ? "" : !sig ? T("flows_zoom") : F.note;
    if (note !== F.shown) { F.shown = note; var n = document.getElementById("tl-flows-note"); if (n) { n.textContent = note; } }
    if (!sig || sig === F.sig || F.busy) { return; }
    if (F.timer) { clearTimeout(F.timer); }
    F.timer = setTimeout(fetchFlows, 150);
  }
  function fetchFlows() {
    var F = S.flows;
    F.timer = null;
    var sig = flowSig();
    if (!sig || sig === F.sig) { return; }
    F.busy = true; F.sig = sig;
    fetch("/_timeline/flows", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ run: S.run, fp: S.fp, ranks: S.ranks, kinds: F.kinds, offsets: offsetsPayload(), a: S.a, b: S.b })
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) { throw new Error(j.error || r.statusText); } return j; });
    }).then(function (j) {
      if (F.sig !== sig) { return; }
      F.data = { arrows: j.arrows, more: j.more, clock: S.clock, fp: S.fp };
      F.note = T("arrows", { n: j.arrows.length.toLocaleString() }) + (j.more ? T("arrows_more", { n: j.more.toLocaleString() }) : "");
    }).catch(function (e) {
      F.note = T("flows_error", { error: e.message });
    }).then(function () { F.busy = false; F.shown = null; invalidate(); });
  }
  function flowY(end, top) {
    // the middle of the end's slice on its lane (its nesting level, the lane's first when unknown);
    // the lane's row when it is folded, its rank's row when the lane is not shown
    var row = S.rows.find(function (r) { return r.key === end[0]; });
    if (row && row.kind === "lane") { return top + row.y + Math.min(end[3] || 0, row.levels - 1) * ROW_H + ROW_H / 2; }
    if (row) { return top + row.y + row.h / 2; }
    var rr = S.rows.find(function (r) { return r.kind === "rank" && r.rank === end[1]; });
    return rr ? top + rr.y + rr.h / 2 : null;
  }
  function drawFlows(g, top, bottom) {
    var F = S.flows, D = F.data;
    S.stats.arrows = 0;
    if (!F.kinds.length || !D || D.fp !== S.fp || D.clock !== S.clock || !flowSig()) { return; }
    g.save();
    g.beginPath(); g.rect(LABEL_W, top, S.width - LABEL_W, bottom - top); g.clip();
    D.arrows.forEach(function (f) {
      if (F.kinds.indexOf(f.kind) < 0) { return; }
      var y0 = flowY(f.from, top), y1 = flowY(f.to, top);
      if (y0 === null || y1 === null) { return; }
      var x0 = xOf(f.from[2]), x1 = xOf(f.to[2]), c = FLOW_COLORS[f.kind] || "#333";
      g.strokeStyle = c; g.fillStyle = c; g.lineWidth = 1.4;
      g.beginPath(); g.moveTo(x0, y0);
      var mx = (x0 + x1) / 2, bend = Math.abs(y1 - y0) < 4 ? -14 : 0;
      g.quadraticCurveTo(mx, (y0 + y1) / 2 + bend, x1, y1); g.stroke();
      var ang = Math.atan2(y1 - ((y0 + y1) / 2 + bend), x1 - mx);
      g.beginPath(); g.moveTo(x1, y1);
      g.lineTo(x1 - 7 * Math.cos(ang - 0.4), y1 - 7 * Math.sin(ang - 0.4));
      g.lineTo(x1 - 7 * Math.cos(ang + 0.4), y1 - 7 * Math.sin(ang + 0.4)); g.closePath(); g.fill();
      g.beginPath(); g.arc(x0, y0, 2.2, 0, 2 * Math.PI); g.fill();
      S.stats.arrows++;
      if (S.stats.arrowEnds.length < 400) { S.stats.arrowEnds.push({ kind: f.kind, x0: x0, y0: y0, x1: x1, y1: y1, label: f.label }); }
    });
    g.restore();
  }

  function drawLabel(g, row, y) {
    g.save();
    g.beginPath(); g.rect(0, y, LABEL_W, row.h); g.clip();
    g.fillStyle = row.kind === "rank" ? "#e9eef4" : "#f7f9fb";
    g.fillRect(0, y, LABEL_W, row.h);
    g.textBaseline = "middle";
    var mid = y + Math.min(row.h, row.kind === "group" ? GROUP_H : ROW_H) / 2;
    if (row.kind === "rank") {
      g.fillStyle = "#1d2733"; g.font = "600 12px system-ui, sans-serif";
      g.fillText((row.folded ? "▸ " : "▾ ") + T("rank", { rank: row.rank }), 6, y + RANK_H / 2);
      g.fillStyle = "#667384"; g.font = "11px system-ui, sans-serif";
      g.fillText(clockText(row.rank), 80, y + RANK_H / 2);
      S.stats.headers.push(T("rank", { rank: row.rank }) + " " + clockText(row.rank));
    } else if (row.kind === "group") {
      g.fillStyle = GROUP_COLORS[row.group] || "#555"; g.font = "600 11px system-ui, sans-serif";
      var head = T("grp." + row.group) + (row.counters && row.shown < row.total ? " · " + T("counters_shown", { shown: row.shown, total: row.total }) : "");
      g.fillText((row.folded ? "▸ " : "▾ ") + head, 14, y + GROUP_H / 2);
      if (row.counters) { S.stats.headers.push(head); }
    } else if (row.kind === "more") {
      g.fillStyle = "#8a4a12"; g.font = "11px system-ui, sans-serif";
      var more = row.open ? T("counters_fewer", { n: row.hidden }) : T("counters_more", { n: row.hidden, total: row.total });
      g.fillText(more, 26, y + row.h / 2);
      S.stats.headers.push(more);
    } else {
      g.fillStyle = "#1d2733"; g.font = "11px system-ui, sans-serif";
      var text = row.kind === "summary" ? T("folded", { group: T("grp." + row.group) }) : row.kind === "counter" ? row.track.label + (row.track.unit ? " [" + row.track.unit + "]" : "") : laneLabel(row.lane);
      if (row.pinned) { text = "r" + row.rank + " " + text; }
      var room = Math.floor((LABEL_W - 28 - PIN_W) / 6.2);
      g.fillText(text.length > room ? text.slice(0, room - 1) + "…" : text, row.kind === "summary" ? 22 : 26, mid);
      if (row.kind === "counter") { S.stats.counterLabels.push(text); g.restore(); g.fillStyle = "#dde3ea"; g.fillRect(0, y + row.h - 1, S.width, 1); return; }
      var pinned = S.pin.indexOf(row.key) >= 0;
      g.fillStyle = pinned ? "#2f6fb0" : "#c5ced8";
      g.fillText(pinned ? "●" : "○", LABEL_W - PIN_W, mid);
    }
    g.restore();
    g.fillStyle = "#dde3ea";
    g.fillRect(0, y + row.h - 1, S.width, 1);
  }

  function drawRows(g, rows, top, bottom, shift, z) {
    rows.forEach(function (row) {
      var y = top + row.y - shift;
      if (y + row.h < top || y > bottom) { return; }
      g.save();
      g.beginPath(); g.rect(LABEL_W, Math.max(y, top), S.width - LABEL_W, Math.min(y + row.h, bottom) - Math.max(y, top)); g.clip();
      if (row.kind === "lane" || row.kind === "summary") { drawLane(g, row, y, z); }
      if (row.kind === "counter") { drawCounter(g, row, y); }
      if (row.kind === "group" && row.folded && !row.counters) { drawLane(g, { kind: "summary", key: row.key, rank: row.rank, group: row.group }, y + GROUP_H - 2, z); }
      drawHighlights(g, row, y);
      g.restore();
      g.save();
      g.beginPath(); g.rect(0, top, S.width, bottom - top); g.clip();
      drawLabel(g, row, y);
      g.restore();
    });
  }

  function drawHighlights(g, row, y) {
    S.hl.forEach(function (h) {
      if (h[0] !== row.rank) { return; }
      var off = offsetOf(h[0]), a = relOf(h[1]) - off, b = relOf(h[2]) - off;
      var xa = xOf(a), xb = Math.max(xOf(b), xa + 2);
      if (xb < LABEL_W || xa > S.width) { return; }
      g.fillStyle = "rgba(255, 196, 0, 0.22)";
      g.fillRect(xa, y, xb - xa, row.h - 1);
      g.strokeStyle = "rgba(214, 140, 0, 0.9)"; g.lineWidth = 1;
      g.strokeRect(xa + 0.5, y + 0.5, xb - xa - 1, row.h - 2);
    });
  }

  function drawAxis(g) {
    g.fillStyle = "#fff";
    g.fillRect(0, 0, S.width, AXIS_H);
    var span = S.b - S.a, step = niceStep(span, dataW());
    g.strokeStyle = "#e6ebf1"; g.fillStyle = "#445"; g.font = "11px system-ui, sans-serif"; g.textBaseline = "middle";
    var first = Math.ceil(S.a / step) * step;
    for (var t = first; t <= S.b; t += step) {
      var x = Math.round(xOf(t)) + 0.5;
      g.fillRect(x, AXIS_H - 6, 1, 6);
      g.fillText(fmtAt(t, step), x + 3, AXIS_H / 2 - 2);
    }
    g.fillStyle = "#1d2733"; g.font = "600 11px system-ui, sans-serif";
    g.fillText(S.clock === "aligned" ? T("aligned_clocks") : T("raw_clocks"), 6, 10);
    g.fillStyle = "#667384"; g.font = "11px system-ui, sans-serif";
    g.fillText(T("window", { span: fmtDur(span) }), 6, 22);
    g.fillStyle = "#c5ced8"; g.fillRect(0, AXIS_H - 1, S.width, 1);
  }

  function drawGrid(g, top) {
    var step = niceStep(S.b - S.a, dataW());
    g.fillStyle = "rgba(0, 0, 0, 0.05)";
    for (var t = Math.ceil(S.a / step) * step; t <= S.b; t += step) { g.fillRect(Math.round(xOf(t)), top, 1, S.height - top); }
  }

  function drawMeasure(g) {
    if (!S.measure) { return; }
    var xa = xOf(Math.min(S.measure.a, S.measure.b)), xb = xOf(Math.max(S.measure.a, S.measure.b));
    g.fillStyle = "rgba(47, 111, 176, 0.12)";
    g.fillRect(xa, AXIS_H, xb - xa, S.height - AXIS_H);
    g.fillStyle = "#2f6fb0";
    g.fillRect(xa, 0, 1, S.height); g.fillRect(xb, 0, 1, S.height);
    var label = fmtDur(Math.abs(S.measure.b - S.measure.a));
    g.font = "600 12px system-ui, sans-serif";
    var w = g.measureText(label).width + 10, xm = Math.max(LABEL_W, Math.min((xa + xb) / 2 - w / 2, S.width - w));
    g.fillStyle = "#2f6fb0"; g.fillRect(xm, 3, w, 18);
    g.fillStyle = "#fff"; g.textBaseline = "middle"; g.fillText(label, xm + 5, 12);
  }

  function draw() {
    S.frame = null;
    if (!S.mounted || !S.meta || !S.box || !document.body.contains(S.box)) { return; }
    var t0 = performance.now();
    sizeCanvas();
    var g = S.ctx;
    g.setTransform(S.dpr, 0, 0, S.dpr, 0, 0);
    g.clearRect(0, 0, S.width, S.height);
    S.stats.slices = 0; S.stats.labelled = 0; S.stats.occupancy = 0; S.stats.missing = 0; S.stats.labels = [];
    S.stats.headers = []; S.stats.counterBuckets = 0; S.stats.counterLabels = []; S.stats.arrowEnds = [];
    var z = levelFor((S.b - S.a) / dataW());
    S.stats.level = z;
    var pinTop = AXIS_H, top = AXIS_H + S.pinH;
    drawGrid(g, AXIS_H);
    drawRows(g, S.rows, top, S.height, S.box.scrollTop, z);
    drawFlows(g, top - S.box.scrollTop, S.height);
    if (S.pinRows.length) {
      g.fillStyle = "#fff"; g.fillRect(0, pinTop, S.width, S.pinH);
      drawRows(g, S.pinRows, pinTop, top, 0, z);
      g.fillStyle = "#889"; g.fillRect(0, top - 2, S.width, 2);
    }
    drawAxis(g);
    drawMeasure(g);
    g.fillStyle = "#c5ced8"; g.fillRect(LABEL_W - 1, AXIS_H, 1, S.height - AXIS_H);
    fetchWanted();
    wantCounters();
    wantFlows();
    var ms = performance.now() - t0;
    S.stats.drawMs = ms;
    if (S.inputAt !== null) { S.stats.inputToDrawMs = performance.now() - S.inputAt; S.inputAt = null; }
    S.seq++;
    publish();
    if (S.autoSelect && !pending()) { autoSelect(); }
  }

  function pending() { return S.want.length + S.inflight.size; }

  function publish() {
    var b = S.box;
    if (!b) { return; }
    var p = pending();
    b.dataset.seq = String(S.seq);
    b.dataset.pending = String(p);
    b.dataset.ready = p === 0 && S.stats.missing === 0 ? "1" : "0";
    b.dataset.start = String(Math.round(S.a));
    b.dataset.end = String(Math.round(S.b));
    b.dataset.slices = String(S.stats.slices);
    b.dataset.labelled = String(S.stats.labelled);
    b.dataset.level = String(S.stats.level);
    b.dataset.clock = S.clock;
    b.dataset.run = S.run || "";
    b.dataset.ranks = formatRanks(S.ranks);
    var st = document.getElementById("tl-status-text");
    if (st) {
      st.textContent = (S.stats.slices ? T("slices_drawn", { n: S.stats.slices.toLocaleString() }) : T("occupancy")) +
        T("window", { span: S.b - S.a >= 1e6 ? ((S.b - S.a) / 1e6).toFixed(3) + " ms" : fmtDur(S.b - S.a) }) +
        T("bucket", { size: fmtDur(Math.pow(2, S.stats.level)) }) + (p ? T("loading", { n: p }) : "");
      st.dataset.mode = S.stats.slices ? "slices" : "occupancy";
    }
  }

  function status(text, bad) {
    var n = document.getElementById("tl-status-note");
    if (n) { n.textContent = text || ""; n.className = bad ? "tl-note bad" : "tl-note"; }
  }

  // -------------------------------------------------------------------------------------------
  // hit testing, details
  // -------------------------------------------------------------------------------------------

  function rowAt(my) {
    var top = AXIS_H + S.pinH;
    if (my < AXIS_H) { return null; }
    var list = my < top ? S.pinRows : S.rows, base = my < top ? AXIS_H : top - S.box.scrollTop;
    for (var k = 0; k < list.length; k++) {
      var r = list[k], y = base + r.y;
      if (my >= y && my < y + r.h) { return { row: r, y: y }; }
    }
    return null;
  }
  function sliceAt(mx, my) {
    var hit = rowAt(my);
    if (!hit || hit.row.kind !== "lane" || mx < LABEL_W) { return null; }
    var row = hit.row, depth = Math.floor((my - hit.y) / ROW_H), z = levelFor((S.b - S.a) / dataW());
    var best = null;
    eachSlice(tilesFor(row.key, row.rank, z, false), row.rank, row.levels, function (t, j, x, w, d) {
      if (d !== depth) { return; }
      var pad = t.dur[j] === 0 ? 5 : 1;
      if (mx >= x - pad && mx <= x + Math.max(w, 1) + pad && (!best || t.dur[j] < best.dur)) {
        best = { tile: t, j: j, dur: t.dur[j] };
      }
    });
    if (!best) { return null; }
    var t = best.tile, j = best.j;
    return {
      lane: row.key, rank: row.rank, member: t.member[j], collection_id: row.lane.members[t.member[j]],
      event: t.event[j], name: t.names[t.name[j]], start: t.start[j], dur: t.dur[j], depth: t.depth[j]
    };
  }
  function select(hit, fromUser) {
    S.sel = hit;
    S.autoSelect = false;
    invalidate();
    if (hit) {
      setProps("tl-selected", { data: { run: S.run, rank: hit.rank, collection_id: hit.collection_id, event: hit.event,
        lane: hit.lane, origin: S.origin, offset: offsetOf(hit.rank) } });
    }
    if (fromUser !== false) { replaceUrl(); }
  }
  function autoSelect() {
    // a link with a highlighted call: select the slice that matches it best once the tiles of its
    // rank's lanes are in (asked for even when the lane is out of view), and scroll to it
    if (!S.hl.length || S.sel) { S.autoSelect = false; return; }
    var h = S.hl[0], a = relOf(h[1]), b = relOf(h[2]), best = null, z = levelFor((S.b - S.a) / dataW());
    var lanes = S.rows.filter(function (row) { return row.kind === "lane" && row.rank === h[0]; });
    var span = tileSpan(z), off = offsetOf(h[0]), i0 = Math.floor((S.a + off) / span), i1 = Math.floor((S.b + off - 1) / span);
    var missing = 0;
    lanes.forEach(function (row) {
      for (var i = i0; i <= i1; i++) { if (!getTile(row.key, z, i)) { want(row.key, z, i); missing++; } }
    });
    if (missing) { fetchWanted(); return; }  // tried again after the next frame with them
    S.autoSelect = false;
    lanes.forEach(function (row) {
      eachSlice(tilesFor(row.key, row.rank, z, false), row.rank, row.levels, function (t, j) {
        var err = Math.abs(t.start[j] - a) + Math.abs(t.start[j] + t.dur[j] - b);
        if (err <= 4000 && (!best || err < best.err)) {
          best = { err: err, row: row, hit: { lane: row.key, rank: row.rank, member: t.member[j], collection_id: row.lane.members[t.member[j]],
            event: t.event[j], name: t.names[t.name[j]], start: t.start[j], dur: t.dur[j], depth: t.depth[j] } };
        }
      });
    });
    if (!best) { return; }
    var viewTop = S.box.scrollTop, viewH = S.height - AXIS_H - S.pinH;
    if (best.row.y < viewTop || best.row.y + ROW_H > viewTop + viewH) { S.box.scrollTop = Math.max(0, best.row.y - viewH / 3); }
    select(best.hit, false);
    replaceUrl();
  }

  // -------------------------------------------------------------------------------------------
  // interaction
  // -------------------------------------------------------------------------------------------

  function clampSpan(a, b) {
    var span = Math.max(b - a, MIN_SPAN), w = eventsWindow(), max = Math.max((w[1] - w[0]) * 20, 1e6);
    if (span > max) { var mid = (a + b) / 2; return [mid - max / 2, mid + max / 2]; }
    return [a, a + span];
  }
  function setWindow(a, b, how) {
    var w = clampSpan(a, b);
    S.a = w[0]; S.b = w[1];
    if (how !== "keep") { S.mode = "window"; S.step = null; }
    invalidate();
  }
  function zoomAt(x, factor) {
    var t = tOf(x), a = t - (t - S.a) * factor, b = t + (S.b - t) * factor;
    setWindow(a, b);
  }
  function onWheel(ev) {
    ev.preventDefault();
    S.inputAt = performance.now();
    var unit = ev.deltaMode === 1 ? 33 : ev.deltaMode === 2 ? 400 : 1;
    var dy = ev.deltaY * unit, dx = ev.deltaX * unit;
    if (ev.shiftKey) { S.box.scrollTop += dy || dx; invalidate(); return; }
    if (Math.abs(dx) > Math.abs(dy)) {
      var shift = dx / dataW() * (S.b - S.a);
      setWindow(S.a + shift, S.b + shift);
    } else {
      zoomAt(Math.max(ev.offsetX, LABEL_W), Math.exp(dy * 0.0018));
    }
    settleCommit();
  }
  function onDown(ev) {
    if (ev.button !== 0) { return; }
    S.canvas.focus({ preventScroll: true });
    var mx = ev.offsetX, my = ev.offsetY;
    if (mx < LABEL_W) { clickLabel(mx, my); return; }
    var measuring = ev.shiftKey || my < AXIS_H;
    S.drag = { x0: ev.clientX, y0: ev.clientY, mx: mx, my: my, a: S.a, b: S.b, scroll: S.box.scrollTop, moved: false, measure: measuring };
    if (measuring) { S.measure = { a: tOf(mx), b: tOf(mx) }; }
    ev.preventDefault();
  }
  function onMove(ev) {
    var d = S.drag;
    if (!d) { return; }
    var dx = ev.clientX - d.x0, dy = ev.clientY - d.y0;
    if (Math.abs(dx) + Math.abs(dy) > 3) { d.moved = true; }
    if (!d.moved) { return; }
    S.inputAt = performance.now();
    if (d.measure) {
      S.measure.b = tOf(d.mx + dx);
      invalidate();
      return;
    }
    var shift = -dx / dataW() * (d.b - d.a);
    S.a = d.a + shift; S.b = d.b + shift; S.mode = "window"; S.step = null;
    S.box.scrollTop = d.scroll - dy;
    invalidate();
  }
  function onUp(ev) {
    var d = S.drag;
    if (!d) { return; }
    S.drag = null;
    if (d.measure) {
      if (!d.moved) { S.measure = null; invalidate(); return; }
      measured();
      return;
    }
    if (d.moved) { commit(); return; }
    select(sliceAt(d.mx, d.my));
  }
  function onDouble(ev) {
    if (ev.offsetX < LABEL_W) { return; }
    S.inputAt = performance.now();
    zoomAt(ev.offsetX, 0.25);
    commit();
  }
  function onHover(ev) {
    S.mouse = { x: ev.offsetX, y: ev.offsetY };
    if (S.drag) { return; }
    var hit = sliceAt(ev.offsetX, ev.offsetY), tip = S.tip;
    var label = ev.offsetX < LABEL_W ? rowAt(ev.offsetY) : null;
    S.canvas.style.cursor = label && label.row ? "pointer" : hit ? "pointer" : "grab";
    var over = !hit && ev.offsetX >= LABEL_W ? rowAt(ev.offsetY) : null, cv = over && over.row.kind === "counter" ? counterAt(over.row, ev.offsetX) : null;
    if (!hit && !(cv && cv.value != null)) { tip.hidden = true; return; }
    tip.textContent = "";
    if (hit) {
      tip.appendChild(el("div", "tl-tip-name", hit.name));
      tip.appendChild(el("div", null, T("starts", { dur: fmtDur(hit.dur), at: fmtAt(hit.start - offsetOf(hit.rank), 1e3) })));
      tip.appendChild(el("div", "muted", T("rank", { rank: hit.rank }) + " · " + laneLabel(S.meta.lanes.find(function (l) { return l.key === hit.lane; }))));
    } else {
      var c = over.row.track;
      tip.appendChild(el("div", "tl-tip-name", c.label));
      tip.appendChild(el("div", null, fmtValue(cv.value, c.unit) + (cv.hi != null && cv.hi !== cv.lo ? " (" + fmtValue(cv.lo, c.unit) + " – " + fmtValue(cv.hi, c.unit) + " here)" : "") + " at " + fmtAt(tOf(ev.offsetX), 1e3)));
      tip.appendChild(el("div", "muted", T("rank", { rank: over.row.rank }) + " · " + T("counter")));
    }
    tip.hidden = false;
    var r = S.canvas.getBoundingClientRect();
    tip.style.left = Math.min(r.left + window.scrollX + ev.offsetX + 14, window.scrollX + window.innerWidth - 340) + "px";
    tip.style.top = (r.top + window.scrollY + ev.offsetY + 16) + "px";
  }
  function clickLabel(mx, my) {
    var hit = rowAt(my);
    if (!hit) { return; }
    var row = hit.row;
    if ((row.kind === "lane" || row.kind === "summary") && mx >= LABEL_W - PIN_W - 4) { togglePin(row.key); return; }
    if (row.kind === "rank") { toggleFold(String(row.rank)); }
    if (row.kind === "group" || row.kind === "more") { toggleFold(row.key); }
  }
  function toggleFold(key) {
    if (S.fold.has(key)) { S.fold.delete(key); } else { S.fold.add(key); }
    layout(); invalidate(); commit();
  }
  function togglePin(key) {
    var i = S.pin.indexOf(key);
    if (i >= 0) { S.pin.splice(i, 1); } else { S.pin.push(key); }
    layout(); invalidate(); commit();
  }

  function typing(ev) {
    var t = ev.target;
    if (!t || !t.tagName) { return false; }
    var tag = t.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || t.isContentEditable;
  }
  function onKeyDown(ev) {
    if (!S.mounted || !S.box || !document.body.contains(S.box) || typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var k = ev.key.toLowerCase();
    if (k === "escape") { S.measure = null; showRange(null); invalidate(); return; }
    if ("wasd".indexOf(k) < 0 || k.length !== 1) { return; }
    ev.preventDefault();
    if (!S.keys.has(k)) { S.keys.add(k); S.inputAt = performance.now(); if (S.animT === null) { S.animT = performance.now(); window.requestAnimationFrame(animate); } }
  }
  function onKeyUp(ev) {
    var k = (ev.key || "").toLowerCase();
    if (S.keys.delete(k) && !S.keys.size) { settleCommit(); }
  }
  function animate(now) {
    if (!S.keys.size) { S.animT = null; return; }
    var dt = Math.min(0.05, (now - S.animT) / 1000);
    S.animT = now;
    var span = S.b - S.a, cx = S.mouse && S.mouse.x >= LABEL_W ? S.mouse.x : LABEL_W + dataW() / 2;
    if (S.keys.has("w")) { zoomAt(cx, Math.exp(-3.2 * dt)); }
    if (S.keys.has("s")) { zoomAt(cx, Math.exp(3.2 * dt)); }
    if (S.keys.has("a")) { setWindow(S.a - span * 1.3 * dt, S.b - span * 1.3 * dt); }
    if (S.keys.has("d")) { setWindow(S.a + span * 1.3 * dt, S.b + span * 1.3 * dt); }
    window.requestAnimationFrame(animate);
  }

  // -------------------------------------------------------------------------------------------
  // measure a range: its length, and what it holds
  // -------------------------------------------------------------------------------------------

  function viewLaneKeys() {
    var keys = [];
    S.rows.forEach(function (r) {
      if (r.kind === "lane") { keys.push(r.key); }
      if (r.kind === "summary" || (r.kind === "group" && r.folded)) { keys = keys.concat(summaryKeys(r.rank, r.group)); }
    });
    return keys;
  }
  function offsetsPayload() {
    var o = {};
    S.ranks.forEach(function (r) { o[r] = offsetOf(r); });
    return o;
  }
  function measured() {
    invalidate();
    var a = Math.min(S.measure.a, S.measure.b), b = Math.max(S.measure.a, S.measure.b);
    showRange({ a: a, b: b, loading: true });
    fetch("/_timeline/range", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ run: S.run, fp: S.fp, lanes: viewLaneKeys(), offsets: offsetsPayload(), a: a, b: b })
    }).then(function (r) { return r.json(); }).then(function (j) {
      if (S.measure) { showRange({ a: a, b: b, result: j }); }
    });
  }
  function showRange(r) {
    var box = document.getElementById("tl-range");
    if (!box) { return; }
    box.textContent = "";
    box.hidden = !r;
    if (!r) { return; }
    box.appendChild(el("h3", null, T("range", { span: fmtDur(r.b - r.a) })));
    box.appendChild(el("div", "note", T("range_hint", { a: fmtAt(r.a, 1e3), b: fmtAt(r.b, 1e3) })));
    if (r.loading) { box.appendChild(el("div", "note", T("counting"))); return; }
    var res = r.result || {};
    if (res.error) { box.appendChild(el("div", "msg msg-warning", res.error)); return; }
    box.appendChild(el("div", "note", T("in_range", { n: (res.slices || 0).toLocaleString() }) + (res.cut ? T("longest_counted") : "")));
    var tbl = el("table", "tbl"), head = el("tr");
    ["col_name", "col_count", "col_time", "col_longest"].forEach(function (h) { head.appendChild(el("th", null, T(h))); });
    tbl.appendChild(head);
    (res.names || []).forEach(function (n) {
      var tr = el("tr");
      tr.appendChild(el("td", null, n.name));
      tr.appendChild(el("td", null, n.count.toLocaleString()));
      tr.appendChild(el("td", null, fmtDur(n.total)));
      tr.appendChild(el("td", null, fmtDur(n.longest)));
      tbl.appendChild(tr);
    });
    tbl.id = "tl-range-table";
    box.appendChild(tbl);
  }

  // -------------------------------------------------------------------------------------------
  // search
  // -------------------------------------------------------------------------------------------

  function searchStep(dir) {
    var input = document.getElementById("tl-search");
    var q = input ? input.value.trim() : "";
    if (!q || !S.meta) { return; }
    if (q !== S.search.q) { S.search = { q: q, hit: null, matches: null, busy: false }; }
    var hit = S.search.hit;
    var t = hit ? hit.start - offsetOf(hit.rank) : (dir === "next" ? S.a : S.b);
    var body = { run: S.run, fp: S.fp, lanes: viewLaneKeys(), offsets: offsetsPayload(), q: q, dir: dir, t: t,
      from: hit ? { lane: hit.lane, event: hit.event } : null };
    var out = document.getElementById("tl-search-count");
    if (out) { out.textContent = T("searching"); }
    fetch("/_timeline/search", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
      .then(function (r) { return r.json(); }).then(function (j) {
        if (j.error) { if (out) { out.textContent = j.error; } return; }
        S.search.matches = j.matches;
        if (!j.hit) { if (out) { out.textContent = j.matches ? T(dir === "next" ? "none_after" : "none_before", { n: j.matches.toLocaleString() }) : T("no_match"); } return; }
        var h = j.hit;
        h.member = S.meta.lanes.find(function (l) { return l.key === h.lane; }).members.indexOf(h.collection_id);
        S.search.hit = h;
        if (out) { out.textContent = T("matches", { n: j.matches.toLocaleString() }); }
        reveal(h);
        select(h, false);
        commit();
      });
  }
  function reveal(h) {
    // keep the zoom when the hit fits, else zoom so that it fills a third of the view; unfold and scroll to its lane
    // the hit at least 40 px wide (so it is drawn with its name), at most 80 % of the view
    var start = h.start - offsetOf(h.rank), end = start + h.dur, span = S.b - S.a;
    if (h.dur > span * 0.8) { span = h.dur * 1.25; }
    if (h.dur / span * dataW() < 40) { span = Math.max(h.dur * dataW() / 40, 20000); }
    var mid = (start + end) / 2;
    setWindow(mid - span / 2, mid + span / 2);
    var lane = S.meta.lanes.find(function (l) { return l.key === h.lane; });
    if (lane && S.groups.indexOf(lane.group) < 0) { S.groups.push(lane.group); syncGroups(); }
    var changed = false;
    [String(h.rank), h.rank + "." + (lane ? lane.group : "")].forEach(function (k) { if (S.fold.has(k)) { S.fold.delete(k); changed = true; } });
    if (changed || lane) { layout(); }
    var row = S.rows.find(function (r) { return r.key === h.lane; });
    if (row) {
      var viewTop = S.box.scrollTop, viewH = S.height - AXIS_H - S.pinH;
      if (row.y < viewTop || row.y + row.h > viewTop + viewH) { S.box.scrollTop = Math.max(0, row.y - viewH / 3); }
    }
    invalidate();
  }

  // -------------------------------------------------------------------------------------------
  // the view in the address: every change is a history entry, Back / Forward walk them
  // -------------------------------------------------------------------------------------------

  function enc(v) { return encodeURIComponent(v).replace(/%2C/gi, ",").replace(/%3A/gi, ":"); }
  function defaultRanks() { return S.allRanks.slice(0, 8); }
  function urlNow() {
    var q = [["run", S.run]];
    if (!sameList(S.ranks, defaultRanks())) { q.push(["ranks", formatRanks(S.ranks)]); }
    if (S.mode === "step" && S.step !== null) { q.push(["step", S.step]); }
    else if (S.mode === "window") { q.push(["start_ns", absOf(S.a)], ["end_ns", absOf(S.b)]); }
    if (!sameList(S.groups.slice().sort(), DEFAULT_GROUPS.slice().sort())) { q.push(["groups", GROUPS.filter(function (g) { return S.groups.indexOf(g) >= 0; }).join(",")]); }
    if (S.clock === "raw") { q.push(["clock", "raw"]); }
    if (S.flows.kinds.length) { q.push(["flows", S.flows.kinds.join(",")]); }
    var fold = Array.from(S.fold).sort(), dflt = S.defaultFold.slice().sort();
    if (!sameList(fold, dflt)) { q.push(["fold", fold.length ? fold.join(",") : "none"]); }
    if (S.pin.length) { q.push(["pin", S.pin.join(",")]); }
    if (S.hl.length) { q.push(["hl", S.hl.map(function (h) { return h.join(":"); }).join(",")]); }
    if (S.sel) { q.push(["sel", S.sel.rank + ":" + S.sel.collection_id + ":" + S.sel.event]); }
    if (S.lang) { q.push(["lang", S.lang]); }
    return "/timeline?" + q.map(function (p) { return p[0] + "=" + enc(p[1]); }).join("&");
  }
  function commit() {
    if (S.commitTimer) { clearTimeout(S.commitTimer); S.commitTimer = null; }
    if (!S.mounted || !S.meta) { return; }
    var url = urlNow(), here = location.pathname + location.search;
    if (url !== here) { history.pushState({ rankscopeTimeline: true }, "", url); }
    setProps("view-url", { data: url });
  }
  function replaceUrl() {
    if (!S.mounted || !S.meta) { return; }
    var url = urlNow(), here = location.pathname + location.search;
    if (url !== here) { history.replaceState(history.state, "", url); }
    setProps("view-url", { data: url });
  }
  function settleCommit() {
    if (S.commitTimer) { clearTimeout(S.commitTimer); }
    S.commitTimer = setTimeout(commit, SETTLE_MS);
  }

  function parseRanksText(t) {
    if (!t) { return null; }
    if (t === "all") { return "all"; }
    return t;
  }
  function cfgFromUrl() {
    var q = new URLSearchParams(location.search), hl = [];
    (q.get("hl") || "").split(",").forEach(function (x) {
      var p = x.split(":");
      if (p.length === 3 && /^\d+$/.test(p[0]) && /^-?\d+$/.test(p[1]) && /^-?\d+$/.test(p[2])) { hl.push([Number(p[0]), p[1], p[2]]); }
    });
    var sel = null, sp = (q.get("sel") || "").split(":");
    if (sp.length === 3 && /^\d+$/.test(sp[0]) && /^\d+$/.test(sp[2])) { sel = { rank: Number(sp[0]), collection_id: sp[1], event: Number(sp[2]) }; }
    var fold = q.get("fold");
    return {
      run: q.get("run") || S.run, ranks: parseRanksText(q.get("ranks")),
      start_ns: q.get("start_ns"), end_ns: q.get("end_ns"), step: q.get("step") !== null ? Number(q.get("step")) : null,
      groups: q.get("groups") ? q.get("groups").split(",").filter(function (g) { return GROUPS.indexOf(g) >= 0; }) : null,
      clock: q.get("clock") === "raw" ? "raw" : "aligned",
      flows: q.get("flows") ? q.get("flows").split(",").filter(function (k) { return FLOW_KINDS.indexOf(k) >= 0; }) : [],
      fold: fold === null ? null : fold === "none" ? [] : fold.split(","),
      pin: q.get("pin") ? q.get("pin").split(",") : [], hl: hl, sel: sel
    };
  }
  function onPop() {
    if (!S.mounted || location.pathname !== "/timeline" || !S.box || !document.body.contains(S.box)) { return; }
    apply(cfgFromUrl(), false);
  }

  // -------------------------------------------------------------------------------------------
  // applying a view (from the page's config, the address, or a control)
  // -------------------------------------------------------------------------------------------

  function ranksParam(cfg) {
    if (Array.isArray(cfg.ranks)) { return formatRanks(cfg.ranks); }
    return cfg.ranks || "";
  }
  function apply(cfg, push) {
    var token = (S.applyToken || 0) + 1;
    S.applyToken = token;
    var sameRun = cfg.run === S.run;
    return loadMeta(cfg.run, ranksParam(cfg)).then(function (m) {
      if (token !== S.applyToken) { return; }
      if (m.fp !== S.fp) { S.cache.clear(); }
      S.fold = null;
      useMeta(m);
      S.groups = cfg.groups && cfg.groups.length ? cfg.groups.slice() : DEFAULT_GROUPS.slice();
      S.clock = cfg.clock === "raw" ? "raw" : "aligned";
      if (cfg.texts) { S.texts = cfg.texts; }
      S.lang = cfg.lang || null;
      S.flows.kinds = (cfg.flows || []).filter(function (k) { return FLOW_KINDS.indexOf(k) >= 0; });
      if (cfg.fold) { S.fold = new Set(cfg.fold); }
      S.pin = (cfg.pin || []).slice();
      S.hl = (cfg.hl || []).slice();
      S.measure = null; showRange(null);
      var w = null;
      if (cfg.start_ns && cfg.end_ns) { w = [relOf(cfg.start_ns), relOf(cfg.end_ns)]; S.mode = "window"; S.step = null; }
      else if (cfg.step !== null && cfg.step !== undefined && (w = stepWindow(cfg.step))) { S.mode = "step"; S.step = cfg.step; }
      else if (S.hl.length && (w = hlWindow())) { S.mode = "window"; S.step = null; }
      else { w = eventsWindow(); S.mode = "whole"; S.step = null; }
      S.a = w[0]; S.b = w[1];
      S.sel = null;
      if (cfg.sel) {
        var lane = null;
        S.meta.lanes.forEach(function (l) { if (!lane && l.rank === cfg.sel.rank && l.members.indexOf(cfg.sel.collection_id) >= 0) { lane = l; } });
        S.sel = { rank: cfg.sel.rank, collection_id: cfg.sel.collection_id, event: cfg.sel.event, lane: null, member: -1 };
        setProps("tl-selected", { data: { run: S.run, rank: cfg.sel.rank, collection_id: cfg.sel.collection_id, event: cfg.sel.event,
          origin: S.origin, offset: offsetOf(cfg.sel.rank) } });
      }
      S.autoSelect = S.hl.length > 0 && !cfg.sel;
      layout();
      syncControls(sameRun);
      invalidate();
      if (push) { commit(); } else { replaceUrl(); }
    }).catch(function (e) { status(String(e.message || e), true); });
  }
  function syncControls() {
    setProps("tl-ranks", { value: S.ranks.slice() });
    setProps("tl-groups", { value: S.groups.slice() });
    setProps("tl-clock", { value: S.clock === "aligned" ? ["aligned"] : [] });
    setProps("tl-flows", { value: S.flows.kinds.slice() });
    setProps("tl-step", { value: S.mode === "step" ? S.step : null });
    setProps("tl-run", { value: S.run });
    var note = [];
    if (S.meta.clock_error) { note.push(T("clock_error", { error: S.meta.clock_error })); }
    S.meta.clock.forEach(function (c) { if (c.warning) { note.push(c.warning); } });
    status(note.join(" · "), note.length > 0);
  }
  function syncGroups() { setProps("tl-groups", { value: S.groups.slice() }); }

  // -------------------------------------------------------------------------------------------
  // public API (Dash clientside callbacks call these; tests and benchmarks read state())
  // -------------------------------------------------------------------------------------------

  var TL = {
    mount: function (cfg) {
      var box = document.getElementById("tl-box");
      if (!box || !cfg || !cfg.run) { return; }
      S.mounted = true;
      attach(box);
      sizeCanvas();
      apply(cfg, false);
    },
    setRun: function (run) {
      if (!S.mounted || !run || run === S.run) { return; }
      apply({ run: run, ranks: null, clock: S.clock, flows: S.flows.kinds }, true);
    },
    setRanks: function (ranks) {
      if (!S.mounted || !S.meta || !Array.isArray(ranks)) { return; }
      var want = ranks.length ? ranks.map(Number).sort(function (x, y) { return x - y; }) : S.allRanks.slice();
      if (sameList(want, S.ranks)) { return; }
      var keep = { a: S.a, b: S.b, mode: S.mode, step: S.step };
      loadMeta(S.run, formatRanks(want)).then(function (m) {
        useMeta(m);
        S.fold = new Set(S.defaultFold);
        S.pin = S.pin.filter(function (k) { return want.indexOf(Number(k.split(".")[0])) >= 0; });
        S.a = keep.a; S.b = keep.b; S.mode = keep.mode; S.step = keep.step;
        if (S.mode === "step") { var w = stepWindow(S.step); if (w) { S.a = w[0]; S.b = w[1]; } }
        if (S.mode === "whole") { var e = eventsWindow(); S.a = e[0]; S.b = e[1]; }
        layout(); invalidate(); commit();
      }).catch(function (e) { status(String(e.message || e), true); });
    },
    setGroups: function (groups) {
      if (!S.mounted || !S.meta || !Array.isArray(groups)) { return; }
      var g = groups.filter(function (x) { return GROUPS.indexOf(x) >= 0; });
      if (sameList(g.slice().sort(), S.groups.slice().sort())) { return; }
      S.groups = g; layout(); invalidate(); commit();
    },
    setFlows: function (kinds) {
      if (!S.mounted || !S.meta || !Array.isArray(kinds)) { return; }
      var k = FLOW_KINDS.filter(function (x) { return kinds.indexOf(x) >= 0; });
      if (sameList(k, S.flows.kinds)) { return; }
      S.flows.kinds = k; S.flows.sig = null; invalidate(); commit();
    },
    setClock: function (aligned) {
      if (!S.mounted || !S.meta) { return; }
      var c = aligned ? "aligned" : "raw";
      if (c === S.clock) { return; }
      S.clock = c;
      if (S.mode === "whole") { var e = eventsWindow(); S.a = e[0]; S.b = e[1]; }
      if (S.mode === "step") { var w = stepWindow(S.step); if (w) { S.a = w[0]; S.b = w[1]; } }
      invalidate(); commit();
    },
    jumpToStep: function (step) {
      if (!S.mounted || !S.meta || step === null || step === undefined || step === "") { return; }
      step = Number(step);
      if (S.mode === "step" && S.step === step) { return; }
      var w = stepWindow(step);
      if (!w) { return; }
      S.inputAt = performance.now();
      S.a = w[0]; S.b = w[1]; S.mode = "step"; S.step = step;
      invalidate(); commit();
    },
    whole: function () {
      if (!S.meta) { return; }
      var w = eventsWindow();
      S.inputAt = performance.now();
      S.a = w[0]; S.b = w[1]; S.mode = "whole"; S.step = null;
      setProps("tl-step", { value: null });
      invalidate(); commit();
    },
    zoomOut: function () {
      if (!S.meta) { return; }
      S.inputAt = performance.now();
      var mid = (S.a + S.b) / 2, half = S.b - S.a;
      setWindow(mid - half, mid + half);
      commit();
    },
    setWindow: function (a, b) { S.inputAt = performance.now(); setWindow(a, b); commit(); },
    zoomAt: function (x, factor) { S.inputAt = performance.now(); zoomAt(x, factor); settleCommit(); },
    toggleFold: toggleFold,
    togglePin: togglePin,
    search: searchStep,
    rowOf: function (key) {
      var r = S.pinRows.concat(S.rows).find(function (x) { return x.key === key; });
      if (!r) { return null; }
      var top = r.pinned ? AXIS_H : AXIS_H + S.pinH - S.box.scrollTop;
      return { y: top + r.y, h: r.h, kind: r.kind, label: LABEL_W };
    },
    // where a drawn slice is (CSS px inside the canvas), for tests: the first whose name contains text
    findDrawn: function (text) {
      var z = levelFor((S.b - S.a) / dataW()), found = null, top = AXIS_H + S.pinH - S.box.scrollTop;
      S.rows.forEach(function (row) {
        if (found || row.kind !== "lane") { return; }
        var y = top + row.y;
        if (y < AXIS_H + S.pinH || y + ROW_H > S.height) { return; }
        eachSlice(tilesFor(row.key, row.rank, z, false), row.rank, row.levels, function (t, j, x, w, d) {
          var name = t.names[t.name[j]];
          var xa = Math.max(x, LABEL_W), xb = Math.min(x + w, S.width);
          if (!found && name.indexOf(text) >= 0 && xb - xa >= 4) {
            found = { x: (xa + xb) / 2, y: y + d * ROW_H + ROW_H / 2, name: name, lane: row.key, rank: row.rank, dur: t.dur[j], start: t.start[j] };
          }
        });
      });
      return found;
    },
    state: function () {
      return {
        mounted: S.mounted, run: S.run, ranks: S.ranks.slice(), origin: S.origin, fp: S.fp, a: S.a, b: S.b,
        mode: S.mode, step: S.step, clock: S.clock, groups: S.groups.slice(), fold: S.fold ? Array.from(S.fold) : [],
        pin: S.pin.slice(), hl: S.hl.slice(), sel: S.sel, pending: pending(), seq: S.seq,
        lanes: S.rows.filter(function (r) { return r.kind === "lane"; }).map(function (r) { return r.key; }),
        rows: S.rows.map(function (r) { return { kind: r.kind, key: r.key, y: r.y, h: r.h, shown: r.shown, hidden: r.hidden, total: r.total }; }),
        events: S.meta ? eventsWindow() : null, offsets: S.meta ? offsetsPayload() : {},
        clockInfo: S.meta ? S.meta.clock : [],
        headers: S.ranks.map(function (r) { return "rank " + r + " " + clockText(r); }), search: { q: S.search.q, matches: S.search.matches, hit: S.search.hit },
        stats: JSON.parse(JSON.stringify(S.stats)), cacheTiles: S.cache.size, measure: S.measure,
        counters: S.counters.data ? { a: S.counters.data.a, b: S.counters.data.b, clock: S.counters.data.clock, tracks: S.counters.data.tracks } : null,
        counterTracks: S.meta ? (S.meta.counters || []) : [],
        flows: { kinds: S.flows.kinds.slice(), data: S.flows.data, note: S.flows.note }
      };
    },
    clearCache: function () { S.cache.clear(); invalidate(); }
  };
  window.rankscopeTimeline = TL;

  document.addEventListener("mousemove", onMove);
  document.addEventListener("mouseup", onUp);
  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("keyup", onKeyUp);
  window.addEventListener("blur", function () { S.keys.clear(); });
  window.addEventListener("popstate", onPop);
  window.addEventListener("resize", function () { invalidate(); });
  document.addEventListener("click", function (ev) {
    var t = ev.target && ev.target.closest ? ev.target.closest("button") : null;
    if (!t || !S.mounted) { return; }
    if (t.id === "tl-reset") { TL.whole(); }
    if (t.id === "tl-out") { TL.zoomOut(); }
    if (t.id === "tl-search-next") { searchStep("next"); }
    if (t.id === "tl-search-prev") { searchStep("prev"); }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.target && ev.target.id === "tl-search" && ev.key === "Enter") { ev.preventDefault(); searchStep(ev.shiftKey ? "prev" : "next"); }
  });
})();
