"""Find every profiler output below a folder and decide, per collection, its producer and rank.

Detection is by structure (formats.md §0, §7.1): ``*_ascend_pt`` folders (torch_npu text or db
export), Kineto chrome traces (by content, any name ending .json / .json.gz), our collector's
``rank_{id}/`` folders with their sidecar (``rankscope_window.json``) and step scalars
(``rankscope_scalars.jsonl``), MindSpore ``*_ascend_ms`` folders and legacy flat ``*_{rank}`` files,
msprof ``PROF_*`` folders. Everything else is listed as ignored, with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .readers import mindspore, mindspore_legacy, msprof, torch_npu_common
from .readers.base import CollectionPlan
from .readers.kineto import classify_json, peek_rank

SIDECAR_NAME = "rankscope_window.json"
SCALARS_NAME = "rankscope_scalars.jsonl"
_RANK_DIR = re.compile(r"^rank_(\d+)$")
_PROFILER_INFO = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
_NPU_DB = re.compile(r"^ascend_pytorch_profiler(?:_(\d+))?\.db$")
_PROF_DIR = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")
_TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass
class Discovery:
    root: Path
    plans: list[CollectionPlan] = field(default_factory=list)
    ignored: list[tuple[Path, str]] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)  # trace-like files that cannot be read at all


def collection_id(run: str, rel_root: str) -> str:
    return hashlib.sha1(f"{run}\0{rel_root}".encode()).hexdigest()[:16]


def _rel(root: Path, p: Path) -> str:
    rel = str(p.relative_to(root))
    return "." if rel == "." else rel


def _load_sidecar(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _all_files(d: Path) -> list[Path]:
    out = []
    for dirpath, _dirs, files in os.walk(d):  # a producer folder: an unlistable part shows as missing files
        for name in files:
            out.append(Path(dirpath) / name)
    return sorted(out)


def _rank_from_dirs(root: Path, p: Path) -> int | None:
    cur = p if p.is_dir() else p.parent
    while True:
        m = _RANK_DIR.match(cur.name)
        if m:
            return int(m.group(1))
        if cur == root or cur.parent == cur:
            return None
        cur = cur.parent


def _nearest_sidecar(root: Path, p: Path, sidecars: dict[Path, dict[str, Any]]) -> tuple[Path, dict[str, Any]] | None:
    cur = p if p.is_dir() else p.parent
    while True:
        if cur in sidecars:
            return cur, sidecars[cur]
        if cur == root or cur.parent == cur:
            return None
        cur = cur.parent


def _npu_rank(d: Path) -> tuple[int | None, str | None, str]:
    """(rank, source, producer) of a *_ascend_pt folder (formats.md §7.5 order, see torch_npu_common)."""
    return torch_npu_common.resolve_rank(d)


def discover(root: Path, run: str) -> Discovery:
    root = root.resolve()
    disc = Discovery(root)
    sidecars: dict[Path, dict[str, Any]] = {}
    npu_dirs: list[Path] = []
    ms_dirs: list[Path] = []
    prof_dirs: list[Path] = []
    loose_dbs: dict[Path, list[Path]] = {}  # msprof_{ts}.db copied without its PROF_* folder
    loose_trace_views: list[Path] = []
    legacy_sets: list[tuple[Path, int, list[Path]]] = []  # (folder, rank suffix, files)
    kineto_files: list[Path] = []
    scalar_files: list[Path] = []

    walk: Iterable[tuple[Path, list[str], list[str]]]
    if root.is_file():
        walk = [(root.parent, [], [root.name])]
        root = root.parent
        disc.root = root
    elif root.name.endswith("_ascend_ms") or _PROF_DIR.match(root.name):
        walk = [(root.parent, [root.name], [])]  # the producer folder itself was given
        root = root.parent
        disc.root = root
    else:
        # lazily: pruning dirnames below keeps os.walk out of producer folders (*_ascend_pt, PROF_*, ...)
        def unreadable(exc: OSError) -> None:
            if exc.filename is not None:
                disc.problems.append((Path(exc.filename), f"cannot list this folder: {exc.strerror or exc}"))

        walk = ((Path(a), b, c) for a, b, c in os.walk(root, onerror=unreadable))
    for dirpath, dirnames, filenames in walk:
        keep = []
        for dn in sorted(dirnames):
            full = dirpath / dn
            if dn.endswith("_ascend_pt_op_args"):
                for f in _all_files(full):
                    disc.ignored.append((f, "operator-argument dump for AOE (record_op_args), not profiling data"))
            elif dn.endswith("_ascend_pt"):
                npu_dirs.append(full)
            elif dn.endswith("_ascend_ms"):
                ms_dirs.append(full)
            elif _PROF_DIR.match(dn):
                prof_dirs.append(full)
            elif dn == msprof.EXPORT_DIR:  # an msprof export folder copied without its PROF_* parent
                prof_dirs.append(dirpath)
            else:
                keep.append(dn)
        dirnames[:] = keep
        legacy = mindspore_legacy.legacy_groups(list(filenames))  # MindSpore <= 2.2 flat *_{rank} files
        claimed = {n for names in legacy.values() for n in names}
        for r, names in legacy.items():
            legacy_sets.append((dirpath, r, [dirpath / n for n in names]))
        if legacy:
            for n, why in mindspore_legacy.legacy_extras(list(filenames)).items():
                claimed.add(n)
                disc.ignored.append((dirpath / n, why))
        for fn in sorted(filenames):
            f = dirpath / fn
            if fn in claimed:
                continue
            if fn == SIDECAR_NAME:
                sc = _load_sidecar(f)
                if sc is None:
                    disc.ignored.append((f, "collector sidecar is not valid JSON"))
                else:
                    sidecars[dirpath] = sc
            elif fn == SCALARS_NAME:
                scalar_files.append(f)
            elif msprof.DB_RE.match(fn):
                loose_dbs.setdefault(dirpath, []).append(f)
            elif fn.endswith(_TRACE_SUFFIXES):
                verdict = classify_json(f)
                if verdict == "kineto":
                    kineto_files.append(f)
                elif verdict == "chrome_array" and fn == "trace_view.json":
                    loose_trace_views.append(f)  # a torch_npu trace_view.json without its *_ascend_pt folder
                elif verdict == "chrome_array":
                    kineto_files.append(f)  # any other Chrome trace in array form
                elif verdict.startswith("ignore:"):
                    disc.ignored.append((f, verdict[7:]))
                else:
                    disc.problems.append((f, verdict))
            else:
                disc.ignored.append((f, "not a known profiler output"))

    # torch_npu folders
    for d in npu_dirs:
        rank, source, producer = _npu_rank(d)
        disc.plans.append(_plan(root, run, sidecars, producer, d, _all_files(d), rank, source))
    for f in loose_trace_views:  # read by the torch_npu text reader as a folder holding only its trace
        p = _plan(root, run, sidecars, "torch_npu_text", f.parent, [f], None, None, rel=_rel(root, f))
        p.hints["loose_trace_view"] = True
        disc.plans.append(p)
    prof_dirs.extend(d for d in loose_dbs if d not in prof_dirs)
    _mindspore_and_msprof(disc, root, run, sidecars, ms_dirs, prof_dirs, legacy_sets, loose_dbs)
    # Kineto traces: the files under one collector window form one collection; elsewhere each
    # file is its own collection (repeat cycles and ranks are kept apart)
    grouped: dict[Path, list[Path]] = {}
    singles: list[Path] = []
    for f in kineto_files:
        sc = _nearest_sidecar(root, f, sidecars)
        if sc:
            grouped.setdefault(sc[0], []).append(f)
        else:
            singles.append(f)
    for d, files in grouped.items():
        sc = sidecars[d]
        rank, source = _prefer_collector_rank(root, d, (d, sc), None, None)
        if rank is None:
            rank, _ws = peek_rank(files[0])
            source = "distributedInfo" if rank is not None else None
        disc.plans.append(
            CollectionPlan(
                collection_id(run, _rel(root, d)),
                run,
                "kineto",
                d,
                _rel(root, d),
                sorted(files + [d / SIDECAR_NAME]),
                rank,
                source,
                sc,
            )
        )
    for f in singles:
        rank, _ws = peek_rank(f)
        source = "distributedInfo" if rank is not None else None
        dir_rank = _rank_from_dirs(root, f)
        if dir_rank is not None:
            rank, source = dir_rank, "rank_dir"
        disc.plans.append(
            CollectionPlan(collection_id(run, _rel(root, f)), run, "kineto", f, _rel(root, f), [f], rank, source)
        )
    # collector step scalars (always on, one file per rank)
    for f in scalar_files:
        rank = _rank_from_dirs(root, f)
        disc.plans.append(
            CollectionPlan(
                collection_id(run, _rel(root, f)),
                run,
                "collector_scalars",
                f,
                _rel(root, f),
                [f],
                rank,
                "rank_dir" if rank is not None else None,
            )
        )
    # sidecars of windows that produced no profiler data (job killed before the first export)
    used = {p.root for p in disc.plans} | {p.root.parent for p in disc.plans}
    for d, sc in sidecars.items():
        if d not in used and not any(str(p.root).startswith(str(d) + os.sep) for p in disc.plans):
            rank, source = _prefer_collector_rank(root, d, (d, sc), None, None)
            disc.plans.append(
                CollectionPlan(
                    collection_id(run, _rel(root, d)),
                    run,
                    "collector_empty",
                    d,
                    _rel(root, d),
                    [d / SIDECAR_NAME],
                    rank,
                    source,
                    sc,
                )
            )
    _resolve_unknown_ranks(disc)
    torch_npu_common.share_group_layouts(disc.plans)  # group-local -> global ranks seen on every rank
    disc.plans.sort(key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.rel_root))
    return disc


def _plan(
    root: Path,
    run: str,
    sidecars: dict[Path, dict[str, Any]],
    producer: str,
    d: Path,
    files: list[Path],
    rank: int | None,
    source: str | None,
    rel: str | None = None,
) -> CollectionPlan:
    """The plan of a producer folder ``d`` (its collector sidecar, if any, decides the rank)."""
    sc = _nearest_sidecar(root, d, sidecars)
    rank, source = _prefer_collector_rank(root, d, sc, rank, source)
    rel = rel or _rel(root, d)
    return CollectionPlan(collection_id(run, rel), run, producer, d, rel, files, rank, source, sc[1] if sc else None)


def _prefer_collector_rank(
    root: Path, d: Path, sc: tuple[Path, dict[str, Any]] | None, rank: int | None, source: str | None
) -> tuple[int | None, str | None]:
    if sc and isinstance(sc[1].get("rank"), int):
        return sc[1]["rank"], "sidecar"
    dir_rank = _rank_from_dirs(root, d)
    if dir_rank is not None:
        return dir_rank, "rank_dir"
    return rank, source


def _worker_key(plan: CollectionPlan) -> tuple[str, str]:
    """Collections written by the same process share a worker: torch's tensorboard_trace_handler names
    files ``{worker}.{timestamp}.pt.trace.json`` (worker = hostname_pid), torch_npu folders
    ``{worker}_{timestamp}_ascend_pt``."""
    name = plan.root.name
    if name.endswith(("_ascend_pt", "_ascend_ms")):
        worker = name.rsplit("_", 3)[0]
    else:
        worker = name.split(".")[0]
    return str(plan.root.parent), worker


def _resolve_unknown_ranks(disc: Discovery) -> None:
    """A collection with no rank anywhere: rank 0 if it is the only writer, else the next free rank
    per writer (and say so). Repeat cycles of one process keep one rank."""
    unknown = [p for p in disc.plans if p.rank is None]
    if not unknown:
        return
    known = {p.rank for p in disc.plans if p.rank is not None}
    workers: dict[tuple[str, str], list[CollectionPlan]] = {}
    for p in unknown:
        workers.setdefault(_worker_key(p), []).append(p)
    if not known and len(workers) == 1:
        for p in unknown:
            p.rank, p.rank_source = 0, "single"
        return
    nxt = max(known) + 1 if known else 0
    for plans in workers.values():
        for p in plans:
            p.rank, p.rank_source = nxt, "assigned"
            p.hints["rank_warning"] = (
                f"no rank found (no rank_{{id}} folder, sidecar or producer metadata): numbered {nxt} in discovery order"
            )
        nxt += 1


def _mindspore_and_msprof(
    disc: Discovery,
    root: Path,
    run: str,
    sidecars: dict[Path, dict[str, Any]],
    ms_dirs: list[Path],
    prof_dirs: list[Path],
    legacy_sets: list[tuple[Path, int, list[Path]]],
    loose_dbs: dict[Path, list[Path]],
) -> None:
    """Plans for MindSpore ``*_ascend_ms`` folders, legacy flat MindSpore files and msprof ``PROF_*``
    folders (or their ``mindstudio_profiler_output/`` / ``msprof_{ts}.db`` copied without them). A 2.3/2.4 ``profiler/`` folder holds the same rank three ways (``rank-{r}_*_ascend_ms``,
    legacy ``*_{r}`` files, the raw ``PROF_*``): the ``*_ascend_ms`` folder is read, the others are
    listed as ignored with the reason."""

    def plan(
        producer: str, d: Path, files: list[Path], rank: int | None, source: str | None, rel: str | None = None
    ) -> CollectionPlan:
        return _plan(root, run, sidecars, producer, d, files, rank, source, rel)

    ms_ranks: dict[Path, set[int | None]] = {}
    for d in ms_dirs:
        rank, source = mindspore.resolve_rank(d)
        p = plan("mindspore", d, _all_files(d), rank, source)
        ms_ranks.setdefault(d.parent, set()).add(p.rank)
        disc.plans.append(p)
    for folder, r, files in legacy_sets:
        if r in ms_ranks.get(folder, set()):
            for f in files:
                disc.ignored.append((f, f"legacy copy of rank {r}'s data; the *_ascend_ms folder next to it was read"))
            continue
        rel = f"{_rel(root, folder)}#rank{r}"  # one folder holds several ranks: one collection per suffix
        disc.plans.append(plan("mindspore_legacy", folder, files, r, "file_suffix", rel))
    unranked: list[CollectionPlan] = []
    for d in prof_dirs:
        ident = msprof.prof_identity(d)
        if d.parent in ms_ranks and (ident.rank is None or ident.rank in ms_ranks[d.parent]):
            for f in _all_files(d):
                disc.ignored.append(
                    (f, "raw CANN data of the MindSpore run; the *_ascend_ms folder next to it was read")
                )
            continue
        files = _all_files(d) if _PROF_DIR.match(d.name) else _all_files(d / msprof.EXPORT_DIR) + loose_dbs.get(d, [])
        p = plan("msprof", d, files, ident.rank, "PROF_info" if ident.rank is not None else None)
        p.hints["msprof"] = {"hostname": ident.hostname, "device_ids": ident.device_ids}
        if p.rank is None:
            unranked.append(p)
        disc.plans.append(p)
    if len(unranked) > 1:  # several msprof folders and no rank_id: msprof-analyze's (host, device) order
        msprof.order_unranked([p for p in disc.plans if p.producer == "msprof"])
