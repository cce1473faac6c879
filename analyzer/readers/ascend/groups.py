"""HCCL communication groups of the CANN family (docs/formats.md §1.10, §7.6).

Communication ops and links name their group by a hash of the HCCL group id (the ``@<hash>`` suffix
of ``communication*.json`` keys, ``COMMUNICATION_OP.groupName`` in the db); links name their ranks
group-locally. A group's global ranks come from ``profiler_metadata.json``'s ``parallel_group_info``
when the job declared them, else from the ``i-i`` self-links of every rank of the run (each rank
says which local rank it is): ``share_group_layouts`` collects them in discovery and hands every
collection the layouts seen on all ranks; ``Groups`` resolves them while a collection is read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import CollectionPlan
from ..common.jsonfile import peek_json
from .names import OUTPUT_DIR, PROFILER_METADATA, TORCH_NPU_ANALYSIS_DB

_SELF_LINK = re.compile(r"^(\d+)-(\d+)$")


def double_hash(s: str) -> str:
    """msprof-analyze's hash of an HCCL group id: the ``@<hash>`` suffix of communication op keys."""
    m = 0xFFFFFFFF
    h0 = h1 = 0
    for ch in s:
        h0 = (((h0 * 29) & m) + ord(ch)) & m
        h1 = (((h1 * 131) & m) + ord(ch)) & m
    return str((h0 << 32) | h1)


def group_key(name: str | None) -> str | None:
    """The store's key of an HCCL group: a raw group id (``90.91.105.46%enp189s0f0_60000_0_1736...``)
    is hashed as msprof-analyze hashes it; a name that is already that hash (older torch_npu db
    exports write the number itself into ``COMMUNICATION_OP.groupName``, as analysis.db does) is
    kept, so ops, links and bandwidth rows of one group share one key."""
    if name is None or name == "":
        return None
    s = str(name).strip()
    return s if s.isdigit() else double_hash(s)


def parse_link_key(lk: str) -> tuple[int | None, int | None]:
    m = _SELF_LINK.match(lk.strip())
    if not m:
        return None, None
    return int(m.group(1)), int(m.group(2))


def _self_links_text(path: Path) -> dict[str, int]:
    """{group hash: local rank} from the i-i LOCAL links of a communication_matrix.json."""
    data = peek_json(path)
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
    from .db.sqlite import read_only  # the db package imports this module: imported when used

    out: dict[str, int] = {}
    try:
        with read_only(path) as con:
            rows = con.execute(
                "SELECT DISTINCT group_name, src_rank FROM CommAnalyzerMatrix WHERE src_rank = dst_rank"
            ).fetchall()
    except (sqlite3.Error, OSError, UnicodeDecodeError):  # a damaged db: its reader names the problem
        return out
    for g, r in rows:
        try:
            out[str(g)] = int(r)
        except (TypeError, ValueError):
            continue
    return out


def share_group_layouts(plans: Iterable[CollectionPlan], reads_text: Callable[[CollectionPlan], bool]) -> None:
    """Give every torch_npu collection of a run what all its ranks say about communication groups:
    ``hints['npu_groups'] = {'members': {hash: {local: global}}, 'parallel_group_info': {...}}``.

    A rank's matrix only names peers by group-local rank; its own i-i self-link tells which local rank
    it is. Collecting the self-links of every rank gives the local -> global map of each group
    (msprof-analyze's fallback when profiler_metadata.json has no parallel_group_info)."""
    plans = list(plans)
    members: dict[str, dict[int, int]] = {}
    pgi: dict[str, Any] = {}
    for p in plans:
        out = p.root / OUTPUT_DIR
        links: dict[str, int] = {}
        if reads_text(p) and (out / "communication_matrix.json").is_file():
            links = _self_links_text(out / "communication_matrix.json")
        if not links and (out / TORCH_NPU_ANALYSIS_DB).is_file():
            links = _self_links_db(out / TORCH_NPU_ANALYSIS_DB)
        if p.rank is not None:
            for h, local in links.items():
                members.setdefault(h, {}).setdefault(local, p.rank)
        meta = peek_json(p.root / PROFILER_METADATA)
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
        for h, (_gid, info) in self._pgi_by_hash.items():
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
