"""One cell of a profiler file to a Python value: one helper per meaning, used by every reader.

Profilers write the same value many ways: a number or its text, ``N/A`` / empty for "no value",
CANN's all-ones sentinels for "no id", ``step12`` for a step, times as exact decimal text. Each
helper below has one meaning, stated by its name; none guesses a unit.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...units import fit_ns, us_text_to_ns

# cell texts that mean "no value"
NULL_TOKENS = frozenset({"", "N/A", "NA", "n/a", "None", "null", "nan", "NaN", "-"})
# CANN's "no id" values of a stream / task id (UINT32_MAX, UINT16_MAX)
_NO_TASK_ID = (4294967295, 65535)
_NO_TASK_IDS = pa.array(_NO_TASK_ID, pa.int64())


def text_cell(v: str | None) -> str | None:
    """A text cell with outer spaces removed; ``N/A`` / empty / ``-`` ... as None."""
    if v is None:
        return None
    s = v.strip()
    return None if s in NULL_TOKENS else s


def int_or_none(v: Any) -> int | None:
    """An integer written as a JSON number or as digits ('3', '-1'); anything else (bools, floats,
    other text) is None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return None


def step_number(v: Any) -> int | None:
    """A step as written by the Ascend analysis tables: 12, '12' or 'step12' -> 12; else None."""
    if v is None:
        return None
    try:
        return int(str(v).strip().removeprefix("step"))
    except ValueError:
        return None


def task_id(v: Any) -> int | None:
    """A device stream / task id; CANN's "none" values (4294967295, 65535) and non-numbers are None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        x = int(v)
    except (TypeError, ValueError):
        return None
    return None if x in _NO_TASK_ID else x


def task_ids(values: list[Any]) -> pa.Array:
    """``task_id`` of many values: integers at once (Arrow), anything else value by value."""
    try:
        arr = pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([task_id(v) for v in values], pa.int64())
    none = pc.is_in(arr, value_set=_NO_TASK_IDS)
    return pc.if_else(none, pa.scalar(None, pa.int64()), arr) if pc.any(none).as_py() else arr


def number(v: Any) -> float | None:
    """A JSON number or numeric text as a float; None for null-like text, bools and non-numbers."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        s = str(v).strip()
        return None if text_cell(s) is None else float(s)
    except ValueError:
        return None


def us_number_to_ns(v: Any) -> int | None:
    """A µs value from JSON to ns through its shortest decimal form (repr), not through f * 1000:
    1736408883732241.5 µs -> 1736408883732241500 ns."""
    f = number(v)
    if f is None:
        return None
    return us_text_to_ns(repr(f) if isinstance(v, float) else str(v))


def decimal_cells_to_ns(values: list[str | None], unit_ms: bool = True) -> tuple[list[int | None], list[str]]:
    """``decimal_text_to_ns`` of a column: (the values, a cell that is no number as None; those cells)."""
    out: list[int | None] = []
    bad: list[str] = []
    for v in values:
        try:
            out.append(decimal_text_to_ns(v, unit_ms))
        except (ValueError, ArithmeticError):
            out.append(None)
            bad.append(str(v))
    return out, bad


def decimal_text_to_ns(v: str | None, unit_ms: bool = True) -> int | None:
    """An exact decimal ms (or, with ``unit_ms=False``, µs) text to ns, rounded half up below the ns:
    '0.002584' ms -> 2584. Null-like text is None; exponent notation goes through float."""
    s = text_cell(v)
    if s is None:
        return None
    neg = s.startswith("-")
    s = s.lstrip("+-")
    if "e" in s.lower() or "inf" in s.lower():
        x = float(s) * (1e6 if unit_ms else 1e3)
        return fit_ns(-x if neg else x)
    digits = 6 if unit_ms else 3
    whole, _, frac = s.partition(".")
    frac = (frac + "0" * 9)[: digits + 1]
    ns = int(whole or "0") * 10**digits + int(frac[:digits]) + (1 if frac[digits] >= "5" else 0)
    return fit_ns(-ns if neg else ns)
