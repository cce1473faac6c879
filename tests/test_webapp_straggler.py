"""The straggler where users look in the web app (issue 11 §2): the overview names it with its
cause and links its latest late collective into the timeline; the communication page shows who
arrived last at every collective and, for a selected one, the blame with its timeline window; where
matching is impossible, both pages say why. Real traces: the 4-rank gloo job whose rank 1 sleeps
30 ms before a world all-reduce (tests/data/make_slow_rank.py), HTA's one-rank NCCL sample."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest
from webapp_helpers import DashClient, ingest, plotly_array, texts

from analyzer.analyses import arrivals, stragglers
from analyzer.store import Store
from webapp import create_app
from webapp.labels import cause_name

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("webapp_straggler") / "store"
    ingest(DATA / "kineto_gloo_4rank_slow", path, "g4")
    ingest(DATA / "hta_nccl", path, "nccl")
    return path


@pytest.fixture(scope="module")
def client(store: Path) -> DashClient:
    return DashClient(create_app(store))


def _hl(href: str) -> list[tuple[int, int, int]]:
    q = parse_qs(urlparse(href).query)
    return [tuple(int(x) for x in h.split(":")) for h in q["hl"][0].split(",")]


def _links(node: object) -> list[dict]:
    out = []
    if isinstance(node, dict):
        if node.get("type") == "Link":
            out.append(node["props"])
        for v in node.values():
            out += _links(v)
    elif isinstance(node, list):
        for v in node:
            out += _links(v)
    return out


def test_overview_names_the_straggler_with_its_cause(client: DashClient, store: Path) -> None:
    out = client.call("ov-content.children", {"ov-run.value": "g4", "ov-ranks.value": [], "ov-step.value": "mean"})
    words = " ".join(texts(out["ov-content"]["children"]))
    assert "Straggler: rank 1 — host time outside any operator" in words
    st = stragglers(Store(store), "g4").set_index("rank")
    assert st["straggler"].tolist().count(True) == 1 and st.loc[1, "straggler"]
    assert "msprof-analyze's vote: 4 collective(s)" in words  # the vote, beside it
    link = next(x for x in _links(out) if x.get("id") == "ov-straggler-link-1")
    hl = _hl(link["href"])
    assert {r for r, _, _ in hl} == {0, 1, 2, 3}
    mine = next(h for h in hl if h[0] == 1)
    peers = [b - a for r, a, b in hl if r != 1]
    assert mine[2] - mine[1] > 25_000_000 > max(peers)  # its interval holds the 30 ms sleep
    # the step bars mark it with its cause
    assert f"straggler: {cause_name('idle')}" in json.dumps(out)  # "host idle"


def test_communication_page_shows_who_arrived_last_and_why(client: DashClient, store: Path) -> None:
    out = client.call("cm-content.children", {"cm-run.value": "g4", "cm-ranks.value": [], "cm-metric.value": "bytes"})
    rows = out["cm-ops"]["rowData"]
    a = arrivals(Store(store), "g4")
    last = a[a["is_last"]].set_index("instance")
    # the world all-reduces after the sleep (the DP groups' own lateness is the pipeline's: a stage
    # waits in its receives)
    late = [r for r in rows if r["ranks"] == 4 and r.get("late_ms") and r["late_ms"] > 20]
    assert len(late) >= 4, "the sleeping rank's collectives are in the grid with their margin"
    for r in late:
        assert r["last_rank"] == 1 == int(last.loc[r["instance"], "rank"])
    blame = client.call(
        "cm-blame.children",
        {"cm-ops.selectedRows": [late[0]], "cm-ops.rowData": rows},
        {"cm-run.value": "g4"},
    )
    words = " ".join(texts(blame["cm-blame"]["children"]))
    assert "Rank 1 arrived last" in words and "Python code, a sleep" in words
    assert "host idle" in words  # the cause's name in the table of excess per cause
    from webapp import lang

    with lang.use("zh"):
        zh = client.call(
            "cm-blame.children", {"cm-ops.selectedRows": [late[0]], "cm-ops.rowData": rows}, {"cm-run.value": "g4"}
        )
    zh_words = " ".join(texts(zh["cm-blame"]["children"]))
    assert "Host 侧算子之外的时间（Python 代码、sleep、下发晚）" in zh_words and "Host 空闲" in zh_words
    assert "host idle" not in zh_words
    link = next(x for x in _links(blame) if x.get("id") == "cm-blame-link")
    assert {r for r, _, _ in _hl(link["href"])} == {0, 1, 2, 3}
    # a row of another rendering (stale selection) shows the prompt, not a wrong blame
    stale = dict(late[0], id="stale-0")
    again = client.call(
        "cm-blame.children", {"cm-ops.selectedRows": [stale], "cm-ops.rowData": rows}, {"cm-run.value": "g4"}
    )
    assert "Select a collective" in " ".join(texts(again["cm-blame"]["children"]))


def test_pages_say_why_nothing_can_be_matched(client: DashClient) -> None:
    """HTA's NCCL sample holds one rank of a 2-rank group: nothing to match with, and both pages say so."""
    ov = client.call("ov-content.children", {"ov-run.value": "nccl", "ov-ranks.value": [], "ov-step.value": "mean"})
    words = " ".join(texts(ov["ov-content"]["children"]))
    assert "Straggler: not judged" in words and "only rank 0 of the group's 2 was profiled" in words
    cm = client.call("cm-content.children", {"cm-run.value": "nccl", "cm-ranks.value": [], "cm-metric.value": "bytes"})
    assert "only rank 0 of the group's 2 was profiled" in " ".join(texts(cm["cm-matching"]["children"]))
    # the same in Chinese: the analysis' notes are messages, shown in the page's language
    from webapp import lang

    with lang.use("zh"):
        ov = client.call("ov-content.children", {"ov-run.value": "nccl", "ov-ranks.value": [], "ov-step.value": "mean"})
        cm = client.call(
            "cm-content.children", {"cm-run.value": "nccl", "cm-ranks.value": [], "cm-metric.value": "bytes"}
        )
    zh = "通信组的 2 张卡中只采集了卡 0：无可匹配（无等待/传输拆分，无到达顺序）"
    assert zh in " ".join(texts(ov["ov-content"]["children"])) and zh in " ".join(texts(cm["cm-matching"]["children"]))


def test_cluster_grid_colours_ranks_by_straggler_lateness(client: DashClient, store: Path) -> None:
    """The Cluster page's "straggler lateness": each cell is the rank's median per-step gain from the
    arrival order (``stragglers``); rank 1, the one that sleeps, is the highest, by about its sleep."""
    st = stragglers(Store(store), "g4").set_index("rank")
    out = client.call(
        "cl-content.children",
        {"cl-run.value": "g4", "cl-metric.value": "straggler_lateness_ns"},
        {"cl-mark.data": None},
    )
    assert "metric=straggler_lateness_ns" in out["view-url"]["data"]
    (heat,) = out["cl-content"]["children"][0]["props"]["children"][2]["props"]["figure"]["data"]
    z, ranks = plotly_array(heat["z"]), plotly_array(heat["customdata"])
    cells = {int(r): float(v) for r, v in zip(ranks.ravel(), z.ravel()) if r >= 0}
    assert set(cells) == set(st.index)
    for r, z in cells.items():
        assert z == pytest.approx(st.loc[r, "median_gain_ns"] / 1e6)  # ms
    assert max(cells, key=cells.get) == 1 and cells[1] > 25  # the 30 ms sleep
    words = " ".join(texts(out["cl-content"]["children"]))
    assert "Ranks by straggler lateness" in words and "Highest: rank 1" in words


def _find(node: object, id_: str) -> object | None:
    """The component of ``id_`` in a Dash tree."""
    if getattr(node, "id", None) == id_:
        return node
    kids = getattr(node, "children", None)
    for kid in kids if isinstance(kids, list) else [kids] if kids is not None else []:
        got = _find(kid, id_)
        if got is not None:
            return got
    return None


def test_overview_of_many_ranks_draws_distributions_with_the_straggler_marked(store: Path) -> None:
    """Beyond BARS_MAX_RANKS ranks, no bar per rank: a box per segment over the ranks, the named
    straggler drawn on top with its cause, the numbers of the slowest ranks only. The real job's
    stored breakdown, its ranks repeated ten times (40 ranks; the straggler stays rank 1)."""
    from analyzer.analyses import slow_ranks, step_breakdown
    from webapp.pages import overview

    st = Store(store)
    bd = step_breakdown(st, "g4")
    many = pd.concat([bd.assign(rank=bd["rank"] + 4 * k) for k in range(10)], ignore_index=True)
    many.loc[many["rank"] == 1, "step_ns"] *= 3  # the straggler is also the slowest rank
    card = overview._step_bars(many, None, "g4", slow_ranks(st, "g4"), stragglers(st, "g4"))
    assert _find(card, "ov-steps-graph") is None
    fig = _find(card, "ov-dist-graph").figure
    boxes = [t for t in fig.data if t.type == "box"]
    assert [b.name for b in boxes][0] == "Step time" and all(len(b.y) == 40 for b in boxes)
    marked = [t for t in fig.data if t.type == "scatter"]
    assert marked and all(list(t.text) == ["rank 1"] for t in marked)
    assert f"straggler: {cause_name('idle')}" in marked[0].customdata[0]
    rows = _find(card, "ov-steps-table").children[1].children
    assert len(rows) == overview.BARS_MAX_RANKS and rows[0].children[0].children == "1"
