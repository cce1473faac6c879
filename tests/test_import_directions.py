"""Which rooms may import which: every import of the code, parsed with ``ast``, against a table of
forbidden (importer, imported) module prefixes.

A prefix names a module and everything below it (``analyzer.readers`` covers
``analyzer.readers.ascend.db``). Relative imports are resolved against the importing module. To forbid a
new direction, add a row to ``FORBIDDEN``; to name a new producer door, add it to ``DOORS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("analyzer", "collector", "webapp", "agent")

# the producer doors of the readers: thin modules over the file families
DOORS = (
    "analyzer.readers.kineto",
    "analyzer.readers.torch_npu",
    "analyzer.readers.msprof",
    "analyzer.readers.mindspore",
    "analyzer.readers.collector",
)
FAMILIES = ("analyzer.readers.common", "analyzer.readers.chrome", "analyzer.readers.ascend")

# (importer prefix, imported prefix, why)
FORBIDDEN: list[tuple[str, str, str]] = [
    ("analyzer.analyses", "analyzer.readers", "analyses read the store only"),
    ("analyzer.analyses", "analyzer.ingest", "analyses read the store only"),
    ("analyzer.store", "analyzer.readers", "the store knows tables, not formats"),
    ("analyzer.store", "analyzer.ingest", "the store knows tables, not how they are filled"),
    ("analyzer.vocabulary", "analyzer.readers", "the shared vocabulary sits below readers and analyses"),
    ("analyzer.vocabulary", "analyzer.analyses", "the shared vocabulary sits below readers and analyses"),
    ("analyzer.readers", "analyzer.analyses", "readers write facts; they do not analyse"),
    ("analyzer.readers", "analyzer.ingest", "readers are called by the ingest, not the other way round"),
    ("analyzer.readers.common", "analyzer.readers.chrome", "common is below every family"),
    ("analyzer.readers.common", "analyzer.readers.ascend", "common is below every family"),
    ("analyzer.readers.chrome", "analyzer.readers.ascend", "the Chrome family knows no producer's files"),
]
FORBIDDEN += [
    ("collector", "analyzer", "the collector runs in the training job: it writes files, nothing more"),
    ("collector", "webapp", "the collector runs in the training job: it writes files, nothing more"),
    ("webapp", "analyzer.ingest", "the web app reads the store; ingesting is the CLI's"),
    ("webapp", "analyzer.readers", "the web app reads the store, not profiler files"),
    ("webapp", "analyzer.factwriter", "the web app reads the store; writing facts is the ingest's"),
    ("analyzer.store", "analyzer.analyses", "the store knows tables, not what is computed from them"),
    ("analyzer.analyses", "webapp", "the analyses serve the CLI and the web app alike"),
    ("analyzer.store", "webapp", "the store serves the CLI and the web app alike"),
]
# the MCP server (agent) reads the store through the CLI's and the web app's library: it never writes
FORBIDDEN += [
    ("agent", "analyzer.ingest", "the MCP server reads the store; ingesting is the CLI's"),
    ("agent", "analyzer.readers", "the MCP server reads the store, not profiler files"),
    ("agent", "analyzer.factwriter", "the MCP server reads the store; writing facts is the ingest's"),
    ("analyzer.analyses", "agent", "the analyses serve every front end alike"),
    ("analyzer.store", "agent", "the store serves every front end alike"),
    ("webapp", "agent", "the web app does not depend on the MCP server"),
    ("collector", "agent", "the collector runs in the training job: it writes files, nothing more"),
]
# torch, torch_npu and mindspore belong to the training job (and to the collector's lazy imports)
FORBIDDEN += [
    (p, f, "the analyzer and the web app never import a framework")
    for p in ("analyzer", "webapp", "agent")
    for f in ("torch", "torch_npu", "mindspore")
]
FORBIDDEN += [(f, d, "families do not import producer doors") for f in FAMILIES for d in DOORS]
FORBIDDEN += [(a, b, "a producer door does not import another one") for a in DOORS for b in DOORS if a != b]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file; ``from x import y`` also yields ``x.y``
    (y may be a module)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names if a.name != "*"]
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def test_import_directions() -> None:
    problems = []
    for path in _sources():
        importer = _module_name(path)
        for line, imported in _imports(path):
            for src, dst, why in FORBIDDEN:
                # a module may import inside its own prefix (a door's own submodules)
                if _under(importer, src) and _under(imported, dst) and not _under(importer, dst):
                    problems.append(f"{path.relative_to(REPO)}:{line}: {importer} imports {imported} ({why})")
    assert not problems, "\n".join(sorted(set(problems)))


@pytest.mark.parametrize("door", DOORS)
def test_every_door_exists(door: str) -> None:
    """The table names real modules (a renamed door would silently escape the rules)."""
    rel = Path(*door.split("."))
    assert (REPO / rel).with_suffix(".py").is_file() or (REPO / rel / "__init__.py").is_file()


def test_relative_imports_are_resolved() -> None:
    """The parser sees relative imports for what they are (the check would pass vacuously otherwise)."""
    door = REPO / "analyzer" / "readers" / "msprof.py"
    names = [n for _line, n in _imports(door)]
    assert "analyzer.readers.ascend.db" in names and "analyzer.readers.base.register" in names
