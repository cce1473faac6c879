"""Unit conversions, applied once at ingest: times to integer ns, memory to bytes, bandwidth to B/s."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

KIB = 1024
# Ascend communication files (communication.json, communication_matrix.json, analysis.db) write
# sizes in decimal MB: a packet of "2.064384" MB in a Size Distribution is the 2 064 384-byte
# size(Byte) of the HCCL tasks that carried it. Their "GB/s" is that MB per ms, i.e. 10^9 B/s.
# (Memory files are different: their MB is 1024^2 bytes, KB 1024.)
COMM_MB = 1_000_000
ASCEND_GB_PER_S = 1_000_000_000
US_NULL_TOKENS = frozenset({"", "N/A", "NA", "n/a", "None", "null", "nan", "NaN"})  # us_text_to_ns: None


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
    if "e" in s or "E" in s:
        v = float(s)
        return round(-v * 1000 if neg else v * 1000)
    whole, _, frac = s.partition(".")
    frac = (frac + "000")[:3] if len(frac) <= 3 else frac
    if len(frac) > 3:  # more than ns precision: round half up on the 4th digit
        ns = int((whole or "0") + frac[:3]) + (1 if frac[3] >= "5" else 0)
    else:
        ns = int((whole or "0") + frac)
    return -ns if neg else ns


def _scaled(value: Any, factor: float) -> int | None:
    """round(value * factor); None for missing, boolean, NaN or unparseable cells."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return None
    return round(v * factor)


def ms_to_ns(value: Any) -> int | None:
    return _scaled(value, 1_000_000)


def mb_to_bytes(value: Any) -> int | None:
    """MB as written in Ascend communication files (10^6 bytes, see COMM_MB) to bytes."""
    return _scaled(value, COMM_MB)


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
    """Float µs (relative or < 2^53) to int64 ns, exact to the ns for values written with 3 decimals."""
    whole = np.floor(values)
    frac = np.rint((values - whole) * 1000.0)
    return whole.astype(np.int64) * 1000 + frac.astype(np.int64)
