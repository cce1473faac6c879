"""What the torch_npu text and db readers share (formats.md §1.2, §1.3, §1.10, §7.5, §7.6).

- rank resolution of a ``*_ascend_pt`` folder (``resolve_rank``, called by discovery);
- ``profiler_info_{rank}.json`` / ``profiler_metadata.json``: collection metadata, level, config,
  versions, environment variables, parallel groups (``read_producer_files``, ``fill_meta``);
- communication groups: the HCCL group-name hash (``double_hash``), group-local to global rank
  conversion from ``parallel_group_info`` or from the ``i-i`` self-links of every rank of the run
  (``share_group_layouts``, run by discovery, hands each collection the layouts seen on all ranks);
- rows shared by both exports: comm_ops, comm_links, comm_groups, capabilities and "missing" sentences.
"""

from __future__ import annotations

import bisect
import json
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..units import ascend_gbps_to_bytes_per_s
from ..units import mb_to_bytes as mb_bytes
from ..units import ms_to_ns as ms_ns
from .base import CollectionPlan, ReadContext

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
NPU_DB_RE = re.compile(r"^ascend_pytorch_profiler(?:_(\d+))?\.db$")
TEXT_MARKERS = ("trace_view.json", "kernel_details.csv", "step_trace_time.csv", "operator_details.csv")
_STEP_KEY = re.compile(r"^step(\d+)$", re.I)
_SELF_LINK = re.compile(r"^(\d+)-(\d+)$")

# bytes per element of HCCL data types (ENUM_HCCL_DATA_TYPE names, trace args data_type)
HCCL_DTYPE_BYTES = {
    "INT8": 1,
    "UINT8": 1,
    "INT16": 2,
    "UINT16": 2,
    "FP16": 2,
    "BFP16": 2,
    "BF16": 2,
    "INT32": 4,
    "UINT32": 4,
    "FP32": 4,
    "INT64": 8,
    "UINT64": 8,
    "FP64": 8,
    "INT128": 16,
    "HIF8": 1,
    "FP8E4M3": 1,
    "FP8E5M2": 1,
}

RAW_HINT = (
    "run torch_npu.profiler.profiler.analyse(profiler_path=...) on a host with torch_npu and the CANN "
    "toolkit (an Ascend machine), then ingest again"
)


def double_hash(s: str) -> str:
    """msprof-analyze's hash of an HCCL group id: the ``@<hash>`` suffix of communication op keys."""
    m = 0xFFFFFFFF
    h0 = h1 = 0
    for ch in s:
        h0 = (((h0 * 29) & m) + ord(ch)) & m
        h1 = (((h1 * 131) & m) + ord(ch)) & m
    return str((h0 << 32) | h1)


def step_from_key(key: str | None) -> int | None:
    """'step50' -> 50; 'step' (no step info) -> None."""
    if not key:
        return None
    m = _STEP_KEY.match(key.strip())
    return int(m.group(1)) if m else None


def hccl_bytes(dtype: str | None, count: int | float | None) -> int | None:
    if dtype is None or count is None:
        return None
    size = HCCL_DTYPE_BYTES.get(dtype.strip().upper())
    return int(count) * size if size else None


def load_json(path: Path, kind: str) -> Any:
    """A small JSON file (metadata, communication*.json) as Python objects; InputError when bad."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read {kind}: {exc.strerror or exc}") from exc
    if not data.strip():
        raise InputError(str(path), f"empty file: no {kind} data")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise InputError(str(path), f"not valid JSON ({kind}): {exc}") from exc


# ---------------------------------------------------------------------------------------------
# rank resolution (discovery)
# ---------------------------------------------------------------------------------------------


def resolve_rank(d: Path) -> tuple[int | None, str | None, str]:
    """(rank, where it was found, producer) of a ``*_ascend_pt`` folder, formats.md §7.5 order
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
            m = NPU_DB_RE.match(name)
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
        info = _try_json(f)
        if isinstance(info, dict) and isinstance(info.get("rank_id"), int) and info["rank_id"] >= 0:
            return info["rank_id"], "profiler_info", producer
    if db_rank is not None:
        return db_rank, "db_name", producer
    if db_path is not None:
        r = _rank_device_map(db_path)
        if r is not None:
            return r, "RANK_DEVICE_MAP", producer
    meta = _try_json(d / "profiler_metadata.json")
    if isinstance(meta, dict):
        da = meta.get("distributed_args")
        if isinstance(da, dict) and isinstance(da.get("rank"), int):
            return da["rank"], "distributed_args", producer
    for info_path in sorted(d.glob("PROF_*/device_*/info.json.*")):
        info = _try_json(info_path)
        if isinstance(info, dict):
            r = info.get("rank_id", info.get("rankId"))
            if isinstance(r, int) and r >= 0:
                return r, "PROF_info", producer
    return None, None, producer


def _try_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _rank_device_map(db: Path) -> int | None:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        try:
            row = con.execute("SELECT rankId FROM RANK_DEVICE_MAP WHERE rankId >= 0 LIMIT 1").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


# ---------------------------------------------------------------------------------------------
# group layouts shared across the ranks of a run (discovery)
# ---------------------------------------------------------------------------------------------


def _self_links_text(path: Path) -> dict[str, int]:
    """{group hash: local rank} from the i-i LOCAL links of a communication_matrix.json."""
    data = _try_json(path)
    out: dict[str, int] = {}
    if not isinstance(data, dict):
        return out
    for step in data.values():
        if not isinstance(step, dict):
            continue
        for part in step.values():
            if not isinstance(part, dict):
                continue
            for key, links in part.items():
                if "@" not in key or not isinstance(links, dict):
                    continue
                h = key.rsplit("@", 1)[1]
                for lk in links:
                    m = _SELF_LINK.match(lk)
                    if m and m.group(1) == m.group(2):
                        out[h] = int(m.group(1))
    return out


def _self_links_db(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            rows = con.execute(
                "SELECT DISTINCT group_name, src_rank FROM CommAnalyzerMatrix WHERE src_rank = dst_rank"
            ).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return out
    for g, r in rows:
        try:
            out[str(g)] = int(r)
        except (TypeError, ValueError):
            continue
    return out


def share_group_layouts(plans: Iterable[CollectionPlan]) -> None:
    """Give every torch_npu collection of a run what all its ranks say about communication groups:
    ``hints['npu_groups'] = {'members': {hash: {local: global}}, 'parallel_group_info': {...}}``.

    A rank's matrix only names peers by group-local rank; its own i-i self-link tells which local rank
    it is. Collecting the self-links of every rank gives the local -> global map of each group
    (msprof-analyze's fallback when profiler_metadata.json has no parallel_group_info)."""
    plans = [p for p in plans if p.producer in ("torch_npu_text", "torch_npu_db")]
    members: dict[str, dict[int, int]] = {}
    pgi: dict[str, Any] = {}
    for p in plans:
        out = p.root / OUTPUT_DIR
        links: dict[str, int] = {}
        if p.producer == "torch_npu_text" and (out / "communication_matrix.json").is_file():
            links = _self_links_text(out / "communication_matrix.json")
        if not links and (out / "analysis.db").is_file():
            links = _self_links_db(out / "analysis.db")
        if p.rank is not None:
            for h, local in links.items():
                members.setdefault(h, {}).setdefault(local, p.rank)
        meta = _try_json(p.root / "profiler_metadata.json")
        if isinstance(meta, dict) and isinstance(meta.get("parallel_group_info"), dict):
            for gid, info in meta["parallel_group_info"].items():
                if isinstance(info, dict):
                    pgi.setdefault(str(gid), info)
    shared = {"members": {h: {str(k): v for k, v in m.items()} for h, m in members.items()}, "parallel_group_info": pgi}
    for p in plans:
        p.hints["npu_groups"] = shared


@dataclass
class Group:
    """One communication group as seen by this rank."""

    hash: str
    group_id: str | None = None
    pg_name: str | None = None
    global_ranks: list[int] | None = None  # full layout (index = local rank) when known
    members: dict[int, int] = field(default_factory=dict)  # local -> global, possibly partial
    local_rank: int | None = None
    size: int | None = None
    source: str | None = None

    def to_global(self, local: int | None) -> int | None:
        if local is None:
            return None
        if self.global_ranks is not None and 0 <= local < len(self.global_ranks):
            return self.global_ranks[local]
        return self.members.get(local)


class Groups:
    """Communication groups of one collection, keyed by HCCL group hash."""

    def __init__(self, rank: int, hints: dict[str, Any] | None, metadata: dict[str, Any] | None):
        self.rank = rank
        self.groups: dict[str, Group] = {}
        shared = (hints or {}).get("npu_groups") or {}
        pgi: dict[str, Any] = dict(shared.get("parallel_group_info") or {})
        if isinstance(metadata, dict) and isinstance(metadata.get("parallel_group_info"), dict):
            pgi.update(metadata["parallel_group_info"])
        self._pgi_by_hash: dict[str, tuple[str, dict[str, Any]]] = {}
        for gid, info in pgi.items():
            if isinstance(info, dict):
                self._pgi_by_hash[double_hash(str(gid))] = (str(gid), info)
        self._shared_members = {
            h: {int(k): int(v) for k, v in m.items()} for h, m in (shared.get("members") or {}).items()
        }
        # groups this rank belongs to according to parallel_group_info
        for h, (gid, info) in self._pgi_by_hash.items():
            ranks = info.get("global_ranks")
            if isinstance(ranks, list) and rank in ranks:
                self.get(h)

    def get(self, h: str | None, group_id: str | None = None) -> Group | None:
        if h is None and group_id is None:
            return None
        if h is None:
            h = double_hash(group_id)  # type: ignore[arg-type]
        g = self.groups.get(h)
        if g is None:
            g = Group(h)
            self.groups[h] = g
            pg = self._pgi_by_hash.get(h)
            if pg is not None:
                gid, info = pg
                g.group_id = gid
                name = info.get("group_name")
                g.pg_name = str(name) if name is not None else None
                ranks = info.get("global_ranks")
                if isinstance(ranks, list) and all(isinstance(r, int) for r in ranks):
                    g.global_ranks = sorted(ranks)
                    g.size = len(ranks)
                    g.source = "parallel_group_info"
                    if self.rank in g.global_ranks:
                        g.local_rank = g.global_ranks.index(self.rank)
            g.members.update(self._shared_members.get(h, {}))
            if g.source is None and g.members:
                g.source = "self_links"
        if group_id is not None and g.group_id is None:
            g.group_id = group_id
        return g

    def note_self_link(self, h: str, local: int) -> None:
        g = self.get(h)
        assert g is not None
        if g.local_rank is None:
            g.local_rank = local
        g.members.setdefault(local, self.rank)
        if g.source is None:
            g.source = "self_links"

    def note_size(self, h: str, size: int) -> None:
        g = self.get(h)
        assert g is not None
        g.size = max(g.size or 0, size)

    def finish(self) -> None:
        """Complete layouts: a group whose every local rank is known gets its global_ranks."""
        for g in self.groups.values():
            if g.global_ranks is None and g.size and all(i in g.members for i in range(g.size)):
                g.global_ranks = [g.members[i] for i in range(g.size)]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for g in self.groups.values():
            out.append(
                {
                    "group_name": g.hash,
                    "group_id": g.group_id,
                    "pg_name": g.pg_name,
                    "global_ranks": g.global_ranks,
                    "local_rank": g.local_rank,
                    "backend": "hccl",
                    "source": g.source,
                }
            )
        return out


# ---------------------------------------------------------------------------------------------
# producer files: profiler_info / profiler_metadata
# ---------------------------------------------------------------------------------------------


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
                data = load_json(f, "profiler_info")
                if not isinstance(data, dict):
                    raise InputError(str(f), "not a profiler_info file: the JSON is not an object")
                if pf.info is None:
                    pf.info = data
                rid = data.get("rank_id")
                if isinstance(rid, int) and rid != ctx.rank and ctx.plan.rank_source in ("sidecar", "rank_dir"):
                    oc.warn(f"rank_id is {rid} but the folder says rank {ctx.rank}; kept {ctx.rank}")
        elif f.name == "profiler_metadata.json":
            with ctx.reading(f, "profiler_metadata.json"):
                data = load_json(f, "profiler_metadata")
                if not isinstance(data, dict):
                    raise InputError(str(f), "not a profiler_metadata file: the JSON is not an object")
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
        say(
            "Level0: no communication matrix and no wait/transit split (communication.json and communication_matrix.json are written from Level1)"
        )
        say("Level0: kernels have no op type, shapes or AI Core PMU metrics (reduced kernel details)")
        if "cann_api" not in caps:
            say("Level0: no CANN API (AscendCL/Runtime) events on the host timeline")
    elif level == "Level1":
        say("Level1: no Runtime API events (recorded at Level2 only)")
    elif level == "Level_none":
        say("Level_none: no CANN-level data (kernels, communication) was collected")
    if pf.config is not None:
        acts = [str(a) for a in (pf.common("activities") or [])]
        if acts and not any("NPU" in a for a in acts):
            say("activities without NPU: no device kernels or communication")
        if acts and not any("CPU" in a for a in acts):
            say("activities without CPU: no framework operators")
        if pf.common("profile_memory") is False:
            say("profile_memory was off: no memory curves and no operator memory")
        if pf.common("with_stack") is False:
            say("with_stack was off: no call stacks")
        if pf.common("record_shapes") is False:
            say("record_shapes was off: no input shapes")
        aic = pf.experimental("aic_metrics")
        if level != "Level0" and aic in ("ACL_AICORE_NONE", "AiCoreNone"):
            say("aic_metrics=AiCoreNone: no AI Core PMU metrics")
        if pf.experimental("l2_cache") is False:
            say("l2_cache was off: no L2 cache hit rates")
    if "memory" not in caps and pf.common("profile_memory") is not False:
        say("no memory records in the export")
    if "communication" not in caps:
        say("no communication operations: single card, or no collective ran in the window")
    elif "comm_matrix" not in caps and level != "Level0":
        say("no communication matrix in the export")
    if "steps" not in caps:
        say("no step ranges: the profiler ran without a schedule / prof.step()")
    if ctx.plan.rank_source in ("single", "assigned"):
        say("no rank found in profiler_info / db name / metadata: rank assigned by discovery")


# ---------------------------------------------------------------------------------------------
# communication rows shared by both exports
# ---------------------------------------------------------------------------------------------


@dataclass
class CommTime:
    """One op of communication.json / CommAnalyzerTime."""

    name: str
    group: str | None
    step: int | None
    is_p2p: bool
    start_us: float | None
    elapse_ns: int | None
    transit_ns: int | None
    wait_ns: int | None
    sync_ns: int | None
    idle_ns: int | None


def gbps(v: Any) -> float | None:
    """'Bandwidth(GB/s)' of communication.json / analysis.db to bytes per second (see units)."""
    return ascend_gbps_to_bytes_per_s(v)


def link_rows(entries: Iterable[dict[str, Any]], groups: Groups) -> list[dict[str, Any]]:
    """comm_links rows from matrix entries (keys: step, op_key, op_name, group, is_p2p, src, dst,
    transport, size_mb, time_ms, bw_gbps), group-local ranks converted to global ones."""
    entries = list(entries)
    # group sizes and this rank's self-links first, so every link can be converted
    for e in entries:
        h, src, dst = e.get("group"), e.get("src"), e.get("dst")
        if h is None or src is None or dst is None:
            continue
        groups.note_size(h, max(src, dst) + 1)
        if src == dst:
            groups.note_self_link(h, src)
    groups.finish()
    rows = []
    for e in entries:
        h = e.get("group")
        g = groups.get(h) if h is not None else None
        rows.append(
            {
                "step": e.get("step"),
                "op_key": e.get("op_key"),
                "op_name": e.get("op_name"),
                "group_name": h,
                "is_p2p": e.get("is_p2p"),
                "src_local": e.get("src"),
                "dst_local": e.get("dst"),
                "src_rank": g.to_global(e.get("src")) if g else None,
                "dst_rank": g.to_global(e.get("dst")) if g else None,
                "transport": e.get("transport"),
                "bytes": mb_bytes(e.get("size_mb")),
                "transit_ns": ms_ns(e.get("time_ms")),
                "bandwidth_bytes_per_s": gbps(e.get("bw_gbps")),
            }
        )
    return rows


def split_op_key(key: str) -> tuple[str, str | None]:
    """'hcom_allReduce__586_0_1@17522688603477080586' -> (name, hash)."""
    if "@" in key:
        name, h = key.rsplit("@", 1)
        return name, h
    return key, None


def parse_link_key(lk: str) -> tuple[int | None, int | None]:
    m = _SELF_LINK.match(lk.strip())
    if not m:
        return None, None
    return int(m.group(1)), int(m.group(2))


def last_step_started(steps: list[tuple[int, int, int]], ts: list[int | None]) -> list[int | None]:
    """The step of each device task: the last step (``steps``: (step, start ns, end ns), by start)
    started at or before it (device work lags the host)."""
    starts = [s[1] for s in steps]
    out: list[int | None] = []
    for t in ts:
        i = bisect.bisect_right(starts, t) if t is not None else 0
        out.append(steps[i - 1][0] if i else None)
    return out
