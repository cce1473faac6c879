"""The straggler analysis on real training made here (issue 11 §2).

``tests/data/make_straggler_jobs.py`` trains a small MLP with data parallelism over gloo on 2, 3 and
4 CPU ranks, one job per world size, each running four profiled modes one after the other: a
control (nobody slow) and one slow rank that sleeps before the gradient all-reduce, computes longer,
or reads its batches from a slow dataset. Each mode is ingested as its own run. The straggler must
be named alone with the right cause, and its what-if gain per step must be within 15 % of the delay
it really injected per step (the job measures it) and of the lateness the job saw on the machine's
own clock (no trace involved); in the controls nobody is named.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analyzer.analyses import ANALYSES, blame_chains, critical_steps, step_breakdown, stragglers
from analyzer.analyses.advisor import _spread_rules
from analyzer.analyses.arrivals import FLOOR_SHARE, Arrivals, arrival_analysis
from analyzer.cli import main
from analyzer.store import Store

DATA = Path(__file__).resolve().parent / "data"
JOB = DATA / "make_straggler_jobs.py"
WORLDS = {2: 1, 3: 2, 4: 1}  # world size -> slow rank
DELAY_MS = 50
CAUSE = {"sleep": "idle", "compute": "compute", "input": "dataloader"}
TOLERANCE = 0.15


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> tuple[Store, dict[int, Path]]:
    """Every world size's job run once (one after the other, from one launch: torch imported once),
    every mode ingested as run ``w{world}_{mode}``."""
    root = tmp_path_factory.mktemp("straggler")
    store_dir = root / "store"
    folders = {}
    jobs = ",".join(f"{world}:{slow}" for world, slow in WORLDS.items())
    proc = subprocess.run(
        [sys.executable, str(JOB), str(root), "--jobs", jobs, "--delay-ms", str(DELAY_MS)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=DATA.parent.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for world in WORLDS:
        out = root / f"w{world}"
        for mode in ("control", *CAUSE):
            res = CliRunner().invoke(
                main, ["ingest", str(out / mode), "--run", f"w{world}_{mode}", "--store", str(store_dir)]
            )
            assert res.exit_code == 0, res.output
        folders[world] = out
    return Store(store_dir), folders


def _job_record(folder: Path, mode: str, rank: int, steps: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(injected, early, late) per profiled step, ns. ``injected``: what the job did to the slow rank
    (the measured sleep or compute; for a slow input pipeline, how much longer its ``next(loader)``
    took than its peers' median). ``early`` and ``late``: the bounds of the what-if gain as the job
    itself saw it on the machine's monotonic clock (no trace, no clock alignment, no matching): for
    each all-reduce of the step, how much later the rank called it than the latest of its peers (0
    when it was not last), summed. Each call lies between the rank's two stamps around it
    (``make_straggler_jobs._call``), so that lateness lies between the rank's first stamp less its
    peers' latest second one and its second stamp less their latest first one: the same instant the
    trace records, within what a busy machine did between the stamps."""
    docs = {
        int(p.name.removeprefix("rank_")): json.loads((p / "injected.json").read_text())
        for p in (folder / mode).glob("rank_*")
    }
    peers = [r for r in docs if r != rank]
    if mode == "input":
        injected = [
            docs[rank]["fetch_ns"][str(s)] - float(np.median([docs[r]["fetch_ns"][str(s)] for r in peers]))
            for s in steps
        ]
    else:
        injected = [float(docs[rank]["injected_ns"][str(s)]) for s in steps]
    early, late = [], []
    for s in steps:
        mine = np.asarray(docs[rank]["call_ns"][str(s)], dtype=np.int64)  # (all-reduce, [before, after])
        theirs = np.asarray([docs[r]["call_ns"][str(s)] for r in peers], dtype=np.int64)  # (peer, all-reduce, 2)
        early.append(float(np.maximum(mine[:, 0] - theirs[:, :, 1].max(axis=0), 0).sum()))
        late.append(float(np.maximum(mine[:, 1] - theirs[:, :, 0].max(axis=0), 0).sum()))
    return np.asarray(injected), np.asarray(early), np.asarray(late)


def _within(x: float, lo: float, hi: float) -> float:
    """How far ``x`` lies outside [lo, hi], relative to the nearer bound (0 inside)."""
    if x < lo:
        return (lo - x) / max(lo, 1.0)
    if x > hi:
        return (x - hi) / max(hi, 1.0)
    return 0.0


@pytest.mark.parametrize("mode", list(CAUSE))
@pytest.mark.parametrize("world", list(WORLDS))
def test_straggler_named_alone_with_its_cause_and_cost(jobs, world, mode):
    store, folders = jobs
    run, slow = f"w{world}_{mode}", WORLDS[world]
    st = stragglers(store, run).set_index("rank")
    assert sorted(st.index) == list(range(world))
    a = arrival_analysis(store, run)
    steps = sorted(int(s) for s in a.steps["step"])
    assert len(steps) == 8
    # named as the job's own clock says: on an idle machine that is the slow rank alone (its injected
    # 50 ms against thresholds of a few ms); a very busy machine can hold a peer back for real too
    on_clock = _named_as_the_clock_says(st, a, folders[world], mode, steps)
    if on_clock[slow] > 1 + TOLERANCE:
        assert st.loc[slow, "cause"] == CAUSE[mode], st.loc[slow].to_dict()
        if mode == "compute":
            assert st.loc[slow, "top_ops"][0]["name"] == "aten::mm"  # the extra matrix products
    # what-if: per step, the gain had the slow rank arrived with its peers, vs what the job saw on the
    # machine's clock (tight: same quantity, another instrument, known within the job's two stamps
    # around each call) and vs what it injected
    gain = _gains(a, steps).get(slow, np.zeros(len(steps)))
    injected, early, late = _job_record(folders[world], mode, slow, steps)
    median_off = _within(float(np.median(gain)), float(np.median(early)), float(np.median(late)))
    total_off = _within(float(gain.sum()), float(early.sum()), float(late.sum()))
    vs_injected = float(np.median(gain)) / float(np.median(injected))
    # steps where nothing but the injection made the slow rank late (the machine's own load can
    # slow one rank by tens of ms now and then: that lateness is real, but not injected)
    clean = (np.abs(early / injected - 1) <= TOLERANCE) & (np.abs(late / injected - 1) <= TOLERANCE)
    vs_injected_clean = float(np.median(gain[clean])) / float(np.median(injected[clean])) if clean.sum() else None
    print(
        f"{run}: rank {slow} named alone, cause {st.loc[slow, 'cause']}; what-if per step (median) "
        f"{np.median(gain) / 1e6:.1f} ms, the job's clock {np.median(early) / 1e6:.1f}-{np.median(late) / 1e6:.1f} ms "
        f"(off by {median_off:.3f}), injected {np.median(injected) / 1e6:.1f} ms (x{vs_injected:.3f}; "
        f"x{vs_injected_clean} on the {int(clean.sum())} steps the machine left alone); run total "
        f"{gain.sum() / 1e6:.1f} / {early.sum() / 1e6:.1f}-{late.sum() / 1e6:.1f} / {injected.sum() / 1e6:.1f} ms; "
        f"threshold {st.loc[slow, 'threshold_ns'] / 1e6:.2f} ms; msprof votes {st.loc[slow, 'slow_rank_votes']}"
    )
    assert median_off <= TOLERANCE
    assert total_off <= TOLERANCE
    # against the injection itself only where there are steps enough the machine left alone (at load
    # 9-12 it slowed the slow rank beyond its injection in 6 of 8 steps): the job's clock above is
    # the check that always holds
    if clean.sum() >= 3:
        assert abs(vs_injected_clean - 1) <= TOLERANCE
    # every step whose critical rank the job's clock decides: the analysis names that rank, on a
    # loaded machine too (arrival is the rank's call of the collective, not the start of gloo's worker
    # thread: that came up to 35 ms later at load ~20 and once cut a step's gain under its floor).
    # Decided per step, not assumed to be the slow rank: at load ~9 the machine held a 4-rank compute
    # job's three peers (sharing a core) back 75 ms in a step, so the slow rank came first there
    expected = _critical_as_the_clock_says(a, folders[world], mode, sorted(st.index), steps)
    assert list(expected.values()).count(slow) >= 1, expected  # the injection showed on the job's clock
    crit = critical_steps(store, run).set_index("step")["critical_rank"].reindex(list(expected))
    assert crit.notna().all() and (crit == pd.Series(expected)).all(), (crit.to_dict(), expected)
    # and every step where the job's clock says the slow rank came late beyond its floor, the step's
    # late collective is blamed on it, with that cause
    floor = float(st.loc[slow, "floor_ns"])
    late_steps = {s for s, t in zip(steps, early) if t > 1.5 * floor}
    bc = blame_chains(store, run)
    mine = bc[bc["last_rank"] == slow]
    assert late_steps <= set(mine["step"])
    assert (mine["cause"] == CAUSE[mode]).mean() >= 0.75
    first = mine.iloc[0]
    assert first["chain"][0]["rank"] == slow
    assert {h[0] for h in first["highlights"]} == set(range(world))
    lo, hi = first["start_ns"], first["end_ns"]
    assert hi - lo > first["peer_interval_ns"]  # its interval is the longer one
    # and it ends where the rank called the collective, as its arrival does: not where gloo's worker
    # thread started the range (tens of ms later under load, time the cause was read as idle)
    arr = a.arrivals
    called = arr[(arr["instance"] == first["instance"]) & (arr["rank"] == slow)]["call_ns"]
    assert called.notna().all() and hi == int(called.iloc[0])


@pytest.mark.parametrize("world", list(WORLDS))
def test_nobody_named_without_a_slow_rank(jobs, world):
    """The controls: nobody injected a delay, so a rank is named only if the machine itself made it
    late, as the job's own clock saw it. On a busy shared machine other processes can hold one rank
    back at most steps (a 2-rank control, each rank on a core of its own, once had rank 0 call the
    all-reduce a median 2.6 ms after rank 1 at load 7): naming it is then right. So a rank whose
    median lateness on the job's clock (no trace involved) is clearly below its threshold must not be
    named, one clearly above must be. The figures are the noise the thresholds are checked against
    (docs/analyses.md)."""
    store, folders = jobs
    run = f"w{world}_control"
    st = stragglers(store, run).set_index("rank")
    assert sorted(st.index) == list(range(world))
    a = arrival_analysis(store, run)
    steps = sorted(int(s) for s in a.steps["step"])
    _named_as_the_clock_says(st, a, folders[world], "control", steps)


def _named_as_the_clock_says(st: pd.DataFrame, a: Arrivals, folder: Path, mode: str, steps: list[int]) -> pd.Series:
    """Assert the analysis names exactly the ranks the job's own monotonic clock (no trace involved)
    says are late: a rank whose median lateness there is clearly above its threshold must be named,
    one clearly below must not. "Clearly": by more than 15 % of the threshold, with the lateness
    known within the job's two stamps around each call (the trace records the call between them;
    a busy machine can deschedule a rank in between). Returns the lower bound / threshold per rank."""
    run_gains = _gains(a, steps)
    early, late, off = {}, {}, {}
    for r in st.index:
        _, lo, hi = _job_record(folder, mode, r, steps)
        gain = run_gains.get(r, np.zeros(len(steps)))
        early[r], late[r] = float(np.median(lo)), float(np.median(hi))
        off[r] = float(np.median(np.maximum(np.maximum(lo - gain, gain - hi), 0)))
    early, late, off = pd.Series(early), pd.Series(late), pd.Series(off)
    threshold = st["threshold_ns"].clip(lower=1)
    ratio = st["median_gain_ns"] / threshold
    print(
        f"{mode}: named {st.index[st['straggler']].tolist()}; median gain / threshold {ratio.round(3).tolist()}; "
        f"median gains {list(st['median_gain_ns'] // 1000)} µs, on the job's clock {list(early // 1000)}-"
        f"{list(late // 1000)} µs, the trace outside the clock's bounds by {list(off // 1000)} µs (median step), "
        f"others' p90 {list(st['others_p90_ns'] // 1000)} µs, floors {list(st['floor_ns'] // 1000)} µs"
    )
    must, must_not = early / threshold > 1 + TOLERANCE, late / threshold < 1 - TOLERANCE
    table = pd.DataFrame(
        {
            "named": st["straggler"],
            "gain/threshold": ratio,
            "clock/threshold": early / threshold,
            "clock_late/threshold": late / threshold,
        }
    )
    assert st.loc[must, "straggler"].all() and not st.loc[must_not, "straggler"].any(), table.to_string()
    return early / threshold


def _critical_as_the_clock_says(
    a: Arrivals, folder: Path, mode: str, ranks: list[int], steps: list[int]
) -> dict[int, int]:
    """{step: rank} for the steps whose critical rank the job's own clock decides (no trace involved):
    the rank whose lateness there (summed over the step's all-reduces, the quantity its what-if gain
    is) is, even at its lower bound, beyond 1.5x its floor and beyond every other rank's upper bound by
    more than its floor. Other steps (nobody clearly late, or two ranks within the floor of each
    other, as a busy machine can make them) are left out."""
    early, late = {}, {}
    for r in ranks:
        _, early[r], late[r] = _job_record(folder, mode, r, steps)
    decided = {}
    for i, s in enumerate(steps):
        top = max(ranks, key=lambda r: early[r][i])
        floor = a.floors.get(top, 0)
        others = max(late[r][i] for r in ranks if r != top)
        if early[top][i] > 1.5 * floor and early[top][i] - others > floor:
            decided[s] = top
    return decided


def _gains(a: Arrivals, steps: list[int]) -> dict[int, np.ndarray]:
    """Per rank, the what-if gain per step (ns; 0 in a step where the rank held nobody back)."""
    return {
        int(r): g.groupby("sample")["gain_ns"].sum().reindex(steps).fillna(0).to_numpy()
        for r, g in a.gains.groupby("rank")
    }


@pytest.mark.parametrize("world", list(WORLDS))
def test_spread_rule_quiet_on_the_controls_noise(jobs, world):
    """§1.9: msprof-analyze's "differs across ranks by > 5 %" rule must not fire on noise. The noise:
    the control's real step breakdown with its rows dealt out to the ranks again within each step,
    balanced, so that no rank is systematically high or low. Per step the rows are ordered by Free
    and the k-th goes to the rank at place (k + i) mod world of a random rank order, i being the step's place in
    a random step order: over ``world`` steps every rank gets every place once. (An unbalanced random
    shuffle is not noise: with 2 ranks, 8 steps and a machine that held one rank back ~10 ms at every
    step, 7 % of shuffles give one rank the long wait in 7 of 8 steps, a systematic difference the
    rule is right to see.) The real labels may carry a difference the machine made (a rank alone on
    a core showed 2-3 ms less Free per step than three ranks sharing the other, at every step); the
    rule stays quiet on every dealing, while the dealings keep each step's spread."""
    store, _ = jobs
    run = f"w{world}_control"
    sb = step_breakdown(store, run)[["rank", "step", "step_ns", "computing_ns", "communication_ns", "free_ns"]]
    rng = np.random.default_rng(world)
    cols = ["computing_ns", "communication_ns", "free_ns"]
    # the dealing on arrays (row positions per step): with pandas' .loc per step it cost ~6 s of CPU
    # per world, more than the rule it checks
    values, ranks, free = sb[cols].to_numpy(), sb["rank"].to_numpy(), sb["free_ns"].to_numpy()
    groups = [sb.index.get_indexer(g) for g in sb.groupby("step").groups.values()]
    for _ in range(50):
        dealt = values.copy()
        order = rng.permutation(world)
        for i, g in enumerate(rng.permutation(len(groups))):
            rows = groups[g]
            by_free = rows[np.argsort(free[rows], kind="stable")]
            by_rank = rows[np.argsort(order[ranks[rows]], kind="stable")]
            dest = by_rank[(np.arange(len(rows)) + i) % len(rows)]
            dealt[dest] = values[by_free]
        shuffled = sb.copy()
        shuffled[cols] = pd.DataFrame(dealt, index=sb.index, columns=cols).astype(sb.dtypes[cols])
        assert not _spread_rules(shuffled), [f["title"] for f in _spread_rules(shuffled)]
    # the real labels: whatever the rule says is printed for the record (docs/analyses.md)
    print(run, [f["title"] for f in _spread_rules(sb)] or "no spread finding")
    # and it does fire on the same data with the last rank's Free raised at every step by the ranks'
    # real spread plus 1.5x the larger of the floor and 6 step-to-step deviations (a real difference
    # of the size the rule is meant to see)
    raised = sb.copy()
    floor = FLOOR_SHARE * float(sb["step_ns"].median())
    free = sb.groupby("rank")["free_ns"]
    spread = float(free.mean().max() - free.mean().min())
    bump = int(spread + 1.5 * max(floor, 6 * float(free.std().max())))
    raised.loc[raised["rank"] == world - 1, "free_ns"] += bump
    assert any("Free differs across ranks" in f["title"] for f in _spread_rules(raised))


def test_report_and_tables_name_the_straggler(jobs):
    store, folders = jobs
    res = CliRunner().invoke(main, ["report", "--run", "w3_sleep", "--store", str(store.path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "straggler: rank 2 holds the others back" in text
    assert "Python code, a sleep" in text
    # the control names whom the job's own clock says is late: nobody on a quiet machine (at load ~9
    # the machine held a 3-rank control's rank 0 back 5.2-5.4 ms per step, above its 4.4 ms threshold)
    st = stragglers(store, "w3_control").set_index("rank")
    a = arrival_analysis(store, "w3_control")
    _named_as_the_clock_says(st, a, folders[3], "control", sorted(int(s) for s in a.steps["step"]))
    named = st.index[st["straggler"]].tolist()
    res = CliRunner().invoke(main, ["report", "--run", "w3_control", "--store", str(store.path)])
    lines = [f"straggler: rank {r} holds the others back" for r in named] or ["straggler: none"]
    assert all(line in " ".join(res.output.split()) for line in lines), named
    doc = json.loads(
        CliRunner().invoke(main, ["report", "--run", "w4_compute", "--json", "--store", str(store.path)]).output
    )
    for name in ("stragglers", "critical_steps", "blame_chains", "arrivals", "collective_matching"):
        assert name in ANALYSES and doc[name], name
    top = doc["stragglers"][0]
    assert top["rank"] == 1 and top["straggler"] and top["cause"] == "compute"
    assert "slow_rank_votes" in top  # msprof-analyze's vote, for cross-checking
    res = CliRunner().invoke(
        main,
        [
            "query",
            "SELECT rank, cause FROM analysis.stragglers WHERE straggler",
            "--run",
            "w2_input",
            "--store",
            str(store.path),
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    # the table holds whom the analysis names, and that is whom the job's clock says is late: the slow
    # rank with its cause, unless the machine held its peer back as long (at load ~12 rank 0 came last
    # by more in 2 of 8 steps, the threshold rose to 93 ms and nobody was clearly late)
    st = stragglers(store, "w2_input").set_index("rank")
    a = arrival_analysis(store, "w2_input")
    on_clock = _named_as_the_clock_says(st, a, folders[2], "input", sorted(int(s) for s in a.steps["step"]))
    named = [(int(r), str(st.loc[r, "cause"])) for r in st.index[st["straggler"]]]
    assert sorted((r["rank"], r["cause"]) for r in json.loads(res.output)) == sorted(named)
    if on_clock[1] <= 1 + TOLERANCE:
        return
    assert named == [(1, "dataloader")]
    adv = json.loads(
        CliRunner().invoke(main, ["report", "--run", "w2_input", "--json", "--store", str(store.path)]).output
    )["advice"]
    finding = next(f for f in adv if f["rule"] == "straggler")
    assert finding["ranks"] == [1] and "input pipeline" in finding["title"]
