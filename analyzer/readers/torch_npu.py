"""torch_npu (``torch_npu.profiler``): a ``*_ascend_pt`` folder (docs/formats.md §1). Three readers,
by what the folder holds (``resolve``):

- ``torch_npu_text``: ``ASCEND_PROFILER_OUTPUT/`` CSV + JSON (the CANN family's output folder,
  ``ascend.output``); also a ``trace_view.json`` found on its own;
- ``torch_npu_db``: ``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db`` + ``analysis.db``
  (the CANN profiler db, ``ascend.db``);
- ``torch_npu_raw``: raw ``FRAMEWORK/`` and ``PROF_*`` data only, never parsed (the job died before the
  profiler's finalize, or dynamic profiling ran with ``analyse=false``; docs/formats.md §1.14, §7.9).
  Those binary files can only be parsed by torch_npu with the CANN toolkit, on an Ascend host; this
  reader does not pretend otherwise: the collection is ``unparsed``, every raw file is listed as
  ignored with the reason, and a sentence says what to run.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..messages import english, problem
from .ascend.db import expected_tables, rank_device_map, read_ascend_db
from .ascend.groups import Groups, share_group_layouts
from .ascend.metadata import fill_meta, read_producer_files, switch_sentences
from .ascend.names import (
    OUTPUT_DIR,
    PROFILER_INFO_RE,
    PROFILER_METADATA,
    TEXT_MARKERS,
    TORCH_NPU_ANALYSIS_DB,
    TORCH_NPU_DB_RE,
    TORCH_NPU_RAW_HINT,
)
from .ascend.output import read_output_folder
from .ascend.prof import prof_info_rank
from .base import CollectionPlan, ReadContext, register
from .common.jsonfile import peek_json


def resolve(d: Path) -> tuple[int | None, str | None, str]:
    """(rank, where it was found, producer) of a ``*_ascend_pt`` folder, docs/formats.md §7.5 order
    (the collector's sidecar and ``rank_{id}`` folders are applied by discovery on top of this):
    profiler_info_{r}.json name / rank_id key -> ascend_pytorch_profiler_{r}.db name ->
    RANK_DEVICE_MAP.rankId -> profiler_metadata.json distributed_args.rank -> PROF_*/device_*/info.json.*.
    Producer: torch_npu_text when the text files exist, torch_npu_db for a db-only export,
    torch_npu_raw when there is no ASCEND_PROFILER_OUTPUT (raw data, never parsed)."""
    out = d / OUTPUT_DIR
    producer = "torch_npu_raw"
    db_path: Path | None = None
    db_rank: int | None = None
    if out.is_dir():
        names = {p.name: p for p in out.iterdir() if p.is_file()}
        for name, p in sorted(names.items()):
            m = TORCH_NPU_DB_RE.match(name)
            if m:
                db_path = p
                if m.group(1) is not None:
                    db_rank = int(m.group(1))
        if any(n in names for n in TEXT_MARKERS):
            producer = "torch_npu_text"
        elif db_path is not None:
            producer = "torch_npu_db"
        elif any(n.endswith((".csv", ".json")) for n in names):
            producer = "torch_npu_text"  # some parsed files, not the usual ones: the text reader reports them
        # else: an empty ASCEND_PROFILER_OUTPUT (parse interrupted at its start): raw
    try:
        entries = sorted(d.iterdir())
    except OSError:
        entries = []
    for f in entries:
        m = PROFILER_INFO_RE.match(f.name)
        if not m:
            continue
        if m.group(1) is not None:
            return int(m.group(1)), "profiler_info", producer
        info = peek_json(f)
        if isinstance(info, dict) and isinstance(info.get("rank_id"), int) and info["rank_id"] >= 0:
            return info["rank_id"], "profiler_info", producer
    if db_rank is not None:
        return db_rank, "db_name", producer
    if db_path is not None:
        r = rank_device_map(db_path)
        if r is not None:
            return r, "RANK_DEVICE_MAP", producer
    meta = peek_json(d / PROFILER_METADATA)
    if isinstance(meta, dict):
        da = meta.get("distributed_args")
        if isinstance(da, dict) and isinstance(da.get("rank"), int):
            return da["rank"], "distributed_args", producer
    r = prof_info_rank(d)
    if r is not None:
        return r, "PROF_info", producer
    return None, None, producer


def share_groups(plans: Iterable[CollectionPlan]) -> None:
    """Hand every torch_npu collection of a run the group layouts seen on all its ranks (discovery)."""
    npu = [p for p in plans if p.producer in ("torch_npu_text", "torch_npu_db")]
    share_group_layouts(npu, reads_text=lambda p: p.producer == "torch_npu_text")


@register("torch_npu_text")
def read_torch_npu_text(ctx: ReadContext) -> None:
    read_output_folder(ctx)


@register("torch_npu_db")
def read_torch_npu_db(ctx: ReadContext) -> None:
    plan = ctx.plan
    root = plan.root
    out = root / OUTPUT_DIR
    dbs = sorted(p for p in plan.files if p.parent == out and TORCH_NPU_DB_RE.match(p.name))
    main = next((p for p in dbs if p.name == f"ascend_pytorch_profiler_{ctx.rank}.db"), dbs[0] if dbs else None)
    analysis = out / TORCH_NPU_ANALYSIS_DB if (out / TORCH_NPU_ANALYSIS_DB) in plan.files else None
    pf = read_producer_files(ctx, root)
    groups = Groups(ctx.rank, plan.hints, pf.metadata)
    for p in plan.files:
        if (
            p in (main, analysis)
            or p.parent == root
            and (PROFILER_INFO_RE.match(p.name) or p.name == PROFILER_METADATA)
        ):
            continue
        rel = p.relative_to(root).parts
        if rel[0] == "FRAMEWORK" or rel[0].startswith("PROF_"):
            ctx.ignore(p, problem("ignored.raw_profiler", folder=OUTPUT_DIR))
        elif rel[0] == "logs":
            ctx.ignore(p, problem("ignored.torch_npu_log"))
        elif TORCH_NPU_DB_RE.match(p.name):
            ctx.ignore(p, problem("ignored.db_other_rank", rank=ctx.rank, file=main.name if main else "?"))
        else:
            ctx.ignore(p, problem("ignored.not_db_reader"))
    if main is None:
        ctx.meta.missing.append(english("missing.torch_npu.no_db"))
    tables = expected_tables(True, pf.config)
    extra = read_ascend_db(ctx, main, analysis, groups, "ascend_pytorch_profiler.db", "a torch_npu profiler db", tables)
    fill_meta(ctx, pf, extra)
    if analysis is None:
        ctx.meta.missing.append(english("missing.torch_npu.no_analysis_db"))
    switch_sentences(ctx, pf)


@register("torch_npu_raw")
def read_torch_npu_raw(ctx: ReadContext) -> None:
    root = ctx.plan.root
    pf = read_producer_files(ctx, root)
    fill_meta(ctx, pf)
    has_fwk = has_prof = False
    for f in ctx.plan.files:
        try:
            top = f.relative_to(root).parts[0]
        except (ValueError, IndexError):
            continue
        if PROFILER_INFO_RE.match(f.name) or f.name == PROFILER_METADATA:
            continue
        if top == "FRAMEWORK":
            has_fwk = True
        elif top.startswith("PROF_"):
            has_prof = True
        ctx.ignore(f, problem("ignored.torch_npu_raw"))
    ctx.meta.status = "unparsed"
    what = " and ".join(x for x, ok in (("FRAMEWORK/", has_fwk), ("PROF_*/", has_prof)) if ok) or english(
        "missing.part.no_profiler_data"
    )
    why = english("missing.part.stopped_early" if pf.info is None else "missing.part.analyse_skipped")
    ctx.meta.missing.append(english("missing.torch_npu.raw", what=what, why=why, hint=TORCH_NPU_RAW_HINT))
