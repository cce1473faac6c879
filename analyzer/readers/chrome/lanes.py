"""Timeline lanes: the process and thread names of M events, and the one lane classifier.

A lane is one (pid, tid) of a trace. ``LaneInfo`` collects the names and sort indexes that M events
give them; ``lane_group`` puts a lane in one of ``vocabulary.LANE_GROUPS`` by the rules of the
family that wrote the trace (``LaneRules``: Kineto decides by the categories of its events, the
Ascend family by process name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..common.jsonfile import DECODE_ERRORS
from .columns import id_text
from .stream import ANY, Event


@dataclass
class LaneInfo:
    """Process and thread names collected from M events."""

    process_names: dict[str, str] = field(default_factory=dict)
    process_labels: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    thread_sort: dict[tuple[str, str], int] = field(default_factory=dict)
    process_sort: dict[str, int] = field(default_factory=dict)

    def add(self, e: Event) -> None:
        pid = id_text(e.pid) or ""
        tid = id_text(e.tid) or ""
        try:
            args = ANY.decode(e.args) if len(e.args) else {}
        except DECODE_ERRORS:
            return
        if not isinstance(args, dict):
            return
        if e.name == "process_name":
            self.process_names[pid] = str(args.get("name", ""))
        elif e.name == "process_labels":
            self.process_labels[pid] = str(args.get("labels", ""))
        elif e.name == "thread_name":
            # Kineto writes two thread_name events for some threads; keep the most specific
            name = str(args.get("name", ""))
            old = self.thread_names.get((pid, tid))
            if old is None or len(name) > len(old):
                self.thread_names[(pid, tid)] = name
        elif e.name == "thread_sort_index":
            si = args.get("sort_index")
            if isinstance(si, int):
                self.thread_sort[(pid, tid)] = si
        elif e.name == "process_sort_index":
            si = args.get("sort_index")
            if isinstance(si, int):
                self.process_sort[pid] = si


@dataclass(frozen=True)
class LaneRules:
    """How a family names its lanes' groups. Checked in this order:

    1. ``device_categories``: a lane whose slices are mostly (at least half) of these categories is
       a device lane (Kineto: kernels, memcpy, ...);
    2. ``other_ids`` / ``other_processes``: pseudo processes (Kineto's "Spans", "Traces") are "other";
    3. ``processes`` (exact process name) and ``prefixes`` (process name prefix) -> group;
    4. ``labels`` (process_labels prefix) -> group;
    5. ``default``.
    """

    default: str
    device_categories: frozenset[str] = frozenset()
    other_ids: frozenset[str] = frozenset()
    other_processes: frozenset[str] = frozenset()
    processes: Mapping[str, str] = field(default_factory=dict)
    prefixes: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


def lane_group(
    rules: LaneRules, process: str, pid: str = "", categories: Mapping[str, int] | None = None, labels: str = ""
) -> str:
    """The lane group (``vocabulary.LANE_GROUPS``) of a lane of process ``process`` (id ``pid``),
    whose slices have these ``categories`` (category -> count) and whose process has ``labels``."""
    if rules.device_categories and categories:
        total = sum(categories.values())
        if sum(n for c, n in categories.items() if c in rules.device_categories) >= total / 2:
            return "device"
    if pid in rules.other_ids or process in rules.other_processes:
        return "other"
    p = process.strip()
    if p in rules.processes:
        return rules.processes[p]
    for prefix, group in rules.prefixes:
        if p.startswith(prefix):
            return group
    for prefix, group in rules.labels:
        if labels.startswith(prefix):
            return group
    return rules.default
