"""Change detection: which collections must be read again, and the one ``source_files`` row builder.

A collection is unchanged when its files are the ones recorded, each with the recorded size and
mtime; a file whose size is the same but whose mtime moved is hashed, and the collection is unchanged
when every such file has the recorded SHA-256 (its row then gets the new mtime).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..format import safe_text
from ..readers.base import CollectionPlan

_HASH_BLOCK = 4 << 20


def file_sha256(path: Path) -> str | None:
    """The file's SHA-256, or None when it cannot be read (permissions, vanished)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while True:
                b = f.read(_HASH_BLOCK)
                if not b:
                    break
                h.update(b)
    except OSError:
        return None
    return h.hexdigest()


def stat_file(path: Path) -> tuple[int, int] | None:
    """(size, mtime ns) of a file, or None when it cannot be seen."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def path_text(path: Path | str) -> str:
    """A path as the store and the terminal show it (``safe_text``: bytes that are not UTF-8 as \\xNN)."""
    return safe_text(str(path))


def relpath(path: Path, run_root: Path) -> str:
    """A file's ``source_files.path``: relative to the run root, as text."""
    try:
        return path_text(path.relative_to(run_root))
    except ValueError:
        return path_text(path)


def source_file_row(
    run: str,
    path: Path,
    run_root: Path,
    now: datetime,
    reader: str,
    status: str,
    error: str | None,
    collection_id: str | None = None,
    rows: int = 0,
    hashed: bool = False,
    sha256: str | None = None,
) -> dict[str, Any]:
    """The ``source_files`` row of one file as it is now. ``hashed``: the file's content was used,
    so its SHA-256 is recorded (``sha256`` when the reader computed it while reading)."""
    st = stat_file(path)
    return {
        "run": run,
        "path": relpath(path, run_root),
        "collection_id": collection_id,
        "size_bytes": st[0] if st else None,
        "mtime_ns": st[1] if st else None,
        "sha256": (sha256 or file_sha256(path)) if st and hashed else None,
        "reader": reader,
        "status": status,
        "error": error,
        "rows": rows,
        "ingested_at": now,
    }


def unchanged(
    plan: CollectionPlan, prev_files: dict[str, dict[str, Any]], run_root: Path
) -> bool | list[tuple[Path, str]]:
    """True if every file has the recorded size and mtime; else the files to hash (same size, new
    mtime: (path, its ``source_files.path``)), or False when the collection changed."""
    files = plan.all_files
    rels = [relpath(f, run_root) for f in files]
    recorded = {p for p, r in prev_files.items() if r["collection_id"] == plan.collection_id}
    if set(rels) != recorded:
        return False
    changed = []
    for f, rel in zip(files, rels):
        st = stat_file(f)
        r = prev_files[rel]
        if st is None:
            return False
        if (st[0], st[1]) != (r["size_bytes"], r["mtime_ns"]):
            if r["sha256"] is None or st[0] != r["size_bytes"]:
                return False
            changed.append((f, rel))
    return changed or True


@dataclass
class Previous:
    """What the store holds of a run before this ingest."""

    existed: bool = False
    root: str | None = None
    collections: dict[str, dict[str, Any]] = field(default_factory=dict)  # by collection id
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # source_files rows by path
    stale: set[str] = field(default_factory=set)  # collections written before a column existed: read again
    fact_files: list[dict[str, Any]] = field(default_factory=list)  # the run's fact_files rows


@dataclass
class Plan:
    """What to do with each collection found."""

    to_read: list[CollectionPlan] = field(default_factory=list)
    unchanged: list[CollectionPlan] = field(default_factory=list)
    touched: list[dict[str, Any]] = field(default_factory=list)  # source_files rows with a new mtime only


def plan_reads(plans: list[CollectionPlan], prev: Previous, run_root: Path) -> Plan:
    """Split the collections found into those to read and those unchanged since the last ingest."""
    out = Plan()
    for plan in plans:
        old = prev.collections.get(plan.collection_id)
        if old is None or old["rank"] != plan.rank or old["rank_source"] != plan.rank_source:
            out.to_read.append(plan)  # new, or its rank is now decided differently
            continue
        if plan.collection_id in prev.stale:
            out.to_read.append(plan)  # its files lack a column added since
            continue
        verdict = unchanged(plan, prev.files, run_root)
        if verdict is True:
            out.unchanged.append(plan)
        elif verdict is False:
            out.to_read.append(plan)
        elif _same_content(verdict, prev.files):  # same size, new mtime, same bytes
            out.unchanged.append(plan)
            for path, rel in verdict:
                row = dict(prev.files[rel])
                st = stat_file(path)
                row["mtime_ns"] = st[1] if st else row["mtime_ns"]
                out.touched.append(row)
        else:
            out.to_read.append(plan)
    return out


def _same_content(files: list[tuple[Path, str]], prev_files: dict[str, dict[str, Any]]) -> bool:
    for path, rel in files:
        digest = file_sha256(path)
        if digest is None or digest != prev_files[rel]["sha256"]:
            return False
    return True
