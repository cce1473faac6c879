"""Human formatting of times, sizes and rates, shared by the CLI and the web app."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def is_missing(v: Any) -> bool:
    """None, NaN, or pandas' NA / NaT."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType")


def safe_text(s: str) -> str:
    """Text that can be stored and printed: a file name's bytes that are not UTF-8 (held by Python
    as surrogate escapes) written as ``\\xNN``. Unchanged when it is valid text already."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def a_or_an(word: str) -> str:
    """'an op_statistic.csv', 'a kernel_details.csv'."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def json_ready(v: Any) -> Any:
    """A value from a DataFrame or an Arrow row as plain JSON data: numpy scalars and arrays become
    Python numbers and lists, NaN / NA None, timestamps ISO text, whole decimals exact ints."""
    if is_missing(v):
        return None
    if isinstance(v, dict):
        return {str(k): json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_ready(x) for x in v]
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):  # numpy scalar or array
        return json_ready(v.tolist())
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    return v


def json_records(df: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as plain JSON data (``json_ready``), one dict per row keyed by column name."""
    return [{str(c): json_ready(v) for c, v in zip(df.columns, row)} for row in df.itertuples(index=False)]


def cell_text(v: Any, missing: str = "") -> str:
    """One cell of a printed table or CSV: lists as JSON, missing values as ``missing``."""
    v = json_ready(v)
    if v is None:
        return missing
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=str)
    return str(v)


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
