"""Unit conversions, applied once at ingest: times to integer ns, memory to bytes, bandwidth to B/s."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MIB = 1024 * 1024
KIB = 1024
GB_PER_S = 1e9  # GB/s as written by Ascend tools is 10^9 bytes per second
_NULL_TOKENS = {"", "N/A", "NA", "n/a", "None", "null", "nan", "NaN"}


def us_text_to_ns(text: str | None) -> int | None:
    """An exact µs decimal string ('1736408883704643.212\\t') to integer ns, without float rounding."""
    if text is None:
        return None
    s = text.strip().strip('"').strip()
    if s in _NULL_TOKENS:
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


def us_float_to_ns(value: float | None) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(value * 1000)


def ms_to_ns(value: float | None) -> int | None:
    if value is None:
        return None
    return round(float(value) * 1_000_000)


def mb_to_bytes(value: float | None) -> int | None:
    if value is None:
        return None
    return round(float(value) * MIB)


def kb_to_bytes(value: float | None) -> int | None:
    if value is None:
        return None
    return round(float(value) * KIB)


def gbps_to_bytes_per_s(value: float | None) -> float | None:
    if value is None:
        return None
    return float(value) * GB_PER_S


def to_float(text: str | None) -> float | None:
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s in _NULL_TOKENS:
        return None
    return float(s)


def to_int(text: str | None, sentinel_null: bool = True) -> int | None:
    """Integer cell; UINT32_MAX / UINT64_MAX sentinels ('no value') become None."""
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s in _NULL_TOKENS:
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


def us_text_array_to_ns(arr: pa.Array) -> pa.Array:
    """Vectorised us_text_to_ns for a string array of plain decimals ('123.456\\t'); nulls stay null."""
    s = pc.utf8_trim(arr, characters=' \t"')
    parts = pc.extract_regex(s, r"^(?P<w>-?\d*)(?:\.(?P<f>\d*))?$")
    whole = pc.struct_field(parts, "w")
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(pc.struct_field(parts, "f"), 3, "0"), 0, 3)
    whole = pc.if_else(pc.equal(whole, ""), "0", whole)
    return pc.cast(pc.binary_join_element_wise(whole, frac, ""), pa.int64())
