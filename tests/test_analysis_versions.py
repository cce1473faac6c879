"""A stored analysis' version (``analyzer.analyses.versions``) changes with its own code and the code
it imports, and with nothing else: on a small package of the analyzer's shape (each version read
from a fresh copy, as a new checkout would), and on the analyzer itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analyzer.analyses import STORED_AT_INGEST, step_breakdown, stragglers
from analyzer.versions import analysis_version, closure, module_version

FILES = {
    "__init__.py": '"""The package."""\n',
    "store/__init__.py": "from .store import Store\n\nif False:\n    from .query import execute\n",
    "store/store.py": "class Store:\n    pass\n",
    "store/query.py": "def execute(sql):\n    return sql\n",
    "readers/kineto.py": "from ..store import Store\n\n\ndef read(path):\n    return Store()\n",
    "cli.py": "from .analyses import slow\nfrom .readers import kineto\n",
    "analyses/__init__.py": "from .fast import fast\nfrom .slow import slow\n",
    "analyses/cache.py": "def per_run(fn):\n    from .stored import read\n    return fn\n",
    "analyses/stored.py": "FORMAT = 1\n",
    "analyses/shared.py": "def matched(store):\n    return [1, 2]\n",
    "analyses/fast.py": "from . import cache\n\n\ndef fast(store):\n    return 1\n",
    "analyses/slow.py": (
        '"""Slow ranks."""\n\nfrom ..store import Store\nfrom . import cache\nfrom .shared import matched\n\n\n'
        "def slow(store: Store):\n    # a vote\n    return matched(store)[0]\n"
    ),
}


def _tree(root: Path, changes: dict[str, str] | None = None) -> Path:
    pkg = root / "analyzer"
    for name, text in {**FILES, **(changes or {})}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def _version(tmp_path: Path, name: str, changes: dict[str, str] | None = None) -> str:
    return module_version("analyzer.analyses.slow", _tree(tmp_path / name, changes))


def test_the_closure_follows_imports_and_not_the_package_of_a_module(tmp_path: Path) -> None:
    pkg = _tree(tmp_path / "a")
    assert closure(["analyzer.analyses.slow"], pkg) == [
        "analyzer.analyses.cache",  # from . import cache: the module, not the package's __init__
        "analyzer.analyses.shared",
        "analyzer.analyses.slow",
        "analyzer.analyses.stored",  # imported inside a function
        "analyzer.store",  # from ..store import Store: a name of the package
        "analyzer.store.query",  # imported under a condition (TYPE_CHECKING)
        "analyzer.store.store",
    ]


@pytest.mark.parametrize(
    ("file", "text", "same"),
    [
        ("readers/kineto.py", "def read(path):\n    return None\n", True),  # a reader
        ("cli.py", "from .analyses import fast\n", True),
        ("analyses/fast.py", "def fast(store):\n    return 2\n", True),  # another analysis
        ("analyses/__init__.py", "from .slow import slow\n", True),  # the registry
        ("analyses/slow.py", FILES["analyses/slow.py"].replace("# a vote", "# the vote"), True),  # a comment
        ("analyses/slow.py", FILES["analyses/slow.py"].replace("Slow ranks.", "The slow ranks."), True),  # doc
        ("analyses/slow.py", FILES["analyses/slow.py"].replace("    return", "\n    return"), True),  # layout
        ("analyses/slow.py", FILES["analyses/slow.py"].replace("[0]", "[1]"), False),  # the analysis
        ("analyses/shared.py", "def matched(store):\n    return [2, 1]\n", False),  # what it reads
        ("analyses/stored.py", "FORMAT = 2\n", False),  # how results are stored
        ("store/query.py", "def execute(sql):\n    return sql.strip()\n", False),  # how the store is read
    ],
)
def test_a_change_keeps_the_version_only_outside_the_analysis_and_its_imports(
    tmp_path: Path, file: str, text: str, same: bool
) -> None:
    assert (_version(tmp_path, "before") == _version(tmp_path, "after", {file: text})) is same


def test_the_analyzer_s_stored_analyses_do_not_depend_on_its_readers_ingest_or_cli(tmp_path: Path) -> None:
    every = closure([fn.compute.__module__ for fn in STORED_AT_INGEST])
    assert "analyzer.analyses.stored" in every and "analyzer.analyses.cache" in every
    outside = ("analyzer.readers", "analyzer.ingest", "analyzer.cli", "analyzer.analyses.report", "analyzer.summary")
    assert not [m for m in every if m.startswith(outside)]
    assert analysis_version(step_breakdown) != analysis_version(stragglers)
    # an analysis that another does not read leaves it as it was: the step breakdown reads no matching
    assert "analyzer.analyses.straggler" not in closure([step_breakdown.compute.__module__])
    # the same code copied elsewhere has the same version (a Dask worker's checkout, the server's)
    import analyzer

    copy = tmp_path / "analyzer"
    shutil.copytree(Path(analyzer.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    module = step_breakdown.compute.__module__
    assert module_version(module, copy) == module_version(module)
