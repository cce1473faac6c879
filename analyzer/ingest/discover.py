"""Find every profiler output below a folder and decide, per collection, its producer and rank.

Detection is by structure (docs/formats.md §0, §7.1), asked of the families and producers through
``readers.registry``: producer folders (``*_ascend_pt``, ``*_ascend_ms``, ``PROF_*``) are not walked
into, they are one collection each (or one per rank); single files are Chrome traces (by content),
the collector's sidecars and step scalars, loose msprof dbs and ``trace_view.json`` files; MindSpore
<= 2.2 writes flat ``*_{rank}`` files. Everything else is listed as ignored, with the reason.

Ranks come from the collector (a sidecar's rank, a ``rank_{id}`` folder), else from the producer's
own files (each door's rule), else they are numbered.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..messages import english, problem
from ..readers import collector, kineto, mindspore, msprof, registry, torch_npu
from ..readers.ascend.names import EXPORT_DIR, PROF_DIR_RE
from ..readers.ascend.prof import prof_identity
from ..readers.base import SIDECAR_NAME, CollectionPlan
from ..readers.common.jsonfile import json_or_none
from .changes import path_text

Sidecars = dict[Path, dict[str, Any]]


@dataclass
class Discovery:
    root: Path
    plans: list[CollectionPlan] = field(default_factory=list)
    ignored: list[tuple[Path, str]] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)  # trace-like files that cannot be read at all


@dataclass
class Found:
    """What the walk found, by kind, before any plan is made."""

    sidecars: Sidecars = field(default_factory=dict)
    npu_dirs: list[Path] = field(default_factory=list)
    ms_dirs: list[Path] = field(default_factory=list)
    prof_dirs: list[Path] = field(default_factory=list)
    loose_dbs: dict[Path, list[Path]] = field(default_factory=dict)  # msprof_{ts}.db copied without its PROF_*
    loose_trace_views: list[Path] = field(default_factory=list)
    legacy_sets: list[tuple[Path, int, list[Path]]] = field(default_factory=list)  # (folder, rank suffix, files)
    kineto_files: list[Path] = field(default_factory=list)
    scalar_files: list[Path] = field(default_factory=list)
    run_files: list[tuple[str, Path]] = field(default_factory=list)  # (kind, path): files of the whole run


def collection_id(run: str, rel_root: str) -> str:
    return hashlib.sha1(f"{run}\0{rel_root}".encode()).hexdigest()[:16]


def discover(root: Path, run: str) -> Discovery:
    disc, walk = _start(root.resolve())
    found = _walk(disc, walk)
    for make in (_torch_npu_plans, _mindspore_and_msprof_plans, _kineto_plans, _scalar_plans, _empty_window_plans):
        disc.plans.extend(make(disc.root, run, found, disc))
    _resolve_unknown_ranks(disc)
    torch_npu.share_groups(disc.plans)  # group-local -> global ranks seen on every rank
    disc.plans.sort(key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.rel_root))
    _attach_run_files(disc, found)
    return disc


def run_root(root: Path) -> Path:
    """The folder a run holds when ``root`` is given: ``root``, or the parent of a file or of a
    producer folder given on its own."""
    root = root.resolve()
    if root.is_file() or registry.folder_kind(root.name) in ("mindspore", "prof"):
        return root.parent
    return root


def _start(root: Path) -> tuple[Discovery, Iterable[tuple[Path, list[str], list[str]]]]:
    """The run root (a file's or producer folder's parent when one was given) and the folders to walk."""
    if root.is_file():
        return Discovery(root.parent), [(root.parent, [], [root.name])]
    if registry.folder_kind(root.name) in ("mindspore", "prof"):  # the producer folder itself was given
        return Discovery(root.parent), [(root.parent, [root.name], [])]
    disc = Discovery(root)
    # lazily: pruning dirnames in _walk keeps the walk out of producer folders (*_ascend_pt, PROF_*, ...)
    return disc, _tree(root, disc.problems)


def _listing(d: Path, problems: list[tuple[Path, str]]) -> tuple[list[str], list[str], list[str]] | None:
    """(sub-folders, of which symbolic links, files) of one folder, by name; None, with the problem
    recorded, when the folder cannot be listed. Names are the file system's bytes as ``str``
    (surrogate escapes for bytes that are not UTF-8: every path still opens the right file)."""
    try:
        with os.scandir(d) as it:
            entries = list(it)
    except OSError as exc:
        problems.append((d, f"cannot list this folder: {exc.strerror or exc}"))
        return None
    dirs, links, files = [], [], []
    for e in entries:
        try:
            is_dir = e.is_dir()
            if is_dir and e.is_symlink():
                links.append(e.name)
        except OSError:  # cannot tell (no search permission on the folder): a file, reported when read
            is_dir = False
        (dirs if is_dir else files).append(e.name)
    return sorted(dirs), links, sorted(files)


def _tree(top: Path, problems: list[tuple[Path, str]]) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` top-down with problems recorded instead of raised: (folder, sub-folder names, file
    names); the caller prunes the sub-folder list in place. Folders reached through a symbolic link
    are not walked into (no loops), as ``os.walk`` does."""
    stack = [top]
    while stack:
        d = stack.pop()
        listing = _listing(d, problems)
        if listing is None:
            continue
        dirs, links, files = listing
        yield d, dirs, files
        stack.extend(d / n for n in reversed(dirs) if n not in links)


def _walk(disc: Discovery, walk: Iterable[tuple[Path, list[str], list[str]]]) -> Found:
    found = Found()
    for dirpath, dirnames, filenames in walk:
        keep = []
        for dn in sorted(dirnames):
            full = dirpath / dn
            kind = registry.folder_kind(dn)
            if kind == "torch_npu_op_args":
                for f in _all_files(full, disc):
                    disc.ignored.append((f, problem("ignored.op_args")))
            elif kind == "torch_npu":
                found.npu_dirs.append(full)
            elif kind == "mindspore":
                found.ms_dirs.append(full)
            elif kind == "prof":
                found.prof_dirs.append(full)
            elif kind == "export":  # an msprof export folder copied without its PROF_* parent
                found.prof_dirs.append(dirpath)
            else:
                keep.append(dn)
        dirnames[:] = keep
        groups, extras = registry.flat_groups(list(filenames))
        claimed = {n for names in groups.values() for n in names} | set(extras)
        for r, names in groups.items():
            found.legacy_sets.append((dirpath, r, [dirpath / n for n in names]))
        for n, why in extras.items():
            disc.ignored.append((dirpath / n, why))
        for fn in sorted(filenames):
            if fn not in claimed:
                _file(disc, found, dirpath / fn)
    found.prof_dirs.extend(d for d in found.loose_dbs if d not in found.prof_dirs)
    return found


def _file(disc: Discovery, found: Found, f: Path) -> None:
    """Classify one file outside the producer folders; one that cannot be looked at is a problem."""
    try:
        _classify(disc, found, f)
    except OSError as exc:
        disc.problems.append((f, problem("cannot_read", detail=exc.strerror or exc)))


def _classify(disc: Discovery, found: Found, f: Path) -> None:
    run_kind = registry.run_file(f.relative_to(disc.root))
    if run_kind is not None:
        found.run_files.append((run_kind, f))
        return
    kind = registry.file_kind(f)
    if kind == "collector_sidecar":
        sc = json_or_none(f.read_bytes())  # unreadable: a problem (_file), not "not valid JSON"
        if isinstance(sc, dict):
            found.sidecars[f.parent] = sc
        else:
            disc.ignored.append((f, problem("ignored.sidecar_not_json")))
    elif kind == "collector_scalars":
        found.scalar_files.append(f)
    elif kind == "msprof_db":
        found.loose_dbs.setdefault(f.parent, []).append(f)
    elif kind == "trace_view":
        found.loose_trace_views.append(f)
    elif kind == "kineto":
        found.kineto_files.append(f)
    elif kind.startswith("ignore:"):
        disc.ignored.append((f, kind[7:]))
    else:
        disc.problems.append((f, kind))


# -- plans, by producer ------------------------------------------------------------------------------


def _torch_npu_plans(root: Path, run: str, found: Found, disc: Discovery) -> list[CollectionPlan]:
    plans = []
    for d in found.npu_dirs:
        try:
            rank, source, producer = torch_npu.resolve(d)
        except OSError as exc:
            _unreadable_folder(disc, d, exc)
            continue
        plans.append(_plan(root, run, found.sidecars, producer, d, _all_files(d, disc), rank, source))
    for f in found.loose_trace_views:  # read by the torch_npu text reader as a folder holding only its trace
        p = _plan(root, run, found.sidecars, "torch_npu_text", f.parent, [f], None, None, rel=_rel(root, f))
        p.hints["loose_trace_view"] = True
        plans.append(p)
    return plans


def _mindspore_and_msprof_plans(root: Path, run: str, found: Found, disc: Discovery) -> list[CollectionPlan]:
    """Plans for MindSpore ``*_ascend_ms`` folders, legacy flat MindSpore files and msprof ``PROF_*``
    folders (or their ``mindstudio_profiler_output/`` / ``msprof_{ts}.db`` copied without them). A
    2.3/2.4 ``profiler/`` folder holds the same rank three ways (``rank-{r}_*_ascend_ms``, legacy
    ``*_{r}`` files, the raw ``PROF_*``): the ``*_ascend_ms`` folder is read, the others are listed as
    ignored with the reason."""
    plans: list[CollectionPlan] = []
    ms_ranks: dict[Path, set[int | None]] = {}
    for d in found.ms_dirs:
        try:
            rank, source = mindspore.resolve_rank(d)
        except OSError as exc:
            _unreadable_folder(disc, d, exc)
            continue
        p = _plan(root, run, found.sidecars, "mindspore", d, _all_files(d, disc), rank, source)
        ms_ranks.setdefault(d.parent, set()).add(p.rank)
        plans.append(p)
    for folder, r, files in found.legacy_sets:
        if r in ms_ranks.get(folder, set()):
            for f in files:
                disc.ignored.append((f, problem("ignored.legacy_copy", rank=r)))
            continue
        rel = f"{_rel(root, folder)}#rank{r}"  # one folder holds several ranks: one collection per suffix
        plans.append(_plan(root, run, found.sidecars, "mindspore_legacy", folder, files, r, "file_suffix", rel))
    prof: list[CollectionPlan] = []
    for d in found.prof_dirs:
        try:
            ident = prof_identity(d)
        except OSError as exc:
            _unreadable_folder(disc, d, exc)
            continue
        if d.parent in ms_ranks and (ident.rank is None or ident.rank in ms_ranks[d.parent]):
            for f in _all_files(d, disc):
                disc.ignored.append((f, problem("ignored.ms_raw_cann")))
            continue
        if PROF_DIR_RE.match(d.name):
            files = _all_files(d, disc)
        else:
            export = d / EXPORT_DIR  # absent when only a loose msprof db was found
            files = (_all_files(export, disc) if _is_dir(export) else []) + found.loose_dbs.get(d, [])
        source = "PROF_info" if ident.rank is not None else None
        p = _plan(root, run, found.sidecars, "msprof", d, files, ident.rank, source)
        p.hints["msprof"] = {"hostname": ident.hostname, "device_ids": ident.device_ids}
        prof.append(p)
    if sum(1 for p in prof if p.rank is None) > 1:  # several msprof folders and no rank_id: (host, device) order
        msprof.order_unranked(prof)
    return plans + prof


def _kineto_plans(root: Path, run: str, found: Found, disc: Discovery) -> list[CollectionPlan]:
    """The files under one collector window form one collection; elsewhere each file is its own
    collection (repeat cycles and ranks are kept apart)."""
    plans = []
    grouped: dict[Path, list[Path]] = {}
    singles: list[Path] = []
    for f in found.kineto_files:
        sc = _nearest_sidecar(root, f, found.sidecars)
        if sc:
            grouped.setdefault(sc[0], []).append(f)
        else:
            singles.append(f)
    for d, files in grouped.items():
        sc = found.sidecars[d]
        rank, source = _prefer_collector_rank(root, d, (d, sc), None, None)
        if rank is None:
            rank, _ws = kineto.peek_rank(files[0])
            source = "distributedInfo" if rank is not None else None
        rel = _rel(root, d)
        files = sorted(files + [d / SIDECAR_NAME])
        plans.append(CollectionPlan(collection_id(run, rel), run, "kineto", d, rel, files, rank, source, sc))
    for f in singles:
        rank, _ws = kineto.peek_rank(f)
        source = "distributedInfo" if rank is not None else None
        dir_rank = _rank_from_dirs(root, f)
        if dir_rank is not None:
            rank, source = dir_rank, "rank_dir"
        rel = _rel(root, f)
        plans.append(CollectionPlan(collection_id(run, rel), run, "kineto", f, rel, [f], rank, source))
    return plans


def _scalar_plans(root: Path, run: str, found: Found, disc: Discovery) -> list[CollectionPlan]:
    """The collector's step scalars (always on, one file per rank)."""
    plans = []
    for f in found.scalar_files:
        rank = _rank_from_dirs(root, f)
        rel = _rel(root, f)
        source = "rank_dir" if rank is not None else None
        plans.append(CollectionPlan(collection_id(run, rel), run, "collector_scalars", f, rel, [f], rank, source))
    return plans


def _empty_window_plans(root: Path, run: str, found: Found, disc: Discovery) -> list[CollectionPlan]:
    """Sidecars of windows that produced no profiler data (job killed before the first export)."""
    plans = []
    used = {p.root for p in disc.plans} | {p.root.parent for p in disc.plans}
    for d, sc in found.sidecars.items():
        if d not in used and not any(str(p.root).startswith(str(d) + os.sep) for p in disc.plans):
            rank, source = _prefer_collector_rank(root, d, (d, sc), None, None)
            rel = _rel(root, d)
            files = [d / SIDECAR_NAME]
            plans.append(
                CollectionPlan(collection_id(run, rel), run, "collector_empty", d, rel, files, rank, source, sc)
            )
    return plans


def _attach_run_files(disc: Discovery, found: Found) -> None:
    """Files of the whole run are read with the run's first collection (lowest rank)."""
    seen: set[str] = set()
    for kind, f in sorted(found.run_files, key=lambda kf: (len(kf[1].relative_to(disc.root).parts), str(kf[1]))):
        if not disc.plans:
            disc.ignored.append((f, problem("ignored.run_file_no_collection")))
        elif kind in seen:
            disc.ignored.append((f, problem("ignored.run_file_again", file=f.name)))
        else:
            seen.add(kind)
            disc.plans[0].run_files.append((kind, f))


# -- helpers ----------------------------------------------------------------------------------------------


def _is_dir(p: Path) -> bool:
    """``p.is_dir()``, False when it cannot be told (a folder without search permission)."""
    try:
        return p.is_dir()
    except OSError:
        return False


def _unreadable_folder(disc: Discovery, d: Path, exc: OSError) -> None:
    """A producer folder whose rank or producer cannot be found out: a problem, the walk goes on."""
    what = exc.strerror or str(exc)
    if isinstance(exc.filename, str) and Path(exc.filename) != d:
        try:
            what += f" ({path_text(Path(exc.filename).relative_to(d))})"
        except ValueError:
            what += f" ({path_text(exc.filename)})"
    disc.problems.append((d, f"cannot read this folder: {what}"))


def _rel(root: Path, p: Path) -> str:
    return path_text(p.relative_to(root))


def _all_files(d: Path, disc: Discovery) -> list[Path]:
    """Every file below a producer folder; a part that cannot be listed is a problem of the run."""
    out = []
    for dirpath, _dirs, files in _tree(d, disc.problems):
        out.extend(dirpath / name for name in files)
    return sorted(out)


def _rank_from_dirs(root: Path, p: Path) -> int | None:
    cur = p if _is_dir(p) else p.parent
    while True:
        m = collector.RANK_DIR_RE.match(cur.name)
        if m:
            return int(m.group(1))
        if cur == root or cur.parent == cur:
            return None
        cur = cur.parent


def _nearest_sidecar(root: Path, p: Path, sidecars: Sidecars) -> tuple[Path, dict[str, Any]] | None:
    cur = p if _is_dir(p) else p.parent
    while True:
        if cur in sidecars:
            return cur, sidecars[cur]
        if cur == root or cur.parent == cur:
            return None
        cur = cur.parent


def _plan(
    root: Path,
    run: str,
    sidecars: Sidecars,
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
    if registry.folder_kind(name) in ("torch_npu", "mindspore"):
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
            p.hints["rank_warning"] = english("missing.rank_assigned", rank=nxt)
        nxt += 1
