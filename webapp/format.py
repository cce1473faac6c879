"""Human formatting of times, sizes and rates, and escaping of program-written text for Plotly.

Dash components render strings as text nodes, so names from traces are safe there. Plotly's SVG
text, however, understands a few HTML-like tags (``<b>``, ``<br>``, ``<a href>``): every string a
trace wrote goes through :func:`plot_text` before it reaches a figure, so it shows literally.
"""

from __future__ import annotations

from typing import Any

from analyzer.format import fmt_bytes, fmt_ns, fmt_rate
from analyzer.format import is_missing as _missing

__all__ = ["fmt_bytes", "fmt_int", "fmt_ns", "fmt_rate", "plot_text", "shorten"]


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
