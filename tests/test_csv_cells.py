"""CSV cells converted in Python (short columns of plain cells) give what the Arrow path gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from analyzer.readers.common import csvfile
from analyzer.readers.common.csvfile import CsvTable

# cells the profilers write, and cells they should not: each is tried alone and among plain ones
ODD = [
    "",
    " ",
    "N/A",
    "NA",
    "n/a",
    "-",
    "None",
    "null",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e3",
    "1E+05",
    "+1",
    "+1.5",
    "0x10",
    "1_000",
    ".",
    "-.",
    "-",
    ".5",
    "-.5",
    "5.",
    "-0",
    "-0.0",
    "-0.0005",
    "0.0004",
    "00012",
    "1.2.3",
    "12345678901234567890",
    "9223372036854775807",
    "4294967295",
    "-9223372036854775808",
    "1234567890123456.5",
    '"12.5"',
    "\t7.25\t",
    "\x0b3",
    "\xa04",
    "١٢",
    "12 ",
    " -3.0001",
    "3.99999",
    "0.0005",
    "999999999999999.9995",
    "abc",
    "1,5",
    "1.5e-3",
]


def _plain(rng: random.Random) -> str:
    whole = str(rng.randrange(10 ** rng.randint(0, 15)))
    frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 7)))
    sign = "-" if rng.random() < 0.2 else ""
    cell = f"{sign}{whole}.{frac}" if frac or rng.random() < 0.3 else f"{sign}{whole}"
    return rng.choice(["{}", "{}\t", '"{}"', " {} "]).format(cell)


def _columns() -> list[list[str]]:
    rng = random.Random(13)
    cols = [[_plain(rng) for _ in range(rng.randint(1, 40))] for _ in range(200)]
    cols += [[str(rng.randrange(-(10**12), 10**12)) for _ in range(rng.randint(1, 40))] for _ in range(100)]
    cols += [[_plain(rng) for _ in range(5)] + [odd] + [_plain(rng) for _ in range(5)] for odd in ODD]
    cols += [[odd] for odd in ODD]
    cols += [["N/A", "", "12.5"], ["4294967295", "7"], ["-", "N/A"]]
    return cols


def _convert(col: list[str], kind: str, short: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list[str]]:
    monkeypatch.setattr(csvfile, "SHORT_COLUMN", short)
    t = CsvTable(Path("x.csv"), ["x"], {"x": list(col)}, {}, len(col))
    return getattr(t, kind)("x"), t.warnings


@pytest.mark.parametrize("kind", ["ns_from_us", "floats", "ints"])
def test_short_columns_convert_as_arrow_does(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain_path = 0
    for col in _columns():
        arrow = _convert(col, kind, 0, monkeypatch)
        ours = _convert(col, kind, 1 << 20, monkeypatch)
        assert repr(ours) == repr(arrow), col  # repr: -0.0 against 0.0, nan, int against float
        vec = {"ns_from_us": csvfile.ns_from_us_array, "floats": csvfile._float_array, "ints": csvfile._int_array}
        plain_path += csvfile._plain_cells(col, vec[kind]) is not None
    assert plain_path >= 100  # the random plain columns took the Python path (at least those of integers)
