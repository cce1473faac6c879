"""Small helpers shared by tests: run the real CLI, count events in a Chrome trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).parent / "analyze"
ANALYZE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "analyzer"]


def analyze(
    *args: str, check: bool = True, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `analyze ...` as a user would (a real process), returning the completed process."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([*ANALYZE, *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"analyze {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def analyze_here(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``analyze ...`` through the real command in this process (click's runner), answered as
    :func:`analyze` answers: for a test of what the command made (a reader's rows, its reasons), not
    of the command as a process (exit codes, signals, stderr of a real process: test_store_and_cli,
    test_kill_mid_ingest, test_concurrent_writers use :func:`analyze`). A process per call cost ~2 s of
    CPU more (the interpreter, pandas, DuckDB, pyarrow imported again)."""
    from click.testing import CliRunner

    from analyzer.cli import main

    res = CliRunner().invoke(main, list(args), env={"COLUMNS": "200", **(env or {})})
    proc = subprocess.CompletedProcess(["analyze", *args], res.exit_code, res.stdout, res.stderr)
    if check and res.exit_code != 0:
        raise AssertionError(
            f"analyze {' '.join(args)} failed ({res.exit_code}):\n{res.stdout}\n{res.stderr}"
        ) from res.exception
    return proc


def sigint_as_on_a_terminal() -> None:
    """``preexec_fn`` of a child a test interrupts with SIGINT: the default disposition, as a program
    started from a terminal has it. A suite run as a background job (``make test &``) ignores SIGINT,
    an ignored signal stays ignored across exec, and Python then installs no KeyboardInterrupt
    handler: the interrupt would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def analyze_json(*args: str) -> Any:
    return json.loads(analyze(*args).stdout)


def analyze_here_json(*args: str) -> Any:
    """What ``analyze ARGS`` prints as JSON, through the real command in this process (:func:`analyze_here`)."""
    return json.loads(analyze_here(*args).stdout)


def query(store: Path, sql: str) -> list[dict[str, Any]]:
    """``analyze query SQL --format json --store STORE`` through the real command, in this process
    (click's runner): a check of what a test made, not the test of `analyze query` as a process
    (test_query_lockdown, test_store_and_cli) — a process per check cost ~0.7 s of CPU (interpreter,
    pandas, DuckDB), in process ~0.08 s."""
    from click.testing import CliRunner

    from analyzer.cli import main

    res = CliRunner().invoke(main, ["query", sql, "--format", "json", "--store", str(store)])
    if res.exit_code != 0:
        raise AssertionError(f"analyze query {sql!r} failed ({res.exit_code}):\n{res.output}") from res.exception
    return json.loads(res.stdout)


def replicated_kineto_job(root: Path, ranks: int) -> Path:
    """A job of ``ranks`` ranks made of the two real traces of sample_data/kineto_gloo_2rank (rank r
    is rank r % 2's trace, with its rank and world size rewritten), one folder per rank."""
    src = REPO / "sample_data" / "kineto_gloo_2rank"
    for r in range(ranks):
        d = root / f"rank_{r}"
        d.mkdir(parents=True)
        data = sorted((src / f"rank_{r % 2}").rglob("*.pt.trace.json"))[-1].read_bytes()
        data = data.replace(
            f'"rank": {r % 2}, "world_size": 2'.encode(), f'"rank": {r}, "world_size": {ranks}'.encode(), 1
        )
        (d / f"rank{r}.pt.trace.json").write_bytes(data)
    return root


def trace_events(path: Path) -> list[dict[str, Any]]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def communication_group_json(path: Path) -> Any:
    """msprof-analyze's communication_group.json as the parallel-layout analysis sees it once ingested:
    the reader's rows (declared_groups) turned into group records."""
    import pandas as pd

    from analyzer.analyses.parallel_layout import declared_group_frame
    from analyzer.readers.ascend.cluster import SOURCE, communication_groups

    cols = communication_groups(Path(path))
    cols["source"] = [SOURCE] * len(cols["group_name"])
    return declared_group_frame(pd.DataFrame(cols))


def traced_p2p(doc: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Per ``ProfilerStep#N`` of a rank's raw Kineto trace (the loaded JSON document): its sends and
    recvs in call order, each ``{"kind", "call", "end"}`` in ns on the trace's clock: the call
    (``c10d::send`` / ``c10d::recv_`` on the training thread) and the end of its ``gloo:send`` /
    ``gloo:recv`` range (gloo's worker thread). Gloo's ranges name no call, so the n-th call of a
    kind is joined to the n-th range of that kind (both in time order; there must be as many)."""
    base = int(doc["baseTimeNanoseconds"])
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]

    def ns(us: float) -> int:
        return base + round(us * 1000)

    steps = {
        int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"] + e["dur"]))
        for e in ev
        if e["name"].startswith("ProfilerStep#")
    }
    out: dict[int, list[dict[str, Any]]] = {s: [] for s in steps}
    for kind, call_name in (("send", "c10d::send"), ("recv", "c10d::recv_")):
        calls = sorted(ns(e["ts"]) for e in ev if e["name"] == call_name)
        ranges = sorted((ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in ev if e["name"] == f"gloo:{kind}")
        assert len(calls) == len(ranges), (kind, len(calls), len(ranges))
        for call, (_, end) in zip(calls, ranges):
            step = next(s for s, (a, b) in steps.items() if a <= call < b)
            out[step].append({"kind": kind, "call": call, "end": end})
    for ops in out.values():
        ops.sort(key=lambda o: o["call"])
    return out


def job_records(job: Path, ranks: int) -> dict[int, dict[str, Any]]:
    """The own record of a pipeline job made by tests/data/make_pipeline_*.py (``job/log/rank{r}.json``)
    per rank, each step's p2p ops joined to their events in the rank's raw trace (``traced``: the
    n-th op posted in a step is the n-th ``c10d::send`` / ``c10d::recv_`` call in it, ``traced_p2p``),
    and ``to_trace``: the job's clock (monotonic) on the trace's, the median gap between an
    exchange's stamp and its first call (the call is made right after the job read its clock: tens
    of µs under load)."""
    out: dict[int, dict[str, Any]] = {}
    for rank in range(ranks):
        log = json.loads((job / "log" / f"rank{rank}.json").read_text())
        doc = json.loads((job / "trace" / f"rank_{rank}" / f"rank{rank}.pt.trace.json").read_text())
        traced = traced_p2p(doc)
        for st in log["steps"]:
            mine = traced[st["step"]]  # in call order
            assert [o["kind"] for o in mine] == [o["kind"] for o in st["p2p"]], (rank, st["step"])
            for o, posted in zip(mine, st["p2p"]):
                o.update(posted)
            st["traced"] = mine
        gaps = sorted(
            min(o["call"] for o in st["traced"] if o["exchange"] == i) - ex["posted"]
            for st in log["steps"]
            for i, ex in enumerate(st["exchanges"])
        )
        log["to_trace"] = gaps[len(gaps) // 2]
        out[rank] = log
    return out


def bubble_shares(stages: Any, job: dict[int, dict[str, Any]]) -> list[tuple[float, float]]:
    """Per row of ``pipeline_stages`` (one rank's step) the bubble share in % by the job's own clock
    (its exchanges from posting to the last wait, over the step's start to the end of its last
    exchange: ``job_records``) and by the trace (``bubble_pct``). Asserts the two readings nest:
    the trace's ops lie inside the job's exchanges (called after the job's stamp, done before its
    wait returned), so their time is never more than the job's; the trace's phase starts at the
    step's start (ProfilerStep), before the job's own stamp (on the first stage of the first
    profiled step that includes the profiler's start: 4.7 ms of a 42 ms phase seen on an idle
    machine), so it is never shorter than the job's (within the clocks' resolution)."""
    out = []
    for row in stages.itertuples():
        log = next(s for s in job[row.rank]["steps"] if s["step"] == row.step)
        blocked = sum(ex["done"] - ex["posted"] for ex in log["exchanges"])
        phase = log["pipeline_end"] - log["start"]
        assert row.bubble_ns <= blocked + 1_000_000 + blocked // 100, (row.rank, row.step, row.bubble_ns, blocked)
        assert row.phase_ns >= phase - 1_000_000, (row.rank, row.step, row.phase_ns, phase)
        out.append((100 * blocked / phase, 100 * row.bubble_ns / phase))
    return out
