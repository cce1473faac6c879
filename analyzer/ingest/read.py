"""Reading one collection (in a worker process): its producer's reader, then the run files it carries,
into fresh Parquet files; the collection's catalog row and the rows of its files."""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path
from typing import Any

from .. import readers  # noqa: F401 - importing the readers registers them
from ..errors import InputError
from ..factwriter import FactWriter
from ..readers.base import READERS, CollectionPlan, ReadContext
from ..readers.registry import read_run_file
from ..store import utcnow
from .changes import source_file_row
from .report import CollectionResult

# cores one reader may use: all of them in this process; the pool gives each worker its share
CORES = os.cpu_count() or 1


def read_collection(plan: CollectionPlan, store_path: str, run_root: str) -> CollectionResult:
    """Read one collection into fresh Parquet files (runs in a worker process)."""
    t0 = time.perf_counter()
    rank = plan.rank if plan.rank is not None else 0
    writer = FactWriter(store_path, plan.run, rank, plan.collection_id, background=CORES > 1)
    ctx = ReadContext(plan, writer, CORES)
    # Readers create millions of short-lived, acyclic objects (decoded events): reference counting
    # frees them, and the cyclic collector would only re-scan the heap again and again meanwhile.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _run_reader(ctx)
        for kind, path in plan.run_files:
            read_run_file(ctx, kind, path)
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
    now = utcnow()
    file_rows = [
        source_file_row(
            plan.run,
            path,
            Path(run_root),
            now,
            oc.reader,
            oc.status,
            oc.error,
            collection_id=plan.collection_id,
            rows=oc.rows,
            hashed=oc.status != "ignored",
            sha256=oc.sha256,
        )
        for path, oc in sorted(ctx.outcomes.items())
    ]
    status = _status(ctx, plan, writer.total_rows)
    row = _collection_row(ctx, writer, rank, status, now)
    return CollectionResult(plan, status, row, fact_files, file_rows, time.perf_counter() - t0)


def _run_reader(ctx: ReadContext) -> None:
    """The producer's reader; a failure it did not record itself is recorded against a file."""
    plan = ctx.plan
    reader = READERS.get(plan.producer)
    if reader is None:
        for f in plan.files:
            ctx.ignore(f, f"no reader for producer {plan.producer}")
        return
    try:
        reader(ctx)
    except InputError as exc:
        with ctx.reading(Path(exc.path), plan.producer):
            raise
    except Exception as exc:
        with ctx.reading(plan.files[0] if plan.files else plan.root, plan.producer):
            raise RuntimeError(f"reader {plan.producer} failed: {type(exc).__name__}: {exc}") from exc


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


def _window_sentence(sc: dict[str, Any]) -> str | None:
    """What the collector's sidecar says about a window that did not complete, or None."""
    if not sc or sc.get("status") in (None, "complete"):
        return None
    captured = sc.get("captured_steps") or []
    last = f", last complete step {max(captured)}" if captured else ", no step completed"
    reason = f" ({sc['reason']})" if sc.get("reason") else ""
    if sc.get("status") == "running":  # no clean-up ran: SIGKILL / os._exit, or the job is still profiling
        return (
            f"the profiling window was still open (sidecar status running: the job is still "
            f"profiling, or was killed without clean-up){last}: later steps were not captured"
        )
    return f"the job stopped during the profiling window{reason}{last}: later steps were not captured"


def _collection_row(ctx: ReadContext, writer: FactWriter, rank: int, status: str, now: Any) -> dict[str, Any]:
    plan, meta = ctx.plan, ctx.meta
    missing = list(meta.missing)
    sc = plan.sidecar or {}
    window = _window_sentence(sc)
    if window:
        missing.insert(0, window)
    if plan.hints.get("rank_warning"):
        missing.insert(0, plan.hints["rank_warning"])
    extra = dict(meta.extra)
    if sc:
        extra["sidecar"] = sc
    return {
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
