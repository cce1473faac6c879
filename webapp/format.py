"""Human formatting of times, sizes and rates, and escaping of program-written text for Plotly.

Dash components render strings as text nodes, so names from traces are safe there. Plotly's SVG
text, however, understands a few HTML-like tags (``<b>``, ``<br>``, ``<a href>``): every string a
trace wrote goes through :func:`plot_text` before it reaches a figure, so it shows literally.
"""

from __future__ import annotations

import math
from typing import Any


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_ns(v: Any) -> str:
    """1234567 → '1.235 ms'."""
    if _missing(v):
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
    if _missing(v):
        return "-"
    v = float(v)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:.0f} B"


def fmt_rate(v: Any) -> str:
    """Bytes per second."""
    if _missing(v):
        return "-"
    v = float(v)
    for unit, div in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:.0f} B/s"


def fmt_pct(v: Any, digits: int = 1) -> str:
    if _missing(v):
        return "-"
    return f"{float(v):.{digits}f} %"


def fmt_int(v: Any) -> str:
    if _missing(v):
        return "-"
    return f"{int(v):,}"


_PLOT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def plot_text(v: Any) -> str:
    """A string safe to put in Plotly text / hover text / tick labels: shown literally."""
    if _missing(v):
        return ""
    return str(v).translate(_PLOT_ESCAPES)


def shorten(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
