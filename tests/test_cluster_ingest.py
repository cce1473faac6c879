"""The ingest on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on 127.0.0.1
(started here, stopped by PID), reading real multi-rank traces. The collections are read in the
workers' processes, the store equals a local ingest row for row, a worker killed mid-ingest is
replaced without changing the result, and a failure on the cluster leaves the store as it was."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from golden import fingerprint
from helpers import REPO, analyze, replicated_kineto_job
from test_aggregates import check_aggregates, check_run_results
from test_kill_mid_ingest import _snapshot

from analyzer.errors import ClusterError
from analyzer.ingest import DaskCluster, ingest, run_results
from analyzer.store import Store

DASK = Path(sys.executable).parent / "dask"
# real multi-rank traces of three producers (run name -> folder)
SAMPLES = {
    "kineto": REPO / "sample_data" / "kineto_gloo_2rank",
    "kineto_slow": REPO / "tests" / "data" / "kineto_gloo_4rank_slow",
    "mindspore": REPO / "sample_data" / "mindspore_cpu_2rank",
    "npu_db": REPO / "sample_data" / "torch_npu_db_level1",
}
BIG_RANKS = 8


@dataclass
class Cluster:
    scheduler_file: Path
    address: str
    client: Any
    procs: list[subprocess.Popen[bytes]]
    worker_pids: dict[str, int] = field(default_factory=dict)  # worker address -> its process
    seen_pids: set[int] = field(default_factory=set)  # every worker process seen (restarted ones too)

    def refresh(self, n: int = 2) -> None:
        self.client.wait_for_workers(n, timeout=180)
        deadline = time.monotonic() + 180
        while True:  # a replaced worker leaves the scheduler's list a moment after its successor joins
            pids = self.client.run(os.getpid)
            if len(pids) == n or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.worker_pids = dict(pids)
        self.seen_pids |= set(pids.values())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _kill_if_dask(pid: int) -> None:
    """A worker process its nanny did not take down (the nanny was killed first): by PID, only if it is one."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"dask" in cmd or b"distributed" in cmd or b"multiprocessing" in cmd:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from distributed import Client

    tmp = tmp_path_factory.mktemp("dask")
    sched_file = tmp / "scheduler.json"
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # every dask server (the scheduler too, which has no --local-directory) keeps a scratch space in
    # dask's temporary-directory, by default $TMPDIR/dask-scratch-space: here, the test's folder
    env["DASK_TEMPORARY_DIRECTORY"] = str(tmp / "scratch")
    procs: list[subprocess.Popen[bytes]] = []
    client = None
    c: Cluster | None = None

    def start(args: list[str], log: str) -> None:
        with open(tmp / log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [str(DASK), *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=tmp,
                    start_new_session=True,  # not in the test's process group: a Ctrl-C is the test's
                )
            )

    try:
        # the scheduler: any free port, no dashboard; it gives up after 10 min without work (a killed test run)
        start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
            + ["--scheduler-file", str(sched_file), "--idle-timeout", "600s"],
            "scheduler.log",
        )
        deadline = time.monotonic() + 180
        while not sched_file.exists():
            assert procs[0].poll() is None, (tmp / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler wrote no scheduler file"
            time.sleep(0.1)
        for i in range(2):
            start(
                ["worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1", "--nthreads", "1"]
                + ["--no-dashboard", "--name", f"w{i}", "--local-directory", str(tmp / f"w{i}")]
                + ["--death-timeout", "120"],
                f"worker{i}.log",
            )
        client = Client(scheduler_file=str(sched_file), timeout=120, set_as_default=False)
        address = json.loads(sched_file.read_text())["address"]
        c = Cluster(sched_file, address, client, procs)
        c.refresh()
        yield c
    finally:
        if client is not None:
            client.close()
        for proc in reversed(procs):  # workers (their nannies take their worker processes down), scheduler
            _stop(proc)
        for pid in c.seen_pids if c is not None else ():
            _kill_if_dask(pid)


@pytest.fixture(scope="module")
def big_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replicated_kineto_job(tmp_path_factory.mktemp("job") / "big", BIG_RANKS)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, big_job: Path) -> dict[str, Any]:
    """The same folders ingested by the local pool: the fingerprint the cluster must give."""
    store = tmp_path_factory.mktemp("local") / "store"
    for run, folder in {**SAMPLES, "big": big_job}.items():
        ingest(folder, Store(store), run=run)
    return fingerprint(Store(store), [*SAMPLES, "big"])


def test_cluster_ingest_equals_local_ingest(
    cluster: Cluster, local: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_results, "MIN_RANKS", 4)  # the 4-rank run's analyses are stored too, computed on a worker
    store = Store(tmp_path / "store")
    executor = DaskCluster(scheduler_file=str(cluster.scheduler_file))
    events: list[tuple[str, str]] = []
    reports = {}
    for run, folder in SAMPLES.items():

        def note(kind: str, obj: Any) -> None:
            events.append((kind, obj.collection_id if kind == "start" else obj.plan.collection_id))

        reports[run] = ingest(folder, store, run=run, executor=executor, on_progress=note)
    assert fingerprint(store, list(SAMPLES)) == {r: local[r] for r in SAMPLES}
    for run in SAMPLES:  # the aggregates the workers built (in the fingerprint) equal what the facts give
        check_aggregates(store, run)
    assert reports["kineto_slow"].stored_analyses and not reports["kineto"].stored_analyses
    check_run_results(store, "kineto_slow")
    read = [r for rep in reports.values() for r in rep.read]
    assert len(read) == sum(len(rep.read) for rep in reports.values()) >= 10
    # every collection was read in a worker process of the cluster, none in this one
    pids = {r.read_by["pid"] for r in read}
    assert pids <= set(cluster.worker_pids.values()) and os.getpid() not in pids, (pids, cluster.worker_pids)
    assert {r.read_by["worker"] for r in read} <= set(cluster.worker_pids)
    # progress per collection: each started once and reported done once
    started = sorted(cid for kind, cid in events if kind == "start")
    assert (
        started == sorted(cid for kind, cid in events if kind == "done") == sorted(r.plan.collection_id for r in read)
    )
    # the shared-filesystem probe does not stay behind
    assert not list(store.path.glob(".cluster-probe-*"))


def test_cli_ingest_on_the_scheduler_from_the_environment(
    cluster: Cluster, local: dict[str, Any], big_job: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = {"DASK_SCHEDULER_ADDRESS": cluster.address}
    out = json.loads(analyze("ingest", str(big_job), "--store", str(store), "--run", "big", "--json", env=env).stdout)
    cols = out["collections"]
    assert len(cols) == BIG_RANKS and all(c["status"] == "complete" for c in cols)
    pids = {c["read_by"]["pid"] for c in cols}
    assert pids == set(cluster.worker_pids.values()), (pids, cluster.worker_pids)  # both workers took ranks
    assert fingerprint(Store(store), ["big"]) == {"big": local["big"]}
    # the progress lines name the worker's host; the scheduler file works as well as the address
    again = analyze(
        "ingest", str(big_job), "--store", str(tmp_path / "s2"), "--scheduler-file", str(cluster.scheduler_file)
    )
    assert f"on {socket.gethostname()}" in again.stdout, again.stdout
    assert fingerprint(Store(tmp_path / "s2"), ["big"]) == {"big": local["big"]}


def test_worker_killed_mid_ingest_its_collections_are_read_elsewhere(
    cluster: Cluster, local: dict[str, Any], big_job: Path, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    killed: dict[str, Any] = {}
    stop = threading.Event()

    def kill_a_busy_worker() -> None:
        # watches from the moment the ingest starts, so the kill lands while collections are still being
        # read whatever the load (waiting for the first one to finish raced the others on a busy machine)
        while not stop.is_set():
            for addr, keys in cluster.client.processing().items():
                if keys and addr in cluster.worker_pids:
                    os.kill(cluster.worker_pids[addr], signal.SIGKILL)  # the worker process, mid-task
                    killed.update(pid=cluster.worker_pids[addr], at=time.time(), keys=list(keys))
                    return
            stop.wait(0.02)

    watcher = threading.Thread(target=kill_a_busy_worker, daemon=True)
    watcher.start()
    try:
        report = ingest(big_job, store, run="big", executor=DaskCluster(scheduler_file=str(cluster.scheduler_file)))
    finally:
        stop.set()
        watcher.join(60)
        cluster.refresh()  # its nanny starts a new worker process: two workers again for the next tests
    assert killed, "no worker was ever seen busy during the ingest"
    assert len(report.read) == BIG_RANKS and all(r.status == "complete" for r in report.read)
    after = [r for r in report.read if r.read_by["at"] > killed["at"]]
    assert after and all(r.read_by["pid"] != killed["pid"] for r in after)
    assert fingerprint(store, ["big"]) == {"big": local["big"]}


def test_failure_on_the_cluster_leaves_the_store_unchanged(cluster: Cluster, big_job: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ingest(SAMPLES["kineto"], store, run="base")
    before = _snapshot(store.path)
    files_before = sorted(store.path.rglob("*.parquet"))

    def lose_the_shared_filesystem(kind: str, obj: Any) -> None:
        if kind == "done":  # the workers no longer see the store folder: the next collections refuse to write
            for probe in store.path.glob(".cluster-probe-*"):
                probe.unlink()

    executor = DaskCluster(scheduler_file=str(cluster.scheduler_file))
    with pytest.raises(ClusterError, match="does not see the store folder.*nothing was committed"):
        ingest(big_job, store, run="big", executor=executor, on_progress=lose_the_shared_filesystem)
    assert _snapshot(store.path) == before
    # a collection still being read when the ingest failed may leave its files: wait for it, then the
    # next ingest collects them with the rest
    deadline = time.monotonic() + 120
    while any(cluster.client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    ingest(SAMPLES["kineto"], store, run="base")
    assert sorted(store.path.rglob("*.parquet")) == files_before


def test_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    store = Store(tmp_path / "store")
    ingest(SAMPLES["kineto"], store, run="base")
    before = _snapshot(store.path)
    with pytest.raises(ClusterError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        ingest(SAMPLES["kineto_slow"], store, run="slow", executor=DaskCluster(f"tcp://127.0.0.1:{port}", timeout=3))
    assert _snapshot(store.path) == before
    proc = analyze(
        "ingest",
        str(SAMPLES["kineto_slow"]),
        "--store",
        str(tmp_path / "s"),
        "--scheduler-file",
        str(tmp_path / "none.json"),
        check=False,
    )
    assert proc.returncode != 0 and "none.json: no such scheduler file" in proc.stdout + proc.stderr
