"""Separate jobs under one folder: a parent folder holding the outputs of unrelated jobs must not be
merged into one run (a "step" would then span both jobs).

The collections are grouped by the top-level folder they sit in. Two groups cannot be one job when:

- their known world sizes differ;
- one rank was recorded on two different hosts.

Time does not separate jobs: a collection's span may reach back to the process start (MindSpore's
windows of one rank overlap so), and the windows of one job may be hours apart; so two runs of the
same job one after the other are not told apart here.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any


def _top(root_path: str) -> str:
    parts = PurePosixPath(root_path).parts
    return parts[0] if len(parts) > 1 else "."


def _conflict(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    """Why two groups of collections cannot be one job, or None."""
    wa = {int(c["world_size"]) for c in a if c.get("world_size")}
    wb = {int(c["world_size"]) for c in b if c.get("world_size")}
    if wa and wb and wa.isdisjoint(wb):
        return "their world sizes differ"
    for x in a:
        for y in b:
            if x.get("rank") is None or x.get("rank") != y.get("rank"):
                continue
            if x.get("hostname") and y.get("hostname") and x["hostname"] != y["hostname"]:
                return f"rank {x['rank']} was recorded on two hosts"
    return None


def _describe(cs: list[dict[str, Any]]) -> str:
    world = sorted({int(c["world_size"]) for c in cs if c.get("world_size")})
    hosts = sorted({str(c["hostname"]) for c in cs if c.get("hostname")})
    ranks = sorted({int(c["rank"]) for c in cs if c.get("rank") is not None})
    parts = [
        f"world size {'/'.join(map(str, world))}" if world else "",
        (f"ranks {ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else f"rank {ranks[0]}") if ranks else "",
        f"host {', '.join(hosts)}" if hosts else "",
    ]
    return ", ".join(p for p in parts if p) or "nothing known"


def separate_jobs(collections: list[dict[str, Any]]) -> tuple[str, list[tuple[str, str]]] | None:
    """(why, [(top-level folder, what it holds), ...]) when the collections under one folder belong
    to more than one job, else None."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in collections:
        groups[_top(str(c.get("root_path") or ""))].append(c)
    names = sorted(groups)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            why = _conflict(groups[a], groups[b])
            if why:
                return f"{a} and {b}: {why}", [(n, _describe(groups[n])) for n in names]
    return None
