"""Which steps and ranks of two runs are compared with each other (``analyze diff``, ``check``).

**Steps.** By number: the step numbers both runs profiled (msprof-analyze's compare aligns by step
too). ``base_step`` / ``new_step`` choose one step of each (msprof-analyze's ``--base_step`` /
``--comparison_step``; one given alone is used for both runs). Runs without a step number in common
(another profiling window, another producer) are compared over every profiled step of each, per
step; a run without steps at all over its whole profile. Every value of a comparison is *per step*
(the mean over the compared steps), so runs that profiled different numbers of steps compare.

**Ranks.** By rank number when both runs have the same world size. When the world sizes differ,
by layout coordinate (``parallel_layout``): ranks with the same coordinate in every dimension but
data parallelism (TP, CP, EP, PP) do the same work, so each such class of ranks is compared as one
row (its mean), e.g. stage ``pp 1`` of a 4-rank PP2 × DP2 job against stage ``pp 1`` of an 8-rank
PP2 × DP4 job. Without a layout in common, ranks are matched by number, and by position when the
runs have no rank number in common.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import QueryError
from ..messages import english
from ..store import Store, resolve_run
from .parallel_layout import parallel_layout
from .step_breakdown import step_breakdown

NON_DP_DIMS = ("tp", "cp", "ep", "pp")  # ranks that differ only in their dp coordinate do the same work

Step = int | None  # None: a run without step numbers (its whole profile)


class CompareError(QueryError):
    """Two runs cannot be compared as asked (a step that a run does not have, no rank in common)."""


@dataclass(frozen=True)
class RankGroup:
    """Ranks of the two runs compared as one row: one rank each (by rank), or a layout class."""

    label: str  # "rank 3", or "pp 1" / "tp 0 pp 1" / "all ranks" (layout classes)
    base_ranks: tuple[int, ...]
    new_ranks: tuple[int, ...]


@dataclass(frozen=True)
class Pairing:
    base: str
    new: str
    base_steps: tuple[Step, ...]  # the steps compared, per run
    new_steps: tuple[Step, ...]
    step_pairs: tuple[tuple[Step, Step], ...]  # steps shown side by side (same number, chosen, or by position)
    step_mode: str  # number | chosen | all
    match: str  # rank | layout | position
    groups: tuple[RankGroup, ...]
    unmatched_base: tuple[int, ...] = ()
    unmatched_new: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def base_ranks(self) -> list[int]:
        return sorted({r for g in self.groups for r in g.base_ranks})

    @property
    def new_ranks(self) -> list[int]:
        return sorted({r for g in self.groups for r in g.new_ranks})

    def side(self, which: str) -> tuple[str, list[int], tuple[Step, ...]]:
        """(run, ranks, steps) of ``base`` or ``new``."""
        if which == "base":
            return self.base, self.base_ranks, self.base_steps
        return self.new, self.new_ranks, self.new_steps


def fmt_ranks(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 3, 7] → '0–3, 7'."""
    rs = sorted({int(r) for r in ranks})
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}–{rs[j]}")
        i = j + 1
    return ", ".join(parts)


def fmt_steps(steps: Sequence[Step]) -> str:
    known = [s for s in steps if s is not None]
    if not known:
        return english("pairing.no_steps")
    return english("pairing.steps_1" if len(known) == 1 else "pairing.steps_n", steps=fmt_ranks(known))


def run_steps(sb: pd.DataFrame) -> list[Step]:
    """The steps of a run's step breakdown ([None]: no step numbers)."""
    known = sorted({int(s) for s in sb["step"].dropna()})
    if known:
        return known
    return [None] if not sb.empty else []


def world_size(store: Store, run: str) -> int:
    """The run's world size when its producer recorded one, else the number of ranks profiled."""
    co = store.catalog_snapshot()["collections"]
    rows = [r for r in co.select(["run", "rank", "world_size"]).to_pylist() if r["run"] == run]
    sizes = [int(r["world_size"]) for r in rows if r["world_size"] is not None]
    return max(sizes) if sizes else len({r["rank"] for r in rows})


def _choose_steps(
    base: str, new: str, bs: list[Step], ns: list[Step], base_step: int | None, new_step: int | None
) -> tuple[tuple[Step, ...], tuple[Step, ...], tuple[tuple[Step, Step], ...], str, list[str]]:
    notes: list[str] = []
    if base_step is not None or new_step is not None:
        b = base_step if base_step is not None else new_step
        n = new_step if new_step is not None else base_step
        for run, step, have in ((base, b, bs), (new, n, ns)):
            if step not in have:
                raise CompareError(f"run {run!r} has no step {step} (it has {fmt_steps(have)})")
        return (b,), (n,), ((b, n),), "chosen", notes
    if not bs or not ns:
        empty = base if not bs else new
        raise CompareError(f"run {empty!r} has neither steps nor activity to compare (no step breakdown)")
    common = sorted({s for s in bs if s is not None} & {s for s in ns if s is not None})
    if common:
        if len(common) < max(len(bs), len(ns)):
            notes.append(english("pairing.common_steps", steps=fmt_steps(common)))
        return tuple(common), tuple(common), tuple((s, s) for s in common), "number", notes
    notes.append(
        english("pairing.no_common_step", base_run=base, base_steps=fmt_steps(bs), new_run=new, new_steps=fmt_steps(ns))
    )
    return tuple(bs), tuple(ns), tuple(zip(bs, ns)), "all", notes


def _layout_classes(store: Store, run: str, ranks: list[int], dims: list[str]) -> dict[tuple[int, ...], list[int]]:
    lay = parallel_layout(store, run)
    coords = {int(r): row for r, row in zip(lay["rank"], lay.to_dict("records"))}
    out: dict[tuple[int, ...], list[int]] = {}
    for r in ranks:
        row = coords.get(r, {})
        key = tuple(int(row[d]) if d in row and not pd.isna(row[d]) else 0 for d in dims)
        out.setdefault(key, []).append(r)
    return out


def _by_layout(store: Store, base: str, new: str, b_ranks: list[int], n_ranks: list[int]) -> list[RankGroup] | None:
    cols = set(parallel_layout(store, base).columns) | set(parallel_layout(store, new).columns)
    dims = [d for d in NON_DP_DIMS if d in cols]
    bc = _layout_classes(store, base, b_ranks, dims)
    nc = _layout_classes(store, new, n_ranks, dims)
    keys = sorted(set(bc) & set(nc))
    if not keys:
        return None
    groups = []
    for k in keys:
        label = " ".join(f"{d} {v}" for d, v in zip(dims, k)) if dims else english("label.all_ranks")
        groups.append(RankGroup(label, tuple(bc[k]), tuple(nc[k])))
    return groups


def pair_runs(
    store: Store,
    base: str,
    new: str,
    base_step: int | None = None,
    new_step: int | None = None,
    ranks: Sequence[int] | None = None,
) -> Pairing:
    """The steps and ranks of ``base`` and ``new`` compared with each other (see the module doc);
    ``ranks`` keeps the rows that hold one of these ranks."""
    base, new = resolve_run(store, base), resolve_run(store, new)
    bsb, nsb = step_breakdown(store, base), step_breakdown(store, new)
    b_steps, n_steps, pairs, mode, notes = _choose_steps(base, new, run_steps(bsb), run_steps(nsb), base_step, new_step)

    def ranks_at(sb: pd.DataFrame, steps: tuple[Step, ...]) -> list[int]:
        known = [s for s in steps if s is not None]
        rows = sb[sb["step"].isin(known)] if known else sb[sb["step"].isna()]
        return sorted({int(r) for r in rows["rank"]})

    b_ranks, n_ranks = ranks_at(bsb, b_steps), ranks_at(nsb, n_steps)
    wb, wn = world_size(store, base), world_size(store, new)
    groups: list[RankGroup] | None = None
    match = "rank"
    if wb != wn:
        groups = _by_layout(store, base, new, b_ranks, n_ranks)
        if groups is not None:
            match = "layout"
            notes.append(english("pairing.by_layout", base_run=base, base_world=wb, new_run=new, new_world=wn))
        else:
            notes.append(english("pairing.by_number", base_run=base, base_world=wb, new_run=new, new_world=wn))
    if groups is None:
        common = sorted(set(b_ranks) & set(n_ranks))
        if common:
            groups = [RankGroup(english("label.rank", rank=r), (r,), (r,)) for r in common]
        else:
            match = "position"
            groups = [
                RankGroup(english("label.rank_pair", base=b, new=n), (b,), (n,)) for b, n in zip(b_ranks, n_ranks)
            ]
            notes.append(
                english(
                    "pairing.in_order",
                    base_run=base,
                    base_ranks=fmt_ranks(b_ranks),
                    new_run=new,
                    new_ranks=fmt_ranks(n_ranks),
                )
            )
    if ranks is not None:
        keep = {int(r) for r in ranks}
        groups = [g for g in groups if keep & (set(g.new_ranks) | set(g.base_ranks))]
    if not groups:
        raise CompareError(f"no rank of {base!r} matches one of {new!r}" + (" among --ranks" if ranks else ""))
    used_b = {r for g in groups for r in g.base_ranks}
    used_n = {r for g in groups for r in g.new_ranks}
    un_b = tuple(r for r in b_ranks if r not in used_b) if ranks is None else ()
    un_n = tuple(r for r in n_ranks if r not in used_n) if ranks is None else ()
    if un_b:
        notes.append(english("pairing.unmatched", run=base, ranks=fmt_ranks(un_b)))
    if un_n:
        notes.append(english("pairing.unmatched", run=new, ranks=fmt_ranks(un_n)))
    return Pairing(base, new, b_steps, n_steps, pairs, mode, match, tuple(groups), un_b, un_n, tuple(notes))
