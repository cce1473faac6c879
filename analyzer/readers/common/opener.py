"""The one place where a profiler file is opened for its bytes: gzip is undone here (by magic bytes,
not by name), guarded, and a stream cut short or corrupt ends the data instead of raising.

``open_input(path)`` returns an ``InputStream`` (a binary file object, ``with`` closes it):

- plain files are read as they are; gzip files (one member or several) are decompressed with zlib
  in bounded pieces — time and memory stay proportional to what is read, whatever the content;
- a decompression ratio guard: once more than ``RATIO_AFTER_BYTES`` came out, more than
  ``MAX_RATIO`` bytes out per byte in is refused with an ``InputError`` (a gzip bomb: 2 GiB of
  whitespace fit in 2 MB; profiler JSON compresses 5-30 times);
- a compressed stream that ends early or holds corrupt data ends the data there: ``problem`` says
  so (with the offset), ``truncated`` is True, and everything before it was returned;
- ``sha256``: with ``hashing=True``, the SHA-256 of the file's bytes (as stored, compressed),
  once every byte was read (``finish()`` reads what the caller left).
"""

from __future__ import annotations

import hashlib
import io
import zlib
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem

GZIP_MAGIC = b"\x1f\x8b"
MAX_RATIO = 200
RATIO_AFTER_BYTES = 64 << 20
_IN_CHUNK = 64 << 10  # compressed bytes fed to zlib at a time (the ratio guard looks after each)
_OUT_CHUNK = 4 << 20  # most decompressed bytes asked of zlib at a time


class InputStream(io.RawIOBase):
    """A profiler file's bytes, gunzipped when compressed (see the module's text)."""

    def __init__(self, path: Path, hashing: bool = False):
        super().__init__()
        self.path = path
        self._raw = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._digest = hashlib.sha256() if hashing else None
        self.compressed = self._raw.read(2) == GZIP_MAGIC
        self._raw.seek(0)
        self.problem: str | None = None  # what is wrong with the compressed data, if anything
        self.truncated = False  # the data ended early (cut or corrupt stream)
        self.bytes_in = 0  # of the file, read so far
        self.bytes_out = 0  # given to the caller so far
        self._raw_eof = False
        self._zlib: Any = zlib.decompressobj(wbits=31) if self.compressed else None
        self._pending = b""  # decompressed, from _pos on not yet given
        self._pos = 0
        self._tail = b""  # compressed input not yet fed to zlib
        self._done = False  # no more data: end of the last member, or the problem above

    # -- io.RawIOBase ----------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if not self.compressed:
            n = self._raw.readinto(view) or 0
            if not n and len(view):
                self._raw_eof = True
            self._count(view[:n])
            self.bytes_out += n
            return n
        while self._pos >= len(self._pending) and not self._done:
            self._inflate(len(view))
        n = min(len(view), len(self._pending) - self._pos)
        view[:n] = memoryview(self._pending)[self._pos : self._pos + n]
        self._pos += n
        self.bytes_out += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()

    # -- the rest ----------------------------------------------------------------------------------

    @property
    def sha256(self) -> str | None:
        """The file's SHA-256 once every byte of it went through (``finish()``), else None."""
        return self._digest.hexdigest() if self._digest is not None and self._raw_eof else None

    def finish(self) -> None:
        """Read the bytes of the file the caller did not need, for the hash."""
        if self._digest is not None and not self._raw.closed:
            while chunk := self._raw.read(_IN_CHUNK):
                self._count(chunk)
            self._raw_eof = True

    def _count(self, data: bytes | memoryview) -> None:
        self.bytes_in += len(data)
        if self._digest is not None:
            self._digest.update(data)

    def _inflate(self, want: int) -> None:
        """Decompress about ``want`` more bytes (at most ``max(want, _OUT_CHUNK)``), or end the data."""
        if not self._tail:
            chunk = self._raw.read(_IN_CHUNK)
            self._count(chunk)
            if not chunk:
                self._raw_eof = True
                if not self._zlib.eof:
                    done = self.bytes_out + len(self._pending) - self._pos
                    self._end(problem("gz_cut", n=done))
                self._done = True
                return
            self._tail = chunk
        if self._zlib.eof:  # a gzip member ended: another may follow, or padding
            rest = self._tail.lstrip(b"\0")
            self._tail = b""
            if not rest:
                return
            if not rest.startswith(GZIP_MAGIC):
                self.problem = problem("gz_trailing", n=self.bytes_in - len(rest))
                self._done = True
                return
            self._zlib = zlib.decompressobj(wbits=31)
            self._tail = rest
        try:
            out = self._zlib.decompress(self._tail, max(want, _OUT_CHUNK))
        except zlib.error as exc:
            done = self.bytes_out + len(self._pending) - self._pos
            self._end(problem("gz_corrupt", n=done, detail=exc))
            return
        self._tail = self._zlib.unused_data if self._zlib.eof else self._zlib.unconsumed_tail
        self._pending, self._pos = out, 0
        self._guard()

    def _guard(self) -> None:
        total = self.bytes_out + len(self._pending)
        if total > RATIO_AFTER_BYTES and total > MAX_RATIO * max(self.bytes_in, 1):
            raise InputError(
                str(self.path),
                problem("gz_bomb", ratio=MAX_RATIO, mib=total >> 20, kib=self.bytes_in >> 10),
            )

    def _end(self, problem: str) -> None:
        self.problem = problem
        self.truncated = True
        self._done = True


def open_input(path: Path, hashing: bool = False) -> InputStream:
    """``path`` opened for its bytes (gunzipped when compressed); ``OSError`` when it cannot be opened."""
    return InputStream(path, hashing)
