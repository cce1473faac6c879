"""Tolerant CSV reading for the CSV files profilers write (torch_npu, msprof, MindSpore).

What these files do (docs/formats.md §1.4, §7.2-7.3): Python ``csv.writer`` dialect, CRLF or LF line
ends, sometimes a UTF-8 BOM, quoted cells with embedded newlines (``Call Stack``), literal quotes
inside shape values (tripled quotes in the file, the cell holds ``"32,3"``), timestamps as exact
µs strings followed by a TAB, ``N/A`` / empty / UINT32_MAX sentinels, columns renamed between versions. So:

- columns are found by header name (case and spacing ignored), through a table of aliases, never by
  position; a file whose header lacks a required column is rejected with an ``InputError`` that names
  the expected columns (a file that is not what its name says);
- a last row cut mid-row (fewer cells than the header, or no final newline) is dropped with a warning,
  as is any other row whose cell count does not match the header;
- an empty file or a file that cannot be opened is an ``InputError``; a header-only file reads as
  zero rows with a warning;
- values stay strings here; the ``*_column`` helpers convert them (exact ns from µs strings, floats,
  integers with sentinels as NULL) and count cells they could not read.
"""

from __future__ import annotations

import codecs
import csv
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import problem
from ...units import to_float, to_int, us_text_to_ns
from .cells import NULL_TOKENS

csv.field_size_limit(min(sys.maxsize, (1 << 31) - 1))

# bytes that are not UTF-8 are replaced (U+FFFD) and counted, so the file's outcome can say so
_DECODE_ERRORS = [0]
_COUNTING_REPLACE = "rankscope-count-replace"


def _count_replace(exc: UnicodeError) -> tuple[str, int]:
    _DECODE_ERRORS[0] += 1
    return "\ufffd", exc.end  # type: ignore[attr-defined]


codecs.register_error(_COUNTING_REPLACE, _count_replace)


def norm_header(name: str) -> str:
    """Header cell -> comparison key: BOM, quotes and outer spaces removed, case folded, spaces collapsed."""
    s = name.replace("\ufeff", "").strip().strip('"').strip()
    return " ".join(s.split()).casefold()


_WHAT = {"µs values": "us", "numbers": "numbers", "integers": "integers"}  # what a column holds: its template


def _cells_not(what: str, bad: int, key: str, first_bad: Any) -> str:
    """The problem of ``bad`` cells of column ``key`` that are not ``what`` (the first: ``first_bad``)."""
    return problem(f"cells_not.{_WHAT[what]}", n=bad, column=repr(key), example=repr(first_bad))


@dataclass
class CsvTable:
    """The rows of one CSV file, by column, with the header as written."""

    path: Path
    header: list[str]
    columns: dict[str, list[str]]  # canonical key -> cells (only the columns asked for and found)
    extra: dict[str, list[str]]  # header as written -> cells, for columns not asked for
    n_rows: int
    warnings: list[str] = field(default_factory=list)
    first_row: int = 0  # index of the chunk's first row in the file (iter_csv)

    def has(self, key: str) -> bool:
        return key in self.columns

    def get(self, key: str) -> list[str | None]:
        """Cells of a column, or a column of None when the file does not have it."""
        col = self.columns.get(key)
        return list(col) if col is not None else [None] * self.n_rows

    def text(self, key: str) -> list[str | None]:
        """Cells with N/A / empty as None and outer whitespace removed (quotes kept: shapes are quoted)."""
        col = self.columns.get(key)
        if col is None:
            return [None] * self.n_rows
        s = pc.utf8_trim_whitespace(pa.array(col, pa.string()))
        return pc.if_else(pc.is_in(s, value_set=_NULL_SET), pa.scalar(None, pa.string()), s).to_pylist()

    def ns_from_us(self, key: str) -> list[int | None]:
        """Exact ns from µs decimal strings (never through float64), rounded half up below the ns."""
        return self._vector(key, ns_from_us_array, us_text_to_ns, "µs values")

    def floats(self, key: str) -> list[float | None]:
        return self._vector(key, _float_array, to_float, "numbers")

    def ints(self, key: str) -> list[int | None]:
        """Integers; UINT32/UINT64/INT64 max sentinels ('no value') as None."""
        return self._vector(key, _int_array, to_int, "integers")

    def _vector(self, key: str, vec: Any, fn: Any, what: str) -> list[Any]:
        """Vectorised conversion (pyarrow) with the per-cell function for whatever it cannot do; a
        short column of plain cells is converted cell by cell instead (``_plain_cells``), to the same values."""
        col = self.columns.get(key)
        if col is None:
            return [None] * self.n_rows
        if len(col) <= SHORT_COLUMN:
            plain = _plain_cells(col, vec)
            if plain is not None:
                return plain
        try:
            arr, todo = vec(col)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            return self._convert(key, fn, what)
        out = arr.to_pylist()
        if todo:
            bad = 0
            first_bad = None
            for i in todo:
                try:
                    out[i] = fn(col[i])
                except (ValueError, TypeError, ArithmeticError):
                    bad += 1
                    first_bad = first_bad if first_bad is not None else col[i]
                    out[i] = None
            if bad:
                self.warnings.append(_cells_not(what, bad, key, first_bad))
        return out

    def _convert(self, key: str, fn, what: str) -> list:  # type: ignore[no-untyped-def]
        col = self.columns.get(key)
        if col is None:
            return [None] * self.n_rows
        out = []
        bad = 0
        first_bad = None
        for v in col:
            if v is None:
                out.append(None)
                continue
            try:
                out.append(fn(v))
            except (ValueError, TypeError, ArithmeticError):
                bad += 1
                if first_bad is None:
                    first_bad = v
                out.append(None)
        if bad:
            self.warnings.append(_cells_not(what, bad, key, first_bad))
        return out


_NULL_SET = pa.array(sorted(NULL_TOKENS), pa.string())
_DECIMAL = r"^(?P<sign>-?)(?P<whole>\d*)(?:\.(?P<frac>\d*))?$"
_SENTINELS = pa.array([4294967295, 9223372036854775807], pa.int64())


def _clean(values: list[str]) -> pa.Array:
    """Cells as an Arrow string array: outer spaces, TABs and quotes trimmed, N/A-like tokens null."""
    s = pc.utf8_trim(pa.array(values, pa.string()), ' \t\r\n"')
    return pc.if_else(pc.is_in(s, value_set=_NULL_SET), pa.scalar(None, pa.string()), s)


def _leftovers(s: pa.Array, ok: pa.Array) -> list[int]:
    """Indices of non-null cells the vectorised path could not convert."""
    need = pc.and_(pc.is_valid(s), pc.invert(pc.fill_null(ok, False)))
    return pc.indices_nonzero(need).to_pylist() if pc.any(need).as_py() else []


def ns_from_us_array(values: list[str]) -> tuple[pa.Array, list[int]]:
    s = _clean(values)
    m = pc.extract_regex(s, _DECIMAL)
    whole = pc.struct_field(m, "whole")
    frac = pc.utf8_rpad(pc.fill_null(pc.struct_field(m, "frac"), ""), 4, "0")
    ok = pc.and_(pc.is_valid(m), pc.or_(pc.not_equal(whole, ""), pc.not_equal(pc.struct_field(m, "frac"), "")))
    whole = pc.if_else(pc.equal(whole, ""), "0", whole)
    digits = pc.binary_join_element_wise(whole, pc.utf8_slice_codeunits(frac, 0, 3), "")
    digits = pc.if_else(ok, digits, pa.scalar(None, pa.string()))
    ns = pc.cast(digits, pa.int64())
    up = pc.greater_equal(pc.utf8_slice_codeunits(frac, 3, 4), "5")
    ns = pc.add(ns, pc.cast(up, pa.int64()))
    ns = pc.if_else(pc.equal(pc.struct_field(m, "sign"), "-"), pc.negate(ns), ns)
    return ns, _leftovers(s, ok)


def _float_array(values: list[str]) -> tuple[pa.Array, list[int]]:
    return pc.cast(_clean(values), pa.float64()), []


def _int_array(values: list[str]) -> tuple[pa.Array, list[int]]:
    v = pc.cast(_clean(values), pa.int64())
    return pc.if_else(pc.is_in(v, value_set=_SENTINELS), pa.scalar(None, pa.int64()), v), []


# A column of at most this many cells is converted in Python when every cell is plain: the ~25
# Arrow calls of ``ns_from_us_array`` cost ~0.5-1 ms whatever the length (a profiler's CSVs hold
# tens to hundreds of rows: a torch_npu Level1 rank converts ~80 such columns), a plain cell ~1 µs.
SHORT_COLUMN = 512
_CLEAN = ' \t\r\n"'  # what ``_clean`` trims
# plain cells: the values the vectorised functions give them are certain (ASCII digits, no
# exponent, few enough digits that no int64 overflows); any other cell sends the column to them
_PLAIN_US = re.compile(r"(-?)([0-9]{0,15})(?:\.([0-9]*))?")
_PLAIN_FLOAT = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{0,15})?")
_PLAIN_INT = re.compile(r"-?[0-9]{1,18}")


def _plain_ns(s: str) -> int:
    m = _PLAIN_US.fullmatch(s)
    if m is None:
        raise ValueError(s)
    sign, whole, frac = m.groups()
    if not whole and not frac:
        raise ValueError(s)
    frac = frac or ""
    ns = int((whole or "0") + frac[:3].ljust(3, "0")) + int(len(frac) > 3 and frac[3] >= "5")
    return -ns if sign else ns


def _plain_float(s: str) -> float:
    if _PLAIN_FLOAT.fullmatch(s) is None:
        raise ValueError(s)
    return float(s)


def _plain_int(s: str) -> int | None:
    if _PLAIN_INT.fullmatch(s) is None:
        raise ValueError(s)
    v = int(s)
    return None if v == 4294967295 else v  # the sentinels of ``_int_array`` (INT64_MAX is not plain)


_PLAIN_BY_VECTOR = {ns_from_us_array: _plain_ns, _float_array: _plain_float, _int_array: _plain_int}


def _plain_cells(values: list[str], vec: Any) -> list[Any] | None:
    """The cells converted as ``vec`` (``ns_from_us_array``, ``_float_array`` or ``_int_array``)
    converts them, in Python; None when a cell is not plain (``_PLAIN_*``): ``vec`` then does it."""
    conv = _PLAIN_BY_VECTOR.get(vec)
    if conv is None:
        return None
    out: list[Any] = []
    try:
        for v in values:
            s = v.strip(_CLEAN) if v is not None else None
            out.append(None if s is None or s in NULL_TOKENS else conv(s))
    except ValueError:
        return None
    return out


def read_csv(
    path: Path,
    kind: str,
    columns: Mapping[str, Iterable[str]],
    required: Iterable[str] = (),
    keep_extra: bool = False,
) -> CsvTable:
    """Read all of ``path`` (a ``kind`` file, e.g. "kernel_details.csv") by header name.

    ``columns`` maps a canonical key to the header names that mean it (aliases, compared with
    :func:`norm_header`); ``required`` keys must be present or the file is rejected. For big files
    use :func:`iter_csv`, which yields the same in chunks of rows.
    """
    chunks = list(iter_csv(path, kind, columns, required, keep_extra, chunk_rows=1 << 62))
    return chunks[0]


def iter_csv(
    path: Path,
    kind: str,
    columns: Mapping[str, Iterable[str]],
    required: Iterable[str] = (),
    keep_extra: bool = False,
    chunk_rows: int = 200_000,
) -> Iterator[CsvTable]:
    """:func:`read_csv` in chunks of at most ``chunk_rows`` rows (``first_row`` says where each
    starts); always yields at least one chunk, the last one carrying the file-level warnings."""
    wanted: dict[str, str] = {}
    for key, aliases in columns.items():
        for a in aliases:
            wanted[norm_header(a)] = key
    try:
        size = path.stat().st_size
        fh = open(path, encoding="utf-8", errors=_COUNTING_REPLACE, newline="")  # noqa: SIM115 - `with fh` below
    except OSError as exc:
        raise InputError(str(path), problem("cannot_read_kind", kind=kind, detail=exc.strerror or exc)) from exc
    decode_errors_before = _DECODE_ERRORS[0]
    if size == 0:
        fh.close()
        raise InputError(str(path), problem("empty_zero_kind", kind=kind))
    with fh:
        try:
            tail = _tail(path)
            ends_with_newline = tail[-1:] in (b"\n", b"\r")
            reader = csv.reader(fh)
            header = next(reader, None)
            while header is not None and not any(c.strip() for c in header):
                header = next(reader, None)  # blank lines before the header
            if header is None:
                raise InputError(str(path), problem("empty_no_header", kind=kind))
            if header and header[0].startswith("\ufeff"):
                header[0] = header[0][1:]
            keys = [norm_header(h) for h in header]
            first = "".join(header)
            if any((ch < " " and ch != "\t") or ch == "\ufffd" for ch in first):
                raise InputError(str(path), problem("csv_binary", kind=kind))
            if sum(1 for k in keys if k) == 0:
                raise InputError(str(path), problem("csv_no_header", kind=kind))
            index: dict[str, int] = {}
            extra_idx: dict[str, int] = {}
            for i, k in enumerate(keys):
                key = wanted.get(k)
                if key is not None and key not in index:
                    index[key] = i
                elif keep_extra and k and key is None:
                    extra_idx.setdefault(header[i].strip(), i)
            missing = [k for k in required if k not in index]
            if missing:
                expected = ", ".join(_first_alias(columns, k) for k in required)
                found = ", ".join(h.strip() for h in header[:8]) + (", ..." if len(header) > 8 else "")
                raise InputError(
                    str(path),
                    problem(
                        "csv_columns",
                        kind=kind,
                        missing=", ".join(_first_alias(columns, k) for k in missing),
                        expected=expected,
                        found=found,
                    ),
                )
            clean_header = [h.strip() for h in header]
            ncols = len(header)
            warnings: list[str] = []
            bad_rows: list[int] = []
            total = 0
            buf: list[list[str]] = []

            def flush() -> CsvTable:
                # transpose the buffered rows at C speed, keep the wanted columns
                cols = list(zip(*buf)) if buf else [()] * ncols
                chunk = CsvTable(
                    path,
                    clean_header,
                    {k: list(cols[i]) for k, i in index.items()},
                    {h: list(cols[i]) for h, i in extra_idx.items()},
                    len(buf),
                    [],
                    total,
                )
                buf.clear()
                return chunk

            held: list[str] | None = None  # one row of look-ahead: the last row may be cut
            record = 1  # the number of the last record checked (the header is record 1)
            while True:
                # rows in blocks (C-level reads), each block as long as it takes to fill the chunk:
                # a chunk is handed out at the same row as one row at a time would
                block = list(islice(reader, chunk_rows - len(buf) + (held is None)))
                if not block:
                    break
                rows = block if held is None else [held, *block]
                held = rows.pop()
                if set(map(len, rows)) <= {ncols}:
                    buf += rows
                else:
                    for i, row in enumerate(rows, record + 1):
                        if len(row) == ncols:
                            buf.append(row)
                        elif any(c.strip() for c in row):
                            bad_rows.append(i)
                record += len(rows)
                if len(buf) >= chunk_rows:
                    chunk = flush()
                    total += chunk.n_rows
                    yield chunk
        except csv.Error as exc:
            raise InputError(str(path), problem("csv_unreadable", kind=kind, detail=exc)) from exc
        finally:
            replaced = _DECODE_ERRORS[0] - decode_errors_before
    if held is not None and unclosed_quote(held, tail):
        lines = sum(c.count("\n") for c in held)
        warnings.append(problem("quote_not_closed", record=record + 1, lines=lines))
        held = None
    if held is not None:
        n = len(held)
        if not ends_with_newline:
            # torch_npu ends every row with CRLF: no final newline means the write was cut
            ends = problem("ends_mid_row", n=n, ncols=ncols) if n != ncols else problem("ends_mid_row_newline")
            warnings.append(ends)
        elif n != ncols:
            if any(c.strip() for c in held):
                bad_rows.append(record + 1)
        else:
            buf.append(held)
    chunk = flush()
    total += chunk.n_rows
    if bad_rows:
        sample = ", ".join(str(x) for x in bad_rows[:3])
        more = ", ..." if len(bad_rows) > 3 else ""
        warnings.append(problem("cell_count", n=len(bad_rows), ncols=ncols, records=sample + more))
    if replaced:
        warnings.append(problem("bytes_replaced", n=replaced))
    if total == 0 and not bad_rows and held is None:
        warnings.append(problem("header_only"))
    chunk.warnings.extend(warnings)
    yield chunk


def _first_alias(columns: Mapping[str, Iterable[str]], key: str) -> str:
    for a in columns[key]:
        return a
    return key


def _tail(path: Path) -> bytes:
    """The file's last bytes."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 8))
        return f.read()


def unclosed_quote(last: list[str], tail: bytes) -> bool:
    """Whether the last record ran to the end of the file inside a quoted cell (a quote opened and
    never closed swallows every line after it into that cell): its last cell spans lines and the
    file does not end with the closing quote."""
    return bool(last) and ("\n" in last[-1] or "\r" in last[-1]) and not tail.rstrip(b"\r\n").endswith(b'"')
