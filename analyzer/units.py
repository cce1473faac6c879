"""Unit conversions, applied once at ingest: times to integer ns, memory to bytes, bandwidth to B/s.

Every time becomes ns here, and what a stored time may be is checked here (``time_problems``, run
on every batch the fact writer stores): a conversion never wraps around or raises on a value int64
ns cannot hold (beyond ±9.2e18 ns, inf) but saturates it to INT64_MAX / INT64_MIN (``fit_ns``),
which the check then names, with the row and the reason, and keeps out of the store."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .messages import english, problem
from .schema import MAX_TIME_NS

KIB = 1024
# Ascend communication files (communication.json, communication_matrix.json, analysis.db) write
# sizes in decimal MB: a packet of "2.064384" MB in a Size Distribution is the 2 064 384-byte
# size(Byte) of the HCCL tasks that carried it. Their "GB/s" is that MB per ms, i.e. 10^9 B/s.
# (Memory files are different: their MB is 1024^2 bytes, KB 1024.)
COMM_MB = 1_000_000
ASCEND_GB_PER_S = 1_000_000_000
US_NULL_TOKENS = frozenset({"", "N/A", "NA", "n/a", "None", "null", "nan", "NaN"})  # us_text_to_ns: None
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
_US_LIMIT = INT64_MAX / 1000


def us_text_to_ns(text: str | None) -> int | None:
    """An exact µs decimal string ('1736408883704643.212\\t') to integer ns, without float rounding."""
    if text is None:
        return None
    s = text.strip().strip('"').strip()
    if s in US_NULL_TOKENS:
        return None
    neg = s.startswith("-")
    if neg or s.startswith("+"):
        s = s[1:]
    if "e" in s or "E" in s or s.lower() in ("inf", "infinity"):
        v = float(s)
        return fit_ns(-v * 1000 if neg else v * 1000)
    whole, _, frac = s.partition(".")
    frac = (frac + "000")[:3] if len(frac) <= 3 else frac
    if len(frac) > 3:  # more than ns precision: round half up on the 4th digit
        ns = int((whole or "0") + frac[:3]) + (1 if frac[3] >= "5" else 0)
    else:
        ns = int((whole or "0") + frac)
    return fit_ns(-ns if neg else ns)


def us_text_or_bad_ns(text: str | None) -> int | None:
    """``us_text_to_ns`` for a time that must be one: text that is no number is INT64_MIN, a time
    that cannot be true, which ``time_problems`` names (with its row) and keeps out."""
    try:
        return us_text_to_ns(text)
    except (ValueError, ArithmeticError):
        return INT64_MIN


def fit_ns(v: float | int | None) -> int | None:
    """A computed ns value as int64 holds it: rounded; beyond the int64 range (inf included)
    saturated to INT64_MAX / INT64_MIN, for ``time_problems`` to name; NaN is None."""
    if v is None:
        return None
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if not math.isfinite(v) or abs(v) >= 9.2e18:
            return INT64_MAX if v > 0 else INT64_MIN
        v = round(v)
    return v if INT64_MIN < v < INT64_MAX else INT64_MAX if v > 0 else INT64_MIN


def _scaled(value: Any, factor: float) -> float | None:
    """value * factor; None for missing, boolean, NaN or unparseable cells."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return None
    return v * factor


def scaled_int(v: float | None, factor: float) -> int | float | None:
    """``v * factor`` rounded, for an integer column that is not a time (bytes): a product no int64
    holds (inf, beyond 9.2e18) stays a float, which the fact writer stores as empty and names; NaN
    and None are None."""
    if v is None:
        return None
    x = v * factor
    if math.isnan(x):
        return None
    return round(x) if abs(x) < 9.2e18 else x


def ms_to_ns(value: Any) -> int | None:
    return fit_ns(_scaled(value, 1_000_000))


def mb_to_bytes(value: Any) -> int | float | None:
    """MB as written in Ascend communication files (10^6 bytes, see COMM_MB) to bytes (a value no
    int64 holds stays a float: the fact writer stores it as empty and says so)."""
    v = _scaled(value, COMM_MB)
    return round(v) if v is not None and abs(v) < 9.2e18 else v


def ascend_gbps_to_bytes_per_s(value: float | str | None) -> float | None:
    """An Ascend 'Bandwidth(GB/s)' value (decimal MB per ms = 10^9 B/s) to bytes per second."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value) * ASCEND_GB_PER_S
    except (TypeError, ValueError):
        return None


def to_float(text: str | None) -> float | None:
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s in US_NULL_TOKENS:
        return None
    return float(s)


def to_int(text: str | None, sentinel_null: bool = True) -> int | None:
    """Integer cell; UINT32_MAX / UINT64_MAX sentinels ('no value') become None."""
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s in US_NULL_TOKENS:
        return None
    v = int(float(s)) if ("." in s or "e" in s.lower()) else int(s)
    if sentinel_null and v in (4294967295, 18446744073709551615, 9223372036854775807):
        return None
    return v


def us_array_to_ns(values: np.ndarray) -> np.ndarray:
    """Float µs (relative or < 2^53) to int64 ns, exact to the ns for values written with 3 decimals.
    A value int64 ns cannot hold (beyond ±9.2e15 µs, or not finite) saturates to INT64_MAX /
    INT64_MIN instead of wrapping around: ``time_problems`` names such rows and keeps them out."""
    whole = np.floor(values)
    frac = np.rint((values - whole) * 1000.0)
    fits = np.abs(values) < _US_LIMIT  # False for NaN and inf too
    if fits.all():
        return whole.astype(np.int64) * 1000 + frac.astype(np.int64)
    out = np.where(values > 0, INT64_MAX, INT64_MIN).astype(np.int64)
    out[fits] = whole[fits].astype(np.int64) * 1000 + frac[fits].astype(np.int64)
    return out


# -- what a stored time may be ------------------------------------------------------------------

# the *_ns columns that are instants (the others are durations)
TIME_POINT_COLUMNS = frozenset({"ts_ns", "start_ns", "end_ns", "alloc_ns", "release_ns", "active_release_ns"})


def time_problems(
    table: str, data: pa.Table, first_row: int = 0, row: str = "row", numbers: np.ndarray | None = None
) -> tuple[pa.Array | None, list[str]]:
    """The one check of every stored time (each ``*_ns`` column of a fact table, integer ns): an
    instant or a duration is never negative and never reaches MAX_TIME_NS (2100, or an overflow
    saturated by a conversion). Returns (the rows to keep, or None when all are good; a sentence
    per column naming the bad rows — ``first_row`` + their index, counted from 1 — their values in
    ns and the reason; ``row`` names what a row is, ``numbers`` their numbers when they are not
    consecutive). Vectorised: one min/max pass per column when everything is in range."""
    keep: pa.Array | None = None
    notes: list[str] = []
    highest: dict[str, int] = {}
    for name in data.column_names:
        if not name.endswith("_ns"):
            continue
        col = data.column(name)
        lo, hi = (v.as_py() for v in pc.min_max(col).values())
        highest[name] = hi or 0
        if lo is None or (lo >= 0 and hi < MAX_TIME_NS):
            continue
        bad = pc.fill_null(pc.or_(pc.less(col, 0), pc.greater_equal(col, MAX_TIME_NS)), False)
        rows = pc.indices_nonzero(bad).to_pylist()
        values = pc.filter(col, bad).to_pylist()
        by_reason: dict[str, list[tuple[int, int]]] = {}
        for r, v in zip(rows, values):
            by_reason.setdefault(_why(name, v), []).append((r, v))
        for why, bad_rows in by_reason.items():
            labels = [(int(numbers[r]) if numbers is not None else first_row + r + 1, v) for r, v in bad_rows[:3]]
            where = _where(row, labels, len(bad_rows))
            notes.append(problem(f"time_{why}.{_unit(row)}", table=table, n=len(bad_rows), column=name, where=where))
        keep = pc.invert(bad) if keep is None else pc.and_(keep, pc.invert(bad))
    # a metric in long form whose name says it is a time (``*_ns``: a kernel's aiv_total_time_ns) is a
    # duration like any other: never negative, never 130 years, never inf / NaN
    if "metric" in data.column_names and "value" in data.column_names:
        is_time = pc.fill_null(pc.ends_with(data.column("metric"), "_ns"), False)
        if pc.any(is_time).as_py():
            v = data.column("value")
            out = pc.or_(pc.invert(pc.is_finite(v)), pc.or_(pc.less(v, 0), pc.greater_equal(v, float(MAX_TIME_NS))))
            bad = pc.and_(is_time, pc.fill_null(out, False))
            if pc.any(bad).as_py():
                rows = pc.indices_nonzero(bad).to_pylist()
                vals = pc.filter(v, bad).to_pylist()
                names = pc.filter(data.column("metric"), bad).to_pylist()
                labels = [
                    (int(numbers[r]) if numbers is not None else first_row + r + 1, f"{m} {x}")
                    for r, m, x in list(zip(rows, names, vals))[:3]
                ]
                where = _where(row, labels, len(rows))
                notes.append(problem(f"time_metric_not_stored.{_unit(row)}", table=table, n=len(rows), where=where))
                keep = pc.invert(bad) if keep is None else pc.and_(keep, pc.invert(bad))
    # an instant and its duration each in range may still end after 2100; checked only when the
    # highest of each could (one min/max per column is the whole cost of a batch that is in range)
    if "ts_ns" in highest and "dur_ns" in highest and highest["ts_ns"] + highest["dur_ns"] >= MAX_TIME_NS:
        ts, dur = data.column("ts_ns"), data.column("dur_ns")
        if keep is not None:
            ts, dur = pc.if_else(keep, ts, 0), pc.if_else(keep, dur, 0)
        late = pc.fill_null(pc.greater_equal(pc.add(ts, dur), MAX_TIME_NS), False)
        if pc.any(late).as_py():
            rows = pc.indices_nonzero(late).to_pylist()
            labels = [int(numbers[r]) if numbers is not None else first_row + r + 1 for r in rows[:3]]
            where = "; ".join(english(f"where.{_unit(row)}", n=n) for n in labels) + ("; ..." if len(rows) > 3 else "")
            notes.append(problem(f"ending_after_2100.{_unit(row)}", table=table, n=len(rows), where=where))
            keep = pc.invert(late) if keep is None else pc.and_(keep, pc.invert(late))
    return keep, notes


def _why(name: str, value: int) -> str:
    """Why a time cannot be true: the key of its ``problem.time_*`` template."""
    if value in (INT64_MAX, INT64_MIN):
        return "overflow"  # beyond what 64-bit ns hold (overflow, or not a number)
    if value < 0:
        return "negative"
    return "after_2100" if name in TIME_POINT_COLUMNS else "longer_130y"


def _unit(row: str) -> str:
    """What a named row is, as the templates know it: a row of a table, or an event of a trace."""
    if row not in ("row", "event"):
        raise ValueError(f"rows are named 'row' or 'event', not {row!r}")
    return row


def _where(row: str, labels: list[tuple[int, Any]], n: int) -> str:
    """The first rows a problem names (their number and value), "..." when there are more."""
    items = [english(f"where.{_unit(row)}_value", n=k, value=v) for k, v in labels]
    return "; ".join(items) + ("; ..." if n > len(labels) else "")
