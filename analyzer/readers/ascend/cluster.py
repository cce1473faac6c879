"""msprof-analyze's cluster output: ``communication_group.json`` (docs/formats.md §4.2), found in the run
folder or one folder below it (``cluster_analysis_output/``).

It declares the job's communication groups once for all ranks: the new format lists each group with
its members (``rank_set``), HCCL group hash (``group_name``), id and role (``pg_name``: tp, dp, pp,
...) and traffic kind (``type``: collective or p2p) under ``comm_group_parallel_info``; the old
format only ``{"collective": [[ranks]], "p2p": [[ranks]]}``. Its rows go to ``declared_groups``,
read once per run with the run's first collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem
from ..base import ReadContext
from ..common.jsonfile import load_json
from .names import COMMUNICATION_GROUP

SOURCE = COMMUNICATION_GROUP


def is_communication_group(rel: Path) -> bool:
    """``communication_group.json`` at the run root or one folder below it (``rel``: relative to the run root)."""
    return rel.name == COMMUNICATION_GROUP and len(rel.parts) <= 2


def communication_groups(path: Path) -> dict[str, list[Any]]:
    """The groups of a ``communication_group.json``, as ``declared_groups`` columns."""
    doc = load_json(path, COMMUNICATION_GROUP, obj=True)
    cols: dict[str, list[Any]] = {k: [] for k in ("group_name", "group_id", "pg_name", "global_ranks", "traffic")}

    def add(name: Any, gid: Any, pg: Any, ranks: Any, traffic: Any) -> None:
        try:
            members = sorted(int(r) for r in ranks or [])
        except (TypeError, ValueError) as exc:
            raise InputError(str(path), problem("bad_rank_list", kind=COMMUNICATION_GROUP, detail=exc)) from exc
        cols["group_name"].append(str(name))
        cols["group_id"].append(None if gid is None else str(gid))
        cols["pg_name"].append(pg if isinstance(pg, str) else None)
        cols["global_ranks"].append(members)
        cols["traffic"].append(traffic if isinstance(traffic, str) else None)

    info = doc.get("comm_group_parallel_info")
    if isinstance(info, list):
        for g in info:
            if isinstance(g, dict):
                add(g.get("group_name"), g.get("group_id"), g.get("pg_name"), g.get("rank_set"), g.get("type"))
    else:
        for kind in ("collective", "p2p"):
            for i, ranks in enumerate(doc.get(kind) or []):
                add(f"{kind}{i}", None, None, ranks, kind)
    return cols


def read_communication_group(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, COMMUNICATION_GROUP) as outcome:
        cols = communication_groups(path)
        cols["source"] = [SOURCE] * len(cols["group_name"])
        outcome.rows = ctx.write("declared_groups", cols)
        if not outcome.rows:
            outcome.warn(problem("no_group"))
