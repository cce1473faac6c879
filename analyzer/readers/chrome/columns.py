"""Decoded Chrome-trace events to Arrow columns, one C-level pass per field.

These turn a block of events into Arrow columns with as little per-event Python as possible: one
``map(attrgetter(...))`` per field, then vectorised Arrow / numpy work. Filtering into tables
(slices, operators, ...) is done on the columns with Arrow masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...units import INT64_MAX, US_NULL_TOKENS, fit_ns, us_array_to_ns, us_text_or_bad_ns
from ..common.jsonfile import DECODE_ERRORS
from .stream import ANY, Event

_FIELDS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args")
GET = {f: attrgetter(f) for f in _FIELDS}


def field_values(events: list[Event], name: str) -> list[Any]:
    """The values of one field of every event, as a list (C-level loop)."""
    return list(map(GET[name], events))


def id_text(v: int | str | None) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else str(v)


class Codes(dict):  # type: ignore[type-arg]
    """value -> first-seen position, filled on lookup (``map(codes.__getitem__, values)``)."""

    def __missing__(self, key: Any) -> int:
        code = self[key] = len(self)
        return code


def id_column(values: list[int | str | None]) -> pa.Array:
    """pid / tid values (numbers and strings mixed, as Kineto writes them) as text. There are few
    distinct ids: each is turned into text once, the column is a dictionary decoded by Arrow."""
    try:
        numbers = pa.array(values, pa.int64())  # the usual case: integers (and None) only
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        codes = Codes()
        idx = pa.array(np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values)))
        text = pa.array([id_text(v) for v in codes], type=pa.string())
        return pa.DictionaryArray.from_arrays(idx, text).cast(pa.string())
    enc = pc.dictionary_encode(numbers)
    return pa.DictionaryArray.from_arrays(enc.indices, enc.dictionary.cast(pa.string())).cast(pa.string())


def times_ns(values: list[float | str | None], base_ns: int = 0) -> pa.Array:
    """Event ts/dur values (float µs or exact µs strings) to int64 ns; ``None`` stays null."""
    if not values:
        return pa.array([], type=pa.int64())
    try:
        fa = pa.array(values, type=pa.float64())  # floats, ints and None; a string raises
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return _text_or_mixed_times_ns(values, base_ns)
    if fa.null_count:
        arr = _with_base(us_array_to_ns(fa.fill_null(0.0).to_numpy()), base_ns)
        return pa.array(arr, type=pa.int64(), mask=fa.is_null().to_numpy(zero_copy_only=False))
    return pa.array(_with_base(us_array_to_ns(fa.to_numpy()), base_ns), type=pa.int64())


def _with_base(arr: np.ndarray, base_ns: int) -> np.ndarray:
    """Event times plus the trace's time base, except those already impossible (negative, or
    saturated by the conversion): they stay as they are, for the time check to name."""
    if base_ns:
        bad = (arr < 0) | (arr == INT64_MAX)
        if bad.any():
            return np.where(bad, arr, arr + base_ns)
        arr += base_ns
    return arr


_US_TEXT = r"^(?P<sign>-?)(?P<whole>\d{0,16})(?:\.(?P<frac>\d*))?$"
_TRIM = ' \t\r\n"'


def text_times_ns(values: pa.Array) -> pa.Array:
    """Exact µs decimal strings (torch_npu's ``"1736408883704643.212"``) to int64 ns, vectorised,
    value for value what ``units.us_text_or_bad_ns`` gives: half up on the 4th decimal, null for
    the null-like tokens; the rare text this pattern does not take (exponents, a '+' sign, 17+
    digits, text that is no number) goes through ``us_text_or_bad_ns`` itself."""
    s = pc.utf8_trim(values, _TRIM)
    s = pc.if_else(pc.is_in(s, value_set=_NULL_TEXT), pa.scalar(None, pa.string()), s)
    m = pc.extract_regex(s, _US_TEXT)
    whole = pc.struct_field(m, "whole")
    frac_raw = pc.struct_field(m, "frac")
    ok = pc.and_(pc.is_valid(m), pc.or_(pc.not_equal(whole, ""), pc.not_equal(pc.fill_null(frac_raw, ""), "")))
    frac = pc.utf8_rpad(pc.fill_null(frac_raw, ""), 4, "0")
    digits = pc.binary_join_element_wise(
        pc.if_else(pc.equal(whole, ""), "0", whole), pc.utf8_slice_codeunits(frac, 0, 3), ""
    )
    try:
        ns = pc.cast(pc.if_else(ok, digits, pa.scalar(None, pa.string())), pa.int64())
    except pa.ArrowInvalid:  # beyond int64 ns: value by value, as before
        return pa.array([us_text_or_bad_ns(v) for v in values.to_pylist()], pa.int64())
    ns = pc.add(ns, pc.cast(pc.greater_equal(pc.utf8_slice_codeunits(frac, 3, 4), "5"), pa.int64()))
    ns = pc.if_else(pc.equal(pc.struct_field(m, "sign"), "-"), pc.negate(ns), ns)
    todo = pc.and_(pc.is_valid(s), pc.invert(pc.fill_null(ok, False)))
    if not pc.any(todo).as_py():
        return ns
    out = ns.to_pylist()
    for i in pc.indices_nonzero(todo).to_pylist():
        out[i] = us_text_or_bad_ns(values[i].as_py())
    return pa.array(out, pa.int64())


_NULL_TEXT = pa.array(sorted(US_NULL_TOKENS), pa.string())


def _text_or_mixed_times_ns(values: list[float | str | None], base_ns: int) -> pa.Array:
    try:
        text = pa.array(values, type=pa.string())  # strings and None only; a number raises
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return _mixed_times_ns(values, base_ns)
    ns = text_times_ns(text)
    if not base_ns:
        return ns
    # as _with_base: a time already impossible (negative, saturated) stays as it is, to be named
    bad = pc.fill_null(pc.or_(pc.less(ns, 0), pc.greater_equal(ns, INT64_MAX)), False)
    return pc.if_else(bad, ns, pc.add(ns, base_ns))


def _mixed_times_ns(values: list[float | str | None], base_ns: int) -> pa.Array:
    """Numbers and strings in one list (rare): value by value."""
    out: list[int | None] = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            ns = us_text_or_bad_ns(v) if isinstance(v, str) else int(us_array_to_ns(np.array([float(v)]))[0])
            out.append(None if ns is None else ns if ns < 0 or ns >= INT64_MAX else fit_ns(ns + base_ns))
    return pa.array(out, type=pa.int64())


def durations_ns(values: list[float | str | None]) -> pa.Array:
    """Event durations to int64 ns; an absent duration (instant events) is 0."""
    try:
        fa = pa.array(values, type=pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        try:
            text = pa.array(values, type=pa.string())  # strings and None only
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            return _mixed_times_ns([0.0 if v is None else v for v in values], 0)
        ns = text_times_ns(text)  # a null-like string stays null; an absent duration is 0
        return pc.if_else(pc.is_null(text), pa.scalar(0, pa.int64()), ns) if text.null_count else ns
    if fa.null_count:
        fa = fa.fill_null(0.0)
    return pa.array(us_array_to_ns(fa.to_numpy()), type=pa.int64())


def raw_text_array(raws: list[Any]) -> pa.Array:
    """Raw JSON pieces (``msgspec.Raw`` / bytes; empty = absent) as one string array, without a
    Python string per value: the bytes are joined once and the offsets computed with numpy."""
    n = len(raws)
    if n == 0:
        return pa.array([], type=pa.string())
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    data = b"".join(raws)
    wide = len(data) >= 1 << 31  # 32-bit offsets unless the values hold 2 GB or more
    offsets = np.zeros(n + 1, dtype=np.int64 if wide else np.int32)
    np.cumsum(lens, out=offsets[1:])
    present = lens > 0
    validity = None if present.all() else pa.array(present).buffers()[1]
    kind = pa.large_string() if wide else pa.string()
    arr = pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
    try:
        arr.validate(full=True)  # valid UTF-8
    except pa.ArrowInvalid:
        return pa.array([bytes(r).decode("utf-8", "replace") if len(r) else None for r in raws], type=pa.string())
    return arr.cast(pa.string()) if wide else arr


def raw_json_column(events: list[Event]) -> pa.Array:
    return raw_text_array(field_values(events, "args"))


@dataclass
class EventColumns:
    """The fields of a block of events as Arrow arrays (one entry per event, in file order)."""

    name: pa.Array
    cat: pa.Array
    pid: pa.Array
    tid: pa.Array
    ts_ns: pa.Array
    dur_ns: pa.Array
    args: pa.Array
    event_id: pa.Array

    @classmethod
    def of(
        cls, events: list[Event], first_event_id: int = 0, base_ns: int = 0, event_ids: np.ndarray | None = None
    ) -> EventColumns:
        """Columns of ``events``; their ids are ``first_event_id`` + position, or ``event_ids``."""
        n = len(events)
        ids = np.arange(first_event_id, first_event_id + n, dtype=np.int64) if event_ids is None else event_ids
        return cls(
            name=pa.array(field_values(events, "name"), type=pa.string()),
            cat=pa.array(field_values(events, "cat"), type=pa.string()),
            pid=id_column(field_values(events, "pid")),
            tid=id_column(field_values(events, "tid")),
            ts_ns=times_ns(field_values(events, "ts"), base_ns),
            dur_ns=durations_ns(field_values(events, "dur")),
            args=raw_json_column(events),
            event_id=pa.array(ids, type=pa.int64()),
        )

    def slices(self, mask: pa.Array | None = None) -> dict[str, pa.Array]:
        """Columns of the slices table (for the rows where ``mask`` is true)."""
        cols = {
            "pid": self.pid,
            "tid": self.tid,
            "name": self.name,
            "category": self.cat,
            "ts_ns": self.ts_ns,
            "dur_ns": self.dur_ns,
            "event_id": self.event_id,
            "args": self.args,
        }
        if mask is None:
            return cols
        return {k: v.filter(mask) for k, v in cols.items()}


def counter_columns(events: list[Event], base_ns: int = 0) -> dict[str, pa.Array] | None:
    """Long-form columns of C (counter) events: one row per numeric series of each event's args
    (``{"MHz": 1800}`` -> series MHz), in event then key order. None when no event has a numeric value.
    The args are decoded in one call and fanned out with C-level maps, not event by event."""
    objs = [a if type(a) is dict else _NO_ARGS for a in _decode_raws(field_values(events, "args"))]
    sizes = np.fromiter(map(len, objs), dtype=np.int64, count=len(objs))
    items = list(chain.from_iterable(map(dict.items, objs)))  # (series, value) pairs
    if not items:
        return None
    keys, vals = zip(*items)
    numeric = list(map(_NUMBER_TYPES.__contains__, map(type, vals)))  # bools are not numbers here
    if not any(numeric):
        return None
    at = np.repeat(np.arange(len(objs)), sizes)[np.flatnonzero(numeric)]
    rows = list(map(events.__getitem__, at.tolist()))  # the event of each row
    numbers = list(compress(vals, numeric))
    try:
        value = pa.array(numbers, pa.float64())
    except (pa.ArrowInvalid, OverflowError):  # an integer no double holds exactly: rounded as Python does
        value = pa.array([float(v) for v in numbers], pa.float64())
    return {
        "pid": id_column(field_values(rows, "pid")),
        "name": pa.array(field_values(rows, "name"), pa.string()),
        "series": pa.array(list(compress(keys, numeric)), pa.string()),
        "ts_ns": times_ns(field_values(rows, "ts"), base_ns),
        "value": value,
    }


_NO_ARGS: dict[str, Any] = {}
_NUMBER_TYPES = frozenset((int, float))


def _decode_raws(raws: list[Any]) -> list[Any]:
    """Each raw JSON value (``msgspec.Raw``; empty = absent) decoded, None when absent or not JSON:
    in one call when every present value decodes, else value by value."""
    n = len(raws)
    present = np.fromiter(map(len, raws), dtype=np.int64, count=n) > 0
    values = list(compress(raws, present.tolist()))
    try:
        decoded = ANY.decode_lines(b"\n".join(values)) if values else []
    except DECODE_ERRORS:
        decoded = None
    if decoded is None or len(decoded) != len(values):
        decoded = [_decode_one(ANY, v) for v in values]
    if len(values) == n:
        return decoded
    out: list[Any] = [None] * n
    for i, v in zip(np.flatnonzero(present).tolist(), decoded):
        out[i] = v
    return out


def decode_args(args: pa.Array, decoder: msgspec.json.Decoder) -> list[Any]:
    """The raw JSON ``args`` of some events (a column of ``EventColumns.args``; null = absent) through
    a typed msgspec ``decoder`` in one call: the values lie back to back in the column's buffer,
    which msgspec reads as a sequence of JSON documents. An absent value is None; when the batch
    does not decode (one args object of another shape), value by value, None for one that does not."""
    n = len(args)
    if n == 0:
        return []
    present = args.filter(args.is_valid()) if args.null_count else args
    out = _decode_buffer(present, decoder)
    if out is None:
        out = [_decode_one(decoder, v) for v in present.to_pylist()]
    if not args.null_count:
        return out
    full: list[Any] = [None] * n
    for i, v in zip(np.flatnonzero(args.is_valid().to_numpy(zero_copy_only=False)).tolist(), out):
        full[i] = v
    return full


def _decode_buffer(arr: pa.Array, decoder: msgspec.json.Decoder) -> list[Any] | None:
    if not len(arr):
        return []
    wide = arr.type == pa.large_string()
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)
    start, end = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    try:
        out = decoder.decode_lines(memoryview(arr.buffers()[2])[start:end])
    except DECODE_ERRORS:
        return None
    return out if len(out) == len(arr) else None


def _decode_one(decoder: msgspec.json.Decoder, text: str) -> Any:
    try:
        return decoder.decode(text)
    except DECODE_ERRORS:
        return None
