"""The one event router of every Chrome trace we read (Kineto, torch_npu / MindSpore ``trace_view.json``,
msprof's json timelines).

One pass per block of decoded events. The phase of every event is coded once (numpy); what every
family does the same way is done here, once, on Arrow columns:

- M events -> ``lanes`` (process / thread names and sort indexes; see ``RouteRules.ordered_lanes``);
- X and i events -> the ``slices`` columns (one C-level pass per field) and per-lane slice counts by
  category, from which ``lane_rows`` classifies the lanes with the family's ``LaneRules``;
- C events -> long-form counter columns;
- X events of ``RouteRules.op_categories`` -> operator positions.

What only one family does (Kineto's kernels, collectives and memory events; the Ascend family's
HCCL ops, CANN levels, device tasks and iterations) is a ``Picker``: it gets each routed block with
the positions and columns above and takes its own rows from them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...units import time_problems
from .columns import Codes, EventColumns, counter_columns, field_values, times_ns
from .lanes import LaneInfo, LaneRules, lane_group
from .stream import Event

_NAME = attrgetter("name")
_PH = attrgetter("ph")
_NOTHING = Event()  # what an event whose times cannot be stored is replaced with (routed nowhere)


@dataclass(frozen=True)
class RouteRules:
    """What a family's traces mean.

    ``op_categories``: X events of these categories are operators (their positions reach the
    picker as ``RoutedBlock.op_idx``). ``held_instants``: instant events of these names are not
    timeline slices (Kineto's ``[memory]`` events: memory samples); the picker gets their positions.
    ``ordered_lanes``: the picker adds the M events itself, in file order, because it decides on
    an event by the names known at its position (M events interleave with the events they name);
    otherwise the router adds a block's M events before anything else.
    """

    lanes: LaneRules
    op_categories: frozenset[str] = frozenset()
    held_instants: frozenset[str] = frozenset()
    ordered_lanes: bool = False


@dataclass
class RoutedBlock:
    """One routed block, as a picker sees it."""

    events: list[Event]
    first: int  # event id of the block's first event (ids count events in file order)
    base_ns: int  # time base added to ts
    is_x: np.ndarray  # per event: an X event
    sl_idx: np.ndarray  # positions of the events that became slices
    cols: EventColumns | None  # columns of those events (None when there are none)
    x_sl: pa.Array | None  # per slice: an X event
    op_idx: np.ndarray  # positions of the operators (RouteRules.op_categories)
    op_mask: pa.Array | None  # per slice: an operator
    held_idx: np.ndarray  # positions of the held instants (RouteRules.held_instants)
    m_idx: np.ndarray  # positions of the M events
    c_idx: np.ndarray  # positions of the C events


class Picker(Protocol):
    def block(self, router: EventRouter, b: RoutedBlock) -> None:
        """Take this family's rows from a routed block."""

    def counters(self, cols: dict[str, pa.Array]) -> None:
        """Long-form counter columns of the block's C events (``counter_columns``)."""


def where(mask: pa.Array) -> np.ndarray:
    """Positions where a boolean Arrow array is true (nulls count as false)."""
    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))


@dataclass
class EventRouter:
    """Routes the events of one collection's trace files (see the module doc)."""

    rules: RouteRules
    picker: Picker
    write_slices: Callable[[dict[str, pa.Array]], None]
    note: Callable[[str], None]  # a problem of the file being read (ReadContext.note)
    lanes: LaneInfo = field(default_factory=LaneInfo)
    lane_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    lane_cats: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    event_base: int = 0  # event id of the next event (ids count the collection's events in file order)
    file_starts: list[int] = field(default_factory=list)  # event id of each file's first event

    def start_file(self) -> None:
        """The events routed from now on come from the next file: problems number them in it."""
        self.file_starts.append(self.event_base)

    def number_in_file(self, event_ids: np.ndarray) -> np.ndarray:
        """Event ids as the events' numbers in their file, counted from 1 (for problems)."""
        first = self.file_starts[-1] if self.file_starts else 0
        return event_ids - first + 1

    def route(self, events: list[Event], base_ns: int = 0) -> None:
        first = self.event_base
        n = len(events)
        self.event_base += n
        kinds = Codes()
        code = np.fromiter(map(kinds.__getitem__, map(_PH, events)), dtype=np.int32, count=n)

        def phase(*values: str) -> np.ndarray:
            m = np.zeros(n, dtype=bool)
            for v in values:
                if v in kinds:
                    m |= code == kinds[v]
            return m

        is_x = phase("X")
        inst = phase("i", "I")
        sl_mask = is_x | inst
        held_idx = np.zeros(0, dtype=np.int64)
        held = self.rules.held_instants
        if held and inst.any():  # the instants' names, through C-level maps: no Python loop per event
            inst_idx = np.flatnonzero(inst)
            names = pa.array(list(map(_NAME, map(events.__getitem__, inst_idx.tolist()))), pa.string())
            is_held = pc.fill_null(pc.is_in(names, value_set=pa.array(sorted(held), pa.string())), False)
            held_idx = inst_idx[is_held.to_numpy(zero_copy_only=False)]
            sl_mask[held_idx] = False
        c_idx = np.flatnonzero(phase("C"))
        if self._drop_bad_times(events, np.union1d(held_idx, c_idx), first, base_ns, None):
            return
        sl_idx = np.flatnonzero(sl_mask)
        m_idx = np.flatnonzero(phase("M"))
        if not self.rules.ordered_lanes:
            for i in m_idx.tolist():
                self.lanes.add(events[i])
        cols = x_sl = op_mask = None
        op_idx = np.zeros(0, dtype=np.int64)
        if len(sl_idx):
            sl_events = events if len(sl_idx) == n else list(map(events.__getitem__, sl_idx.tolist()))
            cols = EventColumns.of(sl_events, base_ns=base_ns, event_ids=sl_idx + first)
            if self._drop_bad_times(events, sl_idx, first, base_ns, cols):
                return
            sl = cols.slices()
            self._count_lanes(sl)
            self.write_slices(sl)
            x_sl = pa.array(is_x[sl_idx])
            if self.rules.op_categories:
                op_mask = pc.and_(x_sl, pc.is_in(cols.cat, value_set=pa.array(sorted(self.rules.op_categories))))
                op_idx = sl_idx[where(op_mask)]
        self.picker.block(
            self,
            RoutedBlock(events, first, base_ns, is_x, sl_idx, cols, x_sl, op_idx, op_mask, held_idx, m_idx, c_idx),
        )
        if len(c_idx):
            ctr = counter_columns([events[i] for i in c_idx.tolist()], base_ns)
            if ctr is not None:
                self.picker.counters(ctr)

    def _drop_bad_times(
        self, events: list[Event], idx: np.ndarray, first: int, base_ns: int, cols: EventColumns | None
    ) -> bool:
        """The one check of every time the router reads (``units.time_problems``), before anything is
        derived from it: slices (``cols``: ts and dur), the instants a picker holds (memory events)
        and counters (ts). An event whose time cannot be true is named on the file being read (its
        number in the file, its value, the reason) and the block is routed again without it
        (replaced by an event of no phase, so every other event keeps its id). True when it was."""
        if not len(idx):
            return False
        if cols is not None:
            times = pa.table({"ts_ns": cols.ts_ns, "dur_ns": cols.dur_ns})
        else:
            held = list(map(events.__getitem__, idx.tolist()))
            times = pa.table({"ts_ns": times_ns(field_values(held, "ts"), base_ns)})
        keep, notes = time_problems("trace", times, row="event", numbers=self.number_in_file(idx + first))
        if keep is None:
            return False
        for note in notes:
            self.note(note)
        self.event_base = first
        block = list(events)
        for i in idx[where(pc.invert(keep))].tolist():
            block[i] = _NOTHING
        self.route(block, base_ns)
        return True

    def _count_lanes(self, sl: dict[str, pa.Array]) -> None:
        """Slices per lane and category, counted with numpy over the columns' dictionary codes (an
        Arrow group_by would import Arrow's query engine in every reader process: 10-20 ms)."""
        codes, values = [], []
        for c in ("pid", "tid", "category"):
            col = sl[c].combine_chunks() if isinstance(sl[c], pa.ChunkedArray) else sl[c]
            enc = pc.dictionary_encode(col)
            codes.append(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1)
            values.append([""] + [v or "" for v in enc.dictionary.to_pylist()])  # code 0: null, as ""
        n_tid, n_cat = len(values[1]), len(values[2])
        keys, counts = np.unique((codes[0] * n_tid + codes[1]) * n_cat + codes[2], return_counts=True)
        for key_code, k in zip(keys.tolist(), counts.tolist()):
            lane, cat = divmod(key_code, n_cat)
            key = (values[0][lane // n_tid], values[1][lane % n_tid])
            self.lane_counts[key] += k
            lc = self.lane_cats.get(key)
            if lc is None:
                lc = self.lane_cats[key] = Counter()
            lc[values[2][cat]] += k

    # -- lanes -----------------------------------------------------------------------------------

    def process(self, pid: str | None) -> str:
        return self.lanes.process_names.get(pid or "", "")

    def lane(self, pid: str | None, tid: str | None) -> str:
        return self.lanes.thread_names.get((pid or "", tid or ""), "")

    def group(self, pid: str | None) -> str:
        """The lane group of a process by name alone (the Ascend family's rule)."""
        return lane_group(self.rules.lanes, self.process(pid))

    def lane_rows(self, process_fallback: Callable[[str, str], str] | None = None) -> dict[str, list[Any]]:
        """The ``lanes`` table: one row per (pid, tid) that holds slices, classified by the family's
        rules; unnamed lanes are "Stream {tid}" on a device, else "Thread {tid}"."""
        li = self.lanes
        rows: dict[str, list[Any]] = {
            k: [] for k in ("pid", "tid", "process", "lane", "lane_group", "sort_index", "n_slices")
        }
        for pid, tid in sorted(self.lane_counts):
            process = li.process_names.get(pid, "")
            group = lane_group(
                self.rules.lanes, process, pid, self.lane_cats.get((pid, tid)), li.process_labels.get(pid, "")
            )
            rows["pid"].append(pid)
            rows["tid"].append(tid)
            rows["process"].append(process or (process_fallback(pid, group) if process_fallback else pid))
            rows["lane"].append(
                li.thread_names.get((pid, tid)) or (f"Stream {tid}" if group == "device" else f"Thread {tid}")
            )
            rows["lane_group"].append(group)
            rows["sort_index"].append(li.thread_sort.get((pid, tid)))
            rows["n_slices"].append(self.lane_counts[(pid, tid)])
        return rows
