"""Human formatting of times, sizes and rates, and escaping of program-written text for Plotly.

Dash components render strings as text nodes, so names from traces are safe there. Plotly's SVG
text, however, understands a few HTML-like tags (``<b>``, ``<br>``, ``<a href>``) in titles, legends,
axis and tick labels, hover text and annotations: :func:`plot_text` is the one escape (``&``, ``<``,
``>`` as entities, which Plotly shows literally), and :func:`plot_safe` applies it to every string of
a figure but its templates when the figure is sent to the browser (``webapp.ui.Figure``), so a page
never has to remember. Names therefore go into a figure's data (``name``, ``x``, ``hovertext``,
``customdata``) and templates refer to them (``%{fullData.name}``): a template is ours alone.
"""

from __future__ import annotations

from typing import Any

from analyzer.format import fmt_bytes, fmt_ns, fmt_rate
from analyzer.format import is_missing as _missing

__all__ = ["fmt_bytes", "fmt_int", "fmt_ns", "fmt_rate", "plot_safe", "plot_text", "shorten"]


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


TEMPLATE_KEYS = frozenset({"hovertemplate", "texttemplate"})  # ours: their tags (<br>, <extra>) are meant


def plot_safe(obj: Any, key: str | None = None) -> Any:
    """A figure's JSON (``to_plotly_json()``) with :func:`plot_text` applied to every string outside
    the templates (names, titles, tick and hover text, category values, annotations)."""
    if isinstance(obj, str):
        return obj if key in TEMPLATE_KEYS else plot_text(obj)
    if isinstance(obj, dict):
        return {k: plot_safe(v, k) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plot_safe(v, key) for v in obj]
    if type(obj).__name__ == "ndarray" and obj.dtype.kind in "OUS":  # numpy is not imported here
        return [plot_safe(v, key) for v in obj.tolist()]
    return obj


def shorten(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
