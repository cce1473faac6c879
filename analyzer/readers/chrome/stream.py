"""Streaming reader for Chrome-trace JSON (Kineto traces, torch_npu trace_view.json, msprof json).

Never one ``json.load`` of a whole trace: the file is read in blocks, event boundaries are found
by a byte search (``}`` ``,`` ``{`` with only whitespace between), and each block of complete events
is decoded at once, in place, by msgspec into small typed structs (``gc=False``) whose ``args``
stay raw JSON bytes. Memory is bounded by the block size, whatever the file size; the file's
SHA-256 is computed on the way. ``columns`` turns a block into Arrow arrays with one C-level pass
per field (no Python loop per event).

Handles: an object with ``traceEvents`` (header keys before it, tail keys after it: older Kineto
writes ``baseTimeNanoseconds`` at the end) or a bare array (torch_npu, MindSpore); ``.gz``; an
unterminated array (a crash mid-write) — complete events are kept and a warning says what was lost.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import mmap
import queue
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from ...errors import InputError

BLOCK_BYTES = 4 << 20  # smaller blocks: fewer fresh pages to fault in, same speed
_WS = b" \t\r\n"
_END_RE = re.compile(rb"\}\s*\]")


NO_RAW = msgspec.Raw(b"")  # default for absent raw fields (Raw cannot be Optional)


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | str | None = None
    dur: float | str | None = None
    args: msgspec.Raw = NO_RAW


_EVENTS = msgspec.json.Decoder(list[Event])
_ONE_EVENT = msgspec.json.Decoder(Event)
ANY = msgspec.json.Decoder()  # any JSON value (metadata, args of rare events)


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading, transparently gunzipping (by magic bytes, not by name)."""
    fh = open(path, "rb")  # noqa: SIM115 - returned open: the caller closes it (with ... as f)
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


class _ReadAhead:
    """Reads a stream ahead in a thread of its own while the caller decodes what came before: file
    reads, gunzip and the SHA-256 of the bytes release the GIL, so a reader with a spare core
    decodes and reads at once. ``readinto`` hands over the bytes in order; at most two blocks wait."""

    def __init__(self, f: Any, size: int):
        self.queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=2)
        self.rest = memoryview(b"")
        self.stopped = False
        self.thread = threading.Thread(target=self._run, args=(f, size), name="read-ahead", daemon=True)
        self.thread.start()

    def _run(self, f: Any, size: int) -> None:
        try:
            while not self.stopped:
                b = f.read(size)
                self.queue.put(b)
                if not b:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which decides
            self.queue.put(exc)

    def readinto(self, view: memoryview) -> int:
        if not self.rest:
            item = self.queue.get()
            if isinstance(item, BaseException):
                raise item
            self.rest = memoryview(item)
        n = min(len(view), len(self.rest))
        view[:n] = self.rest[:n]
        self.rest = self.rest[n:]
        return n

    def close(self) -> None:
        """Stop reading ahead (the caller is done or gave up) and wait for the thread."""
        self.stopped = True
        while self.thread.is_alive():
            try:
                self.queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self.thread.join()


class _Window(io.RawIOBase):
    """The bytes ``[start, end)`` of an open file (``end`` None: to the file's end)."""

    def __init__(self, raw: BinaryIO, start: int, end: int | None):
        super().__init__()
        self.raw = raw
        self.left = None if end is None else end - start
        raw.seek(start)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b)
        if self.left is not None:
            view = view[: self.left]
        n = self.raw.readinto(view) or 0  # type: ignore[attr-defined]
        if self.left is not None:
            self.left -= n
        return n


class _HashingReader(io.RawIOBase):
    """A file read through here feeds every byte to a SHA-256 (the ingest records the hash of each
    source file: computed on the way, the file is not read twice)."""

    def __init__(self, raw: BinaryIO):
        super().__init__()
        self.raw = raw
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.raw.readinto(b)  # type: ignore[attr-defined]
        if n:
            self.digest.update(memoryview(b)[:n])
        return n or 0

    def close(self) -> None:
        self.raw.close()
        super().close()


def _skip_ws_back(buf: bytes | bytearray, k: int) -> int:
    while k >= 0 and buf[k] in _WS:
        k -= 1
    return k


def last_boundary(buf: bytes | bytearray, end: int | None = None, start: int = 0) -> tuple[int, int] | None:
    """(index of the '}' ending an event, index of the '{' starting the next) for the last
    '},{' boundary in ``buf[start:end]``, or None."""
    pos = len(buf) if end is None else end
    while True:
        j = buf.rfind(b"{", start, pos)
        if j <= start:
            return None
        k = _skip_ws_back(buf, j - 1)
        if k >= start and buf[k] == 0x2C:  # ','
            k = _skip_ws_back(buf, k - 1)
            if k >= start and buf[k] == 0x7D:  # '}'
                return k, j
        pos = j


@dataclass
class TraceStream:
    """Iterate the events of one Chrome trace file in decoded blocks."""

    path: Path
    block_bytes: int = BLOCK_BYTES
    header: dict[str, Any] = field(default_factory=dict)
    tail: dict[str, Any] = field(default_factory=dict)
    bare_array: bool = False
    warnings: list[str] = field(default_factory=list)
    truncated: bool = False
    n_events: int = 0
    skipped_events: int = 0
    sha256: str | None = None  # of the file's bytes, once every byte has been read
    read_ahead: bool = False  # read (gunzip, hash) the next block in a thread while this one is decoded
    _carry: bytes = field(default=b"", init=False, repr=False)  # after the last block: the rest of the array

    def blocks(self) -> Iterator[list[Event]]:
        """Decoded events, block by block. Each block is read into a fresh buffer that starts with
        '[' (the rest of the previous block's last event after it); the ',' after the block's last
        complete event is overwritten with ']' and the buffer decoded in place: one copy of the
        data, however big the file."""
        raw = open(self.path, "rb")  # noqa: SIM115 - closed by the `with hashing` that wraps it
        magic = raw.read(2)
        raw.seek(0)
        hashing = _HashingReader(raw)
        with hashing, gzip.GzipFile(fileobj=hashing, mode="rb") if magic == b"\x1f\x8b" else hashing as f:
            head = bytearray()
            read_some = getattr(f, "read1", f.read)  # a gzip stream cut short: keep what came before
            try:
                while len(head) < self.block_bytes:
                    chunk = read_some(self.block_bytes - len(head))
                    if not chunk:
                        break
                    head += chunk
            except (OSError, EOFError) as exc:
                if not head:
                    raise InputError(str(self.path), f"cannot read: {exc}") from exc
                self.warnings.append(f"compressed stream ends early ({exc}); kept the events before it")
                self.truncated = True
            carry = self._start(f, bytes(head))
            retry_limit = max(4 * self.block_bytes, 1 << 20)
            source = _ReadAhead(f, self.block_bytes) if self.read_ahead and not self.truncated else f
            try:
                yield from self._blocks(source, carry, retry_limit)
            finally:
                if isinstance(source, _ReadAhead):
                    source.close()
            events = self._finish(self._carry)
            self.n_events += len(events)
            if not self.truncated:
                while hashing.read(1 << 20):  # bytes after the compressed stream, if any
                    pass
                self.sha256 = hashing.digest.hexdigest()
            if events:
                yield events

    def range_blocks(self, start: int, end: int | None) -> Iterator[list[Event]]:
        """The events of the byte range ``[start, end)`` of an uncompressed trace split at event
        boundaries (``split_points``): ``start`` is 0 (the header is read as usual) or where an event
        begins; ``end`` is where the next range begins, or None (the file's end: the tail is read as
        usual). No SHA-256 here: the whole file's is the caller's (``file_sha256``)."""
        with open(self.path, "rb") as raw:
            f = _Window(raw, start, end)
            retry_limit = max(4 * self.block_bytes, 1 << 20)
            if start == 0:
                carry = self._start(f, f.read(self.block_bytes))  # type: ignore[arg-type]
            else:
                carry = b""
            source = _ReadAhead(f, self.block_bytes) if self.read_ahead else f
            try:
                yield from self._blocks(source, carry, retry_limit)
            finally:
                if isinstance(source, _ReadAhead):
                    source.close()
            events = self._finish(self._carry) if end is None else self._finish_range(self._carry)
            self.n_events += len(events)
            if events:
                yield events

    def _finish_range(self, buf: bytes) -> list[Event]:
        """The events left at the end of a range that stops where the next range's first event
        begins: complete events, then ',' and blanks."""
        piece = buf.rstrip(_WS)
        if piece.endswith(b","):
            piece = piece[:-1]
        if not piece.strip(_WS):
            return []
        try:
            return _EVENTS.decode(b"[" + piece + b"]")
        except msgspec.DecodeError:
            return self._slow_decode(piece)

    def _blocks(self, f: Any, carry: bytes, retry_limit: int) -> Iterator[list[Event]]:
        """The blocks after the head; what is left after the last one is in ``self._carry``."""
        self._carry = carry
        while not self.truncated:
            data = bytearray(1 + len(carry) + self.block_bytes)
            data[0] = 0x5B  # '['
            data[1 : 1 + len(carry)] = carry
            view = memoryview(data)
            try:
                n = f.readinto(view[1 + len(carry) :])
            except (OSError, EOFError) as exc:  # e.g. a gzip stream cut short
                self.warnings.append(f"compressed stream ends early ({exc}); kept the events before it")
                self.truncated = True
                n = 0
            if not n:
                break
            end = 1 + len(carry) + n
            b = last_boundary(data, end, start=1)
            if b is None:
                carry = bytes(view[1:end])
                continue
            events = None
            for _ in range(16):  # a '},{' inside a string or nested args is no boundary: try earlier
                k, j = b
                after = data[k + 1]
                data[k + 1] = 0x5D  # ']' over the ',' (or blank) after the last complete event
                try:
                    events = _EVENTS.decode(view[: k + 2])
                    break
                except msgspec.DecodeError:
                    data[k + 1] = after
                    b = last_boundary(data, j, start=1)
                    if b is None:
                        break
            if events is None:
                if end < retry_limit:  # no boundary decodes yet: read more and retry bigger
                    carry = bytes(view[1:end])
                    continue
                k, j = last_boundary(data, end, start=1)  # type: ignore[misc]
                events = self._slow_decode(bytes(view[1 : k + 1]))  # broken events: skip them
            carry = bytes(view[j:end])
            self._carry = carry
            self.n_events += len(events)
            yield events
        self._carry = carry

    # -- start / end ------------------------------------------------------------------------

    def _start(self, f: BinaryIO, buf: bytes) -> bytes:
        i = 0
        if buf.startswith(b"\xef\xbb\xbf"):
            i = 3
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i >= len(buf):
            raise InputError(str(self.path), "empty file")
        if buf[i] == 0x5B:  # '['
            self.bare_array = True
            return buf[i + 1 :]
        if buf[i] != 0x7B:  # '{'
            raise InputError(str(self.path), "not JSON (does not start with '{' or '[')")
        key = b'"traceEvents"'
        pos = buf.find(key)
        while pos < 0:
            more = f.read(self.block_bytes)
            if not more or len(buf) > 256 << 20:
                raise InputError(str(self.path), "no traceEvents array: not a Chrome/Kineto trace")
            buf += more
            pos = buf.find(key)
        j = pos + len(key)
        while j < len(buf) and buf[j] in _WS + b":":
            j += 1
        if j >= len(buf) or buf[j] != 0x5B:
            raise InputError(str(self.path), "traceEvents is not an array")
        head = buf[i:pos].rstrip()
        if head.endswith(b","):
            head = head[:-1]
        try:
            self.header = ANY.decode(head + b"}") if head != b"{" else {}
        except msgspec.DecodeError as exc:
            self.warnings.append(f"unreadable trace header ({exc}); event data still read")
        return buf[j + 1 :]

    def _finish(self, buf: bytes) -> list[Event]:
        stripped = buf.strip(_WS)
        if stripped.startswith(b"]"):
            self._parse_tail(stripped[1:])
            return []
        for m in _END_RE.finditer(buf):
            try:
                events = _EVENTS.decode(b"[" + buf[: m.start() + 1] + b"]")
            except msgspec.DecodeError:
                continue
            self._parse_tail(buf[m.end() :])
            return events
        # the array is closed but an event in it is broken: skip that event, keep the others
        for m in reversed(list(_END_RE.finditer(buf))):
            if self._tail_ok(buf[m.end() :]):
                events = self._slow_decode(buf[: m.start() + 1])
                self._parse_tail(buf[m.end() :])
                return events
        # no closing bracket that makes sense: the file was cut inside the event list
        self.truncated = True
        end = len(buf)
        for _ in range(64):
            b = last_boundary(buf, end)
            if b is None:
                break
            try:
                events = _EVENTS.decode(b"[" + buf[: b[0] + 1] + b"]")
            except msgspec.DecodeError:
                end = b[1]
                continue
            self.warnings.append(
                f"file ends inside the event list (unterminated JSON array): kept {self.n_events + len(events)} "
                f"complete events, dropped {len(buf) - b[0] - 1} trailing bytes"
            )
            return events
        try:  # a single complete event without a closing bracket
            ev = _ONE_EVENT.decode(stripped.rstrip(b","))
            self.warnings.append("file ends after the last event without closing the JSON array")
            return [ev]
        except msgspec.DecodeError:
            pass
        self.warnings.append(
            f"file ends inside the event list (unterminated JSON array): kept {self.n_events} complete events, "
            f"dropped {len(buf)} trailing bytes"
        )
        return []

    def _tail_ok(self, rest: bytes) -> bool:
        """Whether ``rest`` can follow the closing bracket of the event list."""
        rest = rest.strip(_WS)
        if self.bare_array or not rest or rest == b"}":
            return not rest or not self.bare_array and rest == b"}"
        if rest.startswith(b","):
            rest = rest[1:].strip(_WS)
        try:
            return isinstance(ANY.decode(b"{" + rest), dict)
        except msgspec.DecodeError:
            return False

    def _parse_tail(self, rest: bytes) -> None:
        rest = rest.strip(_WS)
        if self.bare_array:
            if rest:
                self.warnings.append(f"{len(rest)} unexpected bytes after the event array ignored")
            return
        if rest.startswith(b","):
            rest = rest[1:].strip(_WS)
        if not rest or rest == b"}":
            if not rest:
                self.warnings.append("trace object is not closed ('}' missing)")
            return
        try:
            tail = ANY.decode(b"{" + rest)
            if isinstance(tail, dict):
                self.tail = tail
        except msgspec.DecodeError:
            self.warnings.append("unreadable keys after traceEvents ignored")

    def _slow_decode(self, piece: bytes) -> list[Event]:
        """Decode event by event when a block will not decode as a whole; skip broken events. A
        piece that does not decode is retried joined with the next ones (a '},{' inside a string
        is no boundary) before it is given up."""
        cuts: list[tuple[int, int]] = []
        end = len(piece)
        while (b := last_boundary(piece, end)) is not None:
            cuts.append(b)
            end = b[0] + 1
        cuts.reverse()
        starts = [0] + [j for _, j in cuts]
        ends = [k + 1 for k, _ in cuts] + [len(piece)]
        out: list[Event] = []
        skipped = 0
        i = 0
        while i < len(starts):
            for m in range(i, min(i + 8, len(starts))):
                try:
                    out.append(_ONE_EVENT.decode(piece[starts[i] : ends[m]].strip(_WS)))
                except msgspec.DecodeError:
                    continue
                i = m + 1
                break
            else:
                skipped += 1
                i += 1
        if skipped:
            self.skipped_events += skipped
            self.warnings.append(f"{skipped} malformed event(s) skipped")
        return out

    @property
    def metadata(self) -> dict[str, Any]:
        return {**self.header, **self.tail}


# torch.profiler's pretty-printed layout: events at an indent of two, one after the other. JSON
# strings hold no raw newline, and deeper objects are indented deeper: between the event list's
# start and the end, every occurrence is the boundary of two events.
_PRETTY_SEP = b"},\n  {"
_COUNT_CHUNK = 64 << 20


def split_points(path: Path, parts: int) -> list[int] | None:
    """Where to cut an uncompressed trace in torch.profiler's pretty layout into ``parts`` byte
    ranges that each begin with an event (the first at 0): ``[0, p1, ...]``; None when the file is
    compressed or not in that layout."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:2] == b"\x1f\x8b":
            return None
        key = m.find(b'"traceEvents"', 0, 1 << 26)
        first = m.find(_PRETTY_SEP, key) if key >= 0 else -1
        if first < 0 or m.find(b"[", key, first) < 0:
            return None
        points = [0]
        for share in _shares(parts)[:-1]:
            at = m.find(_PRETTY_SEP, max(points[-1] + int(len(m) * share), points[-1] + 1))
            if at < 0:
                return None
            points.append(at + len(_PRETTY_SEP) - 1)
        return points


_COUNT_COST = 0.1  # counting the events before a range (events_before) costs about this share of reading it


def _shares(parts: int) -> list[float]:
    """Byte shares of the ranges so that each reader is busy as long as the others: a later range
    is smaller by what counting the bytes before it costs its reader."""
    sizes, at = [], 0.0
    for _ in range(parts):
        sizes.append(1.0 - _COUNT_COST * at)
        at += sizes[-1]
    return [x / at for x in sizes]


def events_before(path: Path, point: int) -> int:
    """How many events a trace in torch.profiler's pretty layout holds before byte ``point`` (where
    an event begins, from ``split_points``): the event boundaries before it, counted in the bytes.
    The reader of the range before ``point`` counts its events by decoding them: a difference
    means the layout was not what it looked like, and the ranges are read again as one."""
    n = 0
    width = len(_PRETTY_SEP) - 1
    with open(path, "rb") as f:
        head = f.read(1 << 26)
        key = head.find(b'"traceEvents"')
        pos = max(key, 0)
        buf = bytearray(_COUNT_CHUNK + width)
        view = memoryview(buf)
        while pos <= point:
            f.seek(pos)
            want = min(_COUNT_CHUNK, point + 1 - pos) + width
            got = f.readinto(view[:want])
            n += view[:got].tobytes().count(_PRETTY_SEP) if got < want else buf.count(_PRETTY_SEP, 0, got)
            pos += _COUNT_CHUNK
    return n


_TRACE_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')
_TRACE_NAME = re.compile(r"(\.pt\.trace\.json(\.gz)?$|trace.*\.json(\.gz)?$)", re.I)


def sniff(path: Path) -> str:
    """What a JSON file is, from its first 64 KiB: 'object' for a trace object (traceEvents, or Kineto's
    header keys); 'array' for a bare array of Chrome trace events (torch_npu, MindSpore, msprof);
    'ignore:<reason>' for an unrelated JSON file; otherwise the problem that stops the file from
    being read (it looks like a trace but is not usable)."""
    import zlib

    named_trace = bool(_TRACE_NAME.search(path.name))
    try:
        if path.stat().st_size == 0:
            return "empty file"
        with open_binary(path) as f:
            head = f.read(64 << 10)
    except (OSError, EOFError, zlib.error) as exc:
        return f"cannot read: {exc}"
    s = head.lstrip()
    if s.startswith(b"\xef\xbb\xbf"):
        s = s[3:].lstrip()
    if not s:
        return "empty file (only whitespace)"
    if s[:1] not in (b"{", b"["):
        kind = "binary data" if b"\x00" in s[:512] else "text"
        return f"not JSON: the file holds {kind} (starts with {s[:20]!r})"
    if any(k in head for k in _TRACE_KEYS):
        return "object"
    if s[:1] == b"[" and b'"ph"' in head:  # Chrome's JSON array format (torch_npu / msprof write it)
        return "array"
    if named_trace:
        return "JSON but not a Kineto/Chrome trace (no traceEvents array)"
    return "ignore:JSON file that is not a profiler trace"
