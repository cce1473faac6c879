"""The web app's two languages: every label has an English and a Simplified Chinese text with the
same fields, the pages write no label outside ``webapp.labels``, and the language is chosen by the
URL, else the browser's Accept-Language, else English (and links keep it)."""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path
from typing import Any

import dash
import pytest
import webapp_helpers
from webapp_helpers import KINETO, NPU, DashClient, callback_body, ingest

from analyzer import messages
from analyzer.analyses.blame import CAUSES
from analyzer.messages import MESSAGES, message
from webapp import labels, lang, ui
from webapp.labels import LABELS, fields, t

WEBAPP = Path(labels.__file__).parent
CJK = re.compile(r"[\u4e00-\u9fff]")

# the modules whose user-visible strings must all come from webapp.labels
SCANNED = [
    WEBAPP / "ui.py",
    WEBAPP / "page.py",
    WEBAPP / "findings.py",
    WEBAPP / "app.py",
    *sorted((WEBAPP / "pages").glob("*.py")),
]
# pages whose conversion is still to come (issue 17 item 7): scanned once they are done
NOT_YET: set[str] = set()

# calls whose string arguments are shown (html.X(children), dcc.Link(children), our helpers)
SHOWN_CALLS = {"message", "header", "stat", "table", "Link", "Summary", "Button", "Label", "Option"}
SHOWN_KEYWORDS = {
    "children",
    "label",
    "placeholder",
    "title",
    "headerName",
    "headerTooltip",
    "xaxis_title",
    "yaxis_title",
    "hovertext",
    "text",
    "name",
}
# strings that are shown but are no label: the product's name, units; and commands to type
ALLOWED = {"rankscope", "ms", "MiB", "%", "GB/s"}
# messages that are the same words in both languages ("Device", "kernel": MindStudio Insight's Chinese terms too)
SAME_MESSAGES = {"advisor.high_free.where_device", "verdict.kernel", "term.kind.kernel"}
# terms MindStudio Insight's Chinese pages leave in English
SAME_IN_BOTH = {"tl.kernel", "tl.k.block_dim", "tl.flow.p2p"}  # and send / recv, the API names
COMMAND = re.compile(r"^(analyze|rankscope) ")


def _has_words(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]{2,}", text) or CJK.search(text))


def _is_label(text: str) -> bool:
    # (a key of the analyzer's messages is no label: its texts are in analyzer.messages)
    return _has_words(text) and text.strip() not in ALLOWED and not COMMAND.match(text) and text not in MESSAGES


def _literal_texts(node: ast.AST) -> list[str]:
    """The text a string constant or f-string writes itself (not what its fields fill in)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _literal_texts(e)]
    if isinstance(node, ast.BinOp):
        return _literal_texts(node.left) + _literal_texts(node.right)
    if isinstance(node, ast.IfExp):
        return _literal_texts(node.body) + _literal_texts(node.orelse)
    return []


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_html(node: ast.Call) -> bool:
    f = node.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("html", "dcc")


def literal_labels(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal a module shows without going through ``t``: the
    children of html / dcc components and our message helpers, the label-like keywords
    (label, placeholder, title, headerName, axis titles, trace names and hover text), the
    ``"label"`` of dropdown options and ``"headerName"`` of grid columns."""
    tree = ast.parse(path.read_text())
    found: list[tuple[int, str]] = []

    def check(node: ast.AST) -> None:
        for text in _literal_texts(node):
            if _is_label(text):
                found.append((node.lineno, text))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) != "register_page":  # name=: the registry's key
            if _is_html(node) or _call_name(node) in SHOWN_CALLS:
                for a in node.args[:1]:
                    check(a)
            for kw in node.keywords:
                if kw.arg in SHOWN_KEYWORDS:
                    check(kw.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in ("label", "headerName", "headerTooltip", "title"):
                    check(v)
    return found


def test_every_label_has_both_languages_with_the_same_fields() -> None:
    assert len(LABELS) > 200
    for key, texts in LABELS.items():
        assert isinstance(texts, tuple) and len(texts) == 2, key
        en, zh = texts
        assert en and zh, key
        assert fields(en) == fields(zh), f"{key}: {en!r} / {zh!r}"
        assert not CJK.search(en), key
    # Chinese texts are Chinese, except the few that are codes or symbols in both languages
    same = {k for k, (en, zh) in LABELS.items() if en == zh and re.search(r"[A-Za-z]{3,}", en)}
    assert same <= SAME_IN_BOTH, same - SAME_IN_BOTH
    assert sum(bool(CJK.search(zh)) for _, zh in LABELS.values()) > 0.9 * len(LABELS)


def test_the_labels_are_in_the_requests_language() -> None:
    assert t("nav.memory") == "Memory"
    with lang.use("zh"):
        assert t("nav.memory") == "内存"
        assert t("ui.rank_n", rank=3) == "卡 3"
        # a name from a trace is a value: filled in as it is, never translated or parsed
        assert t("op.not_found", name="<b>张量{x}</b>") == "<b>张量{x}</b>：在所选卡上未找到"
    with pytest.raises(ValueError), lang.use("fr"):
        pass


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("zh", "zh"),
        ("zh-Hans-CN", "zh"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR,zh-CN;q=0.5", "zh"),
        ("fr-FR,de;q=0.5", None),
        ("zh-TW,zh-HK;q=0.9", None),  # traditional: we have no text for it
        ("en;q=0.1,zh;q=0.5", "zh"),
        ("zh;q=0,en", "en"),
        ("", None),
        ("garbage;;q=x,,", None),
    ],
)
def test_accept_language(header: str, expected: str | None) -> None:
    assert lang.from_accept_language(header) == expected


@pytest.mark.parametrize("path", [p for p in SCANNED if p.name not in NOT_YET], ids=lambda p: p.name)
def test_no_label_outside_the_labels_module(path: Path) -> None:
    assert literal_labels(path) == []


def test_the_scan_finds_literal_labels(tmp_path: Path) -> None:
    """The scan is not vacuous: each way a page could write a label is caught."""
    f = tmp_path / "p.py"
    f.write_text(
        "from dash import html, dcc\n"
        "x = html.H2('Memory peaks')\n"
        "y = dcc.Dropdown(options=[{'label': f'rank {r}', 'value': r} for r in rs], placeholder='all ranks')\n"
        "z = ui.message('No data here.', 'info', id='p-none')\n"
        "c = {'field': 'total', 'headerName': 'total (ms)'}\n"
        "fig = ui.figure(yaxis_title='ms per step')\n"
        "ok = html.Div(t('nav.memory'), id='p-x', className='note card')\n"
        "sym = html.Td('-')\n"
    )
    lines = {n for n, _ in literal_labels(f)}
    assert lines == {2, 3, 4, 5, 6}


# ---------------------------------------------------------------------------------------------
# over HTTP: the layouts and callbacks of the app in each language
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> DashClient:
    from webapp.app import create_app

    store = tmp_path_factory.mktemp("labels") / "store"
    ingest(KINETO, store, "gloo")
    return DashClient(create_app(store))


ORIGIN = "http://localhost"


def _call(client: DashClient, first_output: str, inputs: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """A callback as the browser calls it from a page (its address is the Referer)."""
    r = client.http.post(
        "/_dash-update-component", json=callback_body(client.deps, first_output, inputs), headers=headers
    )
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    return r.get_json()["response"]


def _page(client: DashClient, address: str, headers: dict[str, str] | None = None) -> str:
    """The layout of the page at ``address`` (path?query), as JSON text."""
    path, _, query = address.partition("?")
    out = _call(
        client,
        "_pages_content.children",
        {"_pages_location.pathname": path, "_pages_location.search": "?" + query if query else ""},
        {"Referer": ORIGIN + address, **(headers or {})},
    )
    return json.dumps(out["_pages_content"]["children"], ensure_ascii=False)


def test_a_page_in_the_language_of_its_url(client: DashClient) -> None:
    zh = _page(client, "/advisor?run=gloo&lang=zh")
    assert "专家建议" in zh and "严重程度" in zh and "Severity" not in zh
    en = _page(client, "/advisor?run=gloo&lang=en", {"Accept-Language": "zh-CN,zh;q=0.9"})
    assert "Severity" in en and "严重程度" not in en  # the URL wins over the browser
    assert "Severity" in _page(client, "/advisor?run=gloo")  # neither: English
    # a bad value is no choice: the browser's language decides
    assert "严重程度" in _page(client, "/advisor?run=gloo&lang=xx", {"Accept-Language": "zh-CN"})


def test_a_page_in_the_browsers_language(client: DashClient) -> None:
    zh = _page(client, "/cluster?run=gloo", {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert "集群" in zh and "着色依据" in zh
    assert "Colour by" in _page(client, "/cluster?run=gloo", {"Accept-Language": "en-GB,zh;q=0.5"})


def test_callbacks_answer_in_the_pages_language_and_keep_it_in_links(client: DashClient) -> None:
    ref = {"Referer": ORIGIN + "/operators?run=gloo&lang=zh"}
    out = _call(
        client,
        "op-grid.rowData",
        {
            "op-run.value": "gloo",
            "op-ranks.value": [],
            "op-source.value": "operators",
            "op-group.value": "name",
            "op-scope.value": "across",
        },
        ref,
    )
    status = out["op-status"]["children"]
    assert "个 Host 侧算子" in status and "跨卡" in status
    cols = {c["field"]: c["headerName"] for c in out["op-grid"]["columnDefs"]}
    assert cols["key"] == "名称" and cols["total_ms"] == "总耗时 (ms)"
    rows = out["op-grid"]["rowData"]
    assert any(r["key"] == "aten::mm" for r in rows)  # names from the trace as they are
    link = next(r["timeline"] for r in rows if r["timeline"])
    assert link.startswith("[卡 ") and "lang=zh" in link  # a deep link keeps the language
    url = _call(
        client,
        "view-url.data",
        {"op-run.value": "gloo", "op-source.value": "kernels", "op-group.value": "name", "op-scope.value": "rank"},
        ref,
    )["view-url"]["data"]
    assert url.startswith("/operators?") and "lang=zh" in url
    # chosen by the browser only: the links stay without lang (they follow each reader's browser)
    out = _call(
        client,
        "view-url.data",
        {"op-run.value": "gloo", "op-source.value": "kernels", "op-group.value": "name", "op-scope.value": "rank"},
        {"Referer": ORIGIN + "/operators?run=gloo", "Accept-Language": "zh-CN"},
    )
    assert "lang=" not in out["view-url"]["data"]


def test_the_navigation_and_the_language_switch(client: DashClient) -> None:
    r = client.http.get("/_dash-layout", headers={"Referer": ORIGIN + "/memory?run=gloo&ranks=0&lang=zh"})
    shell = json.dumps(r.get_json(), ensure_ascii=False)
    assert "内存" in shell and "时间线" in shell and "Memory" not in shell
    assert "/memory?lang=zh" in shell  # the navigation keeps the language
    assert "/memory?run=gloo&ranks=0&lang=en" in shell and "/memory?run=gloo&ranks=0&lang=zh" in shell
    assert "Accept-Language" in r.headers["Vary"] and r.headers["Referrer-Policy"] == "same-origin"
    style = client.http.get("/assets/style.css")
    assert "Referer" not in style.headers.get("Vary", "")  # the same in every language: cached once
    en = json.dumps(client.http.get("/_dash-layout").get_json(), ensure_ascii=False)
    assert "Memory" in en and "内存" not in en and "?lang=" in en  # only the switch names a language


# ---------------------------------------------------------------------------------------------
# the analyzer's messages (advisor findings, straggler causes): one catalog, both languages
# ---------------------------------------------------------------------------------------------


def test_every_analyzer_message_has_both_languages_with_the_same_fields() -> None:
    assert len(MESSAGES) > 30
    for key, texts in MESSAGES.items():
        assert isinstance(texts, tuple) and len(texts) == 2, key
        en, zh = texts
        assert en and zh, key
        assert messages.fields(en) == messages.fields(zh), f"{key}: {en!r} / {zh!r}"
        assert not CJK.search(en), key
        if key not in SAME_MESSAGES:
            assert CJK.search(zh) or not re.search(r"[A-Za-z]{3,}", re.sub(r"\{[^}]*\}", "", zh)), key
    # no sentence twice: a sentence of the analyzer is not also a label of the web app (words may be)
    assert not {en for en, _ in MESSAGES.values()} & {en for en, _ in LABELS.values() if len(en) > 30}


def _message_keys_used(path: Path) -> set[str]:
    """The keys (or, for f-strings, key prefixes ending in '.') passed to ``message``."""
    keys = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and _call_name(node) == "message" and node.args:
            a = node.args[0]
            if isinstance(a, ast.IfExp):
                keys |= {x.value for x in (a.body, a.orelse) if isinstance(x, ast.Constant)}
            elif isinstance(a, ast.Constant):
                keys.add(a.value)
            elif isinstance(a, ast.JoinedStr) and isinstance(a.values[0], ast.Constant):
                keys.add(a.values[0].value.rpartition(".")[0] + ".")
    return keys


def test_the_analyzer_writes_its_sentences_as_messages() -> None:
    """Every message key the analyses use is in the catalog (an f-string key: some key with its
    prefix), and the advisor's findings carry no sentence of their own."""
    analyses = Path(messages.__file__).parent / "analyses"
    used = set().union(*(_message_keys_used(p) for p in analyses.glob("*.py")))
    assert {"advisor.straggler.detail", "advisor.high_free.title", "advisor.aicpu.detail"} <= used
    for key in used:
        if key.endswith("."):
            assert any(k.startswith(key) for k in MESSAGES), key
        else:
            assert key in MESSAGES, key
    # the advisor's sentences: none is written outside the catalog (a `_finding` takes messages)
    tree = ast.parse((analyses / "advisor.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == "_finding":
            for a in node.args[2:4]:
                assert isinstance(a, ast.Call) and _call_name(a) == "message", ast.unparse(a)[:80]
    # every cause the blame analysis can name has a sentence and a name
    assert {f"cause.{c}" for c in (*CAUSES, "unexplained")} <= set(MESSAGES)
    assert {f"cause_name.{c}" for c in (*CAUSES, "unexplained")} <= set(MESSAGES)


def test_a_message_is_rendered_in_each_language_with_its_values_as_data() -> None:
    name = "<b>张量{x}</b>"
    msg = message("advisor.aicpu.detail", tasks=3, min_us=20.0, total=1_234_567.0, longest=1_000_000.0, name=name)
    en, zh = messages.render(msg, "en"), messages.render(msg, "zh")
    assert en.startswith("3 AI CPU tasks longer than 20 µs, 1.235 ms in total (longest 1.000 ms, <b>张量{x}</b>)")
    assert zh.startswith("3 个 AI CPU 任务超过 20 µs，共 1.235 ms（最长 1.000 ms，<b>张量{x}</b>）")
    # a message inside a message is rendered in the same language; a missing value reads "-"
    tail = message("advisor.high_free.biggest", gap=None)
    assert messages.render(tail, "zh") == "最大的空闲间隙为 -。"
    spread = message("advisor.spread.title", column=message("column.free_ns"), ratio=0.0544)
    assert messages.render(spread, "en") == "Free differs across ranks by 5.4%"
    assert messages.render(spread, "zh") == "各卡的空闲相差 5.4%"
    with lang.use("zh"):
        assert labels.said(spread) == "各卡的空闲相差 5.4%"
        assert labels.cause_label("dataloader") == "数据输入慢（DataLoader / GetNext）"
    with pytest.raises(KeyError):
        message("advisor.no_such_rule")


def test_the_page_shell_grids_and_token_page_in_chinese(client: DashClient, tmp_path: Path) -> None:
    from webapp.app import create_app

    assert '<html lang="zh-CN">' in client.http.get("/?lang=zh").get_data(as_text=True)
    assert '<html lang="en">' in client.http.get("/", headers={"Accept-Language": "en-US"}).get_data(as_text=True)
    layout = _page(client, "/operators?run=gloo&lang=zh")
    assert '"noRowsToShow": "无数据"' in layout and '"contains": "包含"' in layout
    assert '"noRowsToShow": "No rows to show"' in _page(client, "/operators?run=gloo&lang=en")
    locked = create_app(tmp_path / "empty", token="s3cret-token").server.test_client()
    r = locked.get("/?lang=zh")
    assert r.status_code == 401 and "需要令牌" in r.get_data(as_text=True)
    r = locked.get("/", headers={"Accept-Language": "en"})
    assert r.status_code == 401 and "needs its token" in r.get_data(as_text=True)


def test_an_analyzer_error_in_the_pages_language(client: DashClient) -> None:
    """ "No run named ..." comes from the store (``UnknownRunError.said``): its message is shown in
    the page's language, the run's name as it was typed."""
    zh = _page(client, "/operators?run=nope{0}&lang=zh")
    assert "没有名为 'nope{0}' 的运行；存储中的运行：gloo" in zh and "no run named" not in zh
    assert "no run named 'nope{0}'; runs in the store: gloo" in _page(client, "/operators?run=nope{0}&lang=en")


def test_the_straggler_verdict_in_the_pages_language(client: DashClient) -> None:
    """The straggler analysis' verdict is a message: the Overview's card says why nobody is judged
    in the page's language, with the analysis' own counts (this 2-step run: 2 of the 3 needed)."""
    inputs = {"ov-run.value": "gloo", "ov-ranks.value": [], "ov-step.value": "mean"}
    zh = json.dumps(
        _call(client, "ov-content.children", inputs, {"Referer": ORIGIN + "/?run=gloo&lang=zh"}), ensure_ascii=False
    )
    assert "未判定：有匹配集合通信的迭代为 2 个，需要 3 个。" in zh and "not judged" not in zh.lower()
    en = json.dumps(_call(client, "ov-content.children", inputs, {"Referer": ORIGIN + "/?run=gloo&lang=en"}))
    assert "Not judged: 2 step(s) with a matched collective, 3 needed." in en


@pytest.fixture(scope="module")
def two_formats(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> DashClient:
    """The Kineto and torch_npu samples in one store (the same session-wide ingest as test_webapp_app's)."""
    from webapp.app import create_app

    store = ingested(tmp_path_factory.mktemp("labels2") / "store", (KINETO, "gloo"), (NPU, "npu"))
    return DashClient(create_app(store))


def _find(tree: Any, prop: str) -> Any:
    """The first value of the property ``prop`` in a (JSON) component tree."""
    if isinstance(tree, dict):
        if prop in tree:
            return tree[prop]
        tree = list(tree.values())
    for v in tree if isinstance(tree, list) else []:
        found = _find(v, prop)
        if found is not None:
            return found
    return None


def test_the_comparison_in_the_pages_language(two_formats: DashClient) -> None:
    """The Compare page's verdict, its findings and the terms of its tables (row labels, statuses,
    kinds, memory metrics, how ranks matched) come from the analyzer's messages: Chinese on a
    Chinese page, English on an English one; names from the traces as they are."""
    inputs = {
        "cmp-base.value": "gloo",
        "cmp-new.value": "npu",
        "cmp-base-step.value": "aligned",
        "cmp-new-step.value": "aligned",
    }

    def shown(lang_: str) -> tuple[list[str], set[str]]:
        out = _call(two_formats, "cmp-content.children", inputs, {"Referer": f"{ORIGIN}/compare?lang={lang_}"})
        kids = out["cmp-content"]["children"]
        rows = _find(kids, "rowData")
        return webapp_helpers.texts(kids), {f"{r['kind']}/{r['status']}" for r in rows}

    (zh, zh_ops), (en, en_ops) = shown("zh"), shown("en")
    verdict_zh = next(w for w in zh if w.startswith("npu 每个迭代比 gloo "))
    assert "格式不同（kineto 与 torch_npu_text）" in verdict_zh and verdict_zh.endswith("。")
    assert not re.search(r"\b(slower|faster|per step|stands out|different formats|peak memory)\b", verdict_zh)
    verdict_en = next(w for w in en if w.startswith("npu is "))
    assert "different formats (kineto vs torch_npu_text)" in verdict_en and "格式" not in verdict_en
    # the Chinese sentence is the English one's findings, one for one
    assert verdict_zh.count("；") == verdict_en.count("; ")
    assert "合计" in zh and "total" not in zh and "total" in en
    assert {"算子/新增", "算子/消失"} <= zh_ops and {"operator/new", "operator/vanished"} <= en_ops
    # each run's slow ranks: the run's name, then the language's colon
    assert {"gloo：无", "npu：无"} <= set(zh) and {"gloo: none", "npu: none"} <= set(en), (zh, en)


def test_charts_show_plotlys_own_texts_in_the_pages_language() -> None:
    """Plotly writes its mode bar's and hints' texts itself ("Zoom in", "Download plot as a PNG"):
    a chart made by ``ui.graph`` on a Chinese page gives them in Chinese through its config (the
    locale and its dictionary, no script to load); each English text is one the Plotly.js that Dash
    serves writes."""
    import plotly

    with lang.use("zh"):
        config = ui.graph("g", ui.figure()).config
    assert config["locale"] == "zh-CN" and config["displaylogo"] is False
    words = config["locales"]["zh-CN"]["dictionary"]
    assert words["Zoom in"] == "放大" and words["Download plot as a PNG"] == "下载为 PNG 图片" and len(words) >= 14
    js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    assert [w for w in words if f'"{w}"' not in js] == []
    with lang.use("en"):
        assert "locale" not in ui.graph("g", ui.figure()).config


def test_the_layout_source_in_the_pages_language(two_formats: DashClient) -> None:
    """How the Cluster page says a parallel dimension was found (``parallel_dims`` source) is the
    analyzer's message: in the page's language."""
    inputs = {"cl-run.value": "gloo", "cl-metric.value": "step_ns"}
    zh = json.dumps(
        _call(two_formats, "cl-content.children", inputs, {"Referer": ORIGIN + "/cluster?lang=zh"}), ensure_ascii=False
    )
    en = json.dumps(_call(two_formats, "cl-content.children", inputs, {"Referer": ORIGIN + "/cluster?lang=en"}))
    assert "推断（全部卡是唯一的通信组，承载集合通信）" in zh and "inferred" not in zh
    assert "inferred (the world is the only group and carries the collectives)" in en


def test_evidence_columns_and_clock_notes_in_the_pages_language(two_formats: DashClient) -> None:
    """The advisor's evidence tables name their columns, and the timeline its clock statuses and
    warnings, in the page's language (the analyzer's messages; English as before)."""
    from analyzer.analyses import advise, clock_offsets
    from analyzer.store import Store

    sev = ["high", "medium", "low"]
    inputs = {"adv-run.value": "npu", "adv-ranks.value": [], "adv-severity.value": sev, "adv-rule.value": None}

    def shown(lang_: str) -> str:
        out = _call(two_formats, "adv-content.children", inputs, {"Referer": f"{ORIGIN}/advisor?lang={lang_}"})
        return json.dumps(out["adv-content"]["children"], ensure_ascii=False)

    zh, en = shown("zh"), shown("en")
    store = two_formats.http.application.config["RANKSCOPE_STORE"]
    store = store if isinstance(store, Store) else Store(store)
    cols = {c for f in advise(store, "npu").to_dict("records") for r in f["evidence"] or [] for c in r}
    assert "start_ns" in cols and "rank" in cols  # the idle gaps of high_free, e.g.
    assert '"开始"' in zh and '"start"' not in zh and '"start"' in en and '"开始"' not in en
    # the clock: each rank's status in the request's language, a warning as a message
    meta = two_formats.http.get("/_timeline/meta?run=gloo", headers={"Referer": ORIGIN + "/timeline?lang=zh"})
    assert {c["status_text"] for c in meta.get_json()["clock"]} <= {"参考", "已对齐", "未对齐", "对齐较差"}
    off = clock_offsets(store, "gloo", max_residual_ns=0)  # every residual counts as poor
    poor = off[off["status"] == "poorly aligned"].iloc[0]
    assert poor["warning"] == messages.render(poor["warning_msg"], "en")
    assert poor["warning"].startswith(f"rank {poor['rank']}: collectives still disagree by ")
    assert messages.render(poor["warning_msg"], "zh").startswith(f"卡 {poor['rank']}：对齐后集合通信仍相差 ")


# ---------------------------------------------------------------------------------------------
# every page in Chinese: no English text of ours left (names from traces excepted)
# ---------------------------------------------------------------------------------------------

GLOO_4RANK = webapp_helpers.REPO / "tests" / "data" / "kineto_gloo_4rank_slow"
BAD_INPUT = webapp_helpers.REPO / "sample_data" / "bad_input"
WORD = r"(?<![\w]){}(?![\w])"


def _english_fragments() -> dict[str, str]:
    """The English text of our tables that a Chinese page must not show: per key of ``LABELS`` and
    ``MESSAGES`` whose two texts differ, each literal stretch between its fields that holds a word
    (and is no term the Chinese texts use as well: "send / recv", "batch size") -> the key."""
    out: dict[str, str] = {}
    chinese = " | ".join(zh for table in (LABELS, MESSAGES) for _en, zh in table.values())
    for table in (LABELS, MESSAGES):
        for key, (en, zh) in table.items():
            if en == zh or key in SAME_MESSAGES:
                continue
            for lit, *_ in string.Formatter().parse(en):
                frag = lit.strip(" .,;:()[]{}·/→↔+-–—'\"\n")
                ours = re.search(r"[A-Za-z]{3,}", frag) and frag not in ALLOWED
                if ours and not re.search(WORD.format(re.escape(frag)), chinese):
                    out.setdefault(frag, key)
    return out


def _filled_in(text: str) -> set[str]:
    """The values filled into a file's problems (``messages.problem`` texts joined by "; "), those
    that are problems themselves opened in turn; a text no template wrote is data as a whole."""
    out: set[str] = set()
    parts = text.split("; ")
    for i in range(len(parts)):
        for j in range(len(parts), i, -1):
            msg = messages.parse("; ".join(parts[i:j]), "problem")
            if msg is not None:
                for v in msg["params"].values():
                    out |= _filled_in(str(v)) if messages.parse(str(v), "problem") else {str(v)}
                break
        else:
            out.add(parts[i])
    return out


def _trace_names(store: Path, run: str) -> list[str]:
    """Every text the store holds for ``run`` (names of operators, kernels, groups, counters,
    scalars, files, hosts, versions...: what the pages show as data), longest first."""
    from analyzer import schema
    from analyzer.store import Store

    names: set[str] = {run}
    with Store(store).read_connection(run=run) as con:
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in (*schema.FACT_TABLES, *schema.CATALOG_TABLES):
            # (what a reader found wrong with a file is ours: written from MESSAGES, read back translated)
            cols = [
                c.name
                for c in table.columns
                if c.type in ("VARCHAR", "VARCHAR[]", "JSON") and (table.name, c.name) != ("source_files", "error")
            ]
            if table.name not in present or not cols or "run" not in table.column_names:
                continue
            for c in cols:
                rows = con.execute(f'SELECT DISTINCT "{c}"::VARCHAR FROM "{table.name}" WHERE run = ?', [run])
                names |= {v for (v,) in rows.fetchall() if v}
        # a file's problem is ours, what fills its fields (the system's words, the file's first bytes) is data
        errors = con.execute("SELECT DISTINCT error FROM source_files WHERE run = ? AND error IS NOT NULL", [run])
        for (text,) in errors.fetchall():
            names |= _filled_in(text)
    return sorted((n for n in names if len(n) >= 3), key=len, reverse=True)


@pytest.fixture(scope="module")
def zh_store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Path:
    store = ingested(tmp_path_factory.mktemp("zh_pages") / "store", (KINETO, "gloo"), (NPU, "npu"))
    ingest(
        GLOO_4RANK, store, "gloo4"
    )  # (gloo: the other run Compare opens on)  # 2 pipeline stages x 2, a straggler: the advisor's and cluster's texts
    ingest(BAD_INPUT, store, "bad")  # a file cut short, an empty one, a corrupt gzip, a CSV named as a trace
    return store


def _english_left(http: Any, store: Path, run: str) -> dict[str, list[str]]:
    """Page -> the English texts of our tables that its Chinese rendering shows, trace names removed."""
    frags = _english_fragments()
    pats = [(f, re.compile(WORD.format(re.escape(f)))) for f in sorted(frags, key=len, reverse=True)]
    names = _trace_names(store, run)
    found: dict[str, list[str]] = {}
    for path in sorted(dash.page_registry[m]["path"] for m in dash.page_registry):
        answers = webapp_helpers.render_page(http, f"{path}?run={run}&lang=zh")
        for text in set(webapp_helpers.shown_texts(answers)):
            text = re.sub(r"\]\([^)]*\)", "]", text)  # a markdown link's address
            for n in names:
                if n in text:
                    text = text.replace(n, " ")
            hits = [f"{f!r} ({frags[f]})" for f, p in pats if p.search(text)]
            if hits:
                found.setdefault(path, []).append(f"{text[:100]!r}: {', '.join(hits[:3])}")
    return found


def test_every_page_in_chinese_shows_no_english_of_ours(zh_store: Path) -> None:
    """Every page, rendered the way the browser loads it (the layout and the answers of the
    callbacks that run on load), in Chinese, over a torch_npu run and a 4-rank Kineto CPU pipeline
    job with a straggler: no text of the labels' or the analyzer's English table is
    left; names from the traces are data and left out of the search."""
    from webapp.app import create_app

    http = create_app(zh_store).server.test_client()
    assert http.get("/").status_code == 200
    left = {run: _english_left(http, zh_store, run) for run in ("npu", "gloo4", "bad")}
    assert left == {"npu": {}, "gloo4": {}, "bad": {}}, json.dumps(left, indent=1, ensure_ascii=False)
    # each file's problem, stored in English, is shown in Chinese: the system's own words left as they are
    bad = " | ".join(webapp_helpers.shown_texts(webapp_helpers.render_page(http, "/?run=bad&lang=zh")))
    assert "空文件" in bad and "文件在事件列表中途结束（JSON 数组未闭合）：保留了 1098 个完整事件" in bad
    assert "无法读取：解压出 0 字节后压缩数据损坏（Error -3 while decompressing data" in bad
    assert "不是 JSON：文件内容为文本（开头为 b'Step,Computing,Free\\r'）" in bad
    # the search is not vacuous: the same pages in English are full of those texts
    en = webapp_helpers.render_page(http, "/?run=npu&lang=en")
    frags = _english_fragments()
    shown = " | ".join(webapp_helpers.shown_texts(en))
    assert sum(1 for f in frags if re.search(WORD.format(re.escape(f)), shown)) > 30
    assert "Level1: no Runtime API events" in shown  # a reader's note, in English in English


def test_every_dropdown_has_its_texts_in_the_pages_language() -> None:
    """dcc.Dropdown writes "3 selected", "Select All", "Search" itself unless given its ``labels``:
    every dropdown of the app is made by ``ui.dropdown``, which gives them in the page's language."""
    made_elsewhere = [p.name for p in SCANNED if p.name != "ui.py" and "dcc.Dropdown(" in p.read_text()]
    assert made_elsewhere == []
    with lang.use("zh"):
        labels_zh = ui.dropdown(id="x", options=[]).labels
    assert labels_zh["selected_count"] == "已选 {num_selected} 项" and labels_zh["select_all"] == "全选"
    assert set(labels_zh) == {k.removeprefix("dd.") for k in LABELS if k.startswith("dd.")}


@pytest.mark.parametrize("family", ["missing", "pairing", "label", "problem", "where", "hold"])
def test_english_texts_of_a_family_read_back_in_chinese(family: str) -> None:
    """A text stored or used as a key in English (``messages.english``: a reader's note on what a
    collection lacks, a pairing note, a compared group's name) is read back by its template and
    written in Chinese, for every template of the family; a text no template wrote is left as it is."""
    keys = [k for k in MESSAGES if k.startswith(family + ".")]
    assert len(keys) > {"missing": 80, "pairing": 5, "label": 4, "problem": 35, "where": 3, "hold": 4}[family]
    for key in keys:
        params = {f: f"v{i}_7" for i, f in enumerate(sorted(messages.fields(MESSAGES[key][0])))}
        en = messages.english(key, **params)
        parsed = messages.parse(en, family)
        assert parsed is not None and parsed["key"] == key, key
        order = dict.fromkeys(n for _, n, _, _ in string.Formatter().parse(MESSAGES[key][0]) if n)
        assert "".join(parsed["params"][f] for f in order) == "".join(params[f] for f in order), key
        assert messages.translate(en, "zh", family) == messages.render(message(key, **params), "zh"), key
        assert messages.translate(en, "en", family) == en
    name = "aten::mm (ranks 0-1) {x}"  # a name from a trace
    assert messages.translate(name, "zh", "missing") == name


def test_a_readers_note_nests_and_old_stores_read_the_same() -> None:
    """Fields filled with texts of the family are translated too (two side by side as well); the
    English is what stores written before this table hold, so their notes read back the same."""
    note = "no step ranges: trace_view.json, which holds the ProfilerStep ranges, is not in the export (profiler_info records a schedule); step ids 3, 4 known from its other files"  # noqa: E501
    assert messages.translate(note, "zh", "missing") == (
        "没有迭代区间：导出数据中没有保存 ProfilerStep 区间的 trace_view.json（profiler_info 记录了 schedule）；"
        "由其他文件得知迭代号 3, 4"
    )
    stopped = (
        "the job stopped during the profiling window (SIGTERM {x}), last complete step 4: later steps were not captured"
    )
    assert messages.translate(stopped, "zh", "missing") == (
        "作业在采集窗口中途停止（SIGTERM {x}），最后一个完整的迭代为 4：之后的迭代未采集"
    )  # the sidecar's reason is data: as it is
    pair = "no step number in common (a: steps 2–3; b: step 50): every profiled step of each run compared, per step (--base-step / --new-step to choose one of each)"  # noqa: E501
    assert messages.translate(pair, "zh", "pairing").startswith("没有共同的迭代号（a：迭代 2–3；b：迭代 50）")


def test_a_files_problems_read_back_one_by_one() -> None:
    """A file's problems are stored joined by "; " (``FileOutcome.warn``), some with "; " in their own
    text: each is read back by its template (a field never swallows the next problem), the system's
    words in a field and a text no template wrote stay as they are."""
    from analyzer.messages import problem, translate_problems

    joined = "; ".join(
        [
            problem("ends_mid_line"),
            problem("malformed_records", n=3),
            "a note no template wrote",
            problem("kept_before", problem=problem("unterminated", kept=5, dropped=87, at=391515)),
            problem("cannot_read", detail=problem("gz_corrupt", n=0, detail="Error -3 while decompressing data")),
        ]
    )
    assert translate_problems(joined, "en") == joined
    assert translate_problems(joined, "zh") == "；".join(
        [
            "文件在一行的中途结束（作业在写入时停止）；最后一个算子的最后一条记录可能不完整",
            "跳过了 3 条格式错误的记录",
            "a note no template wrote",
            "文件在事件列表中途结束（JSON 数组未闭合）：保留了 5 个完整事件，丢弃了最后 87 字节（从第 391515 字节起）；"
            "保留了此前的事件",
            "无法读取：解压出 0 字节后压缩数据损坏（Error -3 while decompressing data）",
        ]
    )
    assert problem("not_object", kind="operator_details.csv").startswith("not an operator_details.csv file")
    assert problem("not_object", kind="trace").startswith("not a trace file")
