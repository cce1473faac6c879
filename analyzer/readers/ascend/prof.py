"""A CANN ``PROF_*`` folder's own description of itself (docs/formats.md §3.1, §7.5): ``device_{d}/``
and ``host/`` with ``info.json*`` (rank, host, pid, device properties), ``start_info*`` / ``end_info*``
(the device's monotonic clock against the host's epoch). msprof writes these; so do torch_npu and
MindSpore inside their own folders (``*_ascend_pt/PROF_*``, ``*_ascend_ms/PROF_*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem
from ...units import us_text_to_ns
from ..base import ReadContext
from ..common.cells import int_or_none
from ..common.jsonfile import load_json, peek_json
from .names import DEVICE_DIR_RE, EXPORT_DIR, EXPORT_NAME_RE, LEGACY_TIMELINE_RE


@dataclass
class ProfIdentity:
    """Who wrote a PROF folder, from ``device_{d}/info.json.{d}`` and ``host/info.json``."""

    rank: int | None = None  # rank_id when set (msprof leaves -1 when the job set no rank)
    hostname: str | None = None
    device_ids: list[int] = field(default_factory=list)
    pid: str | None = None
    exported: bool = False
    legacy_timeline: bool = False


def prof_identity(d: Path) -> ProfIdentity:
    """Rank (rank_id != -1), host and devices of a ``PROF_*`` folder, without reading its data."""
    ident = ProfIdentity()
    try:
        entries = sorted(d.iterdir())
    except OSError:
        return ident
    for sub in entries:
        m = DEVICE_DIR_RE.match(sub.name)
        if m and sub.is_dir():
            dev = int(m.group(1))
            if dev >= 0:
                ident.device_ids.append(dev)
            for info_path in sorted(sub.glob("info.json*")):
                if info_path.name.endswith(".done"):
                    continue
                info = peek_json(info_path)
                if isinstance(info, dict):
                    r = info.get("rank_id", info.get("rankId"))
                    if isinstance(r, str) and r.lstrip("-").isdigit():
                        r = int(r)
                    if isinstance(r, int) and r >= 0 and ident.rank is None:
                        ident.rank = r
                    ident.hostname = ident.hostname or _str(info.get("hostname"))
                    ident.pid = ident.pid or _str(info.get("pid"))
            if (sub / "timeline").is_dir() and any(
                LEGACY_TIMELINE_RE.match(p.name) for p in (sub / "timeline").iterdir()
            ):
                ident.legacy_timeline = True
        elif sub.name == "host" and sub.is_dir():
            info = peek_json(sub / "info.json")
            if isinstance(info, dict):
                ident.hostname = ident.hostname or _str(info.get("hostname"))
                ident.pid = ident.pid or _str(info.get("pid"))
        elif sub.name == EXPORT_DIR and sub.is_dir():
            ident.exported = any(EXPORT_NAME_RE.match(p.name) for p in sub.iterdir())
    return ident


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass
class DeviceClock:
    """Device monotonic clock -> host epoch: epoch ns = mono ns - mono_begin_ns + begin_epoch_ns."""

    mono_begin_ns: int
    begin_epoch_ns: int

    @property
    def offset_ns(self) -> int:
        """What turns a clock reading into epoch ns (added to it)."""
        return self.begin_epoch_ns - self.mono_begin_ns


def read_prof_meta(ctx: ReadContext, root: Path, device_ids: set[int]) -> dict[int, DeviceClock]:
    """The PROF folder's info.json (collection metadata), start_info (device clocks, returned by device)
    and end_info files, each reported as a file; the devices found are added to ``device_ids``."""
    clocks: dict[int, DeviceClock] = {}
    infos: dict[str, Any] = {}
    for p in ctx.plan.files:
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            continue
        if len(rel) != 2 or p.name.endswith(".done"):
            continue
        top, name = rel
        m = DEVICE_DIR_RE.match(top)
        if not (m or top == "host"):
            continue
        dev = int(m.group(1)) if m else None
        if name.startswith("info.json"):
            with ctx.reading(p, "msprof info.json") as oc:
                info = load_json(p, "info.json", obj=True)
                oc.rows = 0
                infos[top] = info
                if dev is not None and dev >= 0:
                    device_ids.add(dev)
        elif name.startswith("start_info") and dev is not None:
            with ctx.reading(p, "msprof start_info"):
                info = load_json(p, "start_info", obj=True)
                mono = info.get("clockMonotonicRaw")
                try:
                    begin = us_text_to_ns(str(info.get("collectionTimeBegin")))
                    mono = int(str(mono)) if mono is not None else None
                except ValueError as exc:
                    raise InputError(str(p), problem("start_info_clock", detail=exc)) from exc
                if begin is None or mono is None:
                    raise InputError(str(p), problem("start_info_fields"))
                clocks[dev] = DeviceClock(mono, begin)
        elif name.startswith("end_info") or name == "host_start.log" or name == "start_info":
            with ctx.reading(p, "msprof clock info"):
                if p.stat().st_size == 0:
                    raise InputError(str(p), problem("empty"))
    m_ = ctx.meta
    for top, info in sorted(infos.items()):
        if not isinstance(info, dict):
            continue
        m_.hostname = m_.hostname or _str(info.get("hostname"))
        rid = info.get("rank_id")
        dev_info = info.get("DeviceInfo")
        extra = {
            k: info.get(k)
            for k in ("rank_id", "pid", "pid_name", "version", "platform_version")
            if info.get(k) is not None
        }
        if isinstance(dev_info, list) and dev_info and isinstance(dev_info[0], dict):
            extra["device"] = {
                k: dev_info[0].get(k)
                for k in ("id", "ai_core_num", "aic_frequency", "hwts_frequency")
                if k in dev_info[0]
            }
        m_.extra.setdefault("info_json", {})[top] = extra
        if isinstance(rid, int) and rid < 0:
            m_.extra["rank_id_unset"] = True
    return clocks


def _prof_infos(d: Path) -> list[dict[str, Any]]:
    """The device info.json files of the PROF_* folders inside a producer folder ``d``."""
    out = []
    for info_path in sorted(d.glob("PROF_*/device_*/info.json.*")):
        if info_path.name.endswith(".done"):
            continue
        info = peek_json(info_path)
        if isinstance(info, dict):
            out.append(info)
    return out


def prof_info_rank(d: Path) -> int | None:
    """The rank_id (not -1) a ``PROF_*/device_*/info.json.*`` inside folder ``d`` names, or None."""
    for info in _prof_infos(d):
        r = int_or_none(info.get("rank_id", info.get("rankId")))
        if r is not None and r >= 0:
            return r
    return None


def prof_hwts_hz(d: Path) -> int | None:
    """The device's system counter frequency (``DeviceInfo[0].hwts_frequency``, MHz, in Hz) of a
    ``PROF_*/device_*/info.json.*`` inside folder ``d``, or None."""
    for info in _prof_infos(d):
        devs = info.get("DeviceInfo")
        if isinstance(devs, list) and devs and isinstance(devs[0], dict):
            try:
                return int(float(devs[0].get("hwts_frequency")) * 1_000_000)
            except (TypeError, ValueError):
                continue
    return None
