"""Kineto traces through the real CLI: every table checked against what the JSON files say.

Scenarios and where their files come from (copied unchanged):
- sample_data/kineto_gloo_2rank: our own 2-rank gloo CPU training, torch 2.13, shapes + memory + stacks,
  one trace per step in the collector's window folder (see sample_data/README.md);
- tests/data/hta_nccl: a GPU trace with NCCL kernels, ``baseTimeNanoseconds`` written at the END of the
  file — facebookresearch/HolisticTraceAnalysis@f4d0062c tests/data/nccl_parser_config/nccl_data.json.gz;
- tests/data/kineto_cpu_only: gloo, rank 34 of 300, eleven process groups in distributedInfo.pg_config —
  HolisticTraceAnalysis@f4d0062c tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz;
- tests/data/hta_trace_filter: ranks 0 and 1 of a 128-rank NCCL job (compact JSON, absolute µs times) —
  HolisticTraceAnalysis@f4d0062c tests/data/trace_filter/sampled_rank-{0,1}.json.gz;
- tests/data/kineto_resnet50_old: PyTorch 1.9 (2021) trace with the OLD category names (Operator, Kernel,
  Memcpy, Memset), ``[memory]`` events without a category, no distributedInfo — pytorch/kineto@041e7ce9
  tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, analyze_here, query

from analyzer.store import Store

DATA = REPO / "tests" / "data"
SCENARIOS = {
    "kineto_gloo_2rank": REPO / "sample_data" / "kineto_gloo_2rank",
    "hta_nccl": DATA / "hta_nccl",
    "kineto_cpu_only": DATA / "kineto_cpu_only",
    "hta_trace_filter": DATA / "hta_trace_filter",
    "kineto_resnet50_old": DATA / "kineto_resnet50_old",
}
OP_CATS = {"cpu_op", "user_annotation", "Operator"}
KERNEL_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
DTYPE = {"float": 4, "Float": 4, "int8_t": 1, "Byte": 1, "Long": 8, "long int": 8, "Int": 4, "int": 4}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("kineto") / "store"
    analyze_here("ingest", *map(str, SCENARIOS.values()), "--store", str(path))
    return Store(path)


def rows(store: Store, sql: str) -> list[dict[str, Any]]:
    return store.query(sql).to_dict("records")


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def traces(scenario: str, rank: int | None = None) -> list[Path]:
    root = SCENARIOS[scenario]
    files = sorted(p for p in root.rglob("*") if p.name.endswith((".json", ".json.gz")) and "rankscope" not in p.name)
    if rank is not None:
        files = [p for p in files if f"rank_{rank}" in p.parts or f"rank-{rank}" in p.name]
    return files


def ns(us: float | int, base: int = 0) -> int:
    """µs as written (shortest decimal of the float) -> exact integer ns."""
    return int(Decimal(repr(us)) * 1000) + base


def events_of(files: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(events in file order with their absolute ns times, metadata per file)."""
    out, metas = [], []
    for f in files:
        d = load(f)
        base = int(d.get("baseTimeNanoseconds") or 0)
        metas.append(d)
        for e in d["traceEvents"]:
            if "ts" in e:
                e["_ts"] = ns(e["ts"], base)
                e["_dur"] = ns(e.get("dur", 0))
            out.append(e)
    return out, metas


# -- our own 2-rank gloo training --------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, 1])
def test_gloo_counts_and_values_match_the_json(store: Store, rank: int) -> None:
    evs, metas = events_of(traces("kineto_gloo_2rank", rank))
    assert {m["distributedInfo"]["rank"] for m in metas} == {rank}
    where = f"run = 'kineto_gloo_2rank' AND rank = {rank}"
    col = rows(store, f"SELECT * FROM collections WHERE {where} AND producer = 'kineto'")
    assert len(col) == 1 and col[0]["world_size"] == 2 and col[0]["status"] == "complete"

    cpu_ops = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    ops = rows(store, f"SELECT category, count(*) AS n, sum(dur_ns) AS d FROM operators WHERE {where} GROUP BY 1")
    by_cat = {r["category"]: r for r in ops}
    assert by_cat["cpu_op"]["n"] == len(cpu_ops)
    assert by_cat["cpu_op"]["d"] == sum(e["_dur"] for e in cpu_ops)  # exact ns, no float rounding

    # every complete / instant event is a slice, except the [memory] samples
    timeline = [e for e in evs if e.get("ph") == "X" or (e.get("ph") in ("i", "I") and e.get("name") != "[memory]")]
    got = rows(store, f"SELECT count(*) AS n, min(ts_ns) AS t0, sum(dur_ns) AS d FROM slices WHERE {where}")[0]
    assert got["n"] == len(timeline)
    assert got["t0"] == min(e["_ts"] for e in timeline)  # baseTimeNanoseconds applied
    assert got["d"] == sum(e["_dur"] for e in timeline)

    steps = {int(e["name"].split("#")[1]): e for e in evs if e.get("name", "").startswith("ProfilerStep#")}
    got_steps = rows(store, f"SELECT step, start_ns, end_ns FROM steps WHERE {where} ORDER BY step")
    assert [s["step"] for s in got_steps] == sorted(steps)
    for s in got_steps:
        e = steps[s["step"]]
        assert (s["start_ns"], s["end_ns"]) == (e["_ts"], e["_ts"] + e["_dur"])

    mem = [e for e in evs if e.get("name") == "[memory]"]
    assert rows(store, f"SELECT count(*) AS n FROM memory_samples WHERE {where}")[0]["n"] == len(mem)
    allocs = [e for e in mem if e["args"].get("Bytes", 0) > 0 and e["args"].get("Addr") is not None]
    om = rows(store, f"SELECT count(*) AS n, sum(size_bytes) AS b FROM operator_memory WHERE {where}")[0]
    assert (om["n"], om["b"]) == (len(allocs), sum(e["args"]["Bytes"] for e in allocs))

    # collectives: gloo:* ranges, sized from Input Dims x dtype, in the job's only process group
    gloo = [e for e in evs if e.get("ph") == "X" and e.get("name", "").startswith("gloo:")]
    comm = rows(store, f"SELECT name, op_type, bytes, group_ranks, step FROM comm_ops WHERE {where} ORDER BY ts_ns")
    assert len(comm) == len(gloo) > 0
    for c, e in zip(comm, sorted(gloo, key=lambda e: e["_ts"])):
        dims, types = e["args"]["Input Dims"], e["args"]["Input type"]
        assert c["bytes"] == sum(math.prod(d) * DTYPE[t] for d, t in zip(dims, types) if d)
        assert c["op_type"] == "allreduce" and list(c["group_ranks"]) == [0, 1]
        assert c["step"] in steps


def _stack_walk(ops: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
    """Reference: depth and self time per event position (per thread, by start, longest first)."""
    out: dict[int, tuple[int, int]] = {}
    threads: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for i, e in ops:
        threads[(e["pid"], e["tid"])].append((i, e))
    for items in threads.values():
        items.sort(key=lambda x: (x[1]["_ts"], -x[1]["_dur"], x[0]))
        stack: list[tuple[int, int, int]] = []  # (position, end, child time)
        child: dict[int, int] = defaultdict(int)
        depth: dict[int, int] = {}
        for i, e in items:
            while stack and stack[-1][1] <= e["_ts"]:
                stack.pop()
            depth[i] = len(stack)
            if stack:
                p, p_end, _ = stack[-1]
                child[p] += min(e["_ts"] + e["_dur"], p_end) - e["_ts"]
            stack.append((i, e["_ts"] + e["_dur"], 0))
        for i, e in items:
            out[i] = (depth[i], max(e["_dur"] - child[i], 0))
    return out


def test_gloo_self_time_and_depth_follow_the_nesting(store: Store) -> None:
    evs, _ = events_of(traces("kineto_gloo_2rank", 0))
    ops = [(i, e) for i, e in enumerate(evs) if e.get("ph") == "X" and e.get("cat") in OP_CATS]
    want = _stack_walk(ops)
    got = rows(store, "SELECT event_id, depth, self_ns FROM operators WHERE run = 'kineto_gloo_2rank' AND rank = 0")
    assert len(got) == len(ops)
    assert {r["event_id"]: (r["depth"], r["self_ns"]) for r in got} == want
    assert max(d for d, _ in want.values()) >= 3  # real nesting, not a flat list


def test_gloo_shapes_and_lanes(store: Store) -> None:
    evs, _ = events_of(traces("kineto_gloo_2rank", 1))
    shaped = [e for e in evs if e.get("ph") == "X" and e.get("cat") in OP_CATS and e.get("args", {}).get("Input Dims")]
    got = rows(
        store,
        "SELECT count(*) AS n FROM operators WHERE run = 'kineto_gloo_2rank' AND rank = 1 "
        "AND input_shapes IS NOT NULL AND input_shapes <> '[]'",
    )[0]["n"]
    assert got == len(shaped)
    names: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in evs:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[(str(e["pid"]), str(e["tid"]))].append(e["args"]["name"])
    lanes = rows(store, "SELECT pid, tid, lane, n_slices FROM lanes WHERE run = 'kineto_gloo_2rank' AND rank = 1")
    per_lane = Counter(
        (str(e["pid"]), str(e["tid"]))
        for e in evs
        if e.get("ph") == "X" or (e.get("ph") == "i" and e.get("name") != "[memory]")
    )
    assert {(r["pid"], r["tid"]): r["n_slices"] for r in lanes} == dict(per_lane)
    for r in lanes:  # Kineto names some threads twice ('thread 7 (python)', 'thread 7 (pt_gloo_runloop)')
        given = names.get((r["pid"], r["tid"]))
        if given:
            assert r["lane"] == max(given, key=len)


def test_capabilities_follow_what_the_trace_holds(store: Store) -> None:
    # torch 2.13 with_stack writes python_function frames (no 'Call stack' arg): stacks are there
    evs, _ = events_of(traces("kineto_gloo_2rank", 0))
    assert any(e.get("cat") == "python_function" for e in evs)
    got = rows(
        store, "SELECT capabilities, missing FROM collections WHERE run = 'kineto_gloo_2rank' AND producer = 'kineto'"
    )
    assert got and all("stacks" in r["capabilities"] and "shapes" in r["capabilities"] for r in got)
    assert not any("call stacks" in m for r in got for m in r["missing"])
    old = rows(
        store, "SELECT capabilities, missing FROM collections WHERE producer = 'kineto' AND run <> 'kineto_gloo_2rank'"
    )
    no_frames = [r for r in old if "stacks" not in r["capabilities"]]
    assert all(any("no call stacks" in m for m in r["missing"]) for r in no_frames)


# -- GPU trace, time base at the end of the file ------------------------------------------------


def test_nccl_kernels_and_late_time_base(store: Store) -> None:
    (path,) = traces("hta_nccl")
    with gzip.open(path) as f:
        raw = f.read()
    assert raw.rstrip().endswith(b"}") and raw.rfind(b'"baseTimeNanoseconds"') > raw.rfind(b'"traceEvents"')
    evs, (meta,) = events_of([path])
    base = int(meta["baseTimeNanoseconds"])
    kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS]
    got = rows(store, "SELECT count(*) AS n, sum(dur_ns) AS d, min(ts_ns) AS t0 FROM kernels WHERE run = 'hta_nccl'")[0]
    assert got["n"] == len(kernels)
    assert got["d"] == sum(e["_dur"] for e in kernels)
    assert got["t0"] == min(e["_ts"] for e in kernels) and got["t0"] > base  # relative times + late base

    nccl = sorted((e for e in kernels if "nccl" in e["name"].lower()), key=lambda e: e["_ts"])
    comm = rows(
        store, "SELECT op_type, bytes, count, dtype, source, ts_ns FROM comm_ops WHERE run = 'hta_nccl' ORDER BY ts_ns"
    )
    assert len(comm) == len(nccl) > 0
    for c, e in zip(comm, nccl):
        a = e["args"]
        n = max(a["In msg nelems"], a["Out msg nelems"])
        assert (c["count"], c["dtype"], c["bytes"]) == (n, a["dtype"], n * DTYPE[a["dtype"]])
        assert c["source"] == "kineto:kernel" and c["ts_ns"] == e["_ts"]
    assert [c["op_type"] for c in comm] == [e["args"]["Collective name"] for e in nccl]  # allreduce, broadcast
    cpu = rows(store, "SELECT count(*) AS n FROM operators WHERE run = 'hta_nccl' AND category = 'cpu_op'")[0]["n"]
    assert cpu == sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") == "cpu_op")


def test_cpu_only_rank_and_process_groups(store: Store) -> None:
    (path,) = traces("kineto_cpu_only")
    dist = load(path)["distributedInfo"]
    col = rows(store, "SELECT rank, world_size FROM collections WHERE run = 'kineto_cpu_only'")
    assert col == [{"rank": 34, "world_size": 300}]
    groups = rows(
        store, "SELECT group_name, global_ranks, local_rank, backend FROM comm_groups WHERE run = 'kineto_cpu_only'"
    )
    assert {g["group_name"] for g in groups} == {pg["pg_name"] for pg in dist["pg_config"]}
    assert all(g["local_rank"] == 34 and len(g["global_ranks"]) == 300 for g in groups)


def test_two_sampled_ranks_steps(store: Store) -> None:
    for rank in (0, 1):
        evs, (meta,) = events_of(traces("hta_trace_filter", rank))
        assert meta["distributedInfo"]["rank"] == rank
        want = sorted(int(e["name"].split("#")[1]) for e in evs if e.get("name", "").startswith("ProfilerStep#"))
        got = rows(store, f"SELECT step FROM steps WHERE run = 'hta_trace_filter' AND rank = {rank} ORDER BY step")
        assert [r["step"] for r in got] == want == [551, 552]
        k = rows(
            store,
            f"SELECT count(*) AS n, sum(dur_ns) AS d FROM kernels WHERE run = 'hta_trace_filter' AND rank = {rank}",
        )[0]
        kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS]
        assert (k["n"], k["d"]) == (len(kernels), sum(e["_dur"] for e in kernels))


# -- old category names ---------------------------------------------------------------------------


def test_old_category_names(store: Store) -> None:
    evs, _ = events_of(traces("kineto_resnet50_old"))
    run = "run = 'kineto_resnet50_old'"
    by_cat = Counter(e.get("cat") for e in evs if e.get("ph") == "X")
    ops = rows(store, f"SELECT category, count(*) AS n FROM operators WHERE {run} GROUP BY 1")
    assert {r["category"]: r["n"] for r in ops} == {"Operator": by_cat["Operator"]}
    kernels = rows(store, f"SELECT core_type, count(*) AS n, sum(dur_ns) AS d FROM kernels WHERE {run} GROUP BY 1")
    assert {r["core_type"]: r["n"] for r in kernels} == {c: by_cat[c] for c in ("Kernel", "Memcpy", "Memset")}
    assert sum(r["d"] for r in kernels) == sum(
        e["_dur"] for e in evs if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS
    )
    mem = [e for e in evs if e.get("name") == "[memory]"]
    assert "cat" not in mem[0]
    got = rows(store, f"SELECT count(*) AS n, max(allocated_bytes) AS peak FROM memory_samples WHERE {run}")[0]
    assert got["n"] == len(mem)
    assert not any("Total Allocated" in e["args"] for e in mem)  # only the signed size of each block:
    peak = 0  # the totals are the running sum per device, lifted so that they never go below 0
    for device in {(e["args"]["Device Type"], e["args"]["Device Id"]) for e in mem}:
        run_sum, low, high = 0, 0, 0
        for e in sorted(
            (e for e in mem if (e["args"]["Device Type"], e["args"]["Device Id"]) == device), key=lambda e: e["_ts"]
        ):
            run_sum += e["args"]["Bytes"]
            low, high = min(low, run_sum), max(high, run_sum)
        peak = max(peak, high - low)
    assert got["peak"] == peak > 0
    (col,) = rows(store, f"SELECT missing FROM collections WHERE {run}")
    assert any(m.startswith("memory totals rebuilt from the allocation sizes") for m in col["missing"])
    steps = sorted(int(e["name"].split("#")[1]) for e in evs if e.get("name", "").startswith("ProfilerStep#"))
    assert [r["step"] for r in rows(store, f"SELECT step FROM steps WHERE {run} ORDER BY step")] == steps


def test_cli_query_reads_every_scenario(store: Store) -> None:
    got = query(store.path, "SELECT run, count(DISTINCT rank) AS ranks FROM slices GROUP BY run ORDER BY run")
    assert {r["run"]: r["ranks"] for r in got} == {
        "hta_nccl": 1,
        "hta_trace_filter": 2,
        "kineto_cpu_only": 1,
        "kineto_gloo_2rank": 2,
        "kineto_resnet50_old": 1,
    }


def test_old_trace_self_time(store: Store) -> None:
    """PyTorch 1.9 ops overlap on some threads (ends recorded loosely): the stack-walk rule holds."""
    evs, _ = events_of(traces("kineto_resnet50_old"))
    ops = [(i, e) for i, e in enumerate(evs) if e.get("ph") == "X" and e.get("cat") in OP_CATS]
    got = rows(store, "SELECT event_id, depth, self_ns FROM operators WHERE run = 'kineto_resnet50_old'")
    assert {r["event_id"]: (r["depth"], r["self_ns"]) for r in got} == _stack_walk(ops)


def test_streaming_blocks_match_json_load() -> None:
    """Small blocks: event boundaries fall everywhere (inside strings, nested args); same events."""
    from analyzer.readers.chrome.stream import TraceStream

    path = traces("kineto_gloo_2rank", 0)[0]
    want = load(path)
    stream = TraceStream(path, block_bytes=3001)
    got = [e for block in stream.blocks() for e in block]
    assert len(got) == len(want["traceEvents"]) == stream.n_events
    assert [(e.name, e.ph, e.ts) for e in got] == [(e["name"], e["ph"], e.get("ts")) for e in want["traceEvents"]]
    assert [json.loads(bytes(e.args)) if len(e.args) else None for e in got] == [
        e.get("args") for e in want["traceEvents"]
    ]
    assert stream.metadata["distributedInfo"] == want["distributedInfo"] and not stream.warnings


def test_overlapping_ops_take_the_stack_walk(tmp_path: Path) -> None:
    """A child that outlives its parent (loose end times): it is clipped to the parent's end and later
    ops nest under it, exactly as the stack walk says (the vectorised path must step aside)."""
    src = traces("kineto_gloo_2rank", 0)[0]
    data = load(src)
    evs = data["traceEvents"]
    for e in evs:
        if "ts" in e:
            e["_ts"], e["_dur"] = ns(e["ts"]), ns(e.get("dur", 0))
    ops = [(i, e) for i, e in enumerate(evs) if e.get("ph") == "X" and e.get("cat") in OP_CATS]
    depth = _stack_walk(ops)
    # stretch a depth-2 op well past its parent's end
    i, e = next((i, e) for i, e in ops if depth[i][0] == 2 and e["dur"] > 5)
    e["dur"] = round(e["dur"] * 50 + 1000.5, 3)
    for x in evs:
        x.pop("_ts", None)
        x.pop("_dur", None)
    (tmp_path / "rank_0").mkdir()
    (tmp_path / "rank_0" / src.name).write_text(json.dumps(data))
    analyze_here("ingest", str(tmp_path), "--store", str(tmp_path / "store"), "--run", "stretched")
    evs2, _ = events_of([tmp_path / "rank_0" / src.name])
    ops2 = [(i, x) for i, x in enumerate(evs2) if x.get("ph") == "X" and x.get("cat") in OP_CATS]
    want = _stack_walk(ops2)
    assert want != depth  # the stretch changed the nesting
    got = rows(Store(tmp_path / "store"), "SELECT event_id, depth, self_ns FROM operators")
    assert {r["event_id"]: (r["depth"], r["self_ns"]) for r in got} == want


def test_nesting_walks_only_the_stretches_that_overlap() -> None:
    """Depth and self time per thread equal a plain stack walk's, whether a thread's ops are all
    properly nested, overlap in some stretches (the rest is computed with numpy) or everywhere,
    with zero-length and negative durations among them."""
    import numpy as np

    from analyzer.readers.chrome.nesting import depth_and_self

    def walk(thread: list[int], ts: list[int], dur: list[int]) -> tuple[list[int], list[int]]:
        depth, child, stack = [0] * len(ts), [0] * len(ts), []
        for i in range(len(ts)):
            if i and thread[i] != thread[i - 1]:
                stack = []
            while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i]:
                stack.pop()
            if stack:
                p = stack[-1]
                depth[i] = len(stack)
                child[p] += min(ts[i] + dur[i], ts[p] + dur[p]) - ts[i]
            stack.append(i)
        return depth, [max(d - c, 0) for d, c in zip(dur, child)]

    rng = np.random.default_rng(13)
    kinds = Counter()
    for trial in range(600):
        n = int(rng.integers(1, 80))
        thread = np.sort(rng.integers(0, 3, n))
        if trial % 2:  # steps of properly nested ops, one step in some trials stretched past its parent
            ts = np.repeat(np.arange(n // 4 + 1) * 1000, 4)[:n] + np.tile([0, 10, 20, 30], n // 4 + 1)[:n]
            dur = np.tile([900, 500, 100, 0], n // 4 + 1)[:n]
            if trial % 4 == 1:
                dur[int(rng.integers(0, n))] += 700
        else:
            ts = rng.integers(0, 300, n)
            dur = rng.integers(0, 60, n) * (rng.random(n) < 0.9)
            if trial % 10 == 0:
                dur[int(rng.integers(0, n))] = -5
        order = np.lexsort((-dur, ts, thread))
        thread, ts, dur = (x[order].astype(np.int64) for x in (thread, ts, dur))
        depth, self_ns = depth_and_self(thread, ts, dur)
        want = walk(thread.tolist(), ts.tolist(), dur.tolist())
        assert (depth.tolist(), self_ns.tolist()) == want, trial
        kinds[max(want[0]) > 1] += 1
    assert kinds[True] > 100 and kinds[False] > 10  # deep nesting and flat lists both seen


def test_streaming_survives_false_boundaries_and_a_broken_event(tmp_path: Path) -> None:
    """Names holding '},{' (no event boundary) are read whole at every block size; one broken event
    in the middle of the array is skipped with a warning and every other event kept."""
    from analyzer.readers.chrome.stream import TraceStream

    data = load(traces("kineto_gloo_2rank", 0)[0])
    evs = data["traceEvents"]
    evs[5]["name"] = 'evil "},{" name'
    evs[300]["name"] = 'evil2 "}, {" "},{"},{'
    evs[9]["args"] = {"x": [{"a": 1}, {"b": 2}]}
    text = json.dumps(data, indent=2)
    path = tmp_path / "t.pt.trace.json"
    path.write_text(text)
    for block in (97, 1000, 65536, 8 << 20):
        stream = TraceStream(path, block_bytes=block)
        got = [e for b in stream.blocks() for e in b]
        assert [(e.name, e.ts) for e in got] == [(e["name"], e.get("ts")) for e in evs], block
        assert not stream.warnings
    victim = [i for i, e in enumerate(evs) if e.get("cat") == "cpu_op"][100]
    kept = [e["name"] for i, e in enumerate(evs) if i != victim]
    evs[victim]["name"] = "@victim@"
    bad = json.dumps(data, indent=2).replace('"@victim@"', "BROKEN")
    (tmp_path / "bad.json").write_text(bad)
    at = bad.rindex("{", 0, bad.index("BROKEN"))  # the broken event starts there
    for block in (1000, 8 << 20):
        stream = TraceStream(tmp_path / "bad.json", block_bytes=block)
        got = [e for b in stream.blocks() for e in b]
        assert [e.name for e in got] == kept
        assert stream.warnings == [f"1 malformed event(s) skipped (invalid character; at byte {at} of the file)"]
        assert stream.metadata["baseTimeNanoseconds"] == data["baseTimeNanoseconds"]


def test_staged_rows_spilled_to_disk_give_the_same_tables(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big trace holds its end-of-file rows in scratch files instead of memory: same tables."""
    from analyzer.ingest import ingest
    from analyzer.readers.common.spill import SpillStage

    monkeypatch.setattr(SpillStage, "HOLD_BYTES", 4096)
    spilled = Store(tmp_path / "store")
    ingest(SCENARIOS["hta_nccl"], spilled, workers=1)
    ingest(SCENARIOS["kineto_gloo_2rank"], spilled, workers=1)
    sql = {
        "operators": "SELECT count(*), sum(self_ns), sum(depth), sum(ts_ns), count(step) FROM operators",
        "kernels": "SELECT count(*), sum(dur_ns), sum(ts_ns), count(step) FROM kernels",
        "comm_ops": "SELECT count(*), sum(bytes), sum(ts_ns) FROM comm_ops",
        "steps": "SELECT count(*), sum(start_ns), sum(end_ns) FROM steps",
        "memory": "SELECT count(*), sum(allocated_bytes), sum(ts_ns) FROM memory_samples",
        "operator_memory": (
            "SELECT count(*), sum(size_bytes), count(name), sum(coalesce(release_ns, 0)) FROM operator_memory"
        ),
    }
    for run in ("hta_nccl", "kineto_gloo_2rank"):
        for name, q in sql.items():
            q = q + f" WHERE run = '{run}'"
            same = [
                [None if isinstance(v, float) and math.isnan(v) else v for v in row]
                for row in (spilled.query(q).values.tolist()[0], store.query(q).values.tolist()[0])
            ]
            assert same[0] == same[1], (run, name)


def test_a_big_trace_read_in_parts_gives_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One big trace is read by several workers at once, each a byte range (kineto.parts): the store
    holds the same rows as when it is read whole; ranges that do not meet are read again, whole."""
    import os

    from golden import fingerprint

    from analyzer.ingest import ingest
    from analyzer.readers.kineto import parts

    if (os.cpu_count() or 1) < 2:
        pytest.skip("parts are read in parallel only with two cores or more")
    job = tmp_path / "job" / "rank_0"
    job.mkdir(parents=True)
    with gzip.open(DATA / "kineto_gloo_4rank_slow" / "rank_0" / "rank0.pt.trace.json.gz") as f:
        (job / "rank0.pt.trace.json").write_bytes(f.read())  # torch 2.13's pretty layout, uncompressed
    monkeypatch.setattr(parts, "SPLIT_BYTES", 1)

    def read(name: str, **kw: Any) -> tuple[dict[str, Any], int]:
        store = Store(tmp_path / name)
        ingest(job.parent, store, run="r", **kw)
        files = store.query("SELECT count(*) AS n FROM fact_files WHERE table_name = 'slices'")["n"].iloc[0]
        return fingerprint(store, ["r"]), int(files)

    whole, n_whole = read("whole", workers=1)
    split, n_split = read("split")
    assert (n_whole, n_split) == (1, 2)  # the parts wrote a slices file each
    assert split == whole
    # a range that does not begin where the one before it ended: read again, whole
    monkeypatch.setattr(parts, "events_before", lambda path, point: 1)
    again, n_again = read("again")
    assert again == whole and n_again == 1


def test_gpu_launch_flows_are_the_traces_ac2g_links(store: Store) -> None:
    """Issue 17 item 4 on a CUDA trace: the timeline's launch arrows join a ``cuda_runtime`` call to
    the kernel / memcpy / memset it launched, as the trace's own ``ac2g`` flow events do (a ``s`` on
    the runtime call, an ``f`` on the device task, one ``id``). Every arrow of a window is one such
    link, from a host lane to a device lane, at both ends' times."""
    from webapp import create_app, flows

    (path,) = traces("hta_nccl")
    evs, _ = events_of([path])
    # the trace's links: ac2g id -> (the start of the X event its 's' is on, the one its 'f' is on)
    xs: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in {"cuda_runtime", *KERNEL_CATS}:
            xs.setdefault((e["pid"], e["tid"]), []).append((e["_ts"], e["_ts"] + e["_dur"]))
    for v in xs.values():
        v.sort()
    starts, ends = {}, {}
    for e in evs:
        if e.get("cat") != "ac2g" or e.get("ph") not in ("s", "f"):
            continue
        lane = xs.get((e["pid"], e["tid"]), [])
        i = bisect.bisect_right(lane, (e["_ts"], float("inf"))) - 1  # the latest start at or before it
        while i >= 0 and not lane[i][0] <= e["_ts"] <= lane[i][1]:
            i -= 1
        if i >= 0:
            (starts if e["ph"] == "s" else ends)[e["id"]] = lane[i][0]
    links = {(starts[i], ends[i]) for i in starts.keys() & ends.keys()}
    assert len(links) > 1000

    http = create_app(store).server.test_client()
    m = http.get("/_timeline/meta?run=hta_nccl").get_json()
    origin, lanes = int(m["origin"]), {ln["key"]: ln for ln in m["lanes"]}
    rank = int(m["lanes"][0]["rank"])
    ev = m["events"][str(rank)]
    mid = (ev[0] + ev[1]) // 2
    body = {"run": "hta_nccl", "fp": m["fp"], "ranks": [rank], "offsets": {str(rank): 0}, "kinds": ["launch"]}
    got = http.post("/_timeline/flows", json={**body, "a": mid, "b": mid + 2_000_000}).get_json()
    arrows = got["arrows"]
    assert 0 < len(arrows) < flows.MAX_ARROWS and got["more"] == 0
    for f in arrows:
        (hl, r, t0), (dl, r2, t1) = f["from"][:3], f["to"][:3]
        assert r == r2 == rank and lanes[hl]["group"] == "host" and lanes[dl]["group"] == "device", f
        assert (origin + t0, origin + t1) in links, f
    # and every trace link with an end in the window is drawn
    inside = {(s, d) for s, d in links if mid <= s - origin < mid + 2_000_000 or mid <= d - origin < mid + 2_000_000}
    assert {(origin + f["from"][2], origin + f["to"][2]) for f in arrows} == inside  # [lane, rank, t, depth]


def test_launch_links_of_a_store_written_before_the_link_column(store: Store, tmp_path: Path) -> None:
    """``slices.link`` is written at ingest; a store written before it (its slices files without the
    column) still draws the same launch arrows (the view reads the link out of the args), and an
    ingest of such a run reads its collections again, so that no run mixes files with and without it."""
    import shutil

    import pyarrow.parquet as pq

    from analyzer.store.sql import absent_columns
    from webapp import create_app

    old = Store(shutil.copytree(store.path, tmp_path / "old"))
    slices = [old.path / p for p in old.query("SELECT path FROM fact_files WHERE table_name = 'slices'")["path"]]
    for f in slices:
        pq.write_table(pq.read_table(f).drop_columns(["link"]), f)

    def launch_arrows(s: Store) -> list[Any]:
        http = create_app(s).server.test_client()
        m = http.get("/_timeline/meta?run=hta_nccl").get_json()
        rank = int(m["lanes"][0]["rank"])
        mid = sum(m["events"][str(rank)]) // 2
        body = {"run": "hta_nccl", "fp": m["fp"], "ranks": [rank], "offsets": {str(rank): 0}, "kinds": ["launch"]}
        return http.post("/_timeline/flows", json={**body, "a": mid, "b": mid + 2_000_000}).get_json()["arrows"]

    new_arrows = launch_arrows(store)
    assert len(new_arrows) > 10
    assert absent_columns("slices", [str(f) for f in slices]) == {"link"}
    assert launch_arrows(old) == new_arrows
    assert rows(old, "SELECT count(link) AS n FROM slices WHERE run = 'hta_nccl'") == rows(
        store, "SELECT count(link) AS n FROM slices WHERE run = 'hta_nccl'"
    )
    # ingested again: its collections are read again (their files unchanged), the column written
    out = analyze_here("ingest", str(SCENARIOS["hta_nccl"]), "--store", str(old.path)).stdout
    assert "read 1 collection(s), 0 unchanged" in out, out
    fresh = old.query("SELECT path FROM fact_files WHERE table_name = 'slices' AND run = 'hta_nccl'")["path"]
    assert all("link" in pq.read_schema(old.path / p).names for p in fresh)
    assert launch_arrows(old) == new_arrows
