"""Where the collections are read: the one executor seam of the ingest.

An executor takes the plans of the collections to read and returns their results; ``read_all``
picks one. Today it is ``LocalPool`` (forked worker processes on this machine, or this process
alone for one collection or one worker); a cluster executor plugs in here, with the same call.
The driver alone commits the catalog, whatever read the collections.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

from ..readers.base import PART_READERS, CollectionPlan
from . import aggregate, read
from .changes import stat_file
from .read import finish_parts, read_collection, read_part
from .report import CollectionResult

Notify = Callable[[str, Any], None]

# Inputs smaller than this (all their files) are read in the driver, one collection after the
# other, unless the workers are given: a pool's start, its forks (pages copied on write) and each
# worker's first calls into Arrow, DuckDB and the aggregates cost more CPU than the reading of a
# few small collections, which is then done by one process. bench/README.md (issue 13, Ascend
# ingest's fixed costs) has the figures: 2-rank inputs of 92 KB-3.7 MB, 0.2-0.3 s of CPU less.
SMALL_INPUT_BYTES = 4 << 20


class Executor(Protocol):
    def run(
        self,
        plans: list[CollectionPlan],
        store_path: str,
        run_root: str,
        notify: Notify,
        meanwhile: Callable[[], None] | None = None,
    ) -> list[CollectionResult]:
        """Read every plan (``read_collection``), calling ``notify('start', plan)`` and
        ``notify('done', result)``; ``meanwhile`` runs in the driver once the work is handed out."""

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` run where the collections are read (its result must pickle)."""


class LocalPool:
    """Forked worker processes on this machine (largest collections first), or this process alone."""

    def __init__(self, workers: int | None = None):
        self.workers = workers

    def run(
        self,
        plans: list[CollectionPlan],
        store_path: str,
        run_root: str,
        notify: Notify,
        meanwhile: Callable[[], None] | None = None,
    ) -> list[CollectionResult]:
        cores = os.cpu_count() or 1
        parts = _parts(plans, cores, store_path) if self.workers is None else {}
        tasks = len(plans) + sum(len(specs) - 1 for specs in parts.values())
        n = self.workers if self.workers is not None else min(tasks, cores)
        if self.workers is None and not parts and sum(map(_size, plans)) < SMALL_INPUT_BYTES:
            n = 1  # a small input is read here: forked workers would cost more than they save
        out: list[CollectionResult] = []
        if n <= 1 or tasks <= 1:
            if meanwhile is not None:
                meanwhile()
            for p in plans:
                notify("start", p)
                res = read_collection(p, store_path, run_root)
                notify("done", res)
                out.append(res)
            return out
        from concurrent.futures import ProcessPoolExecutor  # here: a small input never starts a pool

        ctx = _pool_context()
        parent = os.getpid() if ctx.get_start_method() == "fork" else None
        if parent is not None:  # the forked workers share the aggregates' imports instead of each paying them
            aggregate.preload()
        # largest collections first so the pool is not left waiting on one big rank at the end
        order = sorted(plans, key=lambda p: -_size(p))
        threads = max(1, cores // n)
        with ProcessPoolExecutor(
            max_workers=n, mp_context=ctx, initializer=_init_worker, initargs=(threads, parent)
        ) as pool:
            futs: list[Any] = []
            for p in order:
                notify("start", p)
                specs = parts.get(p.collection_id)
                if specs:  # one big file read by several workers at once, joined once all are read
                    futs.append([pool.submit(read_part, p, spec, store_path) for spec in specs])
                else:
                    futs.append(pool.submit(read_collection, p, store_path, run_root))
            if meanwhile is not None:
                meanwhile()
            for p, fut in zip(order, futs):
                if isinstance(fut, list):
                    done = [f.result() for f in fut]
                    fut = pool.submit(finish_parts, p, parts[p.collection_id], done, store_path, run_root)
                res = fut.result()
                notify("done", res)
                out.append(res)
        return out

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a fresh Python process with every core (the driver stays free of what
        ``fn`` imports). Not a fork: by now the driver has opened the catalog, and a fork of a
        process whose other threads (DuckDB's, Arrow's, a host program's) hold locks can hang; not
        multiprocessing's spawn either, which runs the caller's main script again."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}
        proc = subprocess.run(
            [sys.executable, "-c", _CALL], input=pickle.dumps((fn, args)), capture_output=True, env=env, check=False
        )
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise ChildProcessError(f"{fn.__module__}.{fn.__qualname__} failed (exit {proc.returncode}): {tail[0]}")
        return pickle.loads(proc.stdout)


# what LocalPool.call runs in its fresh process: (fn, args) pickled on stdin, the result on stdout
_CALL = "import pickle, sys; fn, args = pickle.load(sys.stdin.buffer); sys.stdout.buffer.write(pickle.dumps(fn(*args)))"


def _size(plan: CollectionPlan) -> int:
    return sum((stat_file(f) or (0, 0))[0] for f in plan.files)


def _parts(plans: list[CollectionPlan], cores: int, store_path: str) -> dict[str, list[dict[str, Any]]]:
    """The collections read in parts (``PART_READERS``): the biggest first, while there are more
    cores than collections; by collection id, the parts' specs."""
    spare = cores - len(plans)
    out: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(plans, key=lambda p: -_size(p)):
        reader = PART_READERS.get(p.producer)
        if spare <= 0:
            break
        if reader is None:
            continue
        specs = reader.split(p, spare + 1, store_path)
        if specs:
            out[p.collection_id] = specs
            spare -= len(specs) - 1
    return out


def read_all(
    plans: list[CollectionPlan],
    store_path: str,
    run_root: str,
    notify: Notify,
    workers: int | None = None,
    meanwhile: Callable[[], None] | None = None,
    executor: Executor | None = None,
) -> list[CollectionResult]:
    """Read the collections with ``executor`` (default: a ``LocalPool`` of ``workers`` processes)."""
    return (executor or LocalPool(workers)).run(plans, store_path, run_root, notify, meanwhile)


def _pool_context() -> Any:
    """Linux: fork — the workers start at once with everything already imported (a forkserver
    costs a fresh interpreter importing the readers before the first rank can start). Elsewhere a
    forkserver that imports the readers once."""
    import multiprocessing as mp  # ~15-20 ms of CPU that an ingest of a small input does without

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
    read.CORES = threads
    _keep_freed_memory()
    if parent is not None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)
