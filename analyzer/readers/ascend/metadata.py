"""What the CANN family writes next to its output about the collection (docs/formats.md §1.2, §1.3):
``profiler_info_{rank}.json`` (level, configuration, versions, start / end info) and
``profiler_metadata.json`` (environment variables, distributed args, parallel groups, the user's
own metadata); and the plain sentences saying what a profiler configuration left out.

torch_npu's schema is read here (``ProducerFiles``); MindSpore's profiler_info has its own schema and
is read by the MindSpore door.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...messages import english, problem
from ..base import ReadContext
from ..common.jsonfile import load_json
from .names import PROFILER_INFO_RE, PROFILER_METADATA


@dataclass
class ProducerFiles:
    info: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    @property
    def config(self) -> dict[str, Any] | None:
        c = (self.info or {}).get("config")
        return c if isinstance(c, dict) else None

    def common(self, key: str) -> Any:
        cc = (self.config or {}).get("common_config")
        return cc.get(key) if isinstance(cc, dict) else None

    def experimental(self, key: str) -> Any:
        ec = (self.config or {}).get("experimental_config")
        if not isinstance(ec, dict):
            return None
        for k in (f"_{key}", key):
            if k in ec:
                return ec[k]
        return None

    @property
    def level(self) -> str | None:
        lv = self.experimental("profiler_level")
        return str(lv) if lv else None


def read_producer_files(ctx: ReadContext, root: Path) -> ProducerFiles:
    """profiler_info*.json and profiler_metadata.json at the folder's top, each reported as a file."""
    pf = ProducerFiles()
    for f in sorted(root.iterdir()) if root.is_dir() else []:
        if not f.is_file():
            continue
        if PROFILER_INFO_RE.match(f.name):
            with ctx.reading(f, "profiler_info.json") as oc:
                data = load_json(f, "profiler_info", obj=True)
                if pf.info is None:
                    pf.info = data
                rid = data.get("rank_id")
                if isinstance(rid, int) and rid != ctx.rank and ctx.plan.rank_source in ("sidecar", "rank_dir"):
                    oc.warn(problem("rank_mismatch", field="rank_id", found=rid, rank=ctx.rank))
        elif f.name == PROFILER_METADATA:
            with ctx.reading(f, PROFILER_METADATA):
                data = load_json(f, "profiler_metadata", obj=True)
                pf.metadata = data
    return pf


def fill_meta(ctx: ReadContext, pf: ProducerFiles, extra: dict[str, Any] | None = None) -> None:
    """Collection metadata from profiler_info / profiler_metadata (level, config, versions, groups)."""
    m = ctx.meta
    info = pf.info or {}
    md = pf.metadata or {}
    m.level = m.level or pf.level
    if pf.config is not None:
        m.config = pf.config
    versions = []
    if info.get("torch_npu_version"):
        versions.append(f"torch_npu {info['torch_npu_version']}")
    if info.get("cann_version"):
        versions.append(f"CANN {info['cann_version']}")
    if versions:
        m.producer_version = "; ".join(versions)
    da = md.get("distributed_args") if isinstance(md.get("distributed_args"), dict) else None
    if da and isinstance(da.get("world_size"), int):
        m.world_size = da["world_size"]
    out: dict[str, Any] = {}
    for k in ("start_info", "end_info", "rank_id"):
        if k in info:
            out[k] = info[k]
    if md:
        out["env_variables"] = md.get("ENV_VARIABLES")
        if da:
            out["distributed_args"] = da
        if md.get("parallel_group_info"):
            out["parallel_group_info"] = md["parallel_group_info"]
        user = {k: v for k, v in md.items() if k not in ("ENV_VARIABLES", "distributed_args", "parallel_group_info")}
        if user:
            out["user_metadata"] = user
    if extra:
        out.update(extra)
    m.extra.update({k: v for k, v in out.items() if v is not None})


def switch_sentences(ctx: ReadContext, pf: ProducerFiles) -> None:
    """Capabilities and plain sentences about what the profiler configuration left out."""
    m = ctx.meta
    level = m.level
    caps = m.capabilities
    ctx.add_table_capabilities()
    miss = m.missing

    def say(s: str) -> None:
        if s not in miss:
            miss.append(s)

    if level == "Level0":
        say(english("missing.ascend.level0_comm"))
        say(english("missing.ascend.level0_kernels"))
        if "cann_api" not in caps:
            say(english("missing.ascend.level0_cann"))
    elif level == "Level1":
        say(english("missing.ascend.level1_runtime"))
    elif level == "Level_none":
        say(english("missing.ascend.level_none"))
    if pf.config is not None:
        acts = [str(a) for a in (pf.common("activities") or [])]
        if acts and not any("NPU" in a for a in acts):
            say(english("missing.ascend.no_npu"))
        if acts and not any("CPU" in a for a in acts):
            say(english("missing.ascend.no_cpu"))
        if pf.common("profile_memory") is False:
            say(english("missing.ascend.memory_off"))
        if pf.common("with_stack") is False:
            say(english("missing.ascend.stack_off"))
        if pf.common("record_shapes") is False:
            say(english("missing.ascend.shapes_off"))
        aic = pf.experimental("aic_metrics")
        if level != "Level0" and aic in ("ACL_AICORE_NONE", "AiCoreNone"):
            say(english("missing.ascend.no_pmu"))
        if pf.experimental("l2_cache") is False:
            say(english("missing.ascend.l2_off"))
    if "memory" not in caps and pf.common("profile_memory") is not False:
        say(english("missing.ascend.no_memory"))
    if "communication" not in caps:
        say(english("missing.ascend.no_comm"))
    elif "comm_matrix" not in caps and level != "Level0":
        say(english("missing.ascend.no_matrix"))
    if "steps" not in caps:
        say(_no_steps_sentence(ctx, pf))
    if ctx.plan.rank_source in ("single", "assigned"):
        say(english("missing.ascend.rank_discovered"))


def _no_steps_sentence(ctx: ReadContext, pf: ProducerFiles) -> str:
    """Why a torch_npu / msprof collection has no step ranges, from what it holds: the file that
    carries them missing, or a profiler run without a schedule (its profiler_info says which)."""
    names = {f.name for f in ctx.plan.files}
    ids = sorted(ctx.writer.steps)
    known = (
        english("missing.part.known_1" if len(ids) == 1 else "missing.part.known_n", ids=", ".join(map(str, ids)))
        if ids
        else ""
    )
    scheduled = isinstance(pf.common("schedule"), dict)
    if "trace_view.json" not in names and any(n.endswith(".csv") for n in names):
        return english(
            "missing.ascend.no_steps_file",
            scheduled=english("missing.part.scheduled") if scheduled else "",
            known=known,
        )
    if scheduled:
        return english("missing.ascend.no_steps_marker", known=known)
    return english("missing.ascend.no_steps_schedule", known=known)
