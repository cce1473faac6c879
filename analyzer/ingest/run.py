"""`analyze ingest`: discover, skip what is unchanged, read the rest in parallel, commit atomically."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import schema
from ..errors import NothingIngestedError, RunConflictError, RunNameError, SeparateJobsError
from ..format import safe_text
from ..store import Store, digest, utcnow
from ..store.sql import absent_columns
from . import compact
from .changes import Plan, Previous, path_text, plan_reads, source_file_row
from .discover import Discovery, discover, run_root
from .jobs import separate_jobs
from .pool import Executor, LocalPool, read_all
from .report import CollectionResult, IngestReport
from .run_results import refresh_run_results, run_ranks, store_run_results


def ingest(
    root: str | os.PathLike[str],
    store: Store,
    run: str | None = None,
    workers: int | None = None,
    on_progress: Callable[[str, Any], None] | None = None,
    executor: Executor | None = None,
) -> IngestReport:
    """Ingest every profiler output below ``root`` as run ``run`` (default: the folder name).
    ``executor``: where the collections are read (default: a local pool of ``workers`` processes)."""
    t0 = time.perf_counter()
    root_p = Path(root).expanduser().resolve()
    if not root_p.exists():
        raise NothingIngestedError(f"{root_p}: no such file or folder")
    run_name = run_name_for(root_p, run)
    # a store that does not exist yet holds nothing to compare with or to collect: reading starts
    # at once and the empty catalog is created while the workers read
    fresh = not store.exists()
    report = IngestReport(run_name, path_text(root_p), str(store.path))
    notify = on_progress or (lambda kind, obj: None)
    # what is below the folder, before anything is read: a file that changes while the ingest
    # reads it is seen changed by the next ingest (see store.digest)
    listing = digest.folder_listing(run_root(root_p))
    with store.ingest_lock():
        fresh = not store.exists()  # another ingest may have created it while this one waited for the lock
        before = None if fresh else digest.read(store.path)
        disc = discover(root_p, run_name)
        prev = Previous()
        if not fresh:
            # the catalog work before the reading, on one connection (``catalog_held``)
            with store.catalog_held():
                store.initialize()
                # until this ingest commits, the digest is not trusted (a kill before the commit
                # leaves files to collect: the next ingest must take this path)
                digest.remove(store.path)
                store.garbage_collect()
                prev = _previous(store, run_name, disc.root)
        todo = plan_reads(disc.plans, prev, disc.root)
        _note_unchanged(report, todo, prev, disc, notify)
        results = read_all(
            todo.to_read,
            str(store.path),
            str(disc.root),
            notify,
            workers,
            functools.partial(store.initialize, views=False) if fresh else None,  # views: at the commit
            executor,
        )
        batch = _batch(report, results, prev, todo)
        _refuse_separate_jobs(store, root_p, batch, prev, todo)
        batch.file_rows += _discovery_rows(report, disc, run_name)
        ingests = _ingests(report, root_p, disc, listing, before)
        ranks = 0
        with store.catalog_held():  # the catalog work after the reading, on one connection
            committed, replaced = _commit(store, report, prev, run_name, disc.root, batch, ingests)
            if replaced:
                store.garbage_collect()  # the files of the collections this commit replaced or removed
            if committed:
                ranks = run_ranks(store, run_name)
            elif store.exists():
                if fresh:
                    store.initialize()  # the fact views the first commit would have made
                store.write_digest(ingests)
        if committed:  # the analyses are computed with the catalog closed: the executor reads it
            report.stored_analyses, report.stored_seconds = store_run_results(
                store, run_name, executor or LocalPool(workers), ranks
            )
        elif store.exists():  # unchanged: the analyses stored by another version of their code, computed again
            report.stored_analyses, report.stored_seconds = refresh_run_results(
                store, run_name, executor or LocalPool(workers)
            )
        if report.stored_analyses:
            store.write_digest(ingests)  # the catalog changed again since the commit wrote it
    report.seconds = time.perf_counter() - t0
    if report.usable == 0:
        raise _nothing_ingested(report, disc, root_p)
    return report


MAX_RUN_NAME = 120  # characters; the store's folder for a run is a slug of at most 100 (store.slug)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def run_name_for(root: Path, given: str | None) -> str:
    """The run's name, checked once here: ``--run NAME`` as given, refused (``RunNameError``) when it
    is empty, longer than MAX_RUN_NAME or holds control characters (a terminal escape, a newline);
    else the folder's name (a file's name without its suffixes) made storable: bytes that are not
    UTF-8 and control characters written as ``\\xNN``, cut to MAX_RUN_NAME with a hash of the whole
    name kept at the end (two long names that differ after the cut stay two runs). Characters that
    mean something to a terminal or a markup language (``[/]``) are text: every printer escapes them."""
    if given is not None:
        bad = _CONTROL.search(given)
        if not given.strip() or bad or len(given) > MAX_RUN_NAME or given != safe_text(given):
            why = (
                "is empty"
                if not given.strip()
                else f"holds the control character {bad.group()!r}"
                if bad
                else f"is {len(given)} characters long (at most {MAX_RUN_NAME})"
                if len(given) > MAX_RUN_NAME
                else "is not valid text"
            )
            raise RunNameError(f"run name {safe_text(given)!r} {why}: give another with --run NAME")
        return given
    name = root.name if root.is_dir() else root.name.split(".")[0]
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", safe_text(name)).strip() or "run"
    if len(text) > MAX_RUN_NAME:
        digest = hashlib.sha1(text.encode()).hexdigest()[:8]
        text = f"{text[: MAX_RUN_NAME - 10]}~{digest}"
    return text


def _text_safe(rows: list[dict[str, Any]]) -> None:
    """Catalog rows made storable in place: text from file names and OS messages may hold bytes that
    are not UTF-8 (surrogate escapes), which DuckDB refuses (``safe_text``)."""
    for row in rows:
        for k, v in row.items():
            if isinstance(v, str):
                row[k] = safe_text(v)
            elif isinstance(v, list) and any(isinstance(x, str) for x in v):
                row[k] = [safe_text(x) if isinstance(x, str) else x for x in v]


def _refuse_separate_jobs(store: Store, root: Path, batch: _Batch, prev: Previous, todo: Plan) -> None:
    """A folder holding unrelated jobs is not one run (``jobs``): refused before the commit, with
    the folders to ingest instead; the files the workers wrote are collected."""
    kept = {p.collection_id for p in todo.unchanged}
    rows = batch.collections + [c for cid, c in prev.collections.items() if cid in kept]
    found = separate_jobs(rows)
    if found is None:
        return
    why, folders = found
    store.garbage_collect()
    raise SeparateJobsError(
        f"{path_text(root)} holds separate jobs ({why}): "
        + "; ".join(f"{name}: {what}" for name, what in folders)
        + ". Ingest each as its own run: analyze ingest "
        + " ".join(path_text(root / name) if name != "." else path_text(root) for name, _ in folders)
    )


def _previous(store: Store, run: str, run_root: Path) -> Previous:
    """What the store holds of ``run``; a run of that name over another folder is a conflict."""
    cat = store.load_catalog(["runs", "collections", "source_files", "fact_files"], run=run)
    prev_root = next((r["root_path"] for r in cat["runs"].to_pylist()), None)
    if prev_root is not None and prev_root != path_text(run_root):
        raise RunConflictError(
            f"run {run!r} in the store holds {prev_root}, not {run_root}: give this folder "
            f"its own name (--run NAME), or `analyze drop {run}` first to replace it"
        )
    fact_files = cat["fact_files"].to_pylist()
    return Previous(
        existed=prev_root is not None,
        root=prev_root,
        collections={r["collection_id"]: r for r in cat["collections"].to_pylist()},
        files={r["path"]: r for r in cat["source_files"].to_pylist()},
        stale=_written_before(store, fact_files),
        fact_files=fact_files,
    )


def _written_before(store: Store, fact_files: list[dict[str, Any]]) -> set[str]:
    """The collections whose fact files lack a column added since (``schema.Column.derive``): read
    again, so that a run never mixes files with and without it (a view computes such a column only
    when no file holds it). Every ingest leaves none behind, so one file of the run tells: the
    others are looked at only when it lacks one."""
    late = {t.name: {c.name for c in t.columns if c.derive} for t in schema.FACT_TABLES}
    rows = [r for r in fact_files if late.get(r["table_name"])]

    def lacks(r: dict[str, Any]) -> bool:
        return bool(late[r["table_name"]] & absent_columns(r["table_name"], [str(store.path / r["path"])]))

    if not rows or not lacks(rows[0]):
        return set()
    return {r["collection_id"] for r in rows if lacks(r)}


def _note_unchanged(
    report: IngestReport, todo: Plan, prev: Previous, disc: Discovery, notify: Callable[[str, Any], None]
) -> None:
    """Unchanged collections, the problems recorded on their files before, and the collections gone."""
    report.unchanged = list(todo.unchanged)
    found = {p.collection_id for p in disc.plans}
    report.gone = [c for cid, c in sorted(prev.collections.items()) if cid not in found]
    unchanged_ids = {p.collection_id for p in report.unchanged}
    report.earlier = [
        f for f in prev.files.values() if f["collection_id"] in unchanged_ids and f["status"] in ("warning", "error")
    ]
    for plan in report.unchanged:
        notify("unchanged", plan)


@dataclass
class _Batch:
    """What one commit writes to the catalog."""

    replace: list[str] = field(default_factory=list)  # collection ids whose rows and facts are replaced
    collections: list[dict[str, Any]] = field(default_factory=list)
    fact_files: list[dict[str, Any]] = field(default_factory=list)
    file_rows: list[dict[str, Any]] = field(default_factory=list)


def _batch(report: IngestReport, results: list[CollectionResult], prev: Previous, todo: Plan) -> _Batch:
    batch = _Batch(file_rows=list(todo.touched))
    for res in results:
        report.read.append(res)
        cid = res.plan.collection_id
        if res.status == "error" and cid in prev.collections and prev.collections[cid]["status"] != "error":
            # nothing readable this time: keep what was ingested before, record the problem
            report.kept_previous.append(cid)
            for f in res.file_rows:
                if f["status"] == "error":
                    f["error"] = f"{f['error']} (previous data of this collection kept)"
            batch.file_rows.extend(res.file_rows)
            continue
        batch.replace.append(cid)
        batch.collections.append(res.collection_row)
        batch.fact_files.extend(res.fact_files)
        batch.file_rows.extend(res.file_rows)
    return batch


def _discovery_rows(report: IngestReport, disc: Discovery, run: str) -> list[dict[str, Any]]:
    """source_files rows of the files outside every collection: ignored, or unreadable."""
    now = utcnow()
    rows = []
    for path, reason in disc.ignored:
        row = source_file_row(run, path, disc.root, now, "ignored", "ignored", reason)
        rows.append(row)
        report.ignored.append((row["path"], reason))
    for path, reason in dict(disc.problems).items():  # one row per path (a folder met twice)
        row = source_file_row(run, path, disc.root, now, "discover", "error", reason)
        rows.append(row)
        report.unreadable.append(row)
    return rows


def _commit(
    store: Store,
    report: IngestReport,
    prev: Previous,
    run: str,
    run_root: Path,
    batch: _Batch,
    ingests: dict[str, dict[str, Any]],
) -> tuple[bool, bool]:
    """Commit the batch (and the catalog's digest with it): (committed, collections were replaced
    or removed: their old files are garbage)."""
    if report.usable:  # the run mirrors the folder: what is no longer there leaves the run
        batch.replace.extend(c["collection_id"] for c in report.gone)
    else:  # nothing readable (a folder being rewritten, a missing mount): keep everything
        report.gone = []
    _text_safe(batch.collections)
    _text_safe(batch.file_rows)
    if _nothing_new(prev, run_root, batch):
        return False, False  # an unchanged folder changes nothing in the store (not even the run's update time)
    if report.usable or prev.existed:  # a run that never held data is not created
        root = path_text(run_root)
        # the aggregates of the run in one file per table (``compact``): the commit lists it for every collection
        tables, rows = compact.run_files(store.path, run, prev.fact_files, batch.replace, batch.fact_files)
        facts = [f for f in batch.fact_files if f["table_name"] not in tables] + rows
        store.commit(run, root, batch.replace, batch.collections, facts, batch.file_rows, ingests, run_tables=tables)
        return True, bool(tables) or bool(set(batch.replace) & set(prev.collections))
    store.garbage_collect()  # the (empty) files the workers wrote
    return False, False


_WHEN = ("ingested_at",)  # what a re-ingest changes in a file's row even when the file did not change


def _nothing_new(prev: Previous, run_root: Path, batch: _Batch) -> bool:
    """Whether the commit would change nothing but ingest times: the run exists over this folder,
    no collection is read, replaced or removed, and every file row is the row recorded before."""
    if not prev.existed or prev.root != path_text(run_root) or batch.replace or batch.collections or batch.fact_files:
        return False
    for row in batch.file_rows:
        old = prev.files.get(row["path"])
        if old is None or any(old.get(k) != v for k, v in row.items() if k not in _WHEN):
            return False
    return True


def _ingests(
    report: IngestReport,
    given: Path,
    disc: Discovery,
    listing: dict[str, Any] | None,
    before: dict[str, Any] | None,
) -> dict[str, dict[str, Any]]:
    """What the catalog's digest records of each run's last ingest, this one's included: the next
    ingest of the same, unchanged folder answers from it (``store.digest``)."""
    ingests = dict((before or {}).get("ingests", {}))
    ingests.pop(report.run, None)
    if listing is not None and report.usable:
        ingests[report.run] = {
            "given": str(given),
            "root": str(disc.root),
            "listing": listing,
            "unchanged": [{"path": p.rel_root, "rank": p.rank} for p in disc.plans],
            "ignored": [list(x) for x in report.ignored],
        }
    return ingests


def _nothing_ingested(report: IngestReport, disc: Discovery, root: Path) -> NothingIngestedError:
    if not disc.plans and not disc.problems:
        msg = (
            f"{root}: no profiler output found (looked for Kineto traces, *_ascend_pt folders, "
            f"collector rank_{{id}} folders); {len(disc.ignored)} other file(s) ignored"
        )
    else:
        msg = f"{root}: nothing could be ingested ({len(report.problems)} file(s) with problems)"
    err = NothingIngestedError(msg)
    err.report = report  # type: ignore[attr-defined]
    return err
