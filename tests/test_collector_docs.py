"""The collector's documentation matches the code, and the collector keeps its import rules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from collector.backends import mapping_table, mappings
from collector.config import OPTION_HELP, option_names

REPO = Path(__file__).resolve().parent.parent


def test_option_table_in_the_docs_is_the_code_s() -> None:
    assert set(OPTION_HELP) == set(option_names())
    for backend, mapping in mappings().items():
        assert set(mapping) == set(option_names()), backend  # no option silently dropped by a backend
    doc = (REPO / "docs" / "collector.md").read_text()
    assert mapping_table() in doc, "docs/collector.md: regenerate the table with collector.backends.mapping_table()"


def test_readme_has_a_collector_section() -> None:
    readme = (REPO / "README.md").read_text()
    assert "## Collector" in readme and "docs/collector.md" in readme


def test_importing_the_collector_does_not_import_torch() -> None:
    code = (
        "import sys, collector, collector.cli, collector.autorun, collector.callbacks, collector.dynamic, "
        "collector.backends; "
        "from collector import Profiler; Profiler({'enable': False}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'torch_npu', 'transformers', 'mindspore', 'analyzer', 'webapp')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_collector_never_imports_analyzer_or_webapp_and_torch_only_lazily() -> None:
    framework_modules = {
        "backends/torch_profiler.py",
        "backends/torch_npu.py",
        "backends/mindspore.py",
        "optimizer_hook.py",
        "hf.py",
        "mindspore_callback.py",
        "rank.py",  # mindspore.communication, only when the script imported it
    }
    for path in sorted((REPO / "collector").rglob("*.py")):
        rel = str(path.relative_to(REPO / "collector"))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top not in ("analyzer", "webapp"), f"{rel} imports {name}"
                if top in ("torch", "torch_npu", "transformers", "mindspore"):
                    assert rel in framework_modules, f"{rel} imports {name}"
                    lazy = any(isinstance(p, ast.FunctionDef) and node in ast.walk(p) for p in ast.walk(tree))
                    assert lazy or rel in ("hf.py", "mindspore_callback.py"), f"{rel} imports {name} at module level"
