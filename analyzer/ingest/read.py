"""Reading one collection (in a worker process): its producer's reader, then the run files it carries,
into fresh Parquet files; the collection's catalog row and the rows of its files."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import readers  # noqa: F401 - importing the readers registers them
from ..errors import InputError
from ..factwriter import FactWriter
from ..format import safe_text
from ..messages import english, problem
from ..readers.base import PART_READERS, READERS, CollectionPlan, ReadContext
from ..readers.collector import sidecar_sentences, steps_from_sidecar
from ..readers.registry import read_run_file
from ..store import utcnow
from . import aggregate
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
        steps_from_sidecar(ctx)
        sidecar_sentences(ctx)
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
    try:
        return _result(ctx, plan, writer, fact_files, store_path, run_root, t0)
    finally:
        give_back_memory()


def _result(
    ctx: ReadContext,
    plan: CollectionPlan,
    writer: FactWriter,
    fact_files: list[dict[str, Any]],
    store_path: str,
    run_root: str,
    t0: float,
) -> CollectionResult:
    """The collection's result once its reader is done: every file's row, its status and row, and
    its aggregates written beside its facts."""
    rank = plan.rank if plan.rank is not None else 0
    for f in plan.files:  # files of the collection no reader looked at
        if f not in ctx.outcomes:
            ctx.ignore(f, problem("ignored.not_used"))
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
    try:  # the aggregates the pages draw from, here in the worker (``aggregate``)
        fact_files = fact_files + aggregate.build(store_path, row, fact_files)
    except BaseException:
        _remove(store_path, fact_files)
        raise
    return CollectionResult(plan, status, row, fact_files, file_rows, time.perf_counter() - t0)


@dataclass
class PartResult:
    """One part of a collection read by ``read_part``: the producer's state for its ``finish``, the
    fact files written, what they hold, and the part's own problems (None: the part failed)."""

    index: int
    state: Any
    fact_files: list[dict[str, Any]]
    tally: dict[str, Any]
    error: str | None = None


def read_part(plan: CollectionPlan, spec: dict[str, Any], store_path: str) -> PartResult:
    """Read one part of a collection (``PART_READERS``) into fresh Parquet files (in a worker)."""
    writer = FactWriter(store_path, plan.run, plan.rank if plan.rank is not None else 0, plan.collection_id)
    ctx = ReadContext(plan, writer, CORES)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        state = PART_READERS[plan.producer].read(ctx, spec)
        noted = [o.error for o in ctx.outcomes.values() if o.error] + ctx.meta.missing
        noted += [p for _f, p in writer.take_problems()]
        if noted:  # a part with a problem (impossible times, a broken event): read whole, which names it
            writer.abort()
            return PartResult(spec["index"], None, [], {}, "; ".join(str(x) for x in noted))
        return PartResult(spec["index"], state, writer.close(), writer.tally())
    except Exception as exc:  # noqa: BLE001 - the collection is then read whole, which reports it
        writer.abort()
        return PartResult(spec["index"], None, [], {}, f"{type(exc).__name__}: {exc}")
    finally:
        ctx.cleanup()
        if gc_was_enabled:
            gc.enable()
        give_back_memory()  # this worker may now wait, idle, while another joins the parts


def finish_parts(
    plan: CollectionPlan, specs: list[dict[str, Any]], parts: list[PartResult], store_path: str, run_root: str
) -> CollectionResult:
    """Join the parts of a collection (the producer's ``finish``) into one collection's result; when
    a part failed or they do not join, their files go and the collection is read whole."""
    t0 = time.perf_counter()
    try:
        if any(p.error for p in parts):
            raise RuntimeError("; ".join(p.error for p in parts if p.error))
        rank = plan.rank if plan.rank is not None else 0
        writer = FactWriter(store_path, plan.run, rank, plan.collection_id, background=CORES > 1)
        for p in parts:
            writer.adopt(p.tally)
        ctx = ReadContext(plan, writer, CORES)
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            PART_READERS[plan.producer].finish(ctx, [p.state for p in parts])
            for kind, path in plan.run_files:
                read_run_file(ctx, kind, path)
            fact_files = [f for p in parts for f in p.fact_files] + writer.close()
        except BaseException:
            writer.abort()
            raise
        finally:
            ctx.cleanup()
            if gc_was_enabled:
                gc.enable()
    except Exception:  # noqa: BLE001 - read whole: the same data, the problems reported as usual
        _remove(store_path, [f for p in parts for f in p.fact_files])
        return read_collection(plan, store_path, run_root)
    finally:
        for scratch in {s.get("scratch") for s in specs if s.get("scratch")}:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        return _result(ctx, plan, writer, fact_files, store_path, run_root, t0)
    finally:
        give_back_memory()


def give_back_memory() -> None:
    """Once a collection (or a part of one) is read: the memory its reading freed goes back to the
    system. Arrow's allocator and glibc's heap keep freed memory for reuse (a worker keeps up to
    128 MB: ``pool._keep_freed_memory``), and a worker waiting for its next task, or idle while
    another joins a big trace's parts, would hold it all that time."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _remove(store_path: str, fact_files: list[dict[str, Any]]) -> None:
    for f in fact_files:
        (Path(store_path) / f["path"]).unlink(missing_ok=True)


def _run_reader(ctx: ReadContext) -> None:
    """The producer's reader; a failure it did not record itself is recorded against a file."""
    plan = ctx.plan
    reader = READERS.get(plan.producer)
    if reader is None:
        for f in plan.files:
            ctx.ignore(f, problem("ignored.no_reader", producer=plan.producer))
        return
    try:
        reader(ctx)
    except InputError as exc:
        with ctx.reading(Path(exc.path), plan.producer):
            raise
    except OSError as exc:  # a file or folder the reader could not open (permissions, vanished)
        where = Path(exc.filename) if isinstance(exc.filename, str) else None
        target = where if where in plan.files else plan.files[0] if plan.files else plan.root
        what = problem("cannot_read", detail=exc.strerror or exc)
        if where is not None and where != target:
            what += f" ({safe_text(where.name)})"
        with ctx.reading(target, plan.producer):
            raise InputError(str(target), what) from exc
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
    last = english("missing.part.last_step", step=max(captured)) if captured else english("missing.part.no_step")
    why = english("missing.part.reason", reason=sc["reason"]) if sc.get("reason") else ""
    if sc.get("status") == "running":  # no clean-up ran: SIGKILL / os._exit, or the job is still profiling
        return english("missing.window_open", last=last)
    return english("missing.window_stopped", why=why, last=last)


def _int32(name: str, v: Any, missing: list[str]) -> Any:
    """A number of the collection's metadata as its INTEGER column holds it: a value read from a
    damaged file that no such column holds (1e26 devices) is left empty and said, instead of failing
    the commit of the whole run."""
    if isinstance(v, int) and not -(1 << 31) <= v < (1 << 31):
        missing.append(english("missing.bad_number", what=name, value=v))
        return None
    return v


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
    world_size = _int32(
        english("missing.part.world_size"),
        meta.world_size if meta.world_size is not None else sc.get("world_size"),
        missing,
    )
    return {
        "collection_id": plan.collection_id,
        "run": plan.run,
        "rank": rank,
        "rank_source": plan.rank_source,
        "producer": plan.producer,
        "producer_version": meta.producer_version or sc.get("framework_version"),
        "root_path": plan.rel_root,
        "world_size": world_size,
        "hostname": meta.hostname or sc.get("host"),
        "device_id": _int32(english("missing.part.device_id"), meta.device_id, missing),
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
