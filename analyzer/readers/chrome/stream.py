"""Streaming reader for Chrome-trace JSON (Kineto traces, torch_npu trace_view.json, msprof json).

Never one ``json.load`` of a whole trace: the file is read in blocks, event boundaries are found
by a byte search (``}`` ``,`` ``{`` with only whitespace between), and each block of complete events
is decoded at once, in place, by msgspec into small typed structs (``gc=False``) whose ``args``
stay raw JSON bytes. Memory is bounded by the block size, whatever the file size; the file's
SHA-256 is computed on the way. ``columns`` turns a block into Arrow arrays with one C-level pass
per field (no Python loop per event).

Handles: an object with ``traceEvents`` (header keys before it, tail keys after it: older Kineto
writes ``baseTimeNanoseconds`` at the end) or a bare array (torch_npu, MindSpore); ``.gz`` (through
``common.opener``: a stream cut short keeps what came before it, a decompression bomb is refused);
an unterminated array (a crash mid-write) — complete events are kept and a warning says what was
lost. A broken event (a flipped byte, bytes that are not UTF-8, nesting deeper than the decoder
goes) is skipped and named by its byte offset; decoding resumes at the next event boundary. Time
and memory stay proportional to the bytes read: whitespace between events is not accumulated, and
an "event" longer than ``MAX_EVENT_BYTES`` is skipped.
"""

from __future__ import annotations

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
from ...messages import english, problem
from ..common.jsonfile import DECODE_ERRORS
from ..common.opener import InputStream, open_input

BLOCK_BYTES = 4 << 20  # smaller blocks: fewer fresh pages to fault in, same speed
MAX_EVENT_BYTES = 16 << 20  # one event (or header) longer than this is not profiler data: skipped
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


def open_binary(path: Path) -> InputStream:
    """Open a file for reading, transparently gunzipping (by magic bytes, not by name)."""
    return open_input(path)


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
        self.bytes_out = 0  # given to the caller so far
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
        self.bytes_out += n
        return n


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


def next_boundary(buf: bytes | bytearray, pos: int, end: int) -> tuple[int, int] | None:
    """The first '},{' boundary whose '}' is at or after ``pos`` (its '{' before ``end``), or None."""
    j = pos
    while True:
        j = buf.find(b"{", j + 1, end)
        if j < 0:
            return None
        k = _skip_ws_back(buf, j - 1)
        if k >= pos and buf[k] == 0x2C:  # ','
            k = _skip_ws_back(buf, k - 1)
            if k >= pos and buf[k] == 0x7D:  # '}'
                return k, j


_BYTE_RE = re.compile(r"\(byte (\d+)\)")


def _reason(exc: Exception) -> str:
    """What is wrong with one event, in a few words."""
    if isinstance(exc, RecursionError):
        return english("why.nested")
    return _BYTE_RE.sub("", str(exc)).removeprefix("JSON is malformed: ").strip()


def _compact(carry: bytes) -> bytes:
    """The undecided rest of a block with a run of whitespace at its end shortened to one blank,
    when what comes before the run is a complete event (or nothing): whitespace between events,
    however long, is not carried from block to block (2 GiB of it cost minutes)."""
    if carry[-_RUN:].translate(None, _WS):  # no long run of blanks at the end: nothing to do
        return carry
    cut = len(carry) - _RUN
    while cut > 0 and not carry[max(0, cut - _RUN) : cut].translate(None, _WS):
        cut -= _RUN
    body = carry[: max(0, cut - _RUN)] + carry[max(0, cut - _RUN) : cut].rstrip(_WS)
    event = body.rstrip(_WS).rstrip(b",").rstrip(_WS)
    if event:
        try:
            _ONE_EVENT.decode(event)
        except DECODE_ERRORS:
            return carry  # the blanks may be inside a string: keep them
    return body + b" "


_RUN = 1 << 16


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
    compressed: bool = False
    read_ahead: bool = False  # read (gunzip, hash) the next block in a thread while this one is decoded
    _carry_at: int = 0  # offset of the undecided rest's first byte in the (decompressed) data
    _carry: bytes = field(default=b"", init=False, repr=False)  # after the last block: the rest of the array

    def blocks(self) -> Iterator[list[Event]]:
        """Decoded events, block by block. Each block is read into a fresh buffer that starts with
        '[' (the rest of the previous block's last event after it); the ',' after the block's last
        complete event is overwritten with ']' and the buffer decoded in place: one copy of the
        data, however big the file."""
        with open_input(self.path, hashing=True) as f:
            self.compressed = f.compressed
            head = bytearray()
            while len(head) < self.block_bytes and (chunk := f.read(self.block_bytes - len(head))):
                head += chunk
            if not head and f.problem:
                raise InputError(str(self.path), f.problem)
            carry = self._start(f, bytes(head))
            self._carry_at = f.bytes_out - len(carry)  # offset of carry[0] in the (decompressed) data
            retry_limit = max(4 * self.block_bytes, 1 << 20)
            source = _ReadAhead(f, self.block_bytes) if self.read_ahead and not f.problem else f
            try:
                yield from self._blocks(source, carry, retry_limit)
            finally:
                if isinstance(source, _ReadAhead):
                    source.close()
            if f.problem:
                self.warnings.append(problem("kept_before", problem=f.problem) if f.truncated else f.problem)
                self.truncated = self.truncated or f.truncated
            events = self._finish(self._carry)
            self.n_events += len(events)
            f.finish()
            self.sha256 = f.sha256
            if events:
                yield events

    def range_blocks(self, start: int, end: int | None) -> Iterator[list[Event]]:
        """The events of the byte range ``[start, end)`` of an uncompressed trace split at event
        boundaries (``split_points``): ``start`` is 0 (the header is read as usual) or where an event
        begins; ``end`` is where the next range begins, or None (the file's end: the tail is read as
        usual). No SHA-256 here: the whole file's is the caller's (``file_sha256``). Offsets in
        warnings are the file's."""
        with open(self.path, "rb") as raw:
            f = _Window(raw, start, end)
            retry_limit = max(4 * self.block_bytes, 1 << 20)
            carry = self._start(f, f.read(self.block_bytes)) if start == 0 else b""
            self._carry_at = start + f.bytes_out - len(carry)
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
        except DECODE_ERRORS:
            return self._each_event(piece, self._carry_at)

    def _blocks(self, f: Any, carry: bytes, retry_limit: int) -> Iterator[list[Event]]:
        """The blocks after the head (``f``: the stream, or its read-ahead); what is left after the
        last one is in ``self._carry``."""
        self._carry = carry
        while True:
            if len(carry) > MAX_EVENT_BYTES:
                self._skip(english("why.no_boundary", mib=len(carry) >> 20), 1)
                self._carry_at += len(carry)
                carry = b""
            data = bytearray(1 + len(carry) + self.block_bytes)
            data[0] = 0x5B  # '['
            data[1 : 1 + len(carry)] = carry
            view = memoryview(data)
            n = f.readinto(view[1 + len(carry) :])
            if not n:
                break
            end = 1 + len(carry) + n
            b = last_boundary(data, end, start=1)
            if b is None:
                carry = _compact(bytes(view[1:end]))
                continue
            events = None
            for _ in range(16):  # a '},{' inside a string or nested args is no boundary: try earlier
                k, j = b
                events = self._decode_region(data, k)
                if events is not None:
                    break
                b = last_boundary(data, j, start=1)
                if b is None:
                    break
            if events is None:
                if end < retry_limit:  # no boundary decodes yet: read more and retry bigger
                    carry = bytes(view[1:end])
                    continue
                k, j = last_boundary(data, end, start=1)  # type: ignore[misc]
                events = self._each_event(bytes(view[1 : k + 1]), self._carry_at)  # broken: skip them
            carry = bytes(view[j:end])
            self._carry_at += j - 1
            self.n_events += len(events)
            yield events
        self._carry = carry

    def _skip(self, what: str, n: int, at: list[int] | None = None) -> None:
        """Record ``n`` events skipped (``what`` was wrong), naming where they start."""
        self.skipped_events += n
        where = at if at is not None else [self._carry_at]
        sample = ", ".join(str(x) for x in where[:3]) + (", ..." if len(where) > 3 else "")
        key = "events_skipped_decompressed" if self.compressed else "events_skipped"
        self.warnings.append(problem(key, n=n, why=what, at=sample))

    # -- start / end ------------------------------------------------------------------------

    def _start(self, f: Any, buf: bytes) -> bytes:
        i = 0
        if buf.startswith(b"\xef\xbb\xbf"):
            i = 3
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i >= len(buf):
            raise InputError(str(self.path), problem("empty" if not buf else "empty_whitespace"))
        if buf[i] == 0x5B:  # '['
            self.bare_array = True
            return buf[i + 1 :]
        if buf[i] != 0x7B:  # '{'
            raise InputError(str(self.path), problem("not_json_start"))
        key = b'"traceEvents"'
        grown = bytearray(buf)
        pos = grown.find(key)
        while pos < 0:  # header keys before the events: read on, searching only what is new
            more = f.read(self.block_bytes)
            if not more or len(grown) > MAX_EVENT_BYTES:
                raise InputError(str(self.path), problem("no_trace_events"))
            seen = len(grown)
            grown += more
            pos = grown.find(key, max(0, seen - len(key)))
        buf = bytes(grown)
        j = pos + len(key)
        while j < len(buf) and buf[j] in _WS + b":":
            j += 1
        if j >= len(buf) or buf[j] != 0x5B:
            raise InputError(str(self.path), problem("trace_events_not_array"))
        head = buf[i:pos].rstrip()
        if head.endswith(b","):
            head = head[:-1]
        try:
            self.header = ANY.decode(head + b"}") if head != b"{" else {}
        except DECODE_ERRORS as exc:
            self.warnings.append(problem("bad_header", detail=exc))
        return buf[j + 1 :]

    def _finish(self, buf: bytes) -> list[Event]:
        stripped = buf.strip(_WS)
        if stripped.startswith(b"]"):
            self._parse_tail(stripped[1:])
            return []
        for m in _END_RE.finditer(buf):
            try:
                events = _EVENTS.decode(b"[" + buf[: m.start() + 1] + b"]")
            except DECODE_ERRORS:
                continue
            self._parse_tail(buf[m.end() :])
            return events
        # the array is closed but an event in it is broken: skip that event, keep the others
        for m in reversed(list(_END_RE.finditer(buf))):
            if self._tail_ok(buf[m.end() :]):
                events = self._each_event(buf[: m.start() + 1], self._carry_at)
                self._parse_tail(buf[m.end() :])
                return events
        # no closing bracket that makes sense: the file was cut inside the event list
        self.truncated = True
        data = bytearray(b"[" + buf + b" ")  # as in blocks(): '[' first, room for ']' after the last event
        b = last_boundary(data, len(data), start=1)
        for _ in range(16):
            if b is None:
                break
            events = self._decode_region(data, b[0])
            if events is not None:
                self.warnings.append(
                    problem(
                        "unterminated",
                        kept=self.n_events + len(events),
                        dropped=len(buf) - b[0],
                        at=self._carry_at + b[0],
                    )
                )
                return events
            b = last_boundary(data, b[1], start=1)
        try:  # a single complete event without a closing bracket
            ev = _ONE_EVENT.decode(stripped.rstrip(b","))
            self.warnings.append(problem("array_not_closed"))
            return [ev]
        except DECODE_ERRORS:
            pass
        self.warnings.append(problem("unterminated", kept=self.n_events, dropped=len(buf), at=self._carry_at))
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
        except DECODE_ERRORS:
            return False

    def _parse_tail(self, rest: bytes) -> None:
        rest = rest.strip(_WS)
        if self.bare_array:
            if rest:
                self.warnings.append(problem("trailing_bytes", n=len(rest)))
            return
        if rest.startswith(b","):
            rest = rest[1:].strip(_WS)
        if not rest or rest == b"}":
            if not rest:
                self.warnings.append(problem("object_not_closed"))
            return
        try:
            tail = ANY.decode(b"{" + rest)
            if isinstance(tail, dict):
                self.tail = tail
        except DECODE_ERRORS:
            self.warnings.append(problem("keys_after_events"))

    def _decode_region(self, data: bytearray, k: int) -> list[Event] | None:
        """The events of ``data[1 : k + 1]`` (``data[0]`` is '['; ``data[k]`` the '}' that ends the
        last of them), decoded in place at C speed; a broken event is skipped, named by its byte
        offset and the reason, and decoding resumes at the next event boundary. None when the
        region does not end where an event ends (``k`` lies inside a string): try an earlier ``k``."""
        out: list[Event] = []
        start = 1
        while start <= k:
            before, after = data[start - 1], data[k + 1]
            data[start - 1], data[k + 1] = 0x5B, 0x5D  # '[' before the first event, ']' after the last
            try:
                out.extend(_EVENTS.decode(memoryview(data)[start - 1 : k + 2]))
                return out
            except msgspec.DecodeError as exc:
                if isinstance(exc, msgspec.ValidationError):  # an event of the wrong shape: event by event
                    out.extend(self._each_event(bytes(data[start : k + 1]), self._carry_at + start - 1))
                    return out
                m = _BYTE_RE.search(str(exc))
                p = start - 1 + int(m.group(1)) if m else k + 1  # "truncated": at the end
                reason = _reason(exc)
            except (UnicodeDecodeError, RecursionError):
                out.extend(self._each_event(bytes(data[start : k + 1]), self._carry_at + start - 1))
                return out
            finally:
                data[start - 1], data[k + 1] = before, after
            if p >= k:
                if not out and start == 1:
                    return None  # the region ends inside a string, or its last event is cut
                out.extend(self._each_event(bytes(data[start : k + 1]), self._carry_at + start - 1))
                return out
            b = last_boundary(data, p + 1, start)  # the events before the broken one
            if b is not None:
                good = self._decode_region_part(data, start, b[0])
                out.extend(good)
                bad = b[1]
            else:
                bad = start
            while bad < k and data[bad] in _WS:  # name the event's first byte
                bad += 1
            self._skip(reason, 1, [self._carry_at + bad - 1])
            nxt = next_boundary(data, p, k + 1)
            if nxt is None:  # the broken event was the region's last
                return out
            start = nxt[1]
        return out

    def _decode_region_part(self, data: bytearray, start: int, k: int) -> list[Event]:
        """``_decode_region`` of ``data[start : k + 1]``: events before a broken one."""
        before, after = data[start - 1], data[k + 1]
        data[start - 1], data[k + 1] = 0x5B, 0x5D
        try:
            return _EVENTS.decode(memoryview(data)[start - 1 : k + 2])
        except DECODE_ERRORS:
            pass
        finally:
            data[start - 1], data[k + 1] = before, after
        return self._each_event(bytes(data[start : k + 1]), self._carry_at + start - 1)

    def _each_event(self, piece: bytes, at: int) -> list[Event]:
        """Decode event by event (``piece`` starts at byte ``at`` of the data) when a region will not
        decode as a whole; skip broken events, naming their offsets. A piece that does not decode is
        retried joined with the next ones (a '},{' inside a string is no boundary) before it is
        given up; one with bytes that are not UTF-8 is kept with them replaced (and said so)."""
        cuts: list[tuple[int, int]] = []
        end = len(piece)
        while (b := last_boundary(piece, end)) is not None:
            cuts.append(b)
            end = b[0] + 1
        cuts.reverse()
        starts = [0] + [j for _, j in cuts]
        ends = [k + 1 for k, _ in cuts] + [len(piece)]
        out: list[Event] = []
        skipped: list[int] = []
        reasons: set[str] = set()
        repaired: list[int] = []
        i = 0
        while i < len(starts):
            first = ""
            for m in range(i, min(i + 8, len(starts))):
                raw = piece[starts[i] : ends[m]].strip(_WS)
                try:
                    out.append(_ONE_EVENT.decode(raw))
                except UnicodeDecodeError:
                    try:
                        out.append(_ONE_EVENT.decode(raw.decode("utf-8", "replace").encode()))
                    except DECODE_ERRORS:
                        continue
                    seg = piece[starts[i] : ends[m]]
                    repaired.append(at + starts[i] + len(seg) - len(seg.lstrip(_WS)))
                except DECODE_ERRORS as exc:
                    first = first or _reason(exc)
                    continue
                i = m + 1
                break
            else:
                seg = piece[starts[i] : ends[i]]
                skipped.append(at + starts[i] + len(seg) - len(seg.lstrip(_WS)))  # the event's first byte
                reasons.add(first)
                i += 1
        if skipped:
            self._skip("; ".join(sorted(r for r in reasons if r)) or english("why.not_object"), len(skipped), skipped)
        if repaired:
            sample = ", ".join(str(x) for x in repaired[:3]) + (", ..." if len(repaired) > 3 else "")
            self.warnings.append(problem("events_utf8_replaced", n=len(repaired), at=sample))
        return out

    @property
    def metadata(self) -> dict[str, Any]:
        return {**self.header, **self.tail}


_TRACE_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')
_TRACE_NAME = re.compile(r"(\.pt\.trace\.json(\.gz)?$|trace.*\.json(\.gz)?$)", re.I)


def sniff(path: Path) -> str:
    """What a JSON file is, from its first 64 KiB: 'object' for a trace object (traceEvents, or Kineto's
    header keys); 'array' for a bare array of Chrome trace events (torch_npu, MindSpore, msprof);
    'ignore:<reason>' for an unrelated JSON file; otherwise the problem that stops the file from
    being read (it looks like a trace but is not usable)."""
    named_trace = bool(_TRACE_NAME.search(path.name))
    try:
        if path.stat().st_size == 0:
            return problem("empty")
        with open_input(path) as f:  # a compressed file cut short: its first bytes still tell
            head = f.read(64 << 10)
            if not head and f.problem:
                return problem("cannot_read", detail=f.problem)
    except OSError as exc:
        return problem("cannot_read", detail=exc.strerror or exc)
    except InputError as exc:
        return exc.problem
    s = head.lstrip()
    if s.startswith(b"\xef\xbb\xbf"):
        s = s[3:].lstrip()
    if not s:
        return problem("empty_whitespace")
    if s[:1] not in (b"{", b"["):
        return problem("not_json_binary" if b"\x00" in s[:512] else "not_json_text", start=repr(s[:20]))
    if any(k in head for k in _TRACE_KEYS):
        return "object"
    if s[:1] == b"[" and b'"ph"' in head:  # Chrome's JSON array format (torch_npu / msprof write it)
        return "array"
    if named_trace:
        return problem("not_a_trace")
    return "ignore:" + problem("ignored.json_not_trace")


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
