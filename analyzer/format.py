"""Human formatting of times, sizes and rates, shared by the CLI and the web app."""

from __future__ import annotations

import math
from typing import Any


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_ns(v: Any) -> str:
    """1234567 → '1.235 ms'."""
    if is_missing(v):
        return "-"
    v = float(v)
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3f} s"
    if a >= 1e6:
        return f"{v / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{v / 1e3:.1f} µs"
    return f"{v:.0f} ns"


def fmt_bytes(v: Any) -> str:
    if is_missing(v):
        return "-"
    v = float(v)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:.0f} B"


def fmt_rate(v: Any) -> str:
    """Bytes per second."""
    if is_missing(v):
        return "-"
    v = float(v)
    for unit, div in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:.0f} B/s"
