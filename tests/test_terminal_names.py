"""Names from outside are printed as literal text by every command: a folder, run and operator
names holding rich markup (``[/data]`` used to crash the command, ``[bold]`` vanished, ``:x:`` became
an emoji) and terminal escape sequences (printed raw, the terminal obeyed them) come out as written,
with control characters shown as escapes (``\\x1b``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO
from helpers import analyze as _analyze

from analyzer.terminal import lit, visible

KINETO = REPO / "sample_data" / "kineto_gloo_2rank"
ESC = "\x1b"
# a run name given with a control character is refused by the ingest (test_ingest_hardened); the
# folder's name carries the terminal escape here
RUN = "r [/data] [bold]B[/bold] :x: RED"
OP = "op [/data] [bold]mm[/bold] :x: \x1b]0;title\x07\x1b[2J"
SHOWN_RUN = "r [/data] [bold]B[/bold] :x: RED"
SHOWN_OP = r"op [/data] [bold]mm[/bold] :x: \x1b]0;title\x07\x1b[2J"


def test_lit_and_visible() -> None:
    assert visible("plain name") == "plain name"
    assert visible("a\x1b[31mb\x07\x9b\u202ec\td") == r"a\x1b[31mb\x07\x9b\u202ec\td"
    assert visible("two\nlines", lines=True) == "two\nlines" and visible("two\nlines") == r"two\nlines"
    assert lit("[bold]x[/bold]") == r"\[bold]x\[/bold]"
    assert lit("ends with \\") == "ends with \\\\"  # a trailing backslash would escape our closing tag
    assert visible(None) == ""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("names")
    folder = tmp / "folder [/x] :x: \x1b[1mF"
    shutil.copytree(KINETO, folder)
    for f in folder.rglob("*.pt.trace.json"):
        f.write_text(f.read_text().replace('"name": "aten::mm"', '"name": ' + json.dumps(OP)))
    store = tmp / "store"
    out = analyze("ingest", str(folder), "--run", RUN, "--store", str(store))
    return store, out.stdout + out.stderr


def analyze(*args: str, check: bool = True):
    """The real command, on a terminal wide enough that no table cell is wrapped."""
    return _analyze(*args, check=check, env={"COLUMNS": "1000"})


def shows(text: str, *shown: str) -> None:
    assert ESC not in text, repr(text)
    assert "Traceback" not in text, text
    for s in shown:
        assert s in text, (s, text)


def test_ingest_prints_names_literally(store: tuple[Path, str]) -> None:
    shows(store[1], SHOWN_RUN, r"folder [/x] :x: \x1b[1mF")


def test_runs_prints_names_literally(store: tuple[Path, str]) -> None:
    out = analyze("runs", "--store", str(store[0]))
    shows(out.stdout + out.stderr, SHOWN_RUN, r"folder [/x] :x: \x1b[1mF")


def test_summary_prints_names_literally(store: tuple[Path, str]) -> None:
    out = analyze("summary", "--run", RUN, "--top", "30", "--store", str(store[0]))
    shows(out.stdout + out.stderr, SHOWN_RUN, SHOWN_OP)


def test_query_prints_names_literally(store: tuple[Path, str]) -> None:
    sql = "SELECT DISTINCT name AS \"[bold]col[/bold] :x:\" FROM operators WHERE name LIKE 'op %'"
    out = analyze("query", sql, "--store", str(store[0]))
    shows(out.stdout + out.stderr, SHOWN_OP, "[bold]col[/bold] :x:")
    # the machine formats keep the exact text (JSON escapes the control characters itself)
    data = json.loads(analyze("query", sql, "--format", "json", "--store", str(store[0])).stdout)
    assert [list(r.values()) for r in data] == [[OP]]


def test_report_prints_names_literally(store: tuple[Path, str]) -> None:
    out = analyze("report", "--run", RUN, "--store", str(store[0]))
    shows(out.stdout + out.stderr, SHOWN_RUN)


def test_errors_print_names_literally(store: tuple[Path, str]) -> None:
    out = analyze("summary", "--run", "[/nope] \x1b[2J", "--store", str(store[0]), check=False)
    assert out.returncode == 1
    shows(out.stderr, r"no run named '[/nope] \x1b[2J'")


def test_drop_prints_names_literally(store: tuple[Path, str], tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store[0], copy)
    out = analyze("drop", RUN, "--store", str(copy))
    shows(out.stdout + out.stderr, "dropped run " + SHOWN_RUN)


def test_compare_commands_print_names_literally(store: tuple[Path, str], tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store[0], copy)
    s = str(copy)
    analyze("ingest", str(KINETO), "--run", "plain", "--store", s)
    out = analyze("diff", "plain", RUN, "--top", "50", "--store", s)  # aten::mm became OP: a new operator
    shows(out.stdout + out.stderr, SHOWN_RUN, SHOWN_OP)
    out = analyze("baseline", "tag", "b [/x]", RUN, "--store", s)
    shows(out.stdout, SHOWN_RUN, "b [/x]")
    out = analyze("tag", "add", "t [bold]\x1b[2J", RUN, "--store", s, check=False)  # names we give: no controls
    assert out.returncode == 1
    shows(out.stderr, "cannot hold control characters")
    out = analyze("tag", "add", "t [bold] :x:", RUN, "--store", s)
    shows(out.stdout, SHOWN_RUN, "t [bold] :x:")
    out = analyze("trend", "--store", s)
    shows(out.stdout, SHOWN_RUN, "baseline:b [/x]", "#t [bold] :x:")
    out = analyze("check", RUN, "--against", "plain", "--fail-if", "step_time > +1000%", "--store", s)
    shows(out.stdout + out.stderr, SHOWN_RUN)
