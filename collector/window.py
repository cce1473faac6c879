"""A planned profiling window: which steps, which options, where, for which ranks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .config import ProfileOptions


@dataclass
class WindowPlan:
    start: int  # first recorded step
    end: int  # first step not recorded (the window is [start, end))
    options: ProfileOptions
    save_path: str
    trigger: str  # static | dynamic
    ranks: list[int] = field(default_factory=lambda: [-1])
    origin: str = ""  # where the plan came from (static_param, profiler_config.json edit, callback...)
    explicit: frozenset[str] = frozenset()  # option names the user set (the rest are defaults)

    @property
    def warmup(self) -> int:
        return self.options.warmup

    @property
    def warm_start(self) -> int:
        """First step the backend runs (warm-up steps come before ``start``)."""
        return self.start - self.options.warmup

    @property
    def steps(self) -> list[int]:
        return list(range(self.start, self.end))

    def selects(self, rank: int) -> bool:
        return -1 in self.ranks or rank in self.ranks

    def describe(self) -> str:
        last = self.end - 1
        rng = f"step {self.start}" if last == self.start else f"steps {self.start}..{last}"
        warm = f" after {self.warmup} warm-up step(s)" if self.warmup else ""
        ranks = "all ranks" if -1 in self.ranks else "ranks " + ",".join(map(str, self.ranks))
        return f"{rng}{warm}, {ranks}"


_DESCRIBED_RANKS = re.compile(r", (all ranks|ranks ([0-9,]+))$")


def described_selects(described: str, rank: int) -> bool | None:
    """Whether the window :meth:`WindowPlan.describe` wrote as ``described`` selects ``rank``
    (None when the text does not end with its ranks)."""
    m = _DESCRIBED_RANKS.search(described)
    if m is None:
        return None
    return m.group(1) == "all ranks" or rank in {int(r) for r in m.group(2).split(",") if r}
