"""The ingest on a Dask cluster (``analyze ingest --scheduler ADDRESS``): the second executor.

The cluster's workers run the same ``read_collection`` as the local pool; each writes its
collection's Parquet files into the store folder, which must be on a filesystem the driver and
every worker share (the traces too: a worker reads them by the driver's paths). The driver hands
out the collections, reports each as it is done, and alone commits the catalog, once, as for a
local ingest. A worker that dies while reading is replaced by the scheduler: its collections are
read again on another worker (Dask's ``allowed-failures``); a collection that cannot be read on
the cluster fails the ingest before anything is committed, the files already written are removed.

``distributed`` is the optional extra ``rankscope[cluster]``; it is imported only here.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import ClusterError
from ..readers.base import CollectionPlan
from . import read
from .changes import stat_file
from .pool import Notify, _keep_freed_memory
from .read import read_collection
from .report import CollectionResult


class DaskCluster:
    """Read the collections on the workers of a running Dask scheduler (an address such as
    ``tcp://10.0.0.5:8786`` or a scheduler file written by ``dask scheduler --scheduler-file``)."""

    def __init__(self, address: str | None = None, scheduler_file: str | None = None, timeout: float = 60.0):
        if bool(address) == bool(scheduler_file):
            raise ClusterError("name the Dask scheduler by its address or by its scheduler file (one of them)")
        self.address = address
        self.scheduler_file = scheduler_file
        self.timeout = timeout

    @property
    def name(self) -> str:
        return self.address or f"the scheduler of {self.scheduler_file}"

    def run(
        self,
        plans: list[CollectionPlan],
        store_path: str,
        run_root: str,
        notify: Notify,
        meanwhile: Callable[[], None] | None = None,
    ) -> list[CollectionResult]:
        if not plans:
            if meanwhile is not None:
                meanwhile()
            return []
        client = self._connect()
        probe = _write_probe(store_path)
        try:
            _check_workers(client, self.name, probe, run_root, self.timeout)
            return _read(client, plans, store_path, run_root, str(probe[0]), probe[1], notify, meanwhile)
        finally:
            probe[0].unlink(missing_ok=True)
            client.close()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on one of the cluster's workers."""
        client = self._connect()
        try:
            return client.submit(fn, *args, pure=False).result()
        finally:
            client.close()

    def _connect(self) -> Any:
        try:
            from distributed import Client
        except ImportError as exc:
            raise ClusterError(
                "the ingest on a Dask cluster needs dask.distributed: pip install 'rankscope[cluster]'"
            ) from exc
        if self.scheduler_file and not Path(self.scheduler_file).is_file():
            raise ClusterError(f"{self.scheduler_file}: no such scheduler file")
        try:
            if self.scheduler_file:
                return Client(scheduler_file=self.scheduler_file, timeout=self.timeout, set_as_default=False)
            return Client(self.address, timeout=self.timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {self.name}: {exc}") from exc


def executor_for(scheduler: str | None, scheduler_file: str | None) -> DaskCluster | None:
    """The cluster executor the options (or ``DASK_SCHEDULER_ADDRESS``) name; None: the local pool."""
    if scheduler and scheduler_file:
        raise ClusterError("--scheduler and --scheduler-file name the same thing: give one of them")
    if scheduler or scheduler_file:
        return DaskCluster(scheduler, scheduler_file)
    return None


def read_on_worker(
    plan: CollectionPlan, store_path: str, run_root: str, probe: str, token: str, threads: dict[str, int]
) -> CollectionResult:
    """One collection, on a worker: refuse to write unless this worker sees the driver's store
    folder (its probe file) and the run's folder, then read it as the local pool does, with this
    host's cores shared between the worker threads the cluster runs on it (``threads``: by host)."""
    _require_shared(probe, token, run_root)
    _share_cores(threads)
    result = read_collection(plan, store_path, run_root)
    result.read_by = _where()
    return result


def _read(
    client: Any,
    plans: list[CollectionPlan],
    store_path: str,
    run_root: str,
    probe: str,
    token: str,
    notify: Notify,
    meanwhile: Callable[[], None] | None,
) -> list[CollectionResult]:
    from distributed import as_completed

    # largest collections first (Dask runs higher priorities first): no big rank left for the end
    order = sorted(plans, key=lambda p: -sum((stat_file(f) or (0, 0))[0] for f in p.files))
    threads: dict[str, int] = {}  # worker threads per host, to share each host's cores between them
    for w in client.scheduler_info(n_workers=-1)["workers"].values():
        threads[w["host"]] = threads.get(w["host"], 0) + w["nthreads"]
    batch = uuid.uuid4().hex[:8]
    futures = {}
    for i, p in enumerate(order):
        notify("start", p)
        fut = client.submit(
            read_on_worker,
            p,
            store_path,
            run_root,
            probe,
            token,
            threads,
            key=f"rankscope-read-{p.collection_id}-{batch}",
            priority=len(order) - i,
            pure=False,
        )
        futures[fut] = p
    if meanwhile is not None:
        meanwhile()
    out: list[CollectionResult] = []
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            try:
                res = fut.result()
            except Exception as exc:
                raise _failed(futures[fut], exc) from exc
            notify("done", res)
            out.append(res)
    except BaseException:
        client.cancel(list(futures), force=True)
        for res in out:  # the catalog never refers to them: remove them now, not at the next ingest
            for f in res.fact_files:
                (Path(store_path) / f["path"]).unlink(missing_ok=True)
        raise
    return out


def _failed(plan: CollectionPlan, exc: BaseException) -> ClusterError:
    kind = type(exc).__name__
    if kind == "KilledWorker":
        why = "the workers reading it died each time it was tried (out of memory? see the workers' logs)"
    else:
        why = f"{kind}: {exc}"
    return ClusterError(
        f"rank {plan.rank} ({plan.rel_root}) could not be read on the cluster: {why}; "
        "nothing was committed, the store is as it was"
    )


def _write_probe(store_path: str) -> tuple[Path, str]:
    """A file in the store folder that every worker must see: the shared-filesystem check."""
    folder = Path(store_path)
    folder.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    probe = folder / f".cluster-probe-{token[:12]}"
    probe.write_text(token)
    return probe, token


def _require_shared(probe: str, token: str, run_root: str) -> None:
    try:
        seen = Path(probe).read_text()
    except OSError:
        seen = None
    if seen != token:
        raise ClusterError(
            f"worker {_where()['host']} does not see the store folder {Path(probe).parent}: the store "
            "must be on a filesystem shared by the driver and every worker, at the same path"
        )
    if not Path(run_root).is_dir():
        raise ClusterError(
            f"worker {_where()['host']} does not see the run's folder {run_root}: the traces must be on "
            "a filesystem shared by the driver and every worker, at the same path"
        )


def _check_workers(client: Any, name: str, probe: tuple[Path, str], run_root: str, timeout: float) -> None:
    """Wait for a first worker; every worker there now must see the store and the traces."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError as exc:
        raise ClusterError(f"{name} has no workers (waited {timeout:.0f} s): start some with `dask worker`") from exc
    try:
        client.run(_require_shared, str(probe[0]), probe[1], run_root)
    except ClusterError:
        raise
    except Exception as exc:
        raise ClusterError(f"a worker of {name} failed its check: {type(exc).__name__}: {exc}") from exc


def _share_cores(threads: dict[str, int]) -> None:
    """As the local pool's workers do: this worker's share of its host's cores for one reader
    (Arrow's thread pool, a reader's read-ahead and encoding threads); freed memory kept."""
    from distributed import get_worker
    from distributed.comm import get_address_host

    worker = get_worker()
    on_host = threads.get(get_address_host(worker.address), worker.state.nthreads)
    cores = max(1, (os.cpu_count() or 1) // max(1, on_host))
    if cores != read.CORES:
        pa.set_cpu_count(cores)
        read.CORES = cores
    _keep_freed_memory()


def _where() -> dict[str, Any]:
    """Where a collection was read: host, process and (on a Dask worker) the worker's address."""
    where: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        from distributed import get_worker

        where["worker"] = get_worker().address
    except (ImportError, ValueError):
        pass
    where["at"] = time.time()
    return where
