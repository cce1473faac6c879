"""msprof (the CANN command-line profiler): a ``PROF_{n}_{ts}_{rand}/`` folder (docs/formats.md §3).

What is read, by folder:

- ``mindstudio_profiler_output/`` (``msprof --export=on``): CSV summaries + ``msprof_*.json`` timeline
  (``ascend.msprof_export``)
- top of the PROF folder (``msprof --type=db``, no text export): ``msprof_{ts}.db`` (+
  ``analyze/communication_analyzer.db``) (the CANN profiler db reader (``ascend.db``))
- ``device_{d}/timeline/`` (CANN <= 7.0, MindSpore <= 2.2): per-device, per-iteration timelines
  (``ascend.msprof_export``)
- ``device_*/``, ``host/``: ``info.json*``, ``start_info*``, ``end_info*`` (``ascend.prof`` (metadata, device clocks))

A PROF folder without ``mindstudio_profiler_output/`` (and without the old per-device timelines or a
db) was never exported: it is recorded as ``unparsed`` with the command to run. Ranks come from the
devices' ``info.json`` ``rank_id``; folders without one are numbered by (host, device), as
msprof-analyze does (``order_unranked``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..messages import english, problem
from .ascend.db import expected_tables, read_ascend_db
from .ascend.groups import Groups
from .ascend.msprof_export import ExportState, export_files, file_size, legacy_timelines, read_export, read_legacy
from .ascend.names import EXPORT_DIR, MSPROF_ANALYSIS_DB, MSPROF_DB_RE, MSPROF_EXPORT_HINT
from .ascend.prof import read_prof_meta
from .base import ReadContext, register


def order_unranked(plans: Iterable[Any]) -> None:
    """msprof folders without a rank_id: number them by (host, device id), msprof-analyze's fallback
    (docs/formats.md §7.5). ``plans`` are CollectionPlans with ``hints['msprof']`` set by discovery."""
    todo = [p for p in plans if p.rank is None]
    if not todo:
        return
    taken = {p.rank for p in plans if p.rank is not None}

    def key(p: Any) -> tuple[str, int, str]:
        h = p.hints.get("msprof") or {}
        devs = h.get("device_ids") or []
        return (h.get("hostname") or "", min(devs) if devs else -1, p.rel_root)

    nxt = 0
    for p in sorted(todo, key=key):
        while nxt in taken:
            nxt += 1
        p.rank, p.rank_source = nxt, "host_device_order"
        nxt += 1


@register("msprof")
def read_msprof(ctx: ReadContext) -> None:
    st = ExportState()
    root = ctx.plan.root
    clocks = read_prof_meta(ctx, root, st.device_ids)
    export = export_files(ctx.plan.files, root / EXPORT_DIR)
    legacy = legacy_timelines(ctx.plan.files, root)
    empty = db = False
    if export:
        read_export(ctx, st, export)
        if all(file_size(f.path) == 0 for fs in export.values() for f in fs):
            empty = True
            ctx.meta.missing.append(english("missing.msprof.empty", folder=EXPORT_DIR))
    elif legacy:
        read_legacy(ctx, st, legacy, clocks)
    elif dbs := sorted(p for p in ctx.plan.files if p.parent == root and MSPROF_DB_RE.match(p.name)):
        db = True
        _read_db(ctx, dbs)
    else:
        ctx.meta.status = "unparsed"
        ctx.meta.missing.append(english("missing.msprof.not_exported", folder=EXPORT_DIR, hint=MSPROF_EXPORT_HINT))
    _ignore_rest(ctx, root)
    _finish_meta(ctx, st, empty, db)


def _read_db(ctx: ReadContext, dbs: list[Path]) -> None:
    """A db export (``msprof --type=db``): the newest ``msprof_{ts}.db`` through the CANN profiler db reader
    (the same CANN tables; docs/formats.md §3.4), with ``analyze/communication_analyzer.db`` when
    ``msprof --analyze`` wrote it (the wait/transit split, bandwidth and matrix)."""
    root = ctx.plan.root
    main = dbs[-1]  # one db per export; a re-export leaves a newer timestamp
    for old in dbs[:-1]:
        ctx.ignore(old, problem("ignored.msprof_older_db", file=main.name))
    analysis = root.joinpath(*MSPROF_ANALYSIS_DB)
    groups = Groups(ctx.rank, ctx.plan.hints, None)
    read_ascend_db(
        ctx,
        main,
        analysis if analysis in ctx.plan.files else None,
        groups,
        "msprof.db",
        "an msprof db",
        expected_tables(False),
    )
    if analysis not in ctx.plan.files:
        ctx.meta.missing.append(english("missing.msprof.no_analyzer_db"))


def _ignore_rest(ctx: ReadContext, root: Path) -> None:
    for p in ctx.plan.files:
        if p in ctx.outcomes:
            continue
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            ctx.ignore(p, problem("ignored.not_in_prof"))
            continue
        top = rel[0]
        if p.name.endswith(".done"):
            ctx.ignore(p, problem("ignored.msprof_done"))
        elif top == EXPORT_DIR:
            if p.name == "README.txt":
                ctx.ignore(p, problem("ignored.msprof_notes"))
            else:
                ctx.ignore(p, problem("ignored.msprof_export_other"))
        elif top == "mindstudio_profiler_log":
            ctx.ignore(p, problem("ignored.msprof_log"))
        elif top == "analyze":
            ctx.ignore(p, problem("ignored.msprof_analyze"))
        elif len(rel) == 1 and MSPROF_DB_RE.match(p.name):
            ctx.ignore(p, problem("ignored.msprof_db_of_text", folder=EXPORT_DIR))
        elif len(rel) > 2 and rel[1] in ("data", "sqlite"):
            ctx.ignore(p, problem("ignored.msprof_raw", folder=EXPORT_DIR))
        else:
            ctx.ignore(p, problem("ignored.msprof_other"))


def _finish_meta(ctx: ReadContext, st: ExportState, empty_export: bool, db: bool) -> None:
    m = ctx.meta
    w = ctx.writer
    if len(st.device_ids) == 1:
        m.device_id = next(iter(st.device_ids))
    ctx.add_table_capabilities()
    if m.status == "unparsed" or empty_export:
        return
    m.missing.append(english("missing.msprof.no_framework"))
    if not w.has("slices"):
        m.missing.append(english("missing.msprof.no_timeline_db" if db else "missing.msprof.no_timeline"))
    if not w.has("kernels"):
        m.missing.append(english("missing.msprof.no_kernels_db" if db else "missing.msprof.no_kernels"))
    if not w.has("steps"):
        m.missing.append(english("missing.msprof.no_steps_db" if db else "missing.msprof.no_steps"))
    if not w.has("memory_samples"):
        m.missing.append(english("missing.msprof.no_memory_db" if db else "missing.msprof.no_memory"))
    if not w.has("comm_ops"):
        m.missing.append(english("missing.msprof.no_comm"))
    if not db and not w.has("comm_links"):
        m.missing.append(english("missing.msprof.no_matrix"))
