"""The catalog's digest: a small JSON file beside the catalog with what ``analyze runs`` shows and, per
run, what its last ingest found below its folder, so that ``analyze runs`` and the re-ingest of an
unchanged folder answer without opening DuckDB (whose import alone costs more than either answer).

It is written by the process that changed the catalog, right after the change, and trusted only
while the catalog files are still the ones it was written after (inode, size and mtime of
``catalog.duckdb`` and of its write-ahead log: every commit changes them) and while the code that
reads is the code that wrote it. Anything else (another writer since, a crash between the commit
and the digest, an upgrade) makes it stale, and the commands take their usual path. Standard
library only: it is read before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from .layout import CATALOG_FILE

DIGEST_FILE = "catalog.digest.json"
_ANALYZER = Path(__file__).resolve().parent.parent


def catalog_stamp(store_path: Path) -> list[Any]:
    """(inode, size, mtime ns) of the catalog file and of its write-ahead log (None when absent)."""
    out: list[Any] = []
    for name in (CATALOG_FILE, CATALOG_FILE + ".wal"):
        try:
            st = os.stat(store_path / name)
            out.append([st.st_ino, st.st_size, st.st_mtime_ns])
        except FileNotFoundError:
            out.append(None)
    return out


@functools.cache
def code_stamp() -> str:
    """What identifies the analyzer's code: its modules' names, sizes and mtimes (a digest written
    by another version, whose readers or discovery may decide differently, is not used). Computed
    once per process (a walk of the package, ~5 ms of CPU, was made at each digest read and write):
    the code a process runs is the code it loaded."""
    h = hashlib.sha1()
    for top, dirs, files in os.walk(_ANALYZER):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".sql")):
                st = os.stat(os.path.join(top, f))
                h.update(
                    f"{os.path.relpath(os.path.join(top, f), _ANALYZER)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
                )
    return h.hexdigest()


def folder_listing(root: Path) -> dict[str, Any] | None:
    """Every folder and file below ``root`` (files with size and mtime ns), in walk order; None when
    the folder holds a symbolic link to a folder (where discovery may look differs from the walk)."""
    dirs: list[str] = []
    files: list[list[Any]] = []
    for top, dnames, fnames in os.walk(root):
        dnames.sort()
        rel = os.path.relpath(top, root)
        for d in dnames:
            if os.path.islink(os.path.join(top, d)):
                return None
            dirs.append(os.path.normpath(os.path.join(rel, d)))
        for f in sorted(fnames):
            p = os.path.join(top, f)
            try:
                st = os.stat(p)
            except OSError:
                return None
            files.append([os.path.normpath(os.path.join(rel, f)), st.st_size, st.st_mtime_ns])
    return {"dirs": dirs, "files": files}


def read(store_path: Path) -> dict[str, Any] | None:
    """The digest when it is still the catalog's (same catalog files, same code), else None."""
    try:
        with open(store_path / DIGEST_FILE, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("catalog") != catalog_stamp(store_path) or d.get("code") != code_stamp():
        return None
    return d


def runs_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """The digest's ``RUNS_SQL`` rows, ``updated_at`` as a datetime again."""
    return [
        {**r, "updated_at": datetime.fromisoformat(r["updated_at"]) if r["updated_at"] else None} for r in d["runs"]
    ]


def write(
    store_path: Path,
    runs: list[dict[str, Any]],
    problems: list[dict[str, Any]],
    ingests: dict[str, dict[str, Any]],
    stamp_before: list[Any],
) -> None:
    """Write the digest of the catalog as it is now. ``stamp_before``: the catalog stamp when
    ``runs`` / ``problems`` were read; when the catalog changed since, nothing is written (and a
    digest left from before is stale already)."""
    if catalog_stamp(store_path) != stamp_before:
        return
    doc = {
        "catalog": stamp_before,
        "code": code_stamp(),
        "runs": [{**r, "updated_at": r["updated_at"].isoformat() if r["updated_at"] else None} for r in runs],
        "problems": problems,
        "ingests": ingests,
    }
    import tempfile  # only a write needs it: `analyze runs` reads

    fd, tmp = tempfile.mkstemp(prefix=".digest-", dir=store_path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, default=str)
        os.replace(tmp, store_path / DIGEST_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove(store_path: Path) -> None:
    """No digest until the next one is written (an ingest that may leave the store half-changed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(store_path / DIGEST_FILE)


def unchanged_ingest(store_path: Path, run: str, root: Path) -> dict[str, Any] | None:
    """What an ingest of ``root`` as ``run`` would find when nothing below the folder changed since
    the last ingest of that run (every folder and file, with the same size and mtime), or None."""
    d = read(store_path)
    if d is None:
        return None
    rec = d["ingests"].get(run)
    if not rec or rec.get("root") != str(root):
        return None
    listing = folder_listing(root)
    if listing is None or listing != rec.get("listing"):
        return None
    return rec
