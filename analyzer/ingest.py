"""`analyze ingest`: discover, skip what is unchanged, read the rest in parallel, commit atomically."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import json
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import readers  # noqa: F401 - registers the readers
from .discover import discover
from .errors import InputError, NothingIngestedError, RunConflictError
from .factwriter import FactWriter
from .readers.base import READERS, CollectionPlan, ReadContext
from .store import Store, utcnow

_HASH_BLOCK = 4 << 20


def file_sha256(path: Path) -> str | None:
    """The file's SHA-256, or None when it cannot be read (permissions, vanished)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while True:
                b = f.read(_HASH_BLOCK)
                if not b:
                    break
                h.update(b)
    except OSError:
        return None
    return h.hexdigest()


@dataclass
class CollectionResult:
    plan: CollectionPlan
    status: str
    collection_row: dict[str, Any]
    fact_files: list[dict[str, Any]]
    file_rows: list[dict[str, Any]]
    seconds: float


@dataclass
class IngestReport:
    run: str
    root: str
    store: str
    read: list[CollectionResult] = field(default_factory=list)
    unchanged: list[CollectionPlan] = field(default_factory=list)
    kept_previous: list[str] = field(default_factory=list)  # collection ids whose old data was kept
    gone: list[dict[str, Any]] = field(default_factory=list)  # collections no longer below the folder: removed
    ignored: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[dict[str, Any]] = field(default_factory=list)  # files found but not readable at all
    earlier: list[dict[str, Any]] = field(default_factory=list)  # problems of unchanged files, found before
    seconds: float = 0.0

    @property
    def problems(self) -> list[dict[str, Any]]:
        out = list(self.unreadable) + list(self.earlier)
        for r in self.read:
            for f in r.file_rows:
                if f["status"] in ("warning", "error"):
                    out.append(f)
        return out

    @property
    def usable(self) -> int:
        return len(self.unchanged) + sum(1 for r in self.read if r.status != "error")


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def read_collection(plan: CollectionPlan, store_path: str, run_root: str) -> CollectionResult:
    """Read one collection into fresh Parquet files (runs in a worker process)."""
    t0 = time.perf_counter()
    rank = plan.rank if plan.rank is not None else 0
    writer = FactWriter(store_path, plan.run, rank, plan.collection_id)
    ctx = ReadContext(plan, writer)
    reader = READERS.get(plan.producer)
    # Readers create millions of short-lived, acyclic objects (decoded events): reference counting
    # frees them, and the cyclic collector would only re-scan the heap again and again meanwhile.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if reader is None:
            for f in plan.files:
                ctx.ignore(f, f"no reader for producer {plan.producer}")
        else:
            try:
                reader(ctx)
            except InputError as exc:
                with ctx.reading(Path(exc.path), plan.producer):
                    raise
            except Exception as exc:
                with ctx.reading(plan.files[0] if plan.files else plan.root, plan.producer):
                    raise RuntimeError(f"reader {plan.producer} failed: {type(exc).__name__}: {exc}") from exc
        fact_files = writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        ctx.cleanup()
        if gc_was_enabled:
            gc.enable()
    for f in plan.files:  # files of the collection no reader looked at
        if f not in ctx.outcomes:
            ctx.ignore(f, "not used by the reader")
    file_rows = []
    now = utcnow()
    for path, oc in sorted(ctx.outcomes.items()):
        st = _stat(path)
        file_rows.append(
            {
                "run": plan.run,
                "path": _relpath(path, Path(run_root)),
                "collection_id": plan.collection_id,
                "size_bytes": st[0] if st else None,
                "mtime_ns": st[1] if st else None,
                "sha256": (oc.sha256 or file_sha256(path)) if st and oc.status != "ignored" else None,
                "reader": oc.reader,
                "status": oc.status,
                "error": oc.error,
                "rows": oc.rows,
                "ingested_at": now,
            }
        )
    status = _status(ctx, plan, writer.total_rows)
    meta = ctx.meta
    missing = list(meta.missing)
    sc = plan.sidecar or {}
    if sc and sc.get("status") not in (None, "complete"):
        captured = sc.get("captured_steps") or []
        last = f", last complete step {max(captured)}" if captured else ", no step completed"
        reason = f" ({sc['reason']})" if sc.get("reason") else ""
        if sc.get("status") == "running":  # no clean-up ran: SIGKILL / os._exit, or the job is still profiling
            missing.insert(
                0,
                f"the profiling window was still open (sidecar status running: the job is still "
                f"profiling, or was killed without clean-up){last}: later steps were not captured",
            )
        else:
            missing.insert(
                0, f"the job stopped during the profiling window{reason}{last}: later steps were not captured"
            )
    if plan.hints.get("rank_warning"):
        missing.insert(0, plan.hints["rank_warning"])
    extra = dict(meta.extra)
    if sc:
        extra["sidecar"] = sc
    row = {
        "collection_id": plan.collection_id,
        "run": plan.run,
        "rank": rank,
        "rank_source": plan.rank_source,
        "producer": plan.producer,
        "producer_version": meta.producer_version or sc.get("framework_version"),
        "root_path": plan.rel_root,
        "world_size": meta.world_size if meta.world_size is not None else sc.get("world_size"),
        "hostname": meta.hostname or sc.get("host"),
        "device_id": meta.device_id,
        "level": meta.level,
        "start_ns": writer.start_ns,
        "end_ns": writer.end_ns,
        "steps": sorted(writer.steps),
        "status": status,
        "capabilities": sorted(meta.capabilities),
        "missing": missing,
        "config": json.dumps(meta.config, default=str) if meta.config is not None else None,
        "meta": json.dumps(extra, default=str) if extra else None,
        "n_rows": writer.total_rows,
        "ingested_at": now,
    }
    return CollectionResult(plan, status, row, fact_files, file_rows, time.perf_counter() - t0)


def _relpath(path: Path, run_root: Path) -> str:
    try:
        return str(path.relative_to(run_root))
    except ValueError:
        return str(path)


def _status(ctx: ReadContext, plan: CollectionPlan, rows: int) -> str:
    if ctx.meta.status:
        return ctx.meta.status
    outcomes = [o for o in ctx.outcomes.values() if o.status != "ignored"]
    if rows == 0:
        return "error" if any(o.status == "error" for o in outcomes) or not outcomes else "complete"
    sc = plan.sidecar or {}
    if any(o.status in ("error", "warning") for o in outcomes) or sc.get("status") not in (None, "complete"):
        return "partial"
    return "complete"


def _unchanged(plan: CollectionPlan, prev_files: dict[str, dict[str, Any]], run_root: Path) -> bool | list[str]:
    """True if every file has the recorded size and mtime; else the list of files to hash."""
    rels = [_relpath(f, run_root) for f in plan.files]
    recorded = {p for p, r in prev_files.items() if r["collection_id"] == plan.collection_id}
    if set(rels) != recorded:
        return False
    changed = []
    for f, rel in zip(plan.files, rels):
        st = _stat(f)
        r = prev_files[rel]
        if st is None:
            return False
        if (st[0], st[1]) != (r["size_bytes"], r["mtime_ns"]):
            if r["sha256"] is None or st[0] != r["size_bytes"]:
                return False
            changed.append(rel)
    return True if not changed else changed


def ingest(
    root: str | os.PathLike[str],
    store: Store,
    run: str | None = None,
    workers: int | None = None,
    on_progress: Callable[[str, Any], None] | None = None,
) -> IngestReport:
    """Ingest every profiler output below ``root`` as run ``run`` (default: the folder name)."""
    t0 = time.perf_counter()
    root_p = Path(root).expanduser().resolve()
    if not root_p.exists():
        raise NothingIngestedError(f"{root_p}: no such file or folder")
    run_name = run or (root_p.name if root_p.is_dir() else root_p.stem.split(".")[0])
    # a store that does not exist yet holds nothing to compare with or to collect: reading starts
    # at once and the empty catalog is created while the workers read
    fresh = not store.exists()
    if not fresh:
        store.initialize()
    report = IngestReport(run_name, str(root_p), str(store.path))
    notify = on_progress or (lambda kind, obj: None)
    with store.ingest_lock():
        if fresh and store.exists():  # another ingest created it while this one waited for the lock
            fresh = False
            store.initialize()
        if not fresh:
            store.garbage_collect()
        disc = discover(root_p, run_name)
        run_root = disc.root
        prev_cols: dict[str, dict[str, Any]] = {}
        prev_files: dict[str, dict[str, Any]] = {}
        run_existed = False
        if not fresh:
            cat = store.load_catalog(["runs", "collections", "source_files"])
            prev_root = next((r["root_path"] for r in cat["runs"].to_pylist() if r["run"] == run_name), None)
            run_existed = prev_root is not None
            if run_existed and prev_root != str(run_root):
                raise RunConflictError(
                    f"run {run_name!r} in the store holds {prev_root}, not {run_root}: give this folder "
                    f"its own name (--run NAME), or `analyze drop {run_name}` first to replace it"
                )
            prev_cols = {r["collection_id"]: r for r in cat["collections"].to_pylist() if r["run"] == run_name}
            prev_files = {r["path"]: r for r in cat["source_files"].to_pylist() if r["run"] == run_name}
        to_read: list[CollectionPlan] = []
        touched: list[dict[str, Any]] = []
        for plan in disc.plans:
            prev = prev_cols.get(plan.collection_id)
            if prev is None or prev["rank"] != plan.rank or prev["rank_source"] != plan.rank_source:
                to_read.append(plan)  # new, or its rank is now decided differently
                continue
            verdict = _unchanged(plan, prev_files, run_root)
            if verdict is True:
                report.unchanged.append(plan)
            elif verdict is False:
                to_read.append(plan)
            else:  # same size, new mtime: re-read only if the content changed
                same = True
                for rel in verdict:
                    digest = file_sha256(run_root / rel)
                    if digest is None or digest != prev_files[rel]["sha256"]:
                        same = False
                        break
                if same:
                    report.unchanged.append(plan)
                    for rel in verdict:
                        row = dict(prev_files[rel])
                        st = _stat(run_root / rel)
                        row["mtime_ns"] = st[1] if st else row["mtime_ns"]
                        touched.append(row)
                else:
                    to_read.append(plan)
        found = {p.collection_id for p in disc.plans}
        report.gone = [c for cid, c in sorted(prev_cols.items()) if cid not in found]
        unchanged_ids = {p.collection_id for p in report.unchanged}
        report.earlier = [
            f
            for f in prev_files.values()
            if f["collection_id"] in unchanged_ids and f["status"] in ("warning", "error")
        ]
        for plan in report.unchanged:
            notify("unchanged", plan)
        results = _read_all(
            to_read, str(store.path), str(run_root), workers, notify, store.initialize if fresh else None
        )
        replace: list[str] = []
        collections: list[dict[str, Any]] = []
        fact_files: list[dict[str, Any]] = []
        file_rows: list[dict[str, Any]] = list(touched)
        for res in results:
            report.read.append(res)
            cid = res.plan.collection_id
            if res.status == "error" and cid in prev_cols and prev_cols[cid]["status"] != "error":
                # nothing readable this time: keep what was ingested before, record the problem
                report.kept_previous.append(cid)
                for f in res.file_rows:
                    if f["status"] == "error":
                        f["error"] = f"{f['error']} (previous data of this collection kept)"
                file_rows.extend(res.file_rows)
                continue
            replace.append(cid)
            collections.append(res.collection_row)
            fact_files.extend(res.fact_files)
            file_rows.extend(res.file_rows)
        now = utcnow()
        for path, reason in disc.ignored:
            st = _stat(path)
            rel = _relpath(path, run_root)
            file_rows.append(
                {
                    "run": run_name,
                    "path": rel,
                    "collection_id": None,
                    "size_bytes": st[0] if st else None,
                    "mtime_ns": st[1] if st else None,
                    "sha256": None,
                    "reader": "ignored",
                    "status": "ignored",
                    "error": reason,
                    "rows": 0,
                    "ingested_at": now,
                }
            )
            report.ignored.append((rel, reason))
        for path, reason in disc.problems:
            st = _stat(path)
            row = {
                "run": run_name,
                "path": _relpath(path, run_root),
                "collection_id": None,
                "size_bytes": st[0] if st else None,
                "mtime_ns": st[1] if st else None,
                "sha256": None,
                "reader": "discover",
                "status": "error",
                "error": reason,
                "rows": 0,
                "ingested_at": now,
            }
            file_rows.append(row)
            report.unreadable.append(row)
        if report.usable:  # the run mirrors the folder: what is no longer there leaves the run
            replace.extend(c["collection_id"] for c in report.gone)
        else:  # nothing readable (a folder being rewritten, a missing mount): keep everything
            report.gone = []
        if report.usable or run_existed:  # a run that never held data is not created
            store.commit(run_name, str(run_root), replace, collections, fact_files, file_rows)
        else:
            store.garbage_collect()  # the (empty) files the workers wrote
    report.seconds = time.perf_counter() - t0
    if report.usable == 0:
        if not disc.plans and not disc.problems:
            msg = (
                f"{root_p}: no profiler output found (looked for Kineto traces, *_ascend_pt folders, "
                f"collector rank_{{id}} folders); {len(disc.ignored)} other file(s) ignored"
            )
        else:
            msg = f"{root_p}: nothing could be ingested ({len(report.problems)} file(s) with problems)"
        err = NothingIngestedError(msg)
        err.report = report  # type: ignore[attr-defined]
        raise err
    return report


def _pool_context() -> Any:
    """Linux: fork — the workers start at once with everything already imported (a forkserver
    costs a fresh interpreter importing the readers before the first rank can start). Elsewhere a
    forkserver that imports the readers once."""
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["analyzer.ingest"])
    return ctx


def _keep_freed_memory() -> None:
    """glibc malloc, in a reader worker: serve blocks up to 64 MB from the heap and keep up to
    128 MB of freed heap instead of returning it to the system after every trace block — each
    block's buffers would otherwise be mapped, page-faulted in and unmapped again (a fifth of the
    ingest's CPU time went to page faults)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD


def _init_worker(threads: int, parent: int | None) -> None:
    """Pool worker start: share the cores between the workers (Arrow's thread pool per reader);
    a forked worker dies with the ingest that forked it (it must not outlive a killed ingest and
    keep writing, or keep the store's ingest lock it inherited)."""
    pa.set_cpu_count(threads)
    _keep_freed_memory()
    if parent is not None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)


def _read_all(
    plans: list[CollectionPlan],
    store_path: str,
    run_root: str,
    workers: int | None,
    notify: Callable[[str, Any], None],
    meanwhile: Callable[[], None] | None = None,
) -> list[CollectionResult]:
    """Read the collections (in a pool of forked workers when there are several); ``meanwhile``
    runs in this process once the workers have their work."""
    n = workers if workers is not None else min(len(plans), os.cpu_count() or 1)
    out: list[CollectionResult] = []
    if n <= 1 or len(plans) <= 1:
        if meanwhile is not None:
            meanwhile()
        for p in plans:
            notify("start", p)
            res = read_collection(p, store_path, run_root)
            notify("done", res)
            out.append(res)
        return out
    ctx = _pool_context()
    parent = os.getpid() if ctx.get_start_method() == "fork" else None
    # largest collections first so the pool is not left waiting on one big rank at the end
    order = sorted(plans, key=lambda p: -sum((_stat(f) or (0, 0))[0] for f in p.files))
    threads = max(1, (os.cpu_count() or 1) // n)
    with ProcessPoolExecutor(
        max_workers=n, mp_context=ctx, initializer=_init_worker, initargs=(threads, parent)
    ) as pool:
        futs = []
        for p in order:
            notify("start", p)
            futs.append(pool.submit(read_collection, p, store_path, run_root))
        if meanwhile is not None:
            meanwhile()
        for fut in futs:
            res = fut.result()
            notify("done", res)
            out.append(res)
    return out
