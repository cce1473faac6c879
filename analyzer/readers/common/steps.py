"""The step of a moment: which step range holds a timestamp, or which step last started before it.

``steps`` are ``(step, start ns, end ns)`` tuples, as every reader collects them (ProfilerStep
ranges, msprof iterations, STEP_TIME rows, step_trace files).
"""

from __future__ import annotations

import bisect


def step_containing(steps: list[tuple[int, int, int]], ts: int | None) -> int | None:
    """The first step (in the order of ``steps``) whose [start, end) holds ``ts``; None outside every step."""
    if ts is None:
        return None
    for step, s, e in steps:
        if s <= ts < e:
            return step
    return None


def steps_containing(steps: list[tuple[int, int, int]], ts: list[int | None]) -> list[int | None]:
    """``step_containing`` of many times at once (binary search over the steps by start; when ranges
    overlap, the one that starts first)."""
    ordered = sorted(steps, key=lambda s: s[1])
    starts = [s[1] for s in ordered]
    out: list[int | None] = []
    for t in ts:
        hit = None
        if t is not None:
            i = bisect.bisect_right(starts, t)
            for s, a, b in ordered[max(0, i - 8) : i]:  # ranges are disjoint in practice; a few back for overlaps
                if a <= t < b:
                    hit = s
                    break
        out.append(hit)
    return out


def last_step_started(steps: list[tuple[int, int, int]], ts: list[int | None]) -> list[int | None]:
    """The step of each device task: the last step (``steps`` sorted by start) started at or before
    it (device work lags the host)."""
    starts = [s[1] for s in steps]
    out: list[int | None] = []
    for t in ts:
        i = bisect.bisect_right(starts, t) if t is not None else 0
        out.append(steps[i - 1][0] if i else None)
    return out
