"""A ``*_ascend_pt`` folder that torch_npu never parsed: raw ``FRAMEWORK/`` and ``PROF_*`` data only,
no ``ASCEND_PROFILER_OUTPUT/`` (the job died before the profiler's finalize, or dynamic profiling
ran with ``analyse=false``; formats.md §1.14, §7.9).

Those binary files can only be parsed by torch_npu with the CANN toolkit, on an Ascend host; this
reader does not pretend otherwise. It records the collection as ``unparsed``, keeps whatever
``profiler_info`` / ``profiler_metadata`` says (level, config), lists every raw file as ignored with
the reason, and says in plain words what to run.
"""

from __future__ import annotations

from .base import ReadContext, register
from .torch_npu_common import PROFILER_INFO_RE, RAW_HINT, fill_meta, read_producer_files


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
        if PROFILER_INFO_RE.match(f.name) or f.name == "profiler_metadata.json":
            continue
        if top == "FRAMEWORK":
            has_fwk = True
        elif top.startswith("PROF_"):
            has_prof = True
        ctx.ignore(f, f"raw torch_npu data, not parsed: {RAW_HINT}")
    ctx.meta.status = "unparsed"
    what = " and ".join(x for x, ok in (("FRAMEWORK/", has_fwk), ("PROF_*/", has_prof)) if ok) or "no profiler data"
    why = (
        "the job stopped before the profiler finished (no profiler_info file)"
        if pf.info is None
        else "parsing was skipped (e.g. dynamic profiling with analyse=false)"
    )
    ctx.meta.missing.append(
        f"not parsed: this folder holds only raw {what} ({why}), no ASCEND_PROFILER_OUTPUT/; {RAW_HINT}"
    )
