"""The version of one analysis' code: a digest of the analyzer modules it runs, nothing else.

A result stored with a run (``analyses.stored``) stays valid while the run's content is the one it was
computed from (``run_key``) and the code that computed it is unchanged. "The code" is the
analysis' own module and every module of the ``analyzer`` package it imports, directly or through
others (found by reading their import statements, function-level and ``TYPE_CHECKING`` ones
included: ``analyses.cache`` imports ``stored`` inside a function, so the storage format is part of
every analysis' version). A change to a reader, the ingest, the CLI, the web app or an analysis the
stored one does not use leaves it valid; a change to the analysis, to an analysis it reads, to the
store's reading code or to how results are stored invalidates it.

Each module counts by its syntax tree without docstrings (``ast.dump``: no comments, no line
numbers, no formatting), so rewording a comment or a docstring or reformatting keeps the results.

The version is read from the source files alone, without importing the analysis: the ingest's
driver (which imports no pandas) tells a stale stored result by its name (``version_of``).

Imports resolve as Python does, with one exception: importing ``analyzer.analyses.slow_rank`` runs
the package ``analyzer.analyses`` first, whose ``__init__`` imports every analysis; a package counts
only where a module imports a name defined in it (``from ..store import Store``), not merely because
one of its modules is imported (``from . import cache``). Imports made by name at run time
(``importlib.import_module``) are not seen: the lazy exports of ``analyzer.store`` and
``analyzer.analyses`` are also imported under ``TYPE_CHECKING``, which is.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

PACKAGE = "analyzer"
ROOT = Path(__file__).resolve().parent  # the analyzer package's folder
VERSION_KEY = b"rankscope.analysis_version"  # in a stored result's Parquet metadata


def _file(module: str, root: Path = ROOT) -> Path | None:
    """The source file of ``module`` (a dotted name under ``PACKAGE``), None when there is none."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


@functools.cache
def _parsed(module: str, root: Path = ROOT) -> tuple[str, tuple[str, ...]]:
    """The module's syntax tree without docstrings (as text) and the analyzer modules it imports."""
    f = _file(module, root)
    if f is None:
        return "", ()
    tree = ast.parse(f.read_bytes(), filename=str(f))
    package = module if f.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if _file(sub, root) is not None else base)
    deps = tuple(sorted(m for m in found if m.split(".")[0] == PACKAGE and _file(m, root) is not None))
    return ast.dump(_strip_docstrings(tree)), deps


def closure(modules: Iterable[str], root: Path = ROOT) -> list[str]:
    """``modules`` and every analyzer module they import, directly or not (sorted)."""
    seen: set[str] = set()
    todo = [m for m in modules if _file(m, root) is not None]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(_parsed(m, root)[1])
    return sorted(seen)


@functools.cache
def module_version(module: str, root: Path = ROOT) -> str:
    """A digest of the code ``module`` runs: its syntax tree and those of the modules of its
    ``closure``, docstrings left out."""
    h = hashlib.sha256()
    for m in closure([module], root):
        h.update(m.encode() + b"\0" + _parsed(m, root)[0].encode() + b"\0")
    return h.hexdigest()[:16]


def version_of(name: str) -> str:
    """The version of the analysis whose full name (``module.function``) is ``name``: its
    module's ``module_version``, with the name (two analyses of one module have two versions)."""
    return hashlib.sha256(f"{name}\0{module_version(name.rpartition('.')[0])}".encode()).hexdigest()[:16]


def analysis_version(fn: Callable[..., Any]) -> str:
    """The version of analysis ``fn`` (a ``per_run`` function or a plain one)."""
    inner = getattr(fn, "compute", fn)
    return version_of(f"{inner.__module__}.{inner.__qualname__}")


def written_version(path: Path) -> str | None:
    """The version a stored result's file says computed it (None: none, unreadable, or a store made
    before per-analysis versions)."""
    try:
        v = (pq.read_schema(path).metadata or {}).get(VERSION_KEY)
    except (OSError, ValueError):  # ArrowInvalid is a ValueError
        return None
    return v.decode() if v else None
