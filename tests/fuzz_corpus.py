"""A seeded fuzz corpus for `analyze ingest`, made from our own samples of every format, and the
verdict on each case.

A case is (format, target file, mutation, seed): the format's sample folder is copied, one of its
files is mutated, and the copy is ingested in this process by the real ``ingest()`` (discovery,
the readers, the commit into a real store). Its outcome is one of:

- ``ok``: the mutated file was read without a problem (the mutation hit nothing that matters, or
  left valid input);
- ``warned``: rows kept, the file has a warning naming what was dropped;
- ``file_error``: the file is an error with its reason, the other files of the run are ingested;
- ``nothing``: nothing could be ingested (``NothingIngestedError``, exit code 1, problems listed);

and the forbidden ones, which the suite asserts never happen:

- ``traceback``: an exception out of ``ingest()`` (the whole ingest crashed);
- ``hang``: the case took longer than the bound;
- ``caught_crash``: a reader failed on an exception of its own that was recorded as the file's
  error (``KeyError: 'x'``, ``reader kineto failed: OverflowError: ...``): not a reason a user can
  act on;
- ``silent``: a time value of a row was made impossible (negative, after 2100, overflowing 64-bit
  ns, inf / NaN) and the file was read as ``ok`` with different stored times (``*_ns`` columns, or
  row counts) than the clean sample: a row was changed or lost without a word.

Mutations: truncation, flipped bytes, a broken structure byte, inf / NaN / huge / negative
numbers, impossible time values (checked as above), wrong types, deep nesting, empty files, wrong
encodings and bytes that are not UTF-8, gzip bombs and cut gzip streams, renamed files, foreign
content, a db's tables dropped or its pages damaged, files the process may not read.

``python bench/fuzz_ingest.py`` runs 1 000+ cases (``cases``) and prints the counts per outcome and
format; ``tests/test_fuzz_ingest.py`` runs ``covering``: every mutation and every format once, seeded.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUTCOMES = ("ok", "warned", "file_error", "nothing", "traceback", "hang", "caught_crash", "silent")
FORBIDDEN = ("traceback", "hang", "caught_crash", "silent")


@dataclass(frozen=True)
class Source:
    """A format's sample: its folder (relative to the repository) and the files worth mutating."""

    folder: str
    targets: tuple[str, ...]  # glob patterns relative to the folder


SOURCES: dict[str, Source] = {
    "kineto_json": Source("sample_data/kineto_gloo_2rank/rank_0", ("window_step2/*.pt.trace.json",)),
    "kineto_json_gz": Source("tests/data/kineto_cpu_only", ("*.json.gz",)),
    "collector_sidecars": Source(
        "sample_data/kineto_gloo_2rank/rank_1", ("window_step2/rankscope_window.json", "rankscope_scalars.jsonl")
    ),
    "torch_npu_text": Source(
        "tests/data/torch_npu_text_level0",
        ("*/ASCEND_PROFILER_OUTPUT/*.csv", "*/ASCEND_PROFILER_OUTPUT/*.json", "*/profiler_*.json"),
    ),
    "torch_npu_json": Source(
        "tests/data/torch_npu_text_level2", ("*/ASCEND_PROFILER_OUTPUT/*.json", "*/ASCEND_PROFILER_OUTPUT/*.csv")
    ),
    "torch_npu_db": Source("tests/data/torch_npu_db_level0", ("*/ASCEND_PROFILER_OUTPUT/*.db", "*/profiler_*.json")),
    "mindspore_cpu": Source(
        "sample_data/mindspore_cpu_2rank",
        ("vm_28890_*/ASCEND_PROFILER_OUTPUT/trace_view.json", "vm_28890_*/FRAMEWORK/*"),
    ),
    "mindspore_npu": Source("tests/data/mindspore_npu_constructed", ("node-a_4000_*/*/*", "node-a_4000_*/*.json")),
    "mindspore_legacy": Source("tests/data/mindspore_legacy_alexnet", ("profiler/*",)),
    "msprof_text": Source("tests/data/msprof_cann8", ("*/mindstudio_profiler_output/*",)),
    "msprof_db": Source("tests/data/msprof_db", ("*/*.db",)),
    # msprof's JSON timeline cut in slices (msprof_slice_0/1), with counters: rows staged across files
    "msprof_json": Source("tests/data/msprof_constructed", ("*/mindstudio_profiler_output/*",)),
    "msprof_legacy_timeline": Source(
        "tests/data/msprof_legacy_timeline", ("PROF_*_COJ*/device_0/timeline/*.json", "PROF_*_COJ*/device_0/*.0")
    ),
}

# impossible time values, as JSON / CSV text (µs) and as db integers (ns)
_BAD_US = ("9.5e15", "-5", "-1736408883704643.5", "5000000000000000", "1e300", "-1e300")
_BAD_NS = (9_200_000_000_000_000_000, -5_000, 5_000_000_000_000_000_000, -(1 << 62), 9.5e18)
_NUMBERS = ("inf", "-inf", "NaN", "Infinity", "1e999", "99999999999999999999999999", "-42", "0.0000001")
_TIME_KEY = re.compile(rb'"(ts|dur)"\s*:\s*("?)-?[0-9][0-9.eE+-]*\2')
_NUMBER = re.compile(rb"(?<![\w.])-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.])")
_TIME_HEADER = re.compile(r"(time|\(us\)|\(ms\)|duration|_ts|start|end|dur)", re.I)
_BOMB: bytes | None = None


@dataclass
class Case:
    number: int
    fmt: str
    target: str  # relative to the format's folder
    mutation: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.number:04d}-{self.fmt}-{self.mutation}"


@dataclass
class Outcome:
    case: Case
    outcome: str
    seconds: float
    status: str | None = None  # the mutated file's status in source_files
    error: str | None = None
    rows: int = 0  # fact rows stored by the run
    clean_rows: int = 0  # fact rows of the clean sample
    detail: str = ""  # the traceback, the crash message, what changed


# -- cases --------------------------------------------------------------------------------------------


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if name.endswith((".json.gz", ".gz")):
        return "gz"
    if name.endswith(".db"):
        return "db"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(".json") or ".json." in name or name.endswith((".0", ".1")) and "info" in name:
        return "json"
    if name.endswith(".csv"):
        return "csv"
    return "text"


_COMMON = ("truncate", "flip", "structure", "empty", "garbage", "rename", "foreign", "permissions")
MUTATIONS: dict[str, tuple[str, ...]] = {
    "json": (*_COMMON, "number", "time", "wrong_type", "deep", "encoding", "not_utf8", "gzipped_cut", "bomb"),
    "jsonl": (*_COMMON, "number", "time", "wrong_type", "deep", "not_utf8"),
    "gz": (*_COMMON, "gz_cut", "gz_flip", "bomb", "gz_number", "gz_time"),
    "csv": (*_COMMON, "number", "time", "wrong_type", "encoding", "not_utf8", "cut_row"),
    "text": (*_COMMON, "number", "time", "not_utf8", "encoding"),
    "db": ("truncate", "flip", "empty", "garbage", "rename", "permissions", "db_time", "db_drop", "db_type", "db_page"),
}


def cases(n: int, seed: int = 12) -> list[Case]:
    """``n`` cases, the same for the same seed: formats in turn, each with a target file and a
    mutation drawn from what suits that file."""
    rng = random.Random(seed)
    targets = {fmt: _targets(src) for fmt, src in SOURCES.items()}
    fmts = sorted(targets)
    # each kind of file goes through its mutations in a shuffled cycle: every mutation runs early
    cycles = {kind: rng.sample(ms, len(ms)) for kind, ms in sorted(MUTATIONS.items())}
    turns: dict[str, int] = dict.fromkeys(cycles, 0)
    out = []
    for i in range(n):
        fmt = fmts[i % len(fmts)]
        target = rng.choice(targets[fmt])
        kind = _kind(target)
        mutation = cycles[kind][turns[kind] % len(cycles[kind])]
        turns[kind] += 1
        out.append(Case(i, fmt, target, mutation, rng.randrange(1 << 30)))
    return out


def covering(seed: int = 12) -> list[Case]:
    """Few cases that run every mutation and every format (about 50, the suite's share): for each
    mutation in turn, the next format (in a seeded rotation) that has a file it applies to; then
    an impossible time in the biggest file of each format that has none yet (what the ``silent``
    verdict checks); then an impossible time in each family of timed events (``FAMILIES``: slices'
    starts and durations, instants such as Kineto's ``[memory]`` events, counters) of each format
    that has Chrome traces, in the first trace of the format that holds the family (rows gathered
    across files and written after them must be named on their own file, not the file read last).
    The same for the same seed."""
    rng = random.Random(seed)
    targets = {fmt: _targets(src) for fmt, src in SOURCES.items()}
    fmts = sorted(targets)
    turn = rng.randrange(len(fmts))
    out: list[Case] = []
    for mutation in sorted({m for ms in MUTATIONS.values() for m in ms}):
        for k in range(len(fmts)):
            fmt = fmts[(turn + k) % len(fmts)]
            fits = [t for t in targets[fmt] if mutation in MUTATIONS[_kind(t)]]
            if fits:
                out.append(Case(len(out), fmt, rng.choice(fits), mutation, rng.randrange(1 << 30)))
                turn += k + 1
                break
    for fmt in fmts:  # an impossible time in each format's main file (the silent check)
        timed = [t for t in targets[fmt] if CHECKED & set(MUTATIONS[_kind(t)])]
        if timed and not any(c.fmt == fmt and c.mutation in CHECKED for c in out):
            target = max(timed, key=lambda t: (REPO / SOURCES[fmt].folder / t).stat().st_size)
            mutation = sorted(CHECKED & set(MUTATIONS[_kind(target)]))[0]
            out.append(Case(len(out), fmt, target, mutation, rng.randrange(1 << 30)))
    for fmt in fmts:  # an impossible time in each family of timed events, in the format's first trace holding it
        held = {t: _families(REPO / SOURCES[fmt].folder / t) for t in targets[fmt] if _kind(t) in ("json", "gz")}
        for family in FAMILIES:
            first = next((t for t, fams in held.items() if family in fams), None)
            if first is not None:
                out.append(Case(len(out), fmt, first, family, rng.randrange(1 << 30)))
    return out


# an impossible time per family of timed Chrome-trace events: (phases, field)
FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    "time_slice_ts": (("X",), "ts"),
    "time_slice_dur": (("X",), "dur"),
    "time_instant": (("i", "I"), "ts"),
    "time_counter": (("C",), "ts"),
}


def _trace_events(path: Path) -> tuple[Any, list[Any]] | None:
    """A Chrome trace's document and its event list (None when the file is no trace)."""
    raw = _read(path)
    try:
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (ValueError, OSError, EOFError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    return (doc, events) if isinstance(events, list) else None


def _family_events(events: list[Any], family: str) -> list[int]:
    phases, key = FAMILIES[family]
    return [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") in phases and key in e]


def _families(path: Path) -> set[str]:
    """The families of timed events a file holds (``FAMILIES``)."""
    got = _trace_events(path)
    return {f for f in FAMILIES if got is not None and _family_events(got[1], f)}


def _family_time(path: Path, rng: random.Random, family: str) -> None:
    """An impossible value in the ts / dur of one event of the family (a number stays a number, a
    time written as text stays text)."""
    got = _trace_events(path)
    idx = _family_events(got[1], family) if got is not None else []
    if got is None or not idx:
        raise NoTimeHere(str(path))
    doc, events = got
    e = events[rng.choice(idx)]
    key = FAMILIES[family][1]
    bad = rng.choice(_BAD_US)
    e[key] = bad if isinstance(e[key], str) else json.loads(bad)
    out = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(out) if path.name.endswith(".gz") else out)


def _family_mutator(family: str) -> Callable[[Path, random.Random], None]:
    return lambda path, rng: _family_time(path, rng, family)


def _targets(src: Source) -> list[str]:
    folder = REPO / src.folder
    found = sorted({str(p.relative_to(folder)) for pat in src.targets for p in folder.glob(pat) if p.is_file()})
    if not found:
        raise FileNotFoundError(f"no file of {src.targets} below {src.folder}")
    return found


# -- mutations ----------------------------------------------------------------------------------------


@dataclass
class Made:
    job: Path  # the mutated copy of the sample
    target: str  # the mutated file, relative to it (as source_files names it)
    checked: bool  # an impossible time was written: the file must not read as ok with other facts


def materialise(case: Case, dest: Path) -> Made:
    """Copy the case's sample to ``dest``/job and mutate the target."""
    src = REPO / SOURCES[case.fmt].folder
    job = dest / "job"
    shutil.copytree(src, job, ignore=shutil.ignore_patterns("*.db-shm"))
    path = job / case.target
    rng = random.Random(case.seed)
    try:
        new = _MUTATORS[case.mutation](path, rng)
        checked = case.mutation in CHECKED
    except NoTimeHere:
        new, checked = _number(path, rng), False
    return Made(job, str((new or path).relative_to(job)), checked)


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _truncate(path: Path, rng: random.Random) -> None:
    data = _read(path)
    path.write_bytes(data[: rng.randrange(max(1, len(data)))])


def _flip(path: Path, rng: random.Random) -> None:
    data = bytearray(_read(path)) or bytearray(b"\0")  # an empty file (msprof's msprof_tx) gets a byte
    for _ in range(rng.choice((1, 1, 1, 3))):
        i = rng.randrange(len(data))
        data[i] ^= rng.randrange(1, 256)
    path.write_bytes(bytes(data))


def _structure(path: Path, rng: random.Random) -> None:
    data = bytearray(_read(path)) or bytearray(b"\0")
    spots = [i for i, b in enumerate(data) if b in b'{}[],:"\n'] or [0]
    i = rng.choice(spots)
    data[i] = rng.choice(b'{}[],:"\n x')
    path.write_bytes(bytes(data))


def _empty(path: Path, rng: random.Random) -> None:
    path.write_bytes(rng.choice((b"", b"   \n\t  ", b"\xef\xbb\xbf")))


def _garbage(path: Path, rng: random.Random) -> None:
    n = max(16, min(len(_read(path)), 1 << 16))
    path.write_bytes(bytes(rng.randrange(256) for _ in range(n)))


def _rename(path: Path, rng: random.Random) -> Path:
    siblings = [p.name for p in path.parent.iterdir() if p != path and p.is_file()]
    choices = [
        path.name + ".bak",
        path.stem + ".json.gz" if not path.name.endswith(".gz") else path.name[:-3],
        "kernel_details.csv",
        "trace_view.json",
        "op_summary_20260101000000.csv",
        "rankscope_window.json",
        "x.pt.trace.json",
        *siblings,
    ]
    new = path.with_name(rng.choice([c for c in choices if c != path.name]))
    if new.is_dir():
        new = path.with_name(path.name + ".bak")
    if new.exists():
        new.unlink()
    path.rename(new)
    return new


def _foreign(path: Path, rng: random.Random) -> None:
    """Another sample's file under this one's name."""
    pool = sorted(p for src in SOURCES.values() for p in (REPO / src.folder).rglob("*") if p.is_file())
    other = rng.choice([p for p in pool if p.name != path.name and p.stat().st_size < 4 << 20])
    shutil.copyfile(other, path)


def _permissions(path: Path, rng: random.Random) -> None:
    (path if rng.random() < 0.7 else path.parent).chmod(0)


def _replace_match(path: Path, rng: random.Random, pattern: re.Pattern[bytes], values: tuple[str, ...]) -> None:
    data = _read(path)
    spots = list(pattern.finditer(data[: 4 << 20]))
    if not spots:
        _flip(path, rng)
        return
    m = rng.choice(spots)
    value = rng.choice(values).encode()
    if pattern is _TIME_KEY:
        key, quote = m.group(1), m.group(2)
        new = b'"' + key + b'": ' + quote + value + quote
    else:
        new = value
    path.write_bytes(data[: m.start()] + new + data[m.end() :])


def _number(path: Path, rng: random.Random) -> None:
    _replace_match(path, rng, _NUMBER, _NUMBERS)


class NoTimeHere(Exception):
    """The target holds no time value a time mutation can reach (a plain number is changed instead)."""


def _time(path: Path, rng: random.Random) -> None:
    """An impossible time: a ts / dur of a JSON event, a time cell of a CSV (or of a text file with a
    CSV header), a ts_ns of the collector's scalars."""
    data = _read(path)
    first = data.split(b"\n", 1)[0]
    if _kind(str(path)) == "jsonl":
        _replace_match(path, rng, re.compile(rb'(?<="ts_ns":)-?[0-9]+'), tuple(str(v) for v in _BAD_NS))
    elif b"," in first and _TIME_HEADER.search(first.decode("utf-8", "replace")) and b"{" not in first:
        _csv_time(path, rng)
    elif _TIME_KEY.search(data[: 4 << 20]):
        _replace_match(path, rng, _TIME_KEY, _BAD_US)
    else:
        raise NoTimeHere(str(path))


def _csv_time(path: Path, rng: random.Random) -> None:
    text = _read(path).decode("utf-8", "replace")
    lines = text.split("\n")
    header = lines[0].split(",")
    cols = [i for i, h in enumerate(header) if _TIME_HEADER.search(h)]
    rows = [i for i in range(1, len(lines)) if lines[i].strip() and '"' not in lines[i]]
    if not cols or not rows:
        raise NoTimeHere(str(path))
    r = rng.choice(rows)
    cells = lines[r].split(",")
    c = rng.choice([c for c in cols if c < len(cells)] or [0])
    tab = "\t" if cells[c].endswith("\t") else ""
    cells[c] = rng.choice(_BAD_US) + tab
    lines[r] = ",".join(cells)
    path.write_bytes("\n".join(lines).encode())


def _wrong_type(path: Path, rng: random.Random) -> None:
    if _kind(str(path)) == "csv":
        _replace_match(path, rng, _NUMBER, ("abc", '"[1, 2]"', "true", "{}"))
    else:
        _replace_match(path, rng, _NUMBER, ('"abc"', "[1, 2]", "{}", "true", "null", '{"a": [1]}'))


def _deep(path: Path, rng: random.Random) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    data = _read(path)
    if rng.random() < 0.3:
        path.write_bytes(deep)
        return
    spots = list(_NUMBER.finditer(data[: 4 << 20]))
    if not spots:
        path.write_bytes(deep)
        return
    m = rng.choice(spots)
    path.write_bytes(data[: m.start()] + deep + data[m.end() :])


def _encoding(path: Path, rng: random.Random) -> None:
    text = _read(path).decode("utf-8", "replace")
    codec = rng.choice(("utf-16", "utf-16-le", "latin-1", "gb18030", "utf-32"))
    path.write_bytes(text.replace("a", "ä", 5).encode(codec, "replace"))


def _not_utf8(path: Path, rng: random.Random) -> None:
    data = bytearray(_read(path))
    for _ in range(rng.choice((1, 4, 50))):
        i = rng.randrange(len(data) + 1)
        data[i:i] = rng.choice((b"\xff", b"\xc3", b"\xe4\xb8", b"\xed\xa0\x80", b"\x00"))
    path.write_bytes(bytes(data))


def _gzipped_cut(path: Path, rng: random.Random) -> Path:
    """The file gzipped under a .gz name, the stream cut short."""
    data = gzip.compress(_read(path))
    new = path.with_name(path.name + ".gz")
    new.write_bytes(data[: rng.randrange(10, max(11, len(data)))])
    path.unlink()
    return new


def _gz_cut(path: Path, rng: random.Random) -> None:
    data = _read(path)
    path.write_bytes(data[: rng.randrange(10, max(11, len(data)))])


def _gz_flip(path: Path, rng: random.Random) -> None:
    data = bytearray(_read(path))
    i = rng.randrange(10, len(data))
    data[i] ^= rng.randrange(1, 256)
    path.write_bytes(bytes(data))


def _gz_inner(path: Path, rng: random.Random, inner: Callable[[Path, random.Random], Any]) -> None:
    plain = path.with_name(path.name + ".plain")
    plain.write_bytes(gzip.decompress(_read(path)))
    inner(plain, rng)
    path.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()


def bomb() -> bytes:
    """A trace head, then 2 GiB of blanks (gzip members one after another, as gzip allows), then the
    trace's end: 2 MB on disk. Made once per process."""
    global _BOMB
    if _BOMB is None:
        head = b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
        blanks = gzip.compress(b" " * (16 << 20), 9)
        _BOMB = gzip.compress(head) + blanks * 128 + gzip.compress(b"]}")
    return _BOMB


def _bomb(path: Path, rng: random.Random) -> Path:
    new = path if path.name.endswith(".gz") else path.with_name(path.name + ".gz")
    new.write_bytes(bomb())
    if new != path:
        path.unlink()
    return new


def _cut_row(path: Path, rng: random.Random) -> None:
    data = _read(path).rstrip(b"\r\n")
    cut = data.rfind(b",")
    path.write_bytes(data[: max(cut, 1)])


def _db_edit(path: Path, sql: Callable[[sqlite3.Connection, random.Random], None], rng: random.Random) -> None:
    try:
        with contextlib.closing(sqlite3.connect(path)) as con:
            sql(con, rng)
            con.commit()
    except sqlite3.Error:
        _flip(path, rng)


def _tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _db_time(path: Path, rng: random.Random) -> None:
    def edit(con: sqlite3.Connection, rng: random.Random) -> None:
        spots = [
            (t, c)
            for t in _tables(con)
            for c in (r[1] for r in con.execute(f'PRAGMA table_info("{t}")'))
            if re.search(r"(start|end|timestamp)(ns|_ns)?$|Ns$", c, re.I)
        ]
        spots = [(t, c) for t, c in spots if con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]]
        if not spots:
            return
        t, c = rng.choice(spots)
        n = con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
        row = con.execute(f'SELECT rowid FROM "{t}" LIMIT 1 OFFSET {rng.randrange(n)}').fetchone()[0]
        con.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid = ?', (rng.choice(_BAD_NS), row))

    _db_edit(path, edit, rng)


def _db_drop(path: Path, rng: random.Random) -> None:
    def edit(con: sqlite3.Connection, rng: random.Random) -> None:
        wanted = ("TASK", "COMPUTE_TASK_INFO", "PYTORCH_API", "CANN_API", "SESSION_TIME_INFO", "STRING_IDS")
        present = [t for t in _tables(con) if t in wanted] or _tables(con)
        if present:
            con.execute(f'DROP TABLE "{rng.choice(present)}"')

    _db_edit(path, edit, rng)


def _db_type(path: Path, rng: random.Random) -> None:
    def edit(con: sqlite3.Connection, rng: random.Random) -> None:
        tables = [t for t in _tables(con) if con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]]
        if not tables:
            return
        t = rng.choice(tables)
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
        c = rng.choice(cols)
        value = rng.choice(("abc", b"\x00\xff", 1.5e308, None, -1, "\udcff".encode("utf-8", "surrogatepass")))
        con.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid IN (SELECT rowid FROM "{t}" LIMIT 3)', (value,))

    _db_edit(path, edit, rng)


def _db_page(path: Path, rng: random.Random) -> None:
    """Damage one page past the header (an interrupted copy, a bad sector)."""
    data = bytearray(_read(path))
    page = 4096
    if len(data) > 2 * page:
        p = rng.randrange(1, len(data) // page)
        data[p * page : (p + 1) * page] = bytes(rng.randrange(256) for _ in range(page))
    path.write_bytes(bytes(data))


_MUTATORS: dict[str, Callable[[Path, random.Random], Path | None]] = {
    "truncate": _truncate,
    "flip": _flip,
    "structure": _structure,
    "empty": _empty,
    "garbage": _garbage,
    "rename": _rename,
    "foreign": _foreign,
    "permissions": _permissions,
    "number": _number,
    "time": _time,
    "wrong_type": _wrong_type,
    "deep": _deep,
    "encoding": _encoding,
    "not_utf8": _not_utf8,
    "gzipped_cut": _gzipped_cut,
    "gz_cut": _gz_cut,
    "gz_flip": _gz_flip,
    "gz_number": lambda p, rng: _gz_inner(p, rng, _number),
    "gz_time": lambda p, rng: _gz_inner(p, rng, _time),
    "bomb": _bomb,
    "cut_row": _cut_row,
    "db_time": _db_time,
    "db_drop": _db_drop,
    "db_type": _db_type,
    "db_page": _db_page,
    **{f: _family_mutator(f) for f in FAMILIES},
}
# mutations whose result must never be read as ok with different facts (the "silent" check)
CHECKED = frozenset({"time", "gz_time", "db_time", *FAMILIES})


# -- running a case -----------------------------------------------------------------------------------


class Hang(BaseException):
    """The case ran past its bound (a BaseException: no reader's ``except Exception`` swallows it)."""


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_CRASH = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Interrupt)\b: |\breader \w+ failed\b")


@dataclass
class Clean:
    rows: int
    facts: str  # fingerprint of the fact tables


_CLEAN: dict[str, Clean] = {}


def clean(fmt: str, work: Path) -> Clean:
    """The clean sample's rows and fact fingerprint (once per format and process)."""
    if fmt not in _CLEAN:
        from analyzer.ingest import ingest
        from analyzer.store import Store

        d = work / f"clean-{fmt}"
        shutil.copytree(REPO / SOURCES[fmt].folder, d / "job", ignore=shutil.ignore_patterns("*.db-shm"))
        store = Store(d / "store")
        report = ingest(d / "job", store, run="clean", workers=1)
        _CLEAN[fmt] = Clean(sum(r.collection_row["n_rows"] for r in report.read), facts(store, "clean"))
        shutil.rmtree(d, ignore_errors=True)
    return _CLEAN[fmt]


def facts(store: Any, run: str) -> str:
    """A fingerprint of the stored times of a run: every ``*_ns`` column of every fact table, and its
    row count, in a canonical order (what an impossible time written into a file may not change
    without a word; other values may legitimately be anything)."""
    from analyzer.schema import FACT_TABLES

    h = hashlib.sha256()
    with store.read_connection() as con:
        for t in FACT_TABLES:
            cols = [c.name for c in t.columns if c.name.endswith("_ns")] or ["rank"]
            sel = ", ".join(f'"{c}"' for c in cols)
            rows = con.execute(f'SELECT {sel} FROM "{t.name}" WHERE run = ? ORDER BY ALL', [run]).fetchall()
            h.update(f"{t.name}:{len(rows)}:{rows!r}".encode("utf-8", "backslashreplace"))
    return h.hexdigest()


def run_case(case: Case, work: Path, bound_s: float = 20.0) -> Outcome:
    """Materialise the case below ``work`` and ingest it (see the module's text for the outcomes)."""
    base = clean(case.fmt, work)
    d = work / case.name
    made = materialise(case, d)
    shutil.copytree(_store_template(work), d / "store")
    t0 = time.perf_counter()
    try:
        with _as_ordinary_user() if case.mutation == "permissions" else contextlib.nullcontext():
            out = _run_here(made.job, d / "store", made.checked, bound_s)
    finally:
        for p in [d, *d.rglob("*")]:
            with contextlib.suppress(OSError):
                if p.is_dir():
                    p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)
    return _verdict(case, out, made, base, time.perf_counter() - t0)


def _store_template(work: Path) -> Path:
    """An empty store, made once: each case starts from a copy of it (a real store, like a user's
    existing one; making the catalog costs more than most cases)."""
    from analyzer.store import Store

    t = work / "store-template"
    if not t.exists():
        Store(t).initialize()
    return t


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_DAC = (1 << 1) | (1 << 2) | (1 << 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


@contextlib.contextmanager
def _as_ordinary_user() -> Iterator[None]:
    """File permissions bind this thread as they bind an ordinary user: root's capabilities that
    bypass them are taken out of the effective set, and put back after (they stay permitted)."""
    if os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    hdr = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    saved = data[0].effective
    data[0].effective = saved & ~_DAC
    if libc.capset(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    try:
        yield
    finally:
        data[0].effective = saved
        libc.capset(ctypes.byref(hdr), data)


def _run_here(job: Path, store_path: Path, checked: bool, bound_s: float) -> dict[str, Any]:
    from analyzer.errors import NothingIngestedError
    from analyzer.ingest import ingest
    from analyzer.store import Store

    store = Store(store_path)
    try:
        with bounded(bound_s):
            try:
                report = ingest(job, store, run="fuzz", workers=1)
                nothing = False
            except NothingIngestedError as exc:
                report = getattr(exc, "report", None)
                nothing = True
            fp = facts(store, "fuzz") if not nothing and checked else None
    except Hang:
        return {"hang": True}
    except Exception:  # noqa: BLE001 - the forbidden outcome being measured
        return {"traceback": traceback.format_exc()}
    return _summary(report, nothing, fp)


def _summary(report: Any, nothing: bool, fp: str | None) -> dict[str, Any]:
    files = []
    rows = 0
    if report is not None:
        for r in report.read:
            rows += r.collection_row["n_rows"]
            files += [{k: f[k] for k in ("path", "status", "error")} for f in r.file_rows]
        files += [{k: f[k] for k in ("path", "status", "error")} for f in report.unreadable]
        files += [{"path": p, "status": "ignored", "error": why} for p, why in report.ignored]
    return {"nothing": nothing, "files": files, "rows": rows, "facts": fp}


def _verdict(case: Case, out: dict[str, Any], made: Made, base: Clean, seconds: float) -> Outcome:
    if out.get("hang"):
        return Outcome(case, "hang", seconds, clean_rows=base.rows)
    if "traceback" in out:
        return Outcome(case, "traceback", seconds, clean_rows=base.rows, detail=out["traceback"])
    files = out["files"]
    target = made.target
    row = next((f for f in files if f["path"] == target), None)
    # the mutated file, or (for a folder made unreadable) the problem row that covers it
    row = row or next((f for f in files if target.startswith(f["path"] + "/")), None)
    status, error = (row["status"], row["error"]) if row else ("absent", None)
    res = Outcome(case, "ok", seconds, status, error, out["rows"], base.rows)
    crashed = [f for f in files if f["error"] and _CRASH.search(f["error"])]
    if crashed:
        res.outcome = "caught_crash"
        res.detail = f"{crashed[0]['path']}: {crashed[0]['error']}"
    elif made.checked and status == "ok" and out["facts"] != base.facts and not out["nothing"]:
        res.outcome = "silent"
        res.detail = "the file read as ok, the stored times differ from the clean sample's"
    elif out["nothing"]:
        res.outcome = "nothing"
    elif status == "error":
        res.outcome = "file_error"
    elif status == "warning":
        res.outcome = "warned"
    return res


# -- counting ----------------------------------------------------------------------------------------


@dataclass
class Tally:
    by_outcome: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_format: dict[str, dict[str, int]] = field(default_factory=dict)
    kept: dict[str, list[float]] = field(default_factory=dict)  # rows kept / clean rows, per format
    slowest: float = 0.0
    forbidden: list[Outcome] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.by_outcome[o.outcome] += 1
        self.by_format.setdefault(o.case.fmt, dict.fromkeys(OUTCOMES, 0))[o.outcome] += 1
        if o.outcome in ("ok", "warned", "file_error") and o.clean_rows:
            self.kept.setdefault(o.case.fmt, []).append(min(o.rows / o.clean_rows, 1.0))
        self.slowest = max(self.slowest, o.seconds)
        if o.outcome in FORBIDDEN:
            self.forbidden.append(o)

    def table(self) -> str:
        """Counts per format and outcome, and the share of the clean sample's rows kept, as Markdown."""
        head = "| format | cases | " + " | ".join(OUTCOMES) + " | rows kept (mean) |"
        lines = [head, "|" + "---|" * (len(OUTCOMES) + 3)]
        for fmt in sorted(self.by_format):
            c = self.by_format[fmt]
            kept = self.kept.get(fmt, [])
            mean = f"{100 * sum(kept) / len(kept):.0f} %" if kept else "-"
            lines.append(f"| {fmt} | {sum(c.values())} | " + " | ".join(str(c[k]) for k in OUTCOMES) + f" | {mean} |")
        tot = self.by_outcome
        allk = [x for v in self.kept.values() for x in v]
        mean = f"{100 * sum(allk) / len(allk):.0f} %" if allk else "-"
        lines.append(f"| **all** | {sum(tot.values())} | " + " | ".join(str(tot[k]) for k in OUTCOMES) + f" | {mean} |")
        return "\n".join(lines)
