"""The timeline's tile protocol: what the browser asks for, and the compact answer it gets.

Time is cut into tiles per zoom level. At level ``z`` a bucket is ``2**z`` ns and a tile
``TILE_BUCKETS`` buckets; tile ``i`` of level ``z`` covers ``[i, i + 1) * TILE_BUCKETS * 2**z`` ns
after the run's origin (its first timestamp), on the raw clock of the lane's rank. The browser
draws a window at the level whose bucket is at most one pixel wide and asks for the tiles of the
lanes in view that it has not cached yet; zoom and pan redraw from the cache at once and detail
arrives when its tiles do. Clock offsets are applied by the browser (tiles stay on the rank's own
clock, so they stay cached when the clock is toggled).

A tile of one lane holds

- its **occupancy**: per bucket the share covered by the lane's slices (interval union), 0..255,
  rounded up so that a bucket holding anything (an instant too) is never 0;
- every **slice** overlapping the tile that spans at least ``MIN_SLICE_BUCKETS`` buckets (a few
  pixels): those are drawn with their names; shorter ones are only seen through the occupancy;
- its **instants** when at most ``MAX_INSTANTS`` fall in the tile.

So a tile is bounded whatever the trace: 1 KiB of occupancy and, per nesting level, at most about
``TILE_BUCKETS / MIN_SLICE_BUCKETS`` slices (capped at ``MAX_SLICES``: the longest are kept).

The server side has one seam, :class:`TileSource`: ``tile(lane, level, index)`` and
``exact(lanes, start, end)``. :class:`IndexTileSource` answers from the in-memory lane indexes of
``webapp.lod``; :class:`StoredTileSource` answers the zoomed-out levels from the level-of-detail
tables the ingest stored (``agg_lane_occupancy``, ``agg_lane_slices``) and the finer ones from an
``IndexTileSource`` of the ranks in view. :func:`encode` writes tiles in the binary format ``timeline.js`` reads.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from analyzer.schema import TILE_LEVELS as STORED_LEVELS

from . import lod

TILE_BUCKETS = 1024
MIN_SLICE_BUCKETS = 3
MAX_SLICES = 20_000  # per tile
MAX_INSTANTS = 256  # per tile
MAX_LEVEL = 46  # 2^46 ns buckets: a tile covers about two years
MAX_TILES_PER_REQUEST = 512
MAGIC = b"RSTL"
VERSION = 1


def tile_span(level: int) -> int:
    """Length of a tile of ``level`` in ns."""
    return TILE_BUCKETS << level


def tile_range(level: int, index: int) -> tuple[int, int]:
    """[start, end) of tile ``index`` of ``level``, in ns after the origin."""
    span = tile_span(level)
    return index * span, (index + 1) * span


def level_for(ns_per_px: float) -> int:
    """The level whose bucket is at most one pixel (and more than half a pixel) of ``ns_per_px``."""
    if ns_per_px < 2:
        return 0
    return min(MAX_LEVEL, int(np.floor(np.log2(ns_per_px))))


def tiles_for(start_ns: float, end_ns: float, level: int) -> range:
    """Indexes of the tiles of ``level`` covering [start_ns, end_ns) (ns after the origin)."""
    span = tile_span(level)
    return range(int(np.floor(start_ns / span)), int(np.floor((max(end_ns, start_ns + 1) - 1) / span)) + 1)


@dataclass(frozen=True)
class Lane:
    """A timeline row as the protocol names it: ``key`` is ``"{rank}.{k}"`` (the k-th lane of the
    rank in drawing order, stable whatever other ranks are shown); ``members`` are the
    (collection_id, pid, tid) of the same thread in each collection of the rank."""

    key: str
    rank: int
    members: tuple[tuple[str, str, str], ...]


@dataclass
class Slices:
    """Slices of one lane (times in absolute ns of the rank's clock)."""

    start: np.ndarray  # int64
    dur: np.ndarray  # int64
    depth: np.ndarray  # uint8
    event: np.ndarray  # int64 event_id
    member: np.ndarray  # uint8: which of the lane's members (collection) holds the slice
    names: list[str] = field(default_factory=list)  # one per slice

    @classmethod
    def empty(cls) -> Slices:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z.astype(np.uint8), z, z.astype(np.uint8), [])

    def __len__(self) -> int:
        return int(self.start.size)

    def take(self, rows: np.ndarray) -> Slices:
        return Slices(
            self.start[rows],
            self.dur[rows],
            self.depth[rows],
            self.event[rows],
            self.member[rows],
            [self.names[int(i)] for i in rows],
        )

    @classmethod
    def concat(cls, parts: Sequence[Slices]) -> Slices:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(
            np.concatenate([p.start for p in parts]),
            np.concatenate([p.dur for p in parts]),
            np.concatenate([p.depth for p in parts]),
            np.concatenate([p.event for p in parts]),
            np.concatenate([p.member for p in parts]),
            [n for p in parts for n in p.names],
        )


@dataclass
class Tile:
    lane: str
    level: int
    index: int
    occupancy: np.ndarray  # uint8[TILE_BUCKETS]
    slices: Slices
    cut: bool = False  # more than MAX_SLICES qualified: the longest were kept
    instants: int = 0  # instants in the tile (shipped as slices of length 0 when <= MAX_INSTANTS)


class TileSource(Protocol):
    """Where tiles come from: the one seam between the protocol and the store."""

    def tile(self, lane: str, level: int, index: int) -> Tile:
        """Lane ``lane``'s tile ``index`` at zoom ``level`` (a folded group's key: the busiest of its
        lanes per bucket, without slices)."""
        ...

    def exact(self, lanes: Sequence[str], start_ns: int, end_ns: int, limit: int) -> dict[str, Slices]:
        """Every slice of ``lanes`` overlapping [start_ns, end_ns) (absolute ns, rank clock), at most
        ``limit`` over all lanes (the longest kept)."""
        ...


class IndexTileSource:
    """Tiles from the lane indexes of ``webapp.lod`` (built from the slices of the collections)."""

    def __init__(
        self,
        origin_ns: int,
        lanes: Iterable[Lane],
        indexes: dict[str, lod.CollectionIndex],
        summaries: dict[str, Sequence[str]] | None = None,
    ):
        self.origin = int(origin_ns)
        self.lanes = {ln.key: ln for ln in lanes}
        self.indexes = indexes
        self.summaries = dict(summaries or {})  # a folded group's key -> its lanes' keys

    def has(self, key: str) -> bool:
        return key in self.lanes or key in self.summaries

    def members(self, key: str) -> list[tuple[int, lod.LaneIndex, lod.CollectionIndex]]:
        """(member number, index, collection index) of each collection holding lane ``key``."""
        ln = self.lanes.get(key)
        if ln is None:
            raise KeyError(key)
        out = []
        for m, (cid, pid, tid) in enumerate(ln.members):
            coll = self.indexes.get(str(cid))
            ix = None if coll is None else coll.lanes.get((pid, tid))
            if ix is not None and coll is not None:
                out.append((m, ix, coll))
        return out

    @staticmethod
    def _slices(m: int, ix: lod.LaneIndex, coll: lod.CollectionIndex, rows: np.ndarray) -> Slices:
        return Slices(
            ix.starts[rows],
            ix.durs[rows],
            ix.depth[rows],
            ix.events[rows],
            np.full(rows.size, m, dtype=np.uint8),
            [coll.names[int(c)] for c in ix.names[rows]],
        )

    def _occupancy(self, lane: str, a: int, level: int) -> tuple[np.ndarray, int]:
        """Occupancy (uint8 per bucket) of the tile starting at ``a`` (absolute ns), and its instants."""
        bucket = 1 << level
        edges = a + np.arange(TILE_BUCKETS + 1, dtype=np.int64) * bucket
        busy = np.zeros(TILE_BUCKETS, dtype=np.int64)
        marks = np.zeros(TILE_BUCKETS, dtype=np.int64)
        for _, ix, _ in self.members(lane):
            busy += ix.busy(edges)
            marks += ix.instants_per_bucket(edges)
        occ = np.ceil(np.minimum(np.maximum(busy / bucket, 0.0), 1.0) * 255).astype(np.uint8)
        occ[(occ == 0) & (marks > 0)] = 1
        return occ, int(marks.sum())

    def tile(self, lane: str, level: int, index: int) -> Tile:
        a_rel, b_rel = tile_range(level, index)
        a, b = self.origin + a_rel, self.origin + b_rel
        if lane in self.summaries:  # a folded group: the busiest of its lanes per bucket, no slices
            occ = np.zeros(TILE_BUCKETS, dtype=np.uint8)
            for sub in self.summaries[lane]:
                np.maximum(occ, self._occupancy(sub, a, level)[0], out=occ)
            return Tile(lane, level, index, occ, Slices.empty())
        occ, instants = self._occupancy(lane, a, level)
        min_dur = MIN_SLICE_BUCKETS << level
        parts: list[Slices] = []
        for m, ix, coll in self.members(lane):
            rows = ix.select(a, b, min_dur)
            if instants <= MAX_INSTANTS:
                lo, hi = ix.class_lo[0], ix.class_lo[1]
                s = ix.starts[lo:hi]
                inst = np.arange(lo + np.searchsorted(s, a), lo + np.searchsorted(s, b), dtype=np.int64)
                rows = np.concatenate([rows, inst])
            parts.append(self._slices(m, ix, coll, rows))
        sl = Slices.concat(parts)
        cut = len(sl) > MAX_SLICES
        if cut:  # the longest are kept
            sl = sl.take(np.sort(np.argsort(-sl.dur, kind="stable")[:MAX_SLICES]))
        return Tile(lane, level, index, occ, sl, cut, instants)

    def exact(self, lanes: Sequence[str], start_ns: int, end_ns: int, limit: int) -> dict[str, Slices]:
        out = {
            key: Slices.concat(
                [self._slices(m, ix, coll, ix.select(start_ns, end_ns, 0)) for m, ix, coll in self.members(key)]
            )
            for key in lanes
        }
        total = sum(len(s) for s in out.values())
        if total > limit:  # keep the longest over all lanes
            durs = np.concatenate([s.dur for s in out.values()])
            keep = np.zeros(total, dtype=bool)
            keep[np.argsort(-durs, kind="stable")[:limit]] = True
            at = 0
            for key, s in out.items():
                out[key] = s.take(np.flatnonzero(keep[at : at + len(s)]))
                at += len(s)
        return out


# ---------------------------------------------------------------------------------------------
# the binary format (read by webapp/assets/timeline.js)
# ---------------------------------------------------------------------------------------------


def _pad8(n: int) -> int:
    return (8 - n % 8) % 8


def encode(tiles: Sequence[Tile], origin_ns: int) -> bytes:
    """Tiles in the binary format: ``RSTL``, uint32 version, uint32 header length, a JSON header
    (names table and one entry per tile), then per tile its blocks, each padded to 8 bytes:
    occupancy uint8[TILE_BUCKETS], start float64[n] and duration float64[n] (ns after the origin),
    event id float64[n], name uint32[n] (into the header's names), depth uint8[n], member uint8[n].
    Little-endian. Times after the origin fit a float64 exactly (up to 104 days)."""
    names: dict[str, int] = {}
    head_tiles = []
    blocks: list[bytes] = []
    for t in tiles:
        sl = t.slices
        codes = np.fromiter((names.setdefault(n, len(names)) for n in sl.names), dtype="<u4", count=len(sl))
        head_tiles.append(
            {"lane": t.lane, "z": t.level, "i": t.index, "n": len(sl), "cut": t.cut, "instants": t.instants}
        )
        for arr in (
            np.ascontiguousarray(t.occupancy, dtype=np.uint8),
            (sl.start - origin_ns).astype("<f8"),
            sl.dur.astype("<f8"),
            sl.event.astype("<f8"),
            codes,
            sl.depth.astype(np.uint8),
            sl.member.astype(np.uint8),
        ):
            raw = arr.tobytes()
            blocks.append(raw + b"\0" * _pad8(len(raw)))
    header = json.dumps(
        {"origin": str(origin_ns), "buckets": TILE_BUCKETS, "names": list(names), "tiles": head_tiles},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    header += b" " * _pad8(len(header) + 12)
    return MAGIC + struct.pack("<II", VERSION, len(header)) + header + b"".join(blocks)


@dataclass
class Decoded:
    origin_ns: int
    tiles: list[dict]  # header entry + "occupancy", "start", "dur", "event", "name" (str), "depth", "member"


def decode(buf: bytes) -> Decoded:
    """The inverse of :func:`encode` (what the browser does; used by tests and the benchmark)."""
    if buf[:4] != MAGIC:
        raise ValueError("not a rankscope tile response")
    version, hlen = struct.unpack_from("<II", buf, 4)
    if version != VERSION:
        raise ValueError(f"tile format version {version}, expected {VERSION}")
    head = json.loads(buf[12 : 12 + hlen].decode("utf-8"))
    pos = 12 + hlen
    out = []

    def take(dtype: str, n: int) -> np.ndarray:
        nonlocal pos
        size = np.dtype(dtype).itemsize * n
        arr = np.frombuffer(buf, dtype=dtype, count=n, offset=pos)
        pos += size + _pad8(size)
        return arr

    for t in head["tiles"]:
        n = t["n"]
        d = dict(t)
        d["occupancy"] = take("u1", head["buckets"])
        d["start"] = take("<f8", n)
        d["dur"] = take("<f8", n)
        d["event"] = take("<f8", n)
        d["name"] = [head["names"][int(c)] for c in take("<u4", n)]
        d["depth"] = take("u1", n)
        d["member"] = take("u1", n)
        out.append(d)
    return Decoded(int(head["origin"]), out)


class StoredTileSource:
    """Tiles of the zoomed-out levels from what the ingest stored: the occupancy pyramid
    (``agg_lane_occupancy``) and the slices long enough to be drawn there (``agg_lane_slices``,
    with their nesting depth), so a view of any number of ranks holds no lane index. Finer levels,
    ``exact`` and the lanes of collections stored without the pyramid (an older store) come from
    the lane indexes (``exact_source``: an :class:`IndexTileSource` built on first need).

    A stored bucket of level ``l`` is ``[b, b + 1) * 2**l`` ns of the rank's clock; a tile of level
    ``z >= l`` adds up the buckets of the coarsest stored level at most ``z``, which tile exactly
    into its buckets because the origin is a multiple of ``2**max(STORED_LEVELS)``
    (``aligned_origin``). ``fetch(want)`` reads the stored rows of many (member lane, tile) at once:
    ``want`` has one row per query ``q`` (collection_id, pid, tid, level, lo, hi: the stored buckets;
    a, b: the tile in absolute ns; min_dur) and it returns (q, at = bucket - lo, busy_ns, instants)
    and (q, ts_ns, dur_ns, depth, event_id, name)."""

    def __init__(
        self,
        origin_ns: int,
        lanes: Iterable[Lane],
        summaries: dict[str, Sequence[str]],
        stored: set[str],
        fetch: Callable[[pd.DataFrame], tuple[pa.Table, pa.Table]],
        exact_source: Callable[[], IndexTileSource],
    ):
        self.origin = int(origin_ns)
        self.lanes = {ln.key: ln for ln in lanes}
        self.summaries = dict(summaries)
        self.stored_collections = stored
        self._fetch = fetch
        self._exact_source = exact_source
        self._exact: IndexTileSource | None = None
        self._tiles: dict[tuple[str, int, int], Tile] = {}

    def has(self, key: str) -> bool:
        return key in self.lanes or key in self.summaries

    def index_source(self) -> IndexTileSource:
        if self._exact is None:
            self._exact = self._exact_source()
        return self._exact

    def is_stored(self, key: str, level: int) -> bool:
        """Whether the tiles of ``key`` at ``level`` come from the stored pyramid."""
        if level < STORED_LEVELS[0]:
            return False
        keys = self.summaries.get(key, [key])
        return all(cid in self.stored_collections for k in keys for cid, _, _ in self.lanes[k].members)

    def prefetch(self, wanted: Sequence[tuple[str, int, int]]) -> None:
        """Read the stored rows of every tile of ``wanted`` the pyramid answers, in one go."""
        todo = [
            (k, z, i)
            for key, z, i in wanted
            if self.has(key) and self.is_stored(key, z)
            for k in self.summaries.get(key, [key])
            if (k, z, i) not in self._tiles
        ]
        todo = list(dict.fromkeys(todo))
        if not todo:
            return
        rows: list[tuple[Any, ...]] = []
        owner: list[tuple[str, int, int, int]] = []  # per query: lane, level, index, member
        for key, z, i in todo:
            lvl = max(x for x in STORED_LEVELS if x <= z)
            a = self.origin + tile_range(z, i)[0]
            lo = a >> lvl
            for m, (cid, pid, tid) in enumerate(self.lanes[key].members):
                rows.append((len(rows), cid, pid, tid, lvl, lo, lo + (TILE_BUCKETS << (z - lvl)), a, a + tile_span(z)))
                owner.append((key, z, i, m))
        want = pd.DataFrame(rows, columns=["q", "collection_id", "pid", "tid", "level", "lo", "hi", "a", "b"])
        want["min_dur"] = [MIN_SLICE_BUCKETS << z for _, z, _, _ in owner]
        occ, sl = self._fetch(want)
        self._assemble(owner, occ, sl)

    def _assemble(self, owner: list[tuple[str, int, int, int]], occ: pa.Table, sl: pa.Table) -> None:
        n = len(owner)
        # per query: the busy length and instants per bucket of its tile
        busy = np.zeros((n, TILE_BUCKETS), dtype=np.int64)
        marks = np.zeros((n, TILE_BUCKETS), dtype=np.int64)
        if occ.num_rows:
            q = occ["q"].to_numpy().astype(np.int64)
            shift = np.array([z - max(x for x in STORED_LEVELS if x <= z) for _, z, _, _ in owner], dtype=np.int64)
            j = occ["at"].to_numpy().astype(np.int64) >> shift[q]
            np.add.at(busy, (q, j), occ["busy_ns"].to_numpy().astype(np.int64))
            np.add.at(marks, (q, j), occ["instants"].to_numpy().astype(np.int64))
        sq = sl["q"].to_numpy().astype(np.int64) if sl.num_rows else np.zeros(0, dtype=np.int64)
        order = np.argsort(sq, kind="stable")
        sq = sq[order]
        cols = {
            c: (sl[c].to_numpy().astype(np.int64)[order] if sl.num_rows else np.zeros(0, dtype=np.int64))
            for c in ("ts_ns", "dur_ns", "depth", "event_id")
        }
        names = sl["name"].to_pylist() if sl.num_rows else []
        names = [names[int(k)] for k in order]
        bounds = np.searchsorted(sq, np.arange(n + 1))
        per_tile: dict[tuple[str, int, int], list[int]] = {}
        for qi, (key, z, i, _) in enumerate(owner):
            per_tile.setdefault((key, z, i), []).append(qi)
        for (key, z, i), qs in per_tile.items():
            b = busy[qs].sum(axis=0)
            mk = marks[qs].sum(axis=0)
            bucket = 1 << z
            occ_t = np.ceil(np.clip(b.astype(np.float64) / bucket, 0.0, 1.0) * 255).astype(np.uint8)
            occ_t[(occ_t == 0) & (mk > 0)] = 1
            instants = int(mk.sum())
            parts = []
            for qi in qs:
                lo, hi = bounds[qi], bounds[qi + 1]
                ts, dur = cols["ts_ns"][lo:hi], cols["dur_ns"][lo:hi]
                keep = dur > 0
                if instants <= MAX_INSTANTS:
                    keep = np.ones(ts.size, dtype=bool)
                # as the lane index orders them: by duration class, by start (the longer first), instants last
                cls = lod.duration_classes(dur)
                rows = np.flatnonzero(keep)
                rows = rows[np.lexsort((-dur[rows], ts[rows], np.where(cls[rows] == 0, lod.N_CLASSES, cls[rows])))]
                parts.append(
                    Slices(
                        ts[rows],
                        dur[rows],
                        np.minimum(cols["depth"][lo:hi][rows], lod.MAX_DEPTH).astype(np.uint8),
                        cols["event_id"][lo:hi][rows],
                        np.full(rows.size, owner[qi][3], dtype=np.uint8),
                        [names[lo + int(r)] for r in rows],
                    )
                )
            s = Slices.concat(parts)
            cut = len(s) > MAX_SLICES
            if cut:
                s = s.take(np.sort(np.argsort(-s.dur, kind="stable")[:MAX_SLICES]))
            self._tiles[(key, z, i)] = Tile(key, z, i, occ_t, s, cut, instants)

    def tile(self, lane: str, level: int, index: int) -> Tile:
        if not self.is_stored(lane, level):
            return self.index_source().tile(lane, level, index)
        if lane in self.summaries:  # a folded group: the busiest of its lanes per bucket, no slices
            occ = np.zeros(TILE_BUCKETS, dtype=np.uint8)
            for sub in self.summaries[lane]:
                np.maximum(occ, self.tile(sub, level, index).occupancy, out=occ)
            return Tile(lane, level, index, occ, Slices.empty())
        if (lane, level, index) not in self._tiles:
            self.prefetch([(lane, level, index)])
        return self._tiles[(lane, level, index)]

    def exact(self, lanes: Sequence[str], start_ns: int, end_ns: int, limit: int) -> dict[str, Slices]:
        return self.index_source().exact(lanes, start_ns, end_ns, limit)


def aligned_origin(first_ns: int) -> int:
    """The timeline's origin for a run whose first event is at ``first_ns``: the multiple of
    ``2**max(STORED_LEVELS)`` at or before it (so stored buckets tile into every tile)."""
    return (int(first_ns) >> STORED_LEVELS[-1]) << STORED_LEVELS[-1]
